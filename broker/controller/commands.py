"""The metadata commands: one frozen dataclass per ``ClusterState.apply_*`` method.

A command names the apply method it calls (``method``) and carries that method's
arguments as fields, in the method's order and with its defaults.  Callers build
commands (through ``MetadataClient``, never by hand in handlers); the store turns one
into the Raft journal's wire form at its boundary and the Raft thread turns it back
before applying:

    wire form = (method name, args tuple, controller_term)

This is the argument list of ``MetadataConsumer.command``, the one @replicated entry
point, exactly as journals and dumps written before commands were typed hold it: an
older entry (with fewer trailing arguments, as when a default was added later) still
decodes and applies the same way.  Invariants:

* ``decode(*command.to_wire()) == command`` for every command;
* args hold only plain values (int, str, bool, None, list, tuple, dict): journal
  entries are pickled by pysyncobj, and must not depend on this module's classes;
* ``controller_term`` is a field only of the decisions the controller takes
  (``FenceBrokers``, ``ElectPreferred``, ``ElectLeaders``, ``AlterReassignments``;
  ``controller_decision`` is True for them);
  it is not an apply argument: the Raft consumer refuses the entry (NOT_CONTROLLER)
  unless it was committed in that term.  None means "not fenced by a term" (a broker
  fencing itself in a controlled shutdown, or the lone broker's local store).

Pure values: any thread.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from .state import ApplyError, ClusterState

WireForm = tuple[str, tuple, "int | None"]
TERM_FIELD = "controller_term"


@dataclass(frozen=True)
class Command:
    """Base of every metadata command (see the module doc)."""

    method: ClassVar[str] = ""
    controller_decision: ClassVar[bool] = False

    def args(self) -> tuple:
        """The apply method's positional arguments, in order (the term excluded)."""
        return tuple(getattr(self, f.name) for f in fields(self) if f.name != TERM_FIELD)

    @property
    def term(self) -> int | None:
        """The Raft term a controller decision was taken in (None for the others)."""
        return getattr(self, TERM_FIELD, None)

    def to_wire(self) -> WireForm:
        return self.method, self.args(), self.term

    def apply(self, state: ClusterState) -> Any:
        """Apply to ``state`` (the Raft thread's, or a LocalStore copy); the apply
        method's result, or ApplyError when refused."""
        return getattr(state, "apply_" + self.method)(*self.args())


def _term_field():
    return field(default=None, kw_only=True)


@dataclass(frozen=True)
class InitCluster(Command):
    method: ClassVar[str] = "init_cluster"
    cluster_id: str


@dataclass(frozen=True)
class RegisterBroker(Command):
    method: ClassVar[str] = "register_broker"
    broker_id: int
    host: str
    port: int
    incarnation: str
    unclean_default: bool = False
    # Advertised listeners, name → [host, port]; None in entries written before them
    # (host/port then serve every listener).
    endpoints: dict | None = None
    rack: str | None = None  # broker.rack; None when unset or written before racks


@dataclass(frozen=True)
class Heartbeat(Command):
    """``log_end_offsets`` ("topic:partition" → LEO) is not stored: the controller
    reads it as election hints.  ``metadata_position`` ([term, index, version], the
    ``ClusterState.position()`` of the newest image the sender has applied; None in
    entries written before it) is not stored either: every broker reads it to learn
    which images the others know (``propagation.py``)."""

    method: ClassVar[str] = "heartbeat"
    broker_id: int
    broker_epoch: int
    unclean_default: bool = False
    log_end_offsets: dict | None = None
    metadata_position: list | None = None


@dataclass(frozen=True)
class FenceBrokers(Command):
    """The controller's fencing (session expired; ``controller_term`` set) or a
    broker fencing itself in a controlled shutdown (no term)."""

    method: ClassVar[str] = "fence_brokers"
    controller_decision: ClassVar[bool] = True
    broker_ids: list
    leo_hints: dict
    unclean_default: bool = False
    controller_term: int | None = _term_field()


@dataclass(frozen=True)
class ElectPreferred(Command):
    method: ClassVar[str] = "elect_preferred"
    controller_decision: ClassVar[bool] = True
    targets: list
    controller_term: int | None = _term_field()


@dataclass(frozen=True)
class ElectLeaders(Command):
    """A client's ElectLeaders (KIP-460), taken by the controller that received it:
    ``election_type`` 0 PREFERRED / 1 UNCLEAN, ``targets`` [topic, partition] pairs or
    None (every partition).  Re-decided against the state when applied (elections.py)."""

    method: ClassVar[str] = "elect_leaders"
    controller_decision: ClassVar[bool] = True
    election_type: int
    targets: list | None
    controller_term: int | None = _term_field()


@dataclass(frozen=True)
class AlterReassignments(Command):
    """AlterPartitionReassignments (KIP-455), taken by the controller that received it:
    ``requests`` [topic, partition, target replicas or None to cancel], re-decided against
    the state when applied (reassignment.py)."""

    method: ClassVar[str] = "alter_reassignments"
    controller_decision: ClassVar[bool] = True
    requests: list
    controller_term: int | None = _term_field()


@dataclass(frozen=True)
class CreateTopic(Command):
    method: ClassVar[str] = "create_topic"
    name: str
    topic_id: str
    assignment: list
    configs: dict


@dataclass(frozen=True)
class CreatePartitions(Command):
    """Grow a topic to ``count`` partitions; ``assignment`` lists the new partitions'
    replicas (chosen by the caller, re-validated when applied).  ``topic_id`` keeps a
    request from growing a topic deleted and recreated under the same name meanwhile."""

    method: ClassVar[str] = "create_partitions"
    name: str
    topic_id: str
    count: int
    assignment: list


@dataclass(frozen=True)
class DeleteTopic(Command):
    method: ClassVar[str] = "delete_topic"
    name: str


@dataclass(frozen=True)
class AlterTopicConfigs(Command):
    """``changes``: key → value to set, or None to remove the override."""

    method: ClassVar[str] = "alter_topic_configs"
    name: str
    changes: dict


@dataclass(frozen=True)
class AlterResourceConfigs(Command):
    """Dynamic configs of a BROKER (4; name "<id>" or "" for the cluster default) or
    GROUP (32) resource: ``changes`` key → value to set, or None to remove."""

    method: ClassVar[str] = "alter_resource_configs"
    resource_type: int
    name: str
    changes: dict


@dataclass(frozen=True)
class AlterPartition(Command):
    """A leader's ISR proposal (Kafka's AlterPartition): refused unless it carries
    the current leader, leader epoch and partition epoch."""

    method: ClassVar[str] = "alter_partition"
    topic: str
    partition: int
    leader_id: int
    leader_epoch: int
    partition_epoch: int
    new_isr: list


@dataclass(frozen=True)
class AllocateProducerIds(Command):
    method: ClassVar[str] = "allocate_producer_ids"
    count: int


@dataclass(frozen=True)
class AlterScramCredentials(Command):
    """KIP-554's AlterUserScramCredentials: ``upsertions`` are [user, mechanism,
    {salt, iterations, stored_key, server_key}] (base64 text; the password never reaches
    the metadata), ``deletions`` are [user, mechanism]."""

    method: ClassVar[str] = "alter_scram_credentials"
    upsertions: list
    deletions: list


@dataclass(frozen=True)
class CreateAcls(Command):
    """CreateAcls (KIP-140): ``bindings`` are [resource_type, resource_name,
    pattern_type, principal, host, operation, permission] lists with Kafka's codes,
    validated by the caller (broker/security/acls.py); present ones are kept once."""

    method: ClassVar[str] = "create_acls"
    bindings: list


@dataclass(frozen=True)
class DeleteAcls(Command):
    """DeleteAcls: the exact bindings to remove (the caller matched its filters against
    its image, so replaying the entry removes the same bindings and no others)."""

    method: ClassVar[str] = "delete_acls"
    bindings: list


@dataclass(frozen=True)
class RecordVoter(Command):
    """A voter's Raft address before AddRaftVoter, None before RemoveRaftVoter."""

    method: ClassVar[str] = "record_voter"
    node_id: int
    address: str | None


@dataclass(frozen=True)
class UpdateFeatures(Command):
    """UpdateFeatures (KIP-584): ``updates`` [name, level, upgrade type]; ``supported``
    (name → [min, max]) and ``defaults`` (name → level) are the running code's, passed
    in because they are not state.  Applied all or nothing (``features.py``)."""

    method: ClassVar[str] = "update_features"
    updates: list
    supported: dict
    defaults: dict


@dataclass(frozen=True)
class AlterClientQuotas(Command):
    """AlterClientQuotas (KIP-546): ``entries`` [[[type, name or None], ...], {key: value
    or None to remove}], validated by the caller (broker/quotas/entities.py)."""

    method: ClassVar[str] = "alter_client_quotas"
    entries: list


COMMANDS: dict[str, type[Command]] = {cls.method: cls for cls in (
    InitCluster, RegisterBroker, Heartbeat, FenceBrokers, ElectPreferred, ElectLeaders,
    AlterReassignments, CreateTopic, CreatePartitions, DeleteTopic, AlterTopicConfigs,
    AlterPartition, AllocateProducerIds, AlterScramCredentials, CreateAcls, DeleteAcls,
    RecordVoter, AlterResourceConfigs, UpdateFeatures, AlterClientQuotas)}

MEMBERSHIP_METHODS = frozenset({RegisterBroker.method, Heartbeat.method})


def decode(method: str, args: tuple, controller_term: int | None = None) -> Command:
    """The command of a wire form (a journal entry, old or new).

    An unknown method is refused with ApplyError (UNKNOWN_SERVER_ERROR, the code the
    Raft consumer gave such entries before commands were typed); arguments that do
    not fit the method raise TypeError, which the consumer also turns into
    UNKNOWN_SERVER_ERROR.  A term given for a command the controller does not decide
    is dropped here: the consumer checks the wire term itself, before decoding.
    """
    cls = COMMANDS.get(method)
    if cls is None:
        raise ApplyError("UNKNOWN_SERVER_ERROR", f"unknown metadata command {method!r}")
    if cls.controller_decision:
        return cls(*args, controller_term=controller_term)
    return cls(*args)

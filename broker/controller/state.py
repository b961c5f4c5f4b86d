"""The cluster metadata state machine: brokers, topics, partitions, producer-id blocks.

Every change goes through one of ``ClusterState``'s ``apply_*`` methods, which the
Raft group (or, for a lone broker, the local store) calls in log order on every
node.  They are pure and replay-safe: they read only the state and their arguments
(no clock, no randomness, no I/O), so replaying the journal rebuilds the same state.
Decisions that need information outside the state — which broker looks dead, the
log end offsets used to pick a leader — are taken by the controller and passed in
as arguments; the apply methods re-validate them against the state (a stale
decision is refused, never half-applied).

``version`` counts applied changes; a method that changes nothing leaves it alone,
so listeners can skip no-op commands such as heartbeats.

The Raft consumer publishes a state to the event loop as an image plus a delta
(``image.py``); ``snapshot()`` is a private deep copy.

Size (about 680 lines): one class, because every ``apply_*`` is the replay-safe rule of
one Raft command over the same fields (a change moves ``version``, partition epochs and
the ISR together); the rules with a life of their own are beside it (``leaders.py``,
``elections.py``, ``reassignment.py``, ``features.py``, ``replica_state.py``).
"""
from __future__ import annotations

import copy
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from .elections import elect_leaders
from .features import first_problem
from .leaders import NO_LEADER, Election
from .reassignment import alter_reassignments, maybe_complete
from .replica_state import ReplicaState, transition

log = logging.getLogger(__name__)

__all__ = ["NO_LEADER", "ApplyError", "BrokerInfo", "ClusterState", "Election",
           "PartitionInfo", "TopicInfo", "assign_replicas"]


class ApplyError(Exception):
    """A command was refused; ``code`` is the name of a Kafka error code."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


@dataclass
class BrokerInfo:
    broker_id: int
    host: str
    port: int
    broker_epoch: int
    incarnation: str
    fenced: bool = False
    # Advertised listeners, name → [host, port]; empty for a registration that predates
    # them, when (host, port) serves every listener.
    endpoints: dict = field(default_factory=dict)
    #: ``broker.rack`` (None when unset, or in a registration that predates racks)
    rack: str | None = None

    def endpoint(self, listener_name: str) -> tuple[str, int] | None:
        """Where clients of ``listener_name`` reach this broker; None if it has no such
        listener (Kafka then leaves the broker out of that listener's Metadata)."""
        if not self.endpoints:
            return self.host, self.port
        found = self.endpoints.get(listener_name)
        return (found[0], int(found[1])) if found is not None else None


@dataclass
class PartitionInfo:
    """One partition. Invariants: ``isr`` ⊆ ``replicas`` and never empty; the leader
    (when not NO_LEADER) is in the ISR; both epochs only grow."""

    replicas: list[int]
    leader: int
    leader_epoch: int
    partition_epoch: int
    isr: list[int]
    replica_states: dict[int, str] = field(default_factory=dict)
    # A reassignment in progress (KIP-455, reassignment.py): replicas joining / leaving.
    # Tuples with class defaults, so states pickled before them still read.
    adding_replicas: tuple = ()
    removing_replicas: tuple = ()


@dataclass
class TopicInfo:
    name: str
    topic_id: str
    configs: dict[str, str]
    partitions: dict[int, PartitionInfo]


class ClusterState:
    """The replicated metadata. Mutated only by ``apply_*`` (on the Raft thread or the
    local store); readers get ``snapshot()`` copies.

    ``applied_term`` / ``applied_index`` are the Raft log position of the last command
    applied (set by the Raft consumer; 0 under the local store): images are ordered by
    ``position()``, never by arrival, so an older image cannot replace a newer one.
    """

    # Class defaults: states unpickled from dumps written before these existed.
    # ``delta`` (image.MetadataDelta) is set on published images only (``image.py``).
    delta = None
    applied_term = 0
    applied_index = 0
    scram_credentials: Mapping[str, dict] = MappingProxyType({})
    acls: tuple = ()
    quorum_addresses: Mapping[int, str | None] = MappingProxyType({})
    resource_configs: Mapping[int, dict] = MappingProxyType({})
    # Feature levels an UpdateFeatures finalized, name → level (features.py); a feature
    # not here is at the running code's default level.
    finalized_features: Mapping[str, int] = MappingProxyType({})
    # Client quotas (KIP-546): entity (sorted ((type, name or None), ...)) → key → value.
    client_quotas: Mapping[tuple, dict] = MappingProxyType({})

    def __init__(self) -> None:
        self.version = 0
        self.cluster_id = ""
        self.brokers: dict[int, BrokerInfo] = {}
        # SCRAM credentials (KIP-554): user → mechanism → {salt, iterations, stored_key,
        # server_key} as base64 text; never a password.
        self.scram_credentials: dict[str, dict[str, dict]] = {}
        # ACL bindings (KIP-140) as plain lists, in creation order: [resource_type,
        # resource_name, pattern_type, principal, host, operation, permission] with
        # Kafka's codes (broker/security/acls.py reads them).  No duplicates.
        self.acls: list[list] = []
        self.topics: dict[str, TopicInfo] = {}
        self.next_producer_id = 0
        # Raft addresses of the voters added at run time (AddRaftVoter), by node id;
        # None marks a voter being removed (RemoveRaftVoter).  The voters the cluster
        # started with are in controller.quorum.voters, not here.
        self.quorum_addresses: dict[int, str | None] = {}
        # Dynamic configs of BROKER (name "<id>", or "" for the cluster default) and
        # GROUP resources, Kafka's ConfigRecords: resource type → name → key → value.
        self.resource_configs: dict[int, dict[str, dict[str, str]]] = {}

    def snapshot(self) -> ClusterState:
        """A private deep copy, without a delta (a copy may be changed)."""
        image = copy.deepcopy(self)
        image.__dict__.pop("delta", None)
        return image

    # -- plain dicts (the lone broker's metadata file) -----------------------------

    def to_dict(self) -> dict:
        """The whole state as plain JSON values (lists keep the dicts' order, which is
        the order elections iterate in).  ``from_dict(s.to_dict())`` equals ``s``."""
        return {
            "cluster_id": self.cluster_id,
            "version": self.version,
            "applied_term": self.applied_term,
            "applied_index": self.applied_index,
            "next_producer_id": self.next_producer_id,
            "scram_credentials": {user: {m: dict(c) for m, c in by_mechanism.items()}
                                  for user, by_mechanism in self.scram_credentials.items()},
            "acls": [list(binding) for binding in self.acls],
            "quorum_addresses": {str(n): a for n, a in self.quorum_addresses.items()},
            "resource_configs": {str(t): {n: dict(c) for n, c in by_name.items()}
                                 for t, by_name in self.resource_configs.items()},
            "finalized_features": dict(self.finalized_features),
            "client_quotas": [[[list(pair) for pair in entity], dict(values)]
                              for entity, values in self.client_quotas.items()],
            "brokers": [vars(info).copy() for info in self.brokers.values()],
            "topics": [{"name": t.name, "topic_id": t.topic_id, "configs": dict(t.configs),
                        "partitions": [_partition_to_dict(index, p)
                                       for index, p in t.partitions.items()]}
                       for t in self.topics.values()],
        }

    @classmethod
    def from_dict(cls, data: dict) -> ClusterState:
        """The inverse of ``to_dict`` (KeyError/TypeError/ValueError on a bad dict)."""
        state = cls()
        state.cluster_id = str(data["cluster_id"])
        state.version = int(data["version"])
        state.next_producer_id = int(data["next_producer_id"])
        for name in ("applied_term", "applied_index"):
            if data.get(name):  # 0 is the class default: leave it there
                setattr(state, name, int(data[name]))
        state.scram_credentials = {
            str(user): {str(m): dict(c) for m, c in by_mechanism.items()}
            for user, by_mechanism in data.get("scram_credentials", {}).items()}
        state.acls = [list(binding) for binding in data.get("acls", [])]
        state.quorum_addresses = {int(n): (None if a is None else str(a))
                                  for n, a in data.get("quorum_addresses", {}).items()}
        state.resource_configs = {
            int(t): {str(n): {str(k): str(v) for k, v in c.items()} for n, c in by_name.items()}
            for t, by_name in data.get("resource_configs", {}).items()}
        if data.get("finalized_features"):
            state.finalized_features = {str(n): int(v)
                                        for n, v in data["finalized_features"].items()}
        if data.get("client_quotas"):
            state.client_quotas = {
                tuple((str(t), None if n is None else str(n)) for t, n in entity):
                {str(k): float(v) for k, v in values.items()}
                for entity, values in data["client_quotas"]}
        for item in data["brokers"]:
            info = BrokerInfo(**item)
            state.brokers[info.broker_id] = info
        for item in data["topics"]:
            partitions = dict(_partition_from_dict(p) for p in item["partitions"])
            state.topics[item["name"]] = TopicInfo(item["name"], item["topic_id"],
                                                   dict(item["configs"]), partitions)
        return state

    def position(self) -> tuple[int, int, int]:
        """Order of images: Raft (term, index) of the last applied command, then the
        version (which alone orders the local store's images).  Raft's log order: an
        entry committed later has a term at least as high, and within a term a higher
        index."""
        return (self.applied_term, self.applied_index, self.version)

    # -- queries ------------------------------------------------------------------

    def live_brokers(self) -> list[int]:
        return sorted(b for b, info in self.brokers.items() if not info.fenced)

    def is_live(self, broker_id: int) -> bool:
        info = self.brokers.get(broker_id)
        return info is not None and not info.fenced

    def partitions(self) -> Iterator[tuple[TopicInfo, int, PartitionInfo]]:
        for topic in self.topics.values():
            for index, partition in topic.partitions.items():
                yield topic, index, partition

    def topic_by_id(self, topic_id: str) -> TopicInfo | None:
        return next((t for t in self.topics.values() if t.topic_id == topic_id), None)

    # -- cluster and brokers -----------------------------------------------------

    def apply_init_cluster(self, cluster_id: str) -> str:
        """Set the cluster id once; later calls return the existing id."""
        if not self.cluster_id:
            self.cluster_id = cluster_id
            self.version += 1
        return self.cluster_id

    def apply_register_broker(self, broker_id: int, host: str, port: int, incarnation: str,
                              unclean_default: bool = False,
                              endpoints: dict | None = None, rack: str | None = None) -> int:
        """A broker (re)joins: new broker epoch, unfenced, its replicas online.

        Offline partitions it can lead (it is in their ISR, or unclean election is
        allowed for them) get it as leader.  Returns the broker epoch.
        """
        current = self.brokers.get(broker_id)
        if current is not None and current.incarnation == incarnation and not current.fenced:
            return current.broker_epoch  # a retried registration: nothing changes
        if current is not None and not current.fenced:
            # Restarted within its session: fence the old incarnation first, so the
            # partitions it led elect again (epochs move) instead of trusting a new
            # process with the old one's leadership.
            self.apply_fence_brokers([broker_id], {}, unclean_default)
        self.version += 1
        self.brokers[broker_id] = BrokerInfo(
            broker_id, host, port, self.version, incarnation,
            endpoints={name: list(address) for name, address in (endpoints or {}).items()},
            rack=rack)
        self._bring_online(broker_id, unclean_default)
        return self.version

    def apply_heartbeat(self, broker_id: int, broker_epoch: int,
                        unclean_default: bool = False, log_end_offsets: dict | None = None,
                        metadata_position: list | None = None) -> bool:
        """A live broker's heartbeat. Unfences a fenced broker of the same epoch
        (it came back from a pause); True when the broker is known and current.
        ``log_end_offsets`` and ``metadata_position`` are not stored: the controller
        reads the first as election hints, every broker the second (what the sender
        has applied)."""
        info = self.brokers.get(broker_id)
        if info is None or info.broker_epoch != broker_epoch:
            return False
        if info.fenced:
            self.version += 1
            info.fenced = False
            self._bring_online(broker_id, unclean_default)
            log.info("broker %d unfenced by heartbeat", broker_id)
        return True

    def apply_fence_brokers(self, broker_ids: list[int], leo_hints: dict,
                            unclean_default: bool = False) -> list[Election]:
        """Fence brokers (session expired or controlled shutdown).

        Each leaves every ISR (but an ISR never becomes empty: a last member stays, so
        it can be elected cleanly when it returns); partitions it led elect a new
        leader.  ``leo_hints`` maps "topic:partition" → {broker_id: log end offset}.
        """
        to_fence = [b for b in broker_ids if self.is_live(b)]
        if not to_fence:
            return []
        self.version += 1
        for broker_id in to_fence:
            self.brokers[broker_id].fenced = True
        elections = []
        for topic, index, partition in self.partitions():
            touched = False
            for broker_id in to_fence:
                if broker_id in partition.replicas:
                    self._move_replica(partition, broker_id, ReplicaState.OFFLINE)
                if broker_id in partition.isr and len(partition.isr) > 1:
                    partition.isr = [r for r in partition.isr if r != broker_id]
                    touched = True
            if partition.leader in to_fence or partition.leader == NO_LEADER:
                election = self._elect(topic, index, partition, leo_hints, unclean_default)
                if election is not None:
                    elections.append(election)
                    touched = False  # _elect bumped the epochs
            if touched:
                partition.partition_epoch += 1
        return elections

    def _bring_online(self, broker_id: int, unclean_default: bool) -> None:
        for topic, index, partition in self.partitions():
            if broker_id not in partition.replicas:
                continue
            self._move_replica(partition, broker_id, ReplicaState.ONLINE)
            if partition.leader == NO_LEADER:
                self._elect(topic, index, partition, {}, unclean_default)

    def _move_replica(self, partition: PartitionInfo, broker_id: int,
                      target: ReplicaState) -> None:
        current = ReplicaState(partition.replica_states.get(broker_id,
                                                            ReplicaState.NON_EXISTENT.value))
        partition.replica_states[broker_id] = transition(current, target).value

    # -- elections ---------------------------------------------------------------

    def _elect(self, topic: TopicInfo, index: int, partition: PartitionInfo, leo_hints: dict,
               unclean_default: bool) -> Election | None:
        """Pick a leader for a partition whose leader is gone. Clean: the live ISR
        member with the greatest known LEO, ties by assignment order. Unclean (only
        when enabled): the same among live out-of-sync replicas."""
        hints = leo_hints.get(f"{topic.name}:{index}", {})
        candidates = [r for r in partition.replicas if r in partition.isr and self.is_live(r)]
        unclean = False
        if not candidates and _unclean_enabled(topic, unclean_default):
            candidates = [r for r in partition.replicas if self.is_live(r)]
            unclean = bool(candidates)
        if not candidates:
            if partition.leader != NO_LEADER:
                partition.leader = NO_LEADER
                partition.leader_epoch += 1
                partition.partition_epoch += 1
                log.warning("partition %s-%d is offline: no live in-sync replica in %s",
                            topic.name, index, partition.isr)
            return None
        best = max(candidates, key=lambda r: (_hint(hints, r), -partition.replicas.index(r)))
        partition.leader = best
        partition.leader_epoch += 1
        partition.partition_epoch += 1
        if unclean:
            partition.isr = [best]
            log.warning("UNCLEAN leader election for %s-%d: broker %d was not in sync; "
                        "records committed before may be lost", topic.name, index, best)
        return Election(topic.name, index, best, partition.leader_epoch, unclean)

    def apply_elect_preferred(self, targets: list[tuple[str, int]]) -> list[Election]:
        """Preferred-replica election: the first assigned replica leads again when it
        is live and in the ISR (stale or needless targets are skipped)."""
        elections = []
        for name, index in targets:
            topic = self.topics.get(name)
            partition = topic.partitions.get(index) if topic else None
            if partition is None:
                continue
            preferred = partition.replicas[0]
            if partition.leader == preferred or preferred not in partition.isr \
                    or not self.is_live(preferred):
                continue
            partition.leader = preferred
            partition.leader_epoch += 1
            partition.partition_epoch += 1
            elections.append(Election(name, index, preferred, partition.leader_epoch))
        if elections:
            self.version += 1
        return elections

    def apply_alter_reassignments(self, requests: list) -> list:
        """AlterPartitionReassignments (KIP-455): start, replace or cancel (target None)
        the reassignment of each [topic, partition, target] (reassignment.py has the
        rules).  Returns ``[topic, partition, error code name, message]`` per request."""
        results = alter_reassignments(self, requests)
        if any(result[2] == "NONE" for result in results):
            self.version += 1
        return results

    def apply_elect_leaders(self, election_type: int, targets: list | None) -> list:
        """ElectLeaders (KIP-460): PREFERRED (0) or UNCLEAN (1) elections of ``targets``
        ([topic, partition] pairs; None: every partition), each decided against this
        state (elections.py has the rules).  Returns ``[topic, partition, error code
        name, message]`` per target."""
        results, elections = elect_leaders(self, election_type, targets)
        if elections:
            self.version += 1
        return results

    # -- topics ------------------------------------------------------------------

    def apply_create_topic(self, name: str, topic_id: str, assignment: list[list[int]],
                           configs: dict[str, str]) -> str:
        """Create a topic with the given replica assignment; the first live replica of
        each partition leads, the ISR starts as all replicas. Returns the topic id."""
        if name in self.topics:
            raise ApplyError("TOPIC_ALREADY_EXISTS", f"topic {name!r} already exists")
        partitions = {index: self._new_partition(replicas)
                      for index, replicas in enumerate(assignment)}
        self.topics[name] = TopicInfo(name, topic_id, dict(configs), partitions)
        self.version += 1
        return topic_id

    def _new_partition(self, replicas: list[int]) -> PartitionInfo:
        """A new partition: the first live replica leads, the ISR is every replica, each
        replica NewReplica → Online (Offline when its broker is fenced)."""
        live = [r for r in replicas if self.is_live(r)]
        partition = PartitionInfo(list(replicas), live[0] if live else NO_LEADER, 0, 0,
                                  list(replicas))
        for replica in replicas:
            self._move_replica(partition, replica, ReplicaState.NEW)
            self._move_replica(partition, replica, ReplicaState.ONLINE
                               if self.is_live(replica) else ReplicaState.OFFLINE)
        return partition

    def apply_create_partitions(self, name: str, topic_id: str, count: int,
                                assignment: list[list[int]]) -> int:
        """Grow topic ``name`` (of id ``topic_id``) to ``count`` partitions; ``assignment``
        holds the replicas of each new one, in index order, as many as the partitions
        added.  New partitions start as CreateTopic's do.  Refused, changing nothing, when
        the topic is gone or recreated (UNKNOWN_TOPIC_OR_PARTITION), when it no longer has
        ``count - len(assignment)`` partitions (INVALID_PARTITIONS: another request grew it
        first), or when a replica list is empty, repeats a broker or names an unregistered
        one (INVALID_REPLICA_ASSIGNMENT).  Returns the new partition count."""
        topic = self.topics.get(name)
        if topic is None or topic.topic_id != topic_id:
            raise ApplyError("UNKNOWN_TOPIC_OR_PARTITION", f"no topic {name!r} of id {topic_id}")
        current = len(topic.partitions)
        if current + len(assignment) != count or not assignment:
            raise ApplyError("INVALID_PARTITIONS",
                             f"topic {name!r} has {current} partition(s); adding "
                             f"{len(assignment)} does not make {count}")
        for replicas in assignment:
            if not replicas or len(set(replicas)) != len(replicas) \
                    or any(r not in self.brokers for r in replicas):
                raise ApplyError("INVALID_REPLICA_ASSIGNMENT", f"bad replica list {replicas}")
        for offset, replicas in enumerate(assignment):
            topic.partitions[current + offset] = self._new_partition(replicas)
        self.version += 1
        return count

    def apply_delete_topic(self, name: str) -> str:
        """Delete a topic: every replica walks Offline → DeletionStarted →
        DeletionSuccessful → NonExistent; brokers drop the logs when the topic
        disappears from their image. Returns the topic id."""
        topic = self.topics.get(name)
        if topic is None:
            raise ApplyError("UNKNOWN_TOPIC_OR_PARTITION", f"no topic {name!r}")
        for partition in topic.partitions.values():
            for replica in partition.replicas:
                for target in (ReplicaState.OFFLINE, ReplicaState.DELETION_STARTED,
                               ReplicaState.DELETION_SUCCESSFUL, ReplicaState.NON_EXISTENT):
                    self._move_replica(partition, replica, target)
        del self.topics[name]
        self.version += 1
        return topic.topic_id

    def apply_alter_topic_configs(self, name: str, changes: dict[str, str | None]) -> None:
        """Set (value) or remove (None) topic-level config overrides."""
        topic = self.topics.get(name)
        if topic is None:
            raise ApplyError("UNKNOWN_TOPIC_OR_PARTITION", f"no topic {name!r}")
        for key, value in changes.items():
            if value is None:
                topic.configs.pop(key, None)
            else:
                topic.configs[key] = value
        self.version += 1

    # -- ISR changes (Kafka's AlterPartition rule) --------------------------------

    def apply_alter_partition(self, name: str, index: int, leader_id: int, leader_epoch: int,
                              partition_epoch: int, new_isr: list[int]) -> int:
        """A leader proposes a new ISR. Accepted only from the current leader in the
        current leader epoch carrying the current partition epoch; every member must be
        a live replica and the leader must stay in. Returns the new partition epoch."""
        topic = self.topics.get(name)
        partition = topic.partitions.get(index) if topic else None
        if partition is None:
            raise ApplyError("UNKNOWN_TOPIC_OR_PARTITION", f"no partition {name}-{index}")
        if leader_id != partition.leader or leader_epoch != partition.leader_epoch:
            raise ApplyError("FENCED_LEADER_EPOCH",
                             f"{name}-{index}: leader {leader_id} epoch {leader_epoch} is not "
                             f"the current leader {partition.leader} "
                             f"epoch {partition.leader_epoch}")
        if partition_epoch != partition.partition_epoch:
            raise ApplyError("INVALID_UPDATE_VERSION",
                             f"{name}-{index}: partition epoch {partition_epoch} is stale "
                             f"(current {partition.partition_epoch})")
        if leader_id not in new_isr or any(r not in partition.replicas for r in new_isr):
            raise ApplyError("INVALID_REQUEST", f"{name}-{index}: bad ISR {new_isr}")
        added = [r for r in new_isr if r not in partition.isr and not self.is_live(r)]
        if added:
            raise ApplyError("INELIGIBLE_REPLICA", f"{name}-{index}: {added} are fenced")
        partition.isr = [r for r in partition.replicas if r in new_isr]
        partition.partition_epoch += 1
        maybe_complete(self, name, index, partition)
        self.version += 1
        return partition.partition_epoch

    # -- SCRAM credentials (KIP-554) -----------------------------------------------

    def apply_alter_scram_credentials(self, upsertions: list, deletions: list) -> None:
        """Set ``upsertions`` ([user, mechanism, credential dict]) and remove ``deletions``
        ([user, mechanism]; a missing one is no change).  Validation is the caller's."""
        credentials = self.__dict__.setdefault("scram_credentials", {})  # older pickles
        for user, mechanism in deletions:
            by_mechanism = credentials.get(user, {})
            by_mechanism.pop(mechanism, None)
            if not by_mechanism:
                credentials.pop(user, None)
        for user, mechanism, credential in upsertions:
            credentials.setdefault(user, {})[mechanism] = dict(credential)
        self.version += 1

    # -- ACLs (KIP-140) ---------------------------------------------------------------

    def apply_create_acls(self, bindings: list) -> int:
        """Add ACL bindings (plain lists, see ``acls``); one already present is no change,
        so a replayed or retried creation adds nothing twice.  Validation is the
        caller's.  Returns how many were added."""
        acls = self.__dict__.setdefault("acls", [])  # states from before ACLs
        added = 0
        for binding in bindings:
            binding = list(binding)
            if binding not in acls:
                acls.append(binding)
                added += 1
        if added:
            self.version += 1
        return added

    def apply_delete_acls(self, bindings: list) -> list:
        """Remove exactly these bindings (the caller matched its filters against an
        image); one already gone is no change.  Returns the bindings removed."""
        acls = self.__dict__.setdefault("acls", [])
        removed = []
        for binding in bindings:
            binding = list(binding)
            if binding in acls:
                acls.remove(binding)
                removed.append(binding)
        if removed:
            self.version += 1
        return removed

    # -- dynamic broker and group configs -------------------------------------------

    def apply_alter_resource_configs(self, resource_type: int, name: str,
                                     changes: dict[str, str | None]) -> None:
        """Set (value) or remove (None) dynamic configs of one BROKER or GROUP resource;
        a resource left with none is forgotten.  Validation is the caller's."""
        by_type = {t: dict(names) for t, names in self.resource_configs.items()}
        configs = dict(by_type.get(int(resource_type), {}).get(name, {}))
        for key, value in changes.items():
            if value is None:
                configs.pop(key, None)
            else:
                configs[key] = str(value)
        names = by_type.setdefault(int(resource_type), {})
        if configs:
            names[name] = configs
        else:
            names.pop(name, None)
        self.resource_configs = {t: n for t, n in by_type.items() if n}
        self.version += 1

    # -- finalized feature levels (KIP-584) ------------------------------------------

    def apply_update_features(self, updates: list, supported: dict, defaults: dict) -> dict:
        """Finalize ``updates`` ([name, level, upgrade type]) all or none: ApplyError
        INVALID_UPDATE_VERSION naming the first one Kafka's rules refuse (features.py),
        judged against this state and the running code's ``supported`` ranges and
        ``defaults``.  Returns the levels set."""
        problem = first_problem(self.finalized_features, updates, supported, defaults)
        if problem:
            raise ApplyError("INVALID_UPDATE_VERSION", problem)
        levels = {str(name): int(level) for name, level, _upgrade_type in updates}
        self.finalized_features = {**self.finalized_features, **levels}
        self.version += 1
        return levels

    # -- client quotas (KIP-546) -----------------------------------------------------

    def apply_alter_client_quotas(self, entries: list) -> None:
        """Set (value) or remove (None) quota keys of each [entity pairs, {key: value}];
        an entity left with none is forgotten.  Validation is the caller's
        (broker/quotas/entities.py)."""
        quotas = {entity: dict(values) for entity, values in self.client_quotas.items()}
        for pairs, changes in entries:
            entity = tuple(sorted((str(t), None if n is None else str(n)) for t, n in pairs))
            values = quotas.setdefault(entity, {})
            for key, value in changes.items():
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = float(value)
            if not values:
                del quotas[entity]
        self.client_quotas = quotas
        self.version += 1

    # -- the metadata quorum ---------------------------------------------------------

    def apply_record_voter(self, node_id: int, address: str | None) -> None:
        """Remember a voter's Raft address (``host:port``) before it is added to the
        quorum, or mark it leaving (None) before it is removed: the broker being
        removed applies this while it still receives the log, and steps down to an
        observer once the quorum has dropped it (``RaftStore``)."""
        if address is not None and (":" not in address or not address.rpartition(":")[2].isdigit()):
            raise ApplyError("INVALID_REQUEST", f"voter address {address!r} is not host:port")
        addresses = dict(self.quorum_addresses)
        addresses[int(node_id)] = address
        self.quorum_addresses = addresses
        self.version += 1

    # -- producer ids --------------------------------------------------------------

    def apply_allocate_producer_ids(self, count: int) -> int:
        """Reserve ``count`` producer ids, unique across the cluster. Returns the first."""
        first = self.next_producer_id
        self.next_producer_id += count
        self.version += 1
        return first


def _partition_to_dict(index: int, p: PartitionInfo) -> dict:
    return {"partition": index, "replicas": list(p.replicas), "leader": p.leader,
            "leader_epoch": p.leader_epoch, "partition_epoch": p.partition_epoch,
            "isr": list(p.isr),
            "replica_states": {str(b): s for b, s in p.replica_states.items()},
            "adding_replicas": list(p.adding_replicas),
            "removing_replicas": list(p.removing_replicas)}


def _partition_from_dict(item: dict) -> tuple[int, PartitionInfo]:
    states = {int(b): str(s) for b, s in item["replica_states"].items()}
    return int(item["partition"]), PartitionInfo(
        [int(r) for r in item["replicas"]], int(item["leader"]), int(item["leader_epoch"]),
        int(item["partition_epoch"]), [int(r) for r in item["isr"]], states,
        tuple(int(r) for r in item.get("adding_replicas", ())),
        tuple(int(r) for r in item.get("removing_replicas", ())))


def _hint(hints: dict, replica: int) -> int:
    value = hints.get(replica, hints.get(str(replica), -1))
    return int(value)


def _unclean_enabled(topic: TopicInfo, default: bool) -> bool:
    value = topic.configs.get("unclean.leader.election.enable")
    return default if value is None else value.lower() == "true"


def assign_replicas(brokers: list[int], partitions: int, replication_factor: int,
                    start: int = 0) -> list[list[int]]:
    """Spread replicas round-robin with leaders (first replicas) balanced across the
    brokers, and followers shifted so no two partitions repeat the same replica list
    when it can be avoided (Kafka's rack-unaware assignment, simplified)."""
    brokers = sorted(brokers)
    count = len(brokers)
    assignment = []
    for p in range(partitions):
        first = (start + p) % count
        shift = 1 + (p // count) % max(1, count - 1)
        replicas = [brokers[first]]
        for r in range(1, replication_factor):
            replicas.append(brokers[(first + r * shift) % count])
        if len(set(replicas)) != len(replicas):  # shift collided: fall back to consecutive
            replicas = [brokers[(first + r) % count] for r in range(replication_factor)]
        assignment.append(replicas)
    return assignment

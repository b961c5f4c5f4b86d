"""The broker's narrow way to the cluster metadata: one method per operation.

Handlers (CreateTopics, DeleteTopics, the config APIs), the producer-id manager, the
broker lifecycle, the controller and the replica manager's ISR changes all reach the
metadata through a ``MetadataClient`` wrapping the store (``LocalStore`` or
``RaftStore``): each method builds one typed command (``commands.py``) and submits
it.  Reads: ``image`` (the newest applied ClusterState by Raft log position, a copy
the loop owns: read it, never mutate it) and ``controller_id``.

Errors, as the store raises them: ApplyError (refused; ``code`` is the name of a Kafka
error code, e.g. TOPIC_ALREADY_EXISTS, FENCED_LEADER_EPOCH, NOT_CONTROLLER) and
MetadataUnavailable (no quorum answered in time; retriable, the outcome may be
unknown).  Every write returns once the change is applied, and ``image`` then already
shows it.

Controller decisions (``fence_brokers``, ``elect_preferred``, ``elect_leaders``) take the
Raft term the decision was taken in (read ``controller_term`` *before* deciding): the
quorum refuses them unless committed in that term, so a decision outlives no leadership.

Event-loop only.
"""
from __future__ import annotations

import uuid
from typing import Any

from .commands import (
    AllocateProducerIds,
    AlterClientQuotas,
    AlterPartition,
    AlterReassignments,
    AlterResourceConfigs,
    AlterScramCredentials,
    AlterTopicConfigs,
    Command,
    CreateAcls,
    CreatePartitions,
    CreateTopic,
    DeleteAcls,
    DeleteTopic,
    ElectLeaders,
    ElectPreferred,
    FenceBrokers,
    Heartbeat,
    InitCluster,
    RegisterBroker,
    UpdateFeatures,
)
from .features import (
    MINIMUM_METADATA_VERSION,
    SAFE_DOWNGRADE,
    UPGRADE,
    current_level,
    first_problem,
)
from .propagation import MetadataPropagation
from .reassignment import ongoing, original_replicas
from .state import NO_LEADER, ApplyError, ClusterState, Election, assign_replicas
from .store import MetadataUnavailable

# What request handlers (broker/api/, which reach the metadata only through this module)
# need besides the client: its errors, the image's "no leader" mark, replica assignment.
__all__ = ["ApplyError", "ClusterState", "MetadataClient", "MetadataUnavailable", "NO_LEADER",
           "assign_replicas", "MINIMUM_METADATA_VERSION", "SAFE_DOWNGRADE", "UPGRADE",
           "feature_update_problem", "finalized_feature_levels"]

DEFAULT_TIMEOUT_S = 10.0


def finalized_feature_levels(image: ClusterState, defaults: dict[str, int]) -> dict[str, int]:
    """Each feature of ``defaults`` at its finalized level in ``image`` (the level
    UpdateFeatures set, else the default)."""
    return {name: current_level(image.finalized_features, name, defaults) for name in defaults}


def feature_update_problem(image: ClusterState, updates: list[list],
                           supported: dict[str, list[int]],
                           defaults: dict[str, int]) -> str | None:
    """Why ``image`` refuses these updates (UpdateFeatures' validate_only), or None; the
    apply checks the same again."""
    return first_problem(image.finalized_features, updates, supported, defaults)


class MetadataClient:
    """Wraps a LocalStore or RaftStore (see the module doc).  Event-loop only."""

    def __init__(self, store):
        self.store = store
        # What the other brokers have applied, from their heartbeats (propagation.py).
        self.propagation = MetadataPropagation(store)

    @classmethod
    def wrap(cls, store_or_client) -> MetadataClient:
        """``store_or_client`` itself when it is a client, else a client of the store."""
        if isinstance(store_or_client, MetadataClient):
            return store_or_client
        return cls(store_or_client)

    # -- reads ---------------------------------------------------------------------

    @property
    def image(self) -> ClusterState:
        return self.store.image

    @property
    def controller_id(self) -> int:
        """The controller's broker id (-1 while no Raft leader is known)."""
        return self.store.controller_id

    @property
    def controller_term(self) -> int | None:
        """The term this broker's controller leads in; None when it does not lead (the
        lone broker's store: None too, with nothing to fence)."""
        return self.store.controller_term

    @property
    def is_controller(self) -> bool:
        return self.store.is_controller

    @property
    def has_quorum(self) -> bool:
        """True when the metadata lives in a Raft quorum (False: a lone broker)."""
        return hasattr(self.store, "quorum_status")

    def quorum_status(self) -> dict | None:
        """This broker's view of the metadata quorum (None for a lone broker)."""
        return self.store.quorum_status() if self.has_quorum else None

    def quorum_reachable(self) -> bool:
        """Whether this broker is connected to a majority of the voters (itself counted
        when it votes), so a metadata change it submits can commit.  True for a lone
        broker's local store."""
        status = self.quorum_status()
        if status is None:
            return True
        voters = status.get("voters") or []
        connected = sum(1 for voter in voters if voter["connected"])
        return bool(status.get("running")) and connected * 2 > len(voters)

    async def add_voter(self, node_id: int, address: str, timeout_s: float) -> None:
        """AddRaftVoter: ``node_id`` becomes a voter at Raft ``address``."""
        await self.store.add_voter(node_id, address, timeout_s=timeout_s)

    async def remove_voter(self, node_id: int, timeout_s: float = 30.0) -> None:
        """RemoveRaftVoter, on the quorum leader: ``node_id`` leaves the voter set."""
        await self.store.remove_voter(node_id, timeout_s=timeout_s)

    async def hand_over_leadership(self, timeout_s: float) -> None:
        """Another voter becomes the quorum leader (and so the controller)."""
        await self.store.hand_over_leadership(timeout_s)

    async def step_down(self) -> None:
        """This broker left the voter set: it carries on as an observer."""
        await self.store.step_down()

    def add_listener(self, listener) -> None:
        """``listener(image)`` for every new image (only when the version moved)."""
        self.store.add_listener(listener)

    def add_membership_observer(self, observer) -> None:
        """``observer(command)`` for every applied RegisterBroker / Heartbeat."""
        self.store.add_membership_observer(observer)

    async def wait_until_brokers_know(self, position: tuple, node_id: int,
                                      timeout_s: float) -> list[int]:
        """Wait (at most ``timeout_s``) until every live broker but ``node_id`` has
        applied the image at ``position`` (``image.position()``); returns the brokers
        still lagging (empty: every live broker knows it)."""
        return await self.propagation.wait_until_known(position, node_id, timeout_s)

    def brokers_lacking(self, position: tuple, node_id: int) -> list[int]:
        """Live brokers but ``node_id`` not known to have applied ``position``."""
        return self.propagation.lagging(position, node_id)

    async def submit(self, command: Command, timeout_s: float = DEFAULT_TIMEOUT_S) -> Any:
        """Any typed command (the methods below are the ones to call)."""
        return await self.store.submit(command, timeout_s=timeout_s)

    # -- cluster and brokers -------------------------------------------------------

    async def init_cluster(self, cluster_id: str) -> str:
        """Set the cluster id once; returns the cluster's id (the first one set)."""
        return await self.submit(InitCluster(cluster_id))

    async def register_broker(self, broker_id: int, host: str, port: int, incarnation: str,
                              unclean_default: bool = False,
                              endpoints: dict | None = None, rack: str | None = None) -> int:
        """(Re)register this broker's incarnation; returns its broker epoch."""
        return await self.submit(RegisterBroker(broker_id, host, port, incarnation,
                                                unclean_default, endpoints, rack))

    async def heartbeat(self, broker_id: int, broker_epoch: int, unclean_default: bool,
                        log_end_offsets: dict, timeout_s: float = DEFAULT_TIMEOUT_S,
                        metadata_position: tuple | None = None) -> bool:
        """False when the cluster no longer knows ``broker_epoch`` (register again).
        ``log_end_offsets`` ("topic:partition" → LEO) are the controller's hints;
        ``metadata_position`` the position of the newest image this broker applied."""
        position = list(metadata_position) if metadata_position is not None else None
        return await self.submit(Heartbeat(broker_id, broker_epoch, unclean_default,
                                           log_end_offsets, position), timeout_s)

    async def fence_self(self, broker_id: int, unclean_default: bool,
                         timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Election]:
        """Controlled shutdown: fence this broker (elections follow; it leaves every
        ISR).  Not a controller decision: no term."""
        return await self.submit(FenceBrokers([broker_id], {}, unclean_default), timeout_s)

    async def fence_brokers(self, broker_ids: list[int], leo_hints: dict,
                            unclean_default: bool, *,
                            controller_term: int | None) -> list[Election]:
        """The controller fences brokers whose session expired (elections follow)."""
        return await self.submit(FenceBrokers(broker_ids, leo_hints, unclean_default,
                                              controller_term=controller_term))

    async def elect_preferred(self, targets: list[tuple[str, int]], *,
                              controller_term: int | None) -> list[Election]:
        """The controller restores preferred leaders ("topic", partition) targets."""
        return await self.submit(ElectPreferred(targets, controller_term=controller_term))

    async def elect_leaders(self, election_type: int, targets: list | None, *,
                            controller_term: int | None,
                            timeout_s: float = DEFAULT_TIMEOUT_S) -> list[list]:
        """A client's ElectLeaders, decided by this controller (PREFERRED 0, UNCLEAN 1;
        ``targets`` [topic, partition] pairs or None for every partition); returns
        ``[topic, partition, error code name, message]`` per partition."""
        return await self.submit(ElectLeaders(election_type, targets,
                                              controller_term=controller_term), timeout_s)

    async def alter_reassignments(self, requests: list, *, controller_term: int | None,
                                  timeout_s: float = DEFAULT_TIMEOUT_S) -> list[list]:
        """Start, replace or cancel partition reassignments (KIP-455), decided by this
        controller; ``requests`` [topic, partition, target or None]; returns
        ``[topic, partition, error code name, message]`` per request."""
        return await self.submit(AlterReassignments(requests,
                                                    controller_term=controller_term),
                                 timeout_s)

    def ongoing_reassignments(self, wanted: list | None) -> list[list]:
        """[topic, partition, replicas, adding, removing] of the partitions being
        reassigned in the newest image, among ``wanted`` ([topic, [partitions]]; None: all)."""
        return ongoing(self.image, wanted)

    def replicas_before_reassignment(self, topic: str, index: int) -> list[int] | None:
        """The partition's replicas without those a reassignment is adding (None when the
        partition is not in the newest image)."""
        info = self.image.topics.get(topic)
        partition = info.partitions.get(index) if info is not None else None
        return None if partition is None else original_replicas(partition)

    # -- topics --------------------------------------------------------------------

    async def create_topic(self, name: str, assignment: list[list[int]],
                           configs: dict[str, str], topic_id: str | None = None) -> str:
        """Create a topic with this replica assignment; returns its id (a new UUID
        unless given: ids are chosen here, never in the replicated apply)."""
        topic_id = topic_id or str(uuid.uuid4())
        return await self.submit(CreateTopic(name, topic_id, assignment, configs))

    async def create_topic_on_live_brokers(self, name: str, partitions: int, replication: int,
                                           configs: dict[str, str]) -> str:
        """Create a topic with its replicas spread over the live brokers, leaders balanced
        (``assign_replicas``); returns its id.  ApplyError INVALID_REPLICATION_FACTOR when
        fewer than ``replication`` brokers are live.  What CreateTopics without an
        assignment, auto-creation and the coordinators' internal topics use."""
        live = self.image.live_brokers()
        if replication > len(live):
            raise ApplyError("INVALID_REPLICATION_FACTOR",
                             f"replication factor {replication} exceeds the {len(live)} "
                             f"live broker(s)")
        assignment = assign_replicas(live, partitions, replication,
                                     start=sum(name.encode()) % max(1, len(live)))
        return await self.create_topic(name, assignment, configs)

    async def create_partitions(self, name: str, topic_id: str, count: int,
                                assignment: list[list[int]]) -> int:
        """Grow a topic to ``count`` partitions with these replica lists for the new
        ones; returns the new count."""
        return await self.submit(CreatePartitions(name, topic_id, count, assignment))

    async def delete_topic(self, name: str) -> str:
        """Delete a topic; returns its id."""
        return await self.submit(DeleteTopic(name))

    async def alter_topic_configs(self, name: str, changes: dict[str, str | None]) -> None:
        """Set (value) or remove (None) topic config overrides."""
        return await self.submit(AlterTopicConfigs(name, changes))

    async def alter_resource_configs(self, resource_type: int, name: str,
                                     changes: dict[str, str | None]) -> None:
        """Set (value) or remove (None) dynamic configs of a BROKER or GROUP resource."""
        return await self.submit(AlterResourceConfigs(resource_type, name, changes))

    # -- partitions, producer ids --------------------------------------------------

    async def alter_partition(self, topic: str, partition: int, leader_id: int,
                              leader_epoch: int, partition_epoch: int,
                              new_isr: list[int]) -> int:
        """A leader's ISR change; returns the new partition epoch."""
        return await self.submit(AlterPartition(topic, partition, leader_id, leader_epoch,
                                                partition_epoch, new_isr))

    async def alter_scram_credentials(self, upsertions: list, deletions: list) -> None:
        await self.submit(AlterScramCredentials(upsertions, deletions))

    # -- ACLs ----------------------------------------------------------------------

    async def create_acls(self, bindings: list[list]) -> int:
        """Add ACL bindings (plain lists, ``AclBinding.to_wire``); returns how many were
        new."""
        return await self.submit(CreateAcls(bindings))

    async def delete_acls(self, bindings: list[list]) -> list[list]:
        """Remove exactly these bindings; returns those that were present."""
        return await self.submit(DeleteAcls(bindings))

    async def update_features(self, updates: list[list], supported: dict[str, list[int]],
                              defaults: dict[str, int]) -> dict[str, int]:
        """Finalize feature levels ([name, level, upgrade type] each), all or none
        (ApplyError INVALID_UPDATE_VERSION); returns the levels set."""
        return await self.submit(UpdateFeatures(updates, supported, defaults))

    async def alter_client_quotas(self, entries: list[list]) -> None:
        """Set or remove client quota keys ([entity pairs, {key: value or None}] each)."""
        await self.submit(AlterClientQuotas(entries))

    async def allocate_producer_ids(self, count: int) -> int:
        """Reserve ``count`` producer ids unique in the cluster; returns the first."""
        return await self.submit(AllocateProducerIds(count))

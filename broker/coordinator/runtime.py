"""The coordinator runtime: one internal topic's partitions this broker leads, their
loading, the status of a key, and the writes (Kafka's ``CoordinatorRuntime``, reduced).

Ownership of one partition, driven by the replica manager's leadership listener:

    not owned ──(became leader)──► LOADING ──(log read to its end)──► LOADED
        ▲                            │                                  │
        └────────(became follower, or the partition left this broker)───┘

A new leader epoch without a follower spell keeps the tenure (the log was not truncated,
so memory is still what the log says) unless the topic says ``reload_on_new_epoch``
(the transaction coordinator: its markers carry the epoch, so a tenure never changes
it).  Requests for keys of a LOADING partition get COORDINATOR_LOAD_IN_PROGRESS, of a
partition not owned NOT_COORDINATOR.

What a record means is the coordinator's: it plugs in as a ``CoordinatorShard`` that
makes a loader per partition, publishes what the loader read once the partition is
LOADED, and forgets a partition's state when its tenure ends.  Loading reads from the
log start to the log end offset, yielding between chunks (``tenure.load_partition``),
and is abandoned when the tenure changes meanwhile.

Writes (``append_now`` then ``wait_for_acks``): appended as leader at once, without an
``await`` (records appended by one call precede those of any later call, whatever order
the acks take), then acknowledged once the high watermark passes them (acks=all).  A
coordinator changes memory only while the tenure that wrote is current (``holds``).

Event-loop only.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from protocol.errors import ErrorCode

from ..replication.origin import AppendOrigin
from .batches import build_batch
from .tenure import LoadState, Ownership, load_partition
from .topic import InternalTopic

log = logging.getLogger(__name__)

Entries = list[tuple[bytes, bytes | None]]
T = TypeVar("T")

# Kafka's mapping of a coordinator's append errors to what its clients are answered
# (GroupMetadataManager.storeGroup, TransactionStateManager.appendTransactionToLog);
# a coordinator may add its own cases.
APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
}


class PartitionLoader(Protocol):
    def apply(self, chunk: bytes, position: int) -> int:
        """Replay the batches of ``chunk`` at or after ``position``; the next position."""


class CoordinatorShard(Protocol):
    """What a coordinator plugs into the runtime (called on the event loop), besides
    ``new_loader(partition) -> PartitionLoader`` for each tenure."""

    def on_loaded(self, ownership: Ownership, loader) -> str | None:
        """The partition is LOADED: publish what ``loader`` read (no ``await``); a summary
        for the log line, None when nothing was loaded."""

    def on_unloaded(self, partition: int) -> str | None:
        """The tenure of ``partition`` ended: drop its state, answer its waiters; a
        summary of what was dropped for the log line, None when nothing was."""


def drop_partition(cache: dict[str, T], partition: int) -> list[T]:
    """Remove and return the entries of ``cache`` (each with a ``partition``) that belong
    to ``partition``: what a shard forgets when its tenure ends."""
    dropped = [key for key, entry in cache.items() if entry.partition == partition]
    return [cache.pop(key) for key in dropped]


@dataclass(eq=False)
class PendingWrite:
    """An append done as leader in one tenure, waiting for its acks."""

    ownership: Ownership
    status: object  # the replica manager's ProducePartitionStatus

    @property
    def base_offset(self) -> int:
        return self.status.base_offset


class CoordinatorRuntime:
    """The partitions of ``topic`` this broker leads, for the coordinator ``shard``.

    Invariant: ``owned`` maps a partition to its current tenure only; a tenure is
    LOADED only after its loader read the log to its end and the shard published it.
    Registers itself with the replica manager's leadership listeners on construction.
    """

    def __init__(self, topic: InternalTopic, config, replica_manager,
                 image: Callable[[], object], shard: CoordinatorShard,
                 new_loader: Callable[[int], PartitionLoader],
                 clock_ms: Callable[[], int], prefix: str):
        self.topic = topic
        self.replica_manager = replica_manager
        self._image = image
        self._shard = shard
        self._new_loader = new_loader
        self.clock_ms = clock_ms
        self.max_batch_bytes = max(config["message.max.bytes"],
                                   config["socket.request.max.bytes"])
        self.owned: dict[int, Ownership] = {}
        self._prefix = prefix
        replica_manager.add_leadership_listener(self.on_leadership_changed)

    # -- placement and status ----------------------------------------------------------------

    def num_partitions(self) -> int:
        return self.topic.num_partitions(self._image())

    def partition_for(self, key: str) -> int:
        return self.topic.partition_for(self._image(), key)

    def status_for(self, key: str) -> ErrorCode:
        """NONE if this broker coordinates ``key`` now; else the error to answer."""
        ownership = self.owned.get(self.partition_for(key))
        if ownership is None:
            return ErrorCode.NOT_COORDINATOR
        if ownership.state is LoadState.LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE

    def loaded_tenure(self, index: int) -> Ownership | None:
        """The tenure of partition ``index`` if it is LOADED, else None."""
        ownership = self.owned.get(index)
        return ownership if ownership is not None and ownership.state is LoadState.LOADED \
            else None

    def holds(self, ownership: Ownership) -> bool:
        """Whether ``ownership`` is still the current tenure of its partition."""
        return self.owned.get(ownership.partition) is ownership

    def is_loading(self) -> bool:
        return any(o.state is LoadState.LOADING for o in self.owned.values())

    # -- leadership → load / unload --------------------------------------------------------------

    def on_leadership_changed(self, partition) -> None:
        """Replica-manager listener. Triggers: this broker became leader or follower of a
        partition, or stopped hosting it (see the module docstring)."""
        if partition.topic != self.topic.name:
            return
        index = partition.index
        ownership = self.owned.get(index)
        if ownership is not None and partition.is_leader and not (
                self.topic.reload_on_new_epoch
                and ownership.leader_epoch != partition.leader_epoch):
            ownership.leader_epoch = partition.leader_epoch
            return
        if ownership is not None:
            self.unload(index)
        if partition.is_leader:
            ownership = Ownership(index, partition.leader_epoch)
            self.owned[index] = ownership
            ownership.task = asyncio.get_running_loop().create_task(self._load(ownership))

    def unload(self, index: int) -> None:
        ownership = self.owned.pop(index, None)
        if ownership is None:
            return
        if ownership.task is not None and not ownership.task.done():
            ownership.task.cancel()
        summary = self._shard.on_unloaded(index)
        if summary:
            log.info("%s unloaded %s of %s-%d", self._prefix, summary, self.topic.name, index)

    def shutdown(self) -> None:
        for index in list(self.owned):
            self.unload(index)

    async def _load(self, ownership: Ownership) -> None:
        """Read the partition from its log start to its log end offset, then publish."""
        index = ownership.partition
        started = time.monotonic()
        loader = self._new_loader(index)
        if not await load_partition(self.replica_manager, self.topic.name, ownership,
                                    self.owned, loader.apply, self._prefix):
            return
        ownership.state = LoadState.LOADED
        summary = self._shard.on_loaded(ownership, loader)
        log.log(logging.INFO if summary else logging.DEBUG,
                "%s loaded %s of %s-%d (leader epoch %d) in %.0f ms", self._prefix,
                summary or "nothing", self.topic.name, index, ownership.leader_epoch,
                (time.monotonic() - started) * 1000)

    # -- writes ------------------------------------------------------------------------------

    def append_now(self, index: int, entries: Entries, producer_id: int = -1,
                   producer_epoch: int = -1) -> PendingWrite | ErrorCode:
        """Append ``entries`` to partition ``index`` as leader, now (no ``await``); with a
        producer id, as that producer's transactional batch.  NOT_LEADER_OR_FOLLOWER
        unless the partition is LOADED here; the append's own error if it is refused."""
        ownership = self.loaded_tenure(index)
        if ownership is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        batch = build_batch(entries, self.clock_ms(), producer_id, producer_epoch)
        status = self.replica_manager.append_one(
            self.topic.name, index, batch, -1, self.max_batch_bytes,
            origin=AppendOrigin.COORDINATOR)
        if status.error != ErrorCode.NONE:
            return status.error
        return PendingWrite(ownership, status)

    async def wait_for_acks(self, pending: PendingWrite, timeout_ms: int) -> ErrorCode:
        """The write's error once the high watermark passed it, or the timeout's; whether
        its tenure is still current is the caller's to ask (``holds``)."""
        key = (self.topic.name, pending.ownership.partition)
        statuses = await self.replica_manager.wait_for_acks({key: pending.status}, timeout_ms)
        return statuses[key].error

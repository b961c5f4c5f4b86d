"""DeleteRecords on the leaders of this broker (Kafka's ReplicaManager.deleteRecords and
DelayedDeleteRecords).

Each partition's leader moves its log start offset at once (``Partition.
delete_records_on_leader``); the answer waits until the partition's low watermark — the
lowest log start offset over the leader and its live followers — reached the requested
offset, so every live replica has dropped the records, bounded by the request's
``timeout_ms``.  Followers take the leader's log start from their next fetch answer
(the leader answers their parked fetches at once, so none waits out its long poll) and
report theirs in the fetch after: ``ReplicaManager.record_follower_fetches`` triggers
the waiting operations.  Event-loop only.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from protocol.errors import ErrorCode
from storage.errors import StorageError

from ..purgatory import DelayedOperation
from .partition import PartitionError

if TYPE_CHECKING:
    from .replica_manager import ReplicaManager

log = logging.getLogger(__name__)

Key = tuple[str, int]


@dataclass
class DeleteRecordsStatus:
    """One partition's answer: ``requested_offset`` is what its low watermark must reach."""

    requested_offset: int = -1
    low_watermark: int = -1
    error: ErrorCode = ErrorCode.NONE
    pending: bool = False


class DelayedDeleteRecords(DelayedOperation):
    """Waiting until each partition's low watermark reached its requested offset.

    A partition is done when (A) it failed at the leader (error set, never pending);
    (B) this broker no longer leads it → NOT_LEADER_OR_FOLLOWER; (C) its low watermark
    reached the requested offset → NONE, with that low watermark; (D) the timeout
    expired first → REQUEST_TIMED_OUT (``on_expiration``).
    Triggers: follower fetches reporting a log start (``check_and_complete``),
    leadership changes and removals (``complete_all``)."""

    def __init__(self, timeout_ms: int, statuses: dict[Key, DeleteRecordsStatus],
                 replica_manager: ReplicaManager, respond: Callable[[], None]) -> None:
        super().__init__(timeout_ms)
        self.statuses = statuses
        self._rm = replica_manager
        self._respond = respond

    def try_complete(self) -> bool:
        for key, status in self.statuses.items():
            if status.pending:
                self._check(key, status)
        if any(status.pending for status in self.statuses.values()):
            return False
        return self.force_complete()

    def _check(self, key: Key, status: DeleteRecordsStatus) -> None:
        partition = self._rm.get_partition(*key)
        if partition is None or not partition.is_leader or partition.offline:  # (B)
            status.error, status.pending = ErrorCode.NOT_LEADER_OR_FOLLOWER, False
            return
        status.low_watermark = partition.low_watermark(self._rm.image.is_live)
        if status.low_watermark >= status.requested_offset:  # (C)
            status.pending = False

    def on_complete(self) -> None:
        self._respond()

    def on_expiration(self) -> None:
        for status in self.statuses.values():  # (D)
            if status.pending:
                status.error, status.pending = ErrorCode.REQUEST_TIMED_OUT, False


async def delete_records(replica_manager: ReplicaManager, offsets: dict[Key, int],
                         timeout_ms: int) -> dict[Key, DeleteRecordsStatus]:
    """Delete the records below ``offsets`` (key → offset, -1 = the HW) on the partitions
    this broker leads, and wait as the module doc says."""
    statuses = {key: _delete_on_leader(replica_manager, key, offset)
                for key, offset in offsets.items()}
    if not any(status.pending for status in statuses.values()):
        return statuses
    future = asyncio.get_running_loop().create_future()

    def respond() -> None:
        if not future.done():
            future.set_result(None)

    operation = DelayedDeleteRecords(timeout_ms, statuses, replica_manager, respond)
    purgatory = replica_manager.delete_records_purgatory
    purgatory.try_complete_else_watch(operation, [k for k, s in statuses.items() if s.pending])
    try:
        await future
    finally:
        operation.force_complete()  # connection lost: stop watching
    return statuses


def _delete_on_leader(replica_manager: ReplicaManager, key: Key,
                      offset: int) -> DeleteRecordsStatus:
    partition = replica_manager.get_partition(*key)
    if partition is None:
        return DeleteRecordsStatus(error=replica_manager.missing_partition_error(*key))
    try:
        requested = partition.delete_records_on_leader(offset)
    except PartitionError as exc:
        return DeleteRecordsStatus(error=exc.code)
    except StorageError as exc:  # a disk failure: reported, the directory is offline
        log.warning("[Partition %s] deleting records failed: %s", partition.name, exc)
        return DeleteRecordsStatus(error=ErrorCode.KAFKA_STORAGE_ERROR)
    log.info("[Partition %s broker=%d] records below %d deleted by a client", partition.name,
             replica_manager.node_id, requested)
    # Parked follower fetches answer now, carrying the new log start.
    replica_manager.fetch_purgatory.complete_all(key)
    return DeleteRecordsStatus(requested, partition.low_watermark(replica_manager.image.is_live),
                               pending=True)

"""The two delayed operations: acks=all produce and long-poll fetch.

Completion cases are labelled (A), (B), ... in both the docs and the code, as in
Kafka's DelayedProduce/DelayedFetch.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from protocol.errors import ErrorCode

from ..purgatory import DelayedOperation
from .partition import Partition, PartitionError


@dataclass
class ProducePartitionStatus:
    """One partition of an acks=all produce: the offset its HW must pass."""

    partition: Partition | None
    required_offset: int  # exclusive: done when high_watermark >= required_offset
    base_offset: int
    error: ErrorCode = ErrorCode.NONE
    acks_pending: bool = True
    log_append_time_ms: int = -1
    log_start_offset: int = -1


class DelayedProduce(DelayedOperation):
    """An acks=all produce waiting for the high watermark of each partition.

    A partition is satisfied when (Kafka's Partition.checkEnoughReplicasReachOffset):
    (A) it already failed (error set at append) — nothing to wait for;
    (B) this broker is no longer its leader → NOT_LEADER_OR_FOLLOWER, or its log
        directory went offline → KAFKA_STORAGE_ERROR;
    (C) its high watermark reached ``required_offset`` with a maximal ISR (the HW's
        replica set) of at least min.insync.replicas, leader included → NONE;
    (D) its high watermark reached ``required_offset`` but the ISR is then smaller than
        min.insync.replicas → NOT_ENOUGH_REPLICAS_AFTER_APPEND.  The ISR is checked when
        the HW arrives, not only while waiting: a shrink to the leader alone moves the
        HW to the leader's LEO, and that one copy must not be acknowledged;
    (E) the timeout expired first → REQUEST_TIMED_OUT (set in ``on_complete``).
    While the HW has not reached the offset, a small ISR is no reason to answer: the
    ISR may grow back in time, as in Kafka.
    """

    def __init__(self, timeout_ms: int, statuses: dict[tuple[str, int], ProducePartitionStatus],
                 respond: Callable[[dict[tuple[str, int], ProducePartitionStatus]], None]):
        super().__init__(timeout_ms)
        self.statuses = statuses
        self._pending = sum(1 for status in statuses.values() if status.acks_pending)
        self._respond = respond

    def try_complete(self) -> bool:
        for status in self.statuses.values():
            self._check(status)
        return self._complete_if_done()

    def try_complete_after(self, key) -> bool:
        """Only ``key``'s partition changed: check it alone (O(1) per waiting produce)."""
        status = self.statuses.get(key)
        if status is None:
            return self.try_complete()
        self._check(status)
        return self._complete_if_done()

    def watch_order(self, key) -> int | None:
        """Sorted by the offset waited for on ``key``."""
        status = self.statuses.get(key)
        return None if status is None else status.required_offset

    def waits_in_order(self, key) -> bool:
        """Still waiting for the HW on ``key``: every produce sorted after it on ``key``
        waits for a higher offset, so the trigger need not try them."""
        status = self.statuses.get(key)
        return status is not None and status.acks_pending

    def _check(self, status: ProducePartitionStatus) -> None:
        if not status.acks_pending:
            return
        partition = status.partition
        if status.error != ErrorCode.NONE or partition is None:  # (A)
            status.acks_pending = False
        elif partition.offline:  # (B) its log directory failed
            status.error, status.acks_pending = ErrorCode.KAFKA_STORAGE_ERROR, False
        elif not partition.is_leader:  # (B)
            status.error, status.acks_pending = ErrorCode.NOT_LEADER_OR_FOLLOWER, False
        elif partition.high_watermark >= status.required_offset:
            if len(partition.maximal_isr) < partition.settings.min_insync_replicas:  # (D)
                status.error = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            status.acks_pending = False  # (C) or (D)
        if not status.acks_pending:
            self._pending -= 1

    def _complete_if_done(self) -> bool:
        return self.force_complete() if self._pending == 0 else False

    def on_complete(self) -> None:
        for status in self.statuses.values():
            if status.acks_pending:  # (E)
                status.error, status.acks_pending = ErrorCode.REQUEST_TIMED_OUT, False
            if status.partition is not None:
                status.log_start_offset = status.partition.log_start_offset
        self._respond(self.statuses)


@dataclass
class FetchPartitionStatus:
    key: tuple[str, int]
    partition: Partition | None
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int
    log_start_offset: int = -1  # a follower's, from its request (-1: not said)
    #: a consumer reading this replica while it follows (KIP-392); set by the fetch
    follower_read: bool = False


class DelayedFetch(DelayedOperation):
    """A fetch waiting until enough bytes are visible or ``max_wait_ms`` passes.

    Completes when any of:
    (A) a partition's leadership or epoch changed (the reader must hear about it);
    (B) a partition is gone or the fetch offset fell out of range;
    (C) the visible bytes beyond the fetch offsets reach ``min_bytes``;
    (D) the wait expired (the timer) — answer with whatever is there.
    Triggers: appends (consumers of a single broker, followers), HW moves (consumers),
    a follower's progress (consumers reading that follower, KIP-392).
    """

    def __init__(self, timeout_ms: int, min_bytes: int, replica_id: int,
                 statuses: list[FetchPartitionStatus], respond: Callable[[], None],
                 isolation_level: int = 0):
        super().__init__(timeout_ms)
        self.min_bytes = max(1, min_bytes)
        self.replica_id = replica_id
        self.isolation_level = isolation_level  # read_committed: visible up to the LSO
        self.statuses = statuses
        self._by_key = {status.key: status for status in statuses}
        self._respond = respond

    def try_complete(self) -> bool:
        accumulated = 0
        for status in self.statuses:
            if self._must_answer(status):  # (A)/(B)
                return self.force_complete()
            if status.partition.available_to(self.replica_id, self.isolation_level) \
                    > status.fetch_offset:
                if self.min_bytes <= 1:  # (C), the usual case: any data at all
                    return self.force_complete()
                accumulated += len(status.partition.read(
                    status.fetch_offset, status.max_bytes, replica_id=self.replica_id,
                    isolation_level=self.isolation_level,
                    follower_read=status.follower_read).records)
                if accumulated >= self.min_bytes:  # (C)
                    return self.force_complete()
        return False

    def try_complete_after(self, key) -> bool:
        """With ``min_bytes`` <= 1 (every follower, most consumers) only the partition
        that changed can have become answerable: checking it alone keeps a follower's
        fetch over hundreds of partitions from costing a scan of all of them per append.
        A larger ``min_bytes`` sums over every partition, so it re-checks them all."""
        status = self._by_key.get(key)
        if status is None or self.min_bytes > 1:
            return self.try_complete()
        if self._must_answer(status) or status.partition.available_to(
                self.replica_id, self.isolation_level) > status.fetch_offset:
            return self.force_complete()  # (A)/(B)/(C)
        return False

    def _must_answer(self, status: FetchPartitionStatus) -> bool:
        """(A)/(B): the partition is gone, its leadership or epoch changed, or the fetch
        offset is out of its range — the reader must hear about it."""
        partition = status.partition
        if partition is None or partition.is_leader == status.follower_read:
            return True  # gone, or its role changed since the read
        try:
            partition.check_leader_epoch(status.current_leader_epoch)
        except PartitionError:
            return True
        return status.fetch_offset > partition.log_end_offset or \
            status.fetch_offset < partition.log_start_offset

    def on_complete(self) -> None:
        self._respond()

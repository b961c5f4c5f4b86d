"""The long-poll fetch waiting in the fetch purgatory (Kafka's DelayedFetch).

Completion cases are labelled (A), (B), ... in both the docs and the code, as in
Kafka's DelayedFetch.  The acks=all produce's wait is in acks.py, with the other
acks rules.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

from ..purgatory import DelayedOperation
from .partition import Partition, PartitionError


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
                 statuses: list[FetchPartitionStatus], respond: Callable[[], object],
                 isolation_level: int = 0) -> None:
        super().__init__(timeout_ms)
        self.min_bytes = max(1, min_bytes)
        self.replica_id = replica_id
        self.isolation_level = isolation_level  # read_committed: visible up to the LSO
        self.statuses = statuses
        # looked up by the purgatory's keys (any Hashable; ours are (topic, partition))
        self._by_key: dict[Hashable, FetchPartitionStatus] = {s.key: s for s in statuses}
        self._respond = respond

    def try_complete(self) -> bool:
        accumulated = 0
        for status in self.statuses:
            partition = status.partition
            if partition is None or self._must_answer(status):  # (A)/(B)
                return self.force_complete()
            if partition.available_to(self.replica_id, self.isolation_level) \
                    > status.fetch_offset:
                if self.min_bytes <= 1:  # (C), the usual case: any data at all
                    return self.force_complete()
                accumulated += len(partition.read(
                    status.fetch_offset, status.max_bytes, replica_id=self.replica_id,
                    isolation_level=self.isolation_level,
                    follower_read=status.follower_read).records)
                if accumulated >= self.min_bytes:  # (C)
                    return self.force_complete()
        return False

    def try_complete_after(self, key: Hashable) -> bool:
        """With ``min_bytes`` <= 1 (every follower, most consumers) only the partition
        that changed can have become answerable: checking it alone keeps a follower's
        fetch over hundreds of partitions from costing a scan of all of them per append.
        A larger ``min_bytes`` sums over every partition, so it re-checks them all."""
        status = self._by_key.get(key)
        if status is None or self.min_bytes > 1:
            return self.try_complete()
        partition = status.partition
        if partition is None or self._must_answer(status) or partition.available_to(
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

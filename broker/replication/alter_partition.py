"""The leader's side of Kafka's AlterPartition rule: proposing ISR changes.

A leader never changes its ISR on its own: the partition proposes a change
(``Partition.maybe_expand_isr`` when a follower caught up, ``maybe_shrink_isr`` when one
lagged longer than ``replica.lag.time.max.ms``), this module sends it to the controller
and reports the outcome back to the partition.  The committed ISR usually arrives
first, in the metadata image (``image_applier.py``); whichever comes first counts.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from ..controller.metadata_client import ApplyError, MetadataClient, MetadataUnavailable
from ..controller.state import ClusterState
from ..metrics.stats import ReplicaStats
from ..tasks import TaskSupervisor
from .partition import Partition, PendingIsrChange

log = logging.getLogger(__name__)


class AlterPartitionManager:
    """Sends each partition's pending ISR change to the controller.  Event-loop only.

    Invariants: a partition has at most one change in flight (the partition refuses to
    propose another); every change sent is reported back exactly once, committed or
    failed, including when its task is cancelled at shutdown.  ``metadata()`` None (a
    replica manager driven alone) proposes nothing.  ``on_isr_changed(partition)``
    runs after a committed change that this manager applied (the HW may move).
    """

    def __init__(self, node_id: int, lag_time_max_ms: int, tasks: TaskSupervisor,
                 stats: ReplicaStats, metadata: Callable[[], MetadataClient | None],
                 image: Callable[[], ClusterState],
                 on_isr_changed: Callable[[Partition], None]):
        self.node_id = node_id
        self.lag_time_max_ms = lag_time_max_ms
        self.tasks = tasks
        self.stats = stats
        self._metadata = metadata
        self._image = image
        self._on_isr_changed = on_isr_changed

    @property
    def enabled(self) -> bool:
        return self._metadata() is not None

    def maybe_expand(self, partition: Partition, replica_id: int) -> None:
        """A follower fetched up to the leader: propose it for the ISR when it may join.

        Kafka's isReplicaIsrEligible: a fenced broker may fetch (it is catching up, or
        has not heard of its fencing yet) but is not proposed — the controller would
        refuse it (INELIGIBLE_REPLICA), at every fetch, until its heartbeat unfences it."""
        if not self.enabled:
            return
        info = self._image().brokers.get(replica_id)
        if info is not None and info.fenced:
            return
        change = partition.maybe_expand_isr(replica_id)
        if change is not None:
            self.propose(partition, change)

    def shrink_once(self, partitions: Iterable[Partition]) -> None:
        """Propose removing ISR followers that have not caught up within the lag time
        (the partition decides; one change in flight at a time)."""
        if not self.enabled:
            return
        now_ms = int(time.time() * 1000)
        for partition in list(partitions):
            change = partition.maybe_shrink_isr(now_ms, self.lag_time_max_ms)
            if change is not None:
                self.propose(partition, change)

    def propose(self, partition: Partition, change: PendingIsrChange) -> None:
        """Send ``change`` (the partition's pending ISR state) in the background."""
        self.tasks.spawn(f"alter-partition {partition.name}", self.alter(partition, change))

    async def alter(self, partition: Partition, change: PendingIsrChange) -> None:
        """Submit ``change`` and report the outcome to the partition."""
        new_isr = sorted(change.proposed_isr)
        try:
            partition_epoch = await self.submit(partition, change)
        except (ApplyError, MetadataUnavailable) as exc:
            log.info("[Partition %s broker=%d] ISR change to %s not applied: %s",
                     partition.name, self.node_id, new_isr, exc)
            partition.on_isr_change_failed(change)
            return
        except BaseException:  # cancelled (shutdown) or a bug: never leave it in flight
            partition.on_isr_change_failed(change)
            raise
        log.info("[Partition %s broker=%d] ISR change to %s committed", partition.name,
                 self.node_id, new_isr)
        if partition.on_isr_change_committed(change, partition_epoch):
            self.stats.isr_changed(change.isr, change.proposed_isr)
            self._on_isr_changed(partition)

    async def submit(self, partition: Partition, change: PendingIsrChange) -> int:
        """The one AlterPartition call site: returns the new partition epoch; raises
        ApplyError (refused) or MetadataUnavailable (outcome unknown)."""
        metadata = self._metadata()
        if metadata is None:  # proposals are made only while enabled
            raise MetadataUnavailable("no metadata client to send AlterPartition to")
        return await metadata.alter_partition(
            partition.topic, partition.index, self.node_id, change.leader_epoch,
            change.partition_epoch, sorted(change.proposed_isr))

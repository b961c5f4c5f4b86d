"""DelayedFetch: answers when a partition it waits on becomes answerable; a trigger for
one partition checks only that one (min_bytes <= 1), so a follower's fetch over
hundreds of partitions does not cost a scan of them all per append."""
import asyncio

from broker.purgatory import Purgatory
from broker.replication.delayed import DelayedFetch, FetchPartitionStatus


class Records:
    def __init__(self, size):
        self.records = b"x" * size


class LeaderPartition:
    """The few Partition queries a DelayedFetch makes, over a log of ``end`` offsets."""

    def __init__(self, end=10):
        self.is_leader = True
        self.log_start_offset = 0
        self.log_end_offset = end
        self.queries = 0

    def check_leader_epoch(self, epoch):
        pass

    def available_to(self, replica_id, isolation_level=0):
        self.queries += 1
        return self.log_end_offset

    def read(self, offset, max_bytes, replica_id, isolation_level=0, follower_read=False):
        return Records(100 * (self.log_end_offset - offset))


def _fetch(partitions, min_bytes=1):
    answered = []
    statuses = [FetchPartitionStatus(("t", i), p, p.log_end_offset, 1 << 20, 0)
                for i, p in enumerate(partitions)]
    return DelayedFetch(10_000, min_bytes, 2, statuses, lambda: answered.append(1)), answered


def test_a_trigger_checks_only_the_partition_that_changed():
    async def run():
        partitions = [LeaderPartition() for _ in range(300)]
        purgatory = Purgatory("fetch")
        op, answered = _fetch(partitions)
        assert not purgatory.try_complete_else_watch(op, [("t", i) for i in range(300)])
        for p in partitions:
            p.queries = 0
        assert purgatory.check_and_complete(("t", 5)) == 0  # nothing new there
        partitions[7].log_end_offset += 1  # an append
        assert purgatory.check_and_complete(("t", 7)) == 1
        assert answered == [1]
        assert sum(p.queries for p in partitions) == 2
        assert partitions[5].queries == 1 and partitions[7].queries == 1
    asyncio.run(run())


def test_a_trigger_answers_when_its_partition_lost_leadership():
    async def run():
        partitions = [LeaderPartition() for _ in range(3)]
        purgatory = Purgatory("fetch")
        op, answered = _fetch(partitions)
        purgatory.try_complete_else_watch(op, [("t", i) for i in range(3)])
        partitions[1].is_leader = False
        assert purgatory.check_and_complete(("t", 1)) == 1 and answered == [1]
    asyncio.run(run())


def test_min_bytes_counts_over_every_partition():
    async def run():
        partitions = [LeaderPartition() for _ in range(3)]
        purgatory = Purgatory("fetch")
        op, answered = _fetch(partitions, min_bytes=250)
        purgatory.try_complete_else_watch(op, [("t", i) for i in range(3)])
        partitions[0].log_end_offset += 2  # 200 bytes: not enough yet
        assert purgatory.check_and_complete(("t", 0)) == 0
        partitions[2].log_end_offset += 1  # 100 more, on another partition: 300 in all
        assert purgatory.check_and_complete(("t", 2)) == 1 and answered == [1]
    asyncio.run(run())

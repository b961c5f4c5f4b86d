"""DelayedProduce in the purgatory: a high watermark move completes exactly the produces
at or below it, tries them lowest offset first and stops at the first still waiting —
also when a produce was watched after others with higher offsets (a duplicate retry)."""
import asyncio
import random
from types import SimpleNamespace

from broker.purgatory import Purgatory
from broker.replication.acks import DelayedProduce, ProducePartitionStatus
from protocol.errors import ErrorCode

KEY = ("t", 0)


class LeaderPartition:
    """What a DelayedProduce asks of its partition; counts the HW reads."""

    def __init__(self):
        self.offline = False
        self.is_leader = True
        self.log_start_offset = 0
        self.maximal_isr = {1, 2, 3}
        self.settings = SimpleNamespace(min_insync_replicas=2)
        self._high_watermark = 0
        self.reads = 0

    @property
    def high_watermark(self):
        self.reads += 1
        return self._high_watermark


def _watch(purgatory, partition, required_offsets):
    answered = {}
    for offset in required_offsets:
        statuses = {KEY: ProducePartitionStatus(partition, offset, offset - 1)}
        op = DelayedProduce(30_000, statuses,
                            lambda result, offset=offset: answered.__setitem__(offset, result))
        assert not purgatory.try_complete_else_watch(op, [KEY])
    return answered


def test_a_high_watermark_move_completes_exactly_the_produces_below_it_in_order():
    async def run():
        partition = LeaderPartition()
        purgatory = Purgatory("produce")
        offsets = list(range(1, 1001))
        random.Random(7).shuffle(offsets)  # watched in any order, duplicates included
        answered = _watch(purgatory, partition, offsets)
        partition._high_watermark = 10
        partition.reads = 0
        assert purgatory.check_and_complete(KEY) == 10
        assert sorted(answered) == list(range(1, 11))
        assert all(r[KEY].error == ErrorCode.NONE for r in answered.values())
        assert partition.reads <= 11, "the trigger tried produces beyond the first waiting one"
        assert purgatory.watched(KEY) == 990
        partition._high_watermark = 1000
        assert purgatory.check_and_complete(KEY) == 990
        assert purgatory.watched() == 0
    asyncio.run(run())


def test_a_lost_leadership_answers_every_waiting_produce():
    async def run():
        partition = LeaderPartition()
        purgatory = Purgatory("produce")
        answered = _watch(purgatory, partition, [5, 3, 9])
        partition.is_leader = False
        assert purgatory.check_and_complete(KEY) == 3
        assert {r[KEY].error for r in answered.values()} == {ErrorCode.NOT_LEADER_OR_FOLLOWER}
    asyncio.run(run())

"""DeleteRecords at the partition (broker/replication/partition.py) and the delayed answer
(broker/replication/delete_records.py): the leader's start moves at once, never past the
HW; the answer waits until every live replica's start reached the requested offset."""
from __future__ import annotations

import asyncio

import pytest

from broker.purgatory import Purgatory
from broker.replication.delete_records import DelayedDeleteRecords, DeleteRecordsStatus
from broker.replication.partition import Partition, PartitionError, PartitionSettings
from protocol.errors import ErrorCode
from storage.config import LogConfig
from storage.log import PartitionLog
from tests.unit.replication.test_partition_hw import append, fetch, leader


def committed_leader(tmp_path, records: int = 30) -> Partition:
    """Leader of [1, 2, 3] with ``records`` records, every follower caught up (HW = LEO)."""
    p = leader(tmp_path)
    for _ in range(records // 3):
        append(p, 3)
    for replica in (2, 3):
        fetch(p, replica, p.log_end_offset)
    assert p.high_watermark == records
    return p


def test_the_leader_moves_its_start_and_minus_one_means_the_high_watermark(tmp_path):
    p = committed_leader(tmp_path)
    assert p.delete_records_on_leader(12) == 12
    assert p.log_start_offset == 12
    assert p.delete_records_on_leader(5) == 5            # below the start: no change, no error
    assert p.log_start_offset == 12
    assert p.delete_records_on_leader(-1) == 30
    assert p.log_start_offset == 30


@pytest.mark.parametrize("offset", [31, -2])
def test_an_offset_beyond_the_high_watermark_or_below_minus_one_is_out_of_range(tmp_path,
                                                                                offset):
    p = committed_leader(tmp_path)
    with pytest.raises(PartitionError) as refused:
        p.delete_records_on_leader(offset)
    assert refused.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert p.log_start_offset == 0


def test_a_compacted_topic_refuses_with_policy_violation_and_a_follower_is_not_leader(tmp_path):
    log = PartitionLog.open(tmp_path / "c-0", LogConfig(cleanup_policy="compact"))
    compacted = Partition("c", 0, "id", log, 1, PartitionSettings())
    compacted.make_leader(0, 0, [1], [1])
    with pytest.raises(PartitionError) as refused:
        compacted.delete_records_on_leader(0)
    assert refused.value.code == ErrorCode.POLICY_VIOLATION
    follower = Partition("f", 0, "id", PartitionLog.open(tmp_path / "f-0", LogConfig()), 1,
                         PartitionSettings())
    follower.make_follower(2, 0, 0, [2, 1], [2, 1])
    with pytest.raises(PartitionError) as refused:
        follower.delete_records_on_leader(0)
    assert refused.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_the_low_watermark_is_the_lowest_start_over_the_leader_and_its_live_followers(tmp_path):
    p = committed_leader(tmp_path)
    p.delete_records_on_leader(12)
    everyone = lambda replica: True  # noqa: E731
    assert p.low_watermark(everyone) == -1                # followers have not reported
    p.update_follower_fetch(2, 30, 2_000, log_start_offset=12)
    p.update_follower_fetch(3, 30, 2_000, log_start_offset=6)
    assert p.low_watermark(everyone) == 6
    assert p.low_watermark(lambda replica: replica != 3) == 12   # a fenced one is not waited for
    p.update_follower_fetch(3, 30, 2_000)                 # a fetch that does not say: kept
    assert p.low_watermark(everyone) == 6


def test_a_follower_takes_the_leaders_start_up_to_its_own_high_watermark(tmp_path):
    source = committed_leader(tmp_path / "leader")
    follower = Partition("t", 0, "id", PartitionLog.open(tmp_path / "f" / "t-0", LogConfig()), 2,
                         PartitionSettings())
    follower.make_follower(1, 0, 0, [1, 2, 3], [1, 2, 3])
    follower.append_as_follower(bytes(source.read(0, 1 << 20, replica_id=2).records), 18)
    assert follower.high_watermark == 18
    assert follower.maybe_follow_leader_log_start_offset(24) is True
    assert follower.log_start_offset == 18                # not past what it knows committed
    assert follower.maybe_follow_leader_log_start_offset(9) is False
    assert follower.log_start_offset == 18


class StubReplicaManager:
    def __init__(self, partition: Partition):
        self.partition = partition
        self.image = type("Image", (), {"is_live": staticmethod(lambda broker_id: True)})()

    def get_partition(self, topic, index):
        return self.partition if (topic, index) == self.partition.key else None


def test_the_answer_waits_for_every_live_replica_then_times_out_with_request_timed_out(tmp_path):
    async def scenario():
        p = committed_leader(tmp_path)
        rm = StubReplicaManager(p)
        purgatory = Purgatory("delete-records")
        p.delete_records_on_leader(12)
        answered = []
        status = DeleteRecordsStatus(12, -1, pending=True)
        op = DelayedDeleteRecords(5_000, {p.key: status}, rm, lambda: answered.append(1))
        assert not purgatory.try_complete_else_watch(op, [p.key])
        p.update_follower_fetch(2, 30, 2_000, log_start_offset=12)
        purgatory.check_and_complete(p.key)
        assert not answered
        p.update_follower_fetch(3, 30, 2_000, log_start_offset=12)
        purgatory.check_and_complete(p.key)
        assert answered == [1] and (status.error, status.low_watermark) == (ErrorCode.NONE, 12)

        late = DeleteRecordsStatus(20, -1, pending=True)
        p.delete_records_on_leader(20)
        op = DelayedDeleteRecords(20, {p.key: late}, rm, lambda: answered.append(2))
        purgatory.try_complete_else_watch(op, [p.key])
        await asyncio.sleep(0.1)
        assert answered == [1, 2] and late.error == ErrorCode.REQUEST_TIMED_OUT

    asyncio.run(scenario())

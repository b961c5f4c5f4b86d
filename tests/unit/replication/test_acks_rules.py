"""The acks rules of broker/replication/acks.py, each on a real Partition over a real
PartitionLog: valid acks are 0, 1 and -1; an acks=0 failure closes the connection;
acks=-1 is refused before the append below min.insync.replicas and nothing is written;
a waiting acks=-1 produce answers NONE, NOT_ENOUGH_REPLICAS_AFTER_APPEND,
NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR or REQUEST_TIMED_OUT by the case it is in,
and only once its high watermark reached the batch while it still leads."""
from __future__ import annotations

import asyncio

import pytest

from broker.purgatory import Purgatory
from broker.replication import acks
from broker.replication.acks import ProducePartitionStatus
from broker.replication.partition import PartitionError
from protocol.errors import ErrorCode
from tests.unit.replication.test_partition_hw import append, fetch, leader


@pytest.mark.parametrize("value,valid", [(0, True), (1, True), (-1, True), (2, False),
                                         (-2, False), (3, False), (32767, False)])
def test_only_acks_0_1_and_minus_1_are_valid(value, valid):
    assert acks.valid_required_acks(value) is valid


def test_an_acks_0_produce_closes_the_connection_only_when_a_partition_failed():
    assert not acks.closes_connection([ErrorCode.NONE, ErrorCode.NONE])
    assert acks.closes_connection([ErrorCode.NONE, ErrorCode.NOT_LEADER_OR_FOLLOWER])
    assert not acks.closes_connection([])


def test_min_insync_replicas_refuses_only_acks_all():
    assert acks.not_enough_replicas(acks.ACKS_ALL, [1], 2) is not None
    assert acks.not_enough_replicas(acks.ACKS_ALL, [1, 2], 2) is None
    assert acks.not_enough_replicas(acks.ACKS_LEADER, [1], 3) is None
    assert acks.not_enough_replicas(acks.ACKS_NONE, [1], 3) is None


def test_acks_all_below_min_insync_replicas_appends_nothing(tmp_path):
    p = leader(tmp_path, isr=(1,), min_insync_replicas=2)
    with pytest.raises(PartitionError) as refused:
        append(p, 3, acks=-1)
    assert refused.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert p.log_end_offset == 0, "a refused acks=all batch was written"
    append(p, 3, acks=1)
    assert p.log_end_offset == 3, "acks=1 is not held to min.insync.replicas"


def _waiting(partition, required_offset: int) -> ProducePartitionStatus:
    status = ProducePartitionStatus(partition, required_offset, 0)
    assert not acks.check_enough_replicas_reach_offset(status), "settled before the HW"
    assert status.acks_pending and status.error == ErrorCode.NONE
    return status


def test_the_hw_reaching_the_batch_with_enough_replicas_answers_none(tmp_path):
    p = leader(tmp_path, isr=(1, 2), min_insync_replicas=2)
    _, last = append(p, 4, acks=-1)
    status = _waiting(p, last + 1)
    fetch(p, 2, last)
    assert not acks.check_enough_replicas_reach_offset(status), "the HW is one short"
    fetch(p, 2, last + 1)
    assert acks.check_enough_replicas_reach_offset(status)
    assert (status.acks_pending, status.error) == (False, ErrorCode.NONE)
    assert not acks.check_enough_replicas_reach_offset(status), "settled twice"


def test_the_hw_reaching_the_batch_after_a_shrink_answers_not_enough_after_append(tmp_path):
    p = leader(tmp_path, isr=(1, 2), min_insync_replicas=2)
    _, last = append(p, 4, acks=-1)
    status = _waiting(p, last + 1)
    p.update_isr_from_metadata([1], partition_epoch=1)
    assert not acks.check_enough_replicas_reach_offset(status), \
        "a small ISR alone is no answer while the HW is short"
    assert p.maybe_increment_high_watermark()
    assert acks.check_enough_replicas_reach_offset(status)
    assert status.error == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


def test_a_lost_leadership_answers_not_leader_or_follower(tmp_path):
    p = leader(tmp_path, isr=(1, 2))
    _, last = append(p, 2, acks=-1)
    status = _waiting(p, last + 1)
    p.make_follower(2, 1, 1, [1, 2], [1, 2])
    assert acks.check_enough_replicas_reach_offset(status)
    assert status.error == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_an_offline_log_directory_answers_kafka_storage_error_also_before_the_wait(tmp_path):
    async def run():
        p = leader(tmp_path, isr=(1, 2))
        _, last = append(p, 2, acks=-1)
        p.take_offline()  # between the append and the wait (a later partition failed)
        answers = []
        op = acks.watch(Purgatory("produce"), {p.key: ProducePartitionStatus(p, last + 1, 0)},
                        30_000, answers.append)
        assert op.completed and len(answers) == 1
        assert answers[0][p.key].error == ErrorCode.KAFKA_STORAGE_ERROR
    asyncio.run(run())


def test_an_already_failed_partition_is_not_waited_for(tmp_path):
    async def run():
        answers = []
        failed = ProducePartitionStatus(None, -1, -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        op = acks.watch(Purgatory("produce"), {("t", 9): failed}, 30_000, answers.append)
        assert op.completed
        assert answers[0][("t", 9)].error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    asyncio.run(run())


def test_the_timeout_answers_request_timed_out_once_and_only_the_waiting_partitions(tmp_path):
    async def run():
        short = leader(tmp_path / "a", isr=(1, 2))
        done = leader(tmp_path / "b", isr=(1,), name="t-1")
        _, last = append(short, 2, acks=-1)
        _, done_last = append(done, 2, acks=-1)  # an ISR of one: the HW is there at once
        answers = []
        statuses = {("t", 0): ProducePartitionStatus(short, last + 1, 0),
                    ("t", 1): ProducePartitionStatus(done, done_last + 1, 0)}
        purgatory = Purgatory("produce")
        op = acks.watch(purgatory, statuses, 0, answers.append)
        assert not op.completed
        for _ in range(100):  # the timer of 0 ms fires on the next loop turns
            if answers:
                break
            await asyncio.sleep(0.01)
        assert len(answers) == 1 and op.expired
        assert answers[0][("t", 0)].error == ErrorCode.REQUEST_TIMED_OUT
        assert answers[0][("t", 1)].error == ErrorCode.NONE
        fetch(short, 2, last + 1)
        purgatory.check_and_complete(("t", 0))
        assert len(answers) == 1, "answered twice"
        assert purgatory.watched() == 0
    asyncio.run(run())

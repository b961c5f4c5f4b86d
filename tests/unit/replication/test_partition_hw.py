"""The high watermark and ISR rules of broker/replication/partition.py, on a real PartitionLog.

HW = min LEO over the ISR (leader included, replicas whose addition is pending count
already) and it never goes backwards on a leader; a follower is caught up by Kafka's
rule (a fetch at the leader's LEO, or at the LEO the leader had at its previous fetch);
a follower may join the ISR only at or past the HW and the current epoch's start;
consumers read below the HW, followers to the LEO; acks=all is refused before appending
when the ISR is below min.insync.replicas.
"""
from __future__ import annotations

import pytest

from broker.replication.partition import FollowerState, Partition, PartitionError, PartitionSettings
from broker.testing import build_batch
from protocol.errors import ErrorCode
from protocol.records import iter_headers, validate_produce_records
from storage.config import LogConfig
from storage.log import PartitionLog


def new_partition(tmp_path, node_id: int = 1, name: str = "t-0", **settings) -> Partition:
    log = PartitionLog.open(tmp_path / name, LogConfig())
    return Partition("t", 0, "topic-id", log, node_id, PartitionSettings(**settings))


def leader(tmp_path, isr=(1, 2, 3), replicas=(1, 2, 3), epoch: int = 0, **settings) -> Partition:
    partition = new_partition(tmp_path, **settings)
    partition.make_leader(epoch, 0, list(replicas), list(isr))
    return partition


def append(partition: Partition, count: int, acks: int = 1) -> tuple[int, int]:
    """Append one batch of ``count`` records as the leader; (first, last) offsets."""
    batch, header = validate_produce_records(
        build_batch([(None, b"v%d" % i, 1_000 + i, []) for i in range(count)]))
    info, duplicate = partition.append_as_leader(batch, header, acks)
    assert not duplicate
    return info.first_offset, info.last_offset


def fetch(partition: Partition, replica_id: int, offset: int, now_ms: int = 1_000) -> bool:
    """A follower fetch at ``offset`` as the replica manager records it; True if the HW moved."""
    assert partition.update_follower_fetch(replica_id, offset, now_ms)
    return partition.maybe_increment_high_watermark()


# -- HW = min LEO over the ISR ---------------------------------------------------------------

def test_hw_is_the_minimum_leo_over_the_isr_leader_included(tmp_path):
    p = leader(tmp_path)
    append(p, 10)
    assert (p.log_end_offset, p.high_watermark) == (10, 0), "followers' LEOs are unknown"
    assert not fetch(p, 2, 10), "follower 3's LEO is still unknown"
    assert p.high_watermark == 0
    assert fetch(p, 3, 4)
    assert p.high_watermark == 4
    assert fetch(p, 3, 10)
    assert p.high_watermark == 10
    append(p, 5)
    assert p.high_watermark == 10, "an append alone cannot pass the followers"


def test_a_follower_outside_the_isr_does_not_hold_the_hw_back(tmp_path):
    p = leader(tmp_path, isr=(1, 2))
    append(p, 10)
    fetch(p, 3, 0)
    fetch(p, 2, 7)
    assert p.high_watermark == 7


def test_a_single_replica_isr_moves_the_hw_on_append(tmp_path):
    p = leader(tmp_path, isr=(1,))
    append(p, 3)
    assert p.high_watermark == 3


def test_a_pending_isr_addition_already_counts_for_the_hw(tmp_path):
    """Kafka's "maximal ISR": a replica about to join bounds the HW before the controller
    commits it, so the HW never passes a replica that is in the ISR a moment later."""
    p = leader(tmp_path, isr=(1, 2))
    append(p, 10)
    fetch(p, 3, 6)
    assert p.maybe_expand_isr(3)
    fetch(p, 2, 10)
    assert p.high_watermark == 6


def test_the_hw_never_goes_backwards_on_a_leader(tmp_path):
    p = leader(tmp_path)
    append(p, 10)
    fetch(p, 2, 10)
    fetch(p, 3, 10)
    assert p.high_watermark == 10
    assert not fetch(p, 3, 2), "a follower reporting a lower LEO"
    assert p.high_watermark == 10
    p.update_isr_from_metadata([1, 2, 3], 1)
    assert not p.maybe_increment_high_watermark()
    p.make_leader(1, 2, [1, 2, 3], [1, 2, 3])  # a new epoch: followers unknown again
    assert p.high_watermark == 10


def test_shrinking_the_isr_lets_the_hw_advance(tmp_path):
    p = leader(tmp_path)
    append(p, 10)
    fetch(p, 2, 10)
    fetch(p, 3, 4)
    assert p.high_watermark == 4
    p.update_isr_from_metadata([1, 2], 1)
    assert p.maybe_increment_high_watermark()
    assert p.high_watermark == 10


def test_a_follower_hw_is_the_leader_hw_capped_by_its_own_leo(tmp_path):
    source = leader(tmp_path, isr=(1,))
    append(source, 4)
    append(source, 6)
    records = source.read(0, 1 << 20, replica_id=2).records
    first_batch = records[:next(iter_headers(records)).size]
    follower = new_partition(tmp_path, node_id=2, name="follower")
    follower.make_follower(1, 0, 0, [1, 2], [1, 2])
    follower.append_as_follower(bytes(first_batch), leader_high_watermark=10)
    assert (follower.log_end_offset, follower.high_watermark) == (4, 4)
    follower.append_as_follower(bytes(records[len(first_batch):]), leader_high_watermark=7)
    assert (follower.log_end_offset, follower.high_watermark) == (10, 7)
    follower.append_as_follower(b"", leader_high_watermark=3)
    assert follower.high_watermark == 7, "a follower's HW does not go back either"


# -- caught up, out of sync, joining the ISR -------------------------------------------------

def test_a_fetch_at_the_leader_leo_makes_the_follower_caught_up_at_that_fetch():
    state = FollowerState(2)
    state.on_fetch(10, leader_leo=10, now_ms=5_000)
    assert state.last_caught_up_ms == 5_000 and state.log_end_offset == 10


def test_a_fetch_reaching_the_leo_of_the_previous_fetch_is_caught_up_as_of_that_fetch():
    state = FollowerState(2)
    state.on_fetch(5, leader_leo=10, now_ms=1_000)     # behind
    assert state.last_caught_up_ms == 0
    state.on_fetch(10, leader_leo=20, now_ms=2_000)    # reached what the leader had at 1 s
    assert state.last_caught_up_ms == 1_000
    state.on_fetch(12, leader_leo=30, now_ms=3_000)    # not up to 20: no progress
    assert state.last_caught_up_ms == 1_000


def test_followers_not_caught_up_within_the_lag_time_are_out_of_sync(tmp_path):
    p = leader(tmp_path)
    append(p, 10)
    now = p.followers[2].last_caught_up_ms
    fetch(p, 2, 10, now_ms=now + 5_000)
    fetch(p, 3, 2, now_ms=now + 5_000)
    assert p.out_of_sync_replicas(now + 5_000, lag_time_max_ms=10_000) == []
    assert p.out_of_sync_replicas(now + 10_001, lag_time_max_ms=10_000) == [3]
    assert p.out_of_sync_replicas(now + 15_001, lag_time_max_ms=10_000) == [2, 3]


def test_can_join_isr_needs_the_hw_and_the_current_epoch_start(tmp_path):
    p = leader(tmp_path, isr=(1, 2))
    append(p, 10)
    fetch(p, 2, 10)
    assert p.high_watermark == 10
    fetch(p, 3, 9)
    assert not p.can_join_isr(3), "below the HW"
    fetch(p, 3, 10)
    assert p.can_join_isr(3)
    assert not p.can_join_isr(2), "already in the ISR"
    assert not p.can_join_isr(7), "not a replica"
    assert p.maybe_expand_isr(3)
    assert not p.can_join_isr(3), "already being added"


def test_can_join_isr_waits_for_the_start_of_the_leaders_epoch(tmp_path):
    p = leader(tmp_path, isr=(1, 2))
    append(p, 10)
    fetch(p, 2, 6)
    assert p.high_watermark == 6
    p.make_leader(1, 1, [1, 2, 3], [1, 2])  # epoch 1 starts at the LEO, 10
    assert p.epoch_start_offset() == 10
    fetch(p, 3, 8)
    assert not p.can_join_isr(3), "at or past the HW but before the epoch's start"
    fetch(p, 3, 10)
    assert p.can_join_isr(3)


# -- reads and acks=all ----------------------------------------------------------------------

def test_consumers_read_below_the_hw_and_followers_to_the_leo(tmp_path):
    p = leader(tmp_path, isr=(1, 2))
    append(p, 5)
    fetch(p, 2, 5)
    append(p, 5)
    consumer = p.read(0, 1 << 20)
    follower = p.read(0, 1 << 20, replica_id=2)
    assert consumer.high_watermark == 5
    assert [h.last_offset for h in iter_headers(consumer.records)] == [4]
    assert [h.last_offset for h in iter_headers(follower.records)] == [4, 9]
    assert p.read(7, 1 << 20).records == b"", "between HW and LEO: nothing visible, no error"


def test_acks_all_below_min_insync_replicas_is_refused_before_appending(tmp_path):
    p = leader(tmp_path, isr=(1, 2), min_insync_replicas=3)
    with pytest.raises(PartitionError) as refused:
        append(p, 3, acks=-1)
    assert refused.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert p.log_end_offset == 0
    assert append(p, 3, acks=1) == (0, 2)
    p.update_isr_from_metadata([1, 2, 3], 1)
    assert append(p, 1, acks=-1) == (3, 3)


def test_a_follower_refuses_leader_work(tmp_path):
    p = new_partition(tmp_path)
    p.make_follower(2, 0, 0, [1, 2], [1, 2])
    with pytest.raises(PartitionError) as refused:
        append(p, 1)
    assert refused.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    with pytest.raises(PartitionError):
        p.read(0, 100)

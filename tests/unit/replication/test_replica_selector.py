"""The rack-aware preferred read replica (KIP-392): Kafka's rule on plain values."""
from __future__ import annotations

from types import SimpleNamespace

from broker.replication.partition import FollowerState
from broker.replication.replica_selector import preferred_read_replica

RACKS = {1: "a", 2: "b", 3: "b", 4: "c"}


def partition(**followers):
    """Leader 1 (rack a); followers by id -> (log_start, log_end, last_caught_up_ms)."""
    states = {}
    for name, (start, end, caught_up) in followers.items():
        replica_id = int(name[1:])
        states[replica_id] = FollowerState(replica_id, log_end_offset=end,
                                           last_caught_up_ms=caught_up,
                                           log_start_offset=start)
    return SimpleNamespace(node_id=1, followers=states)


def choose(p, offset, rack, dead=()):
    return preferred_read_replica(p, offset, rack, RACKS.get, lambda b: b not in dead)


def test_no_rack_or_the_leaders_rack_reads_from_the_leader():
    p = partition(r2=(0, 100, 5), r3=(0, 100, 5))
    assert choose(p, 10, "") is None
    assert choose(p, 10, "a") is None


def test_a_follower_of_the_clients_rack_holding_the_offset_is_preferred():
    p = partition(r2=(0, 100, 5), r4=(0, 100, 5))
    assert choose(p, 10, "b") == 2
    assert choose(p, 10, "c") == 4


def test_the_most_caught_up_replica_of_the_rack_wins_then_the_latest_caught_up():
    assert choose(partition(r2=(0, 90, 9), r3=(0, 100, 1)), 10, "b") == 3
    assert choose(partition(r2=(0, 100, 9), r3=(0, 100, 1)), 10, "b") == 2


def test_replicas_that_do_not_hold_the_offset_or_are_dead_are_not_candidates():
    p = partition(r2=(0, 10, 5), r3=(20, 100, 5))
    assert choose(p, 10, "b") is None, "2 ends at 10 (exclusive), 3 starts at 20"
    assert choose(partition(r2=(0, 100, 5)), 10, "b", dead={2}) is None
    assert choose(partition(r2=(0, 100, 5)), 10, "z") is None, "no replica in rack z"

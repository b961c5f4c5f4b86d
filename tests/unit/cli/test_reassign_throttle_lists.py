"""raftwood reassign --execute --throttle: the throttled-replica lists it writes, as
kafka-reassign-partitions --throttle computes them (leader: the current replicas of each
moving partition; follower: the replicas the move adds)."""
from __future__ import annotations

from broker.cli.reassign import throttle_lists
from broker.replication.throttle import parse_throttled_replicas
from broker.topics import FOLLOWER_THROTTLED_REPLICAS, LEADER_THROTTLED_REPLICAS


def test_the_lists_name_the_current_replicas_and_the_added_ones_per_topic():
    current = {("a", 0): [1, 2, 3], ("a", 1): [2, 3, 4], ("a", 2): [1, 2, 3], ("b", 0): [1]}
    targets = {("a", 0): [2, 3, 4], ("a", 1): [5, 3, 4], ("b", 0): [6]}
    lists = throttle_lists(current, targets)
    assert lists == {
        "a": {LEADER_THROTTLED_REPLICAS: "0:1,0:2,0:3,1:2,1:3,1:4",
              FOLLOWER_THROTTLED_REPLICAS: "0:4,1:5"},
        "b": {LEADER_THROTTLED_REPLICAS: "0:1", FOLLOWER_THROTTLED_REPLICAS: "0:6"},
    }
    follower = parse_throttled_replicas(lists["a"][FOLLOWER_THROTTLED_REPLICAS])
    assert follower.throttles(0, 4) and not follower.throttles(0, 2), "kept replicas fetch freely"
    assert not parse_throttled_replicas(lists["a"][LEADER_THROTTLED_REPLICAS]).throttles(2, 1), \
        "a partition that does not move is not listed"

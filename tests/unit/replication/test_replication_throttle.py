"""The leader's replication throttle (leader.replication.throttled.rate): a token bucket."""
from __future__ import annotations

from broker.replication.throttle import UNLIMITED, ReplicationThrottle


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_the_bucket_allows_its_rate_per_second_and_refills():
    clock = Clock()
    throttle = ReplicationThrottle(1000, clock)
    assert throttle.enabled and throttle.allowance() == 1000
    throttle.record(1500)  # one batch may overdraw
    assert throttle.allowance() == 0
    assert abs(throttle.delay_s() - 0.501) < 1e-9
    clock.now += 0.5
    assert throttle.allowance() == 0
    clock.now += 0.25
    assert throttle.allowance() == 250
    clock.now += 10
    assert throttle.allowance() == 1000, "never more than one second's worth"


def test_the_default_rate_is_unlimited():
    assert not ReplicationThrottle(UNLIMITED).enabled


# -- the throttled-replica lists (topic configs) ------------------------------------------

import pytest  # noqa: E402

from broker.replication.throttle import parse_throttled_replicas  # noqa: E402
from broker.topics import (  # noqa: E402
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_REPLICAS,
    throttled_replicas_problem,
    topic_config_problem,
)


@pytest.mark.parametrize("value", ["", "*", " * ", "0:101", "0:101,1:102", " 0:101 , 1:102 ",
                                   "0:101,", ","])
def test_kafkas_list_forms_are_accepted(value):
    assert throttled_replicas_problem(LEADER_THROTTLED_REPLICAS, value) is None
    assert topic_config_problem({FOLLOWER_THROTTLED_REPLICAS: value}) is None


@pytest.mark.parametrize("value", ["0", "0:", ":1", "a:1", "0:1:2", "0-1", "*,0:1", "**",
                                   "0:1;1:2", "-1:2"])
def test_malformed_lists_are_refused_naming_the_config(value):
    problem = topic_config_problem({LEADER_THROTTLED_REPLICAS: value})
    assert problem and LEADER_THROTTLED_REPLICAS in problem and repr(value) in problem


def test_an_entry_names_the_partition_and_the_broker_that_throttles_it():
    listed = parse_throttled_replicas("0:101, 1:102")
    assert listed.throttles(0, 101) and listed.throttles(1, 102)
    assert not listed.throttles(0, 102), "partition 0 is throttled on broker 101 only"
    assert not listed.throttles(1, 101) and not listed.throttles(2, 101)


def test_the_wildcard_throttles_every_replica_and_empty_throttles_none():
    assert parse_throttled_replicas("*").throttles(7, 3)
    for nothing in ("", None, ",", "garbage"):
        listed = parse_throttled_replicas(nothing)
        assert not listed and not listed.throttles(0, 1)

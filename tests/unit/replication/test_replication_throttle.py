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

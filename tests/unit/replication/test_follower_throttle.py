"""The follower side of the replication throttles (broker/replication/fetcher.py):
follower.replication.throttled.rate applies to partitions the replica manager names
(the topic's follower.replication.throttled.replicas) while the follower is behind.

Broker 3 follows broker 2 through a fake endpoint; the throttle's clock is the test's.
"""
from __future__ import annotations

import asyncio

from broker.replication.throttle import ReplicationThrottle
from tests.unit.replication.fake_leader import FakeLeaderEndpoint, open_replica, produce
from tests.unit.replication.test_replica_fetcher import (
    FOLLOWER,
    following,
    leading,
    manager_with,
    stepping_fetcher,
)


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def setup(tmp_path, rate: int, throttled: bool, batches: int = 20):
    leader = leading(open_replica(tmp_path, 2), epoch=0, isr=(2,))
    for _ in range(batches):
        produce(leader, 10)
    follower = following(open_replica(tmp_path, FOLLOWER), 2, epoch=0)
    endpoint = FakeLeaderEndpoint(FOLLOWER, leader)
    manager = manager_with({2: endpoint})
    clock = Clock()
    manager.throttle = ReplicationThrottle(rate, clock)
    manager.follower_throttles = lambda partition: throttled
    return leader, follower, endpoint, manager, clock


def test_a_listed_partition_fetches_no_more_than_the_bucket_then_waits(tmp_path):
    leader, follower, endpoint, manager, clock = setup(tmp_path, 300, throttled=True)

    async def main():
        fetcher, followed = stepping_fetcher(manager, endpoint, 2, follower)
        followed.needs_truncation = False
        assert await fetcher._fetch_once()
        assert endpoint.fetches[-1][0].max_bytes == 300, "capped at what the bucket holds"
        for _ in range(5):  # what is left in the bucket, then at least one batch
            asked = len(endpoint.fetches)
            assert await fetcher._fetch_once()
            if len(endpoint.fetches) == asked:
                break  # the bucket is empty: the partition was left out of the fetch
        else:
            raise AssertionError("the bucket never ran dry")
        assert 0 < follower.log_end_offset < leader.log_end_offset
        assert follower.log.size_bytes < 300 + 200, "the rate plus at most one batch"
        stuck = follower.log_end_offset
        assert await fetcher._fetch_once() and follower.log_end_offset == stuck
        clock.now += 10  # refilled (one second deep)
        while follower.log_end_offset < leader.log_end_offset:
            clock.now += 10
            assert await fetcher._fetch_once()
        assert followed.caught_up

    asyncio.run(main())


def test_an_unlisted_partition_or_an_unlimited_rate_is_not_throttled(tmp_path):
    for rate, throttled in ((300, False), (2**63 - 1, True)):
        leader, follower, endpoint, manager, _ = setup(tmp_path / str(rate), rate, throttled)

        async def main(leader, follower, endpoint, manager):
            fetcher, followed = stepping_fetcher(manager, endpoint, 2, follower)
            followed.needs_truncation = False
            assert await fetcher._fetch_once()
            assert endpoint.fetches[-1][0].max_bytes == manager.fetch_max_bytes
            assert follower.log_end_offset == leader.log_end_offset

        asyncio.run(main(leader, follower, endpoint, manager))


def test_a_caught_up_follower_is_left_alone(tmp_path):
    """Kafka's shouldFollowerThrottle: only a replica behind the leader is throttled."""
    leader, follower, endpoint, manager, clock = setup(tmp_path, 10_000, throttled=True,
                                                       batches=1)

    async def main():
        fetcher, followed = stepping_fetcher(manager, endpoint, 2, follower)
        followed.needs_truncation = False
        assert await fetcher._fetch_once()
        assert follower.log_end_offset == leader.log_end_offset and followed.caught_up
        manager.throttle.record(10**9)  # the bucket is deep in debt
        produce(leader, 10)
        assert await fetcher._fetch_once()
        assert follower.log_end_offset == leader.log_end_offset, "fetched despite the debt"

    asyncio.run(main())

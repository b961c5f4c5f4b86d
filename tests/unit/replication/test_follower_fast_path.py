"""The replica fetcher's per-fetch work (broker/replication/fetcher.py), against the fake
leader: each Fetch still asks for every ready partition from its log end and log start,
and the follower still takes the leader's log start (DeleteRecords), though it no longer
asks its partition to when the leader's start is not past its own.

Broker 3 follows broker 2.
"""
from __future__ import annotations

import asyncio

from broker.replication.leader_endpoint import PartitionFetch
from tests.unit.replication.fake_leader import FakeLeaderEndpoint, produce, replica_with_history
from tests.unit.replication.test_replica_fetcher import (
    FOLLOWER, following, leading, manager_with, stepping_fetcher,
)


def test_each_fetch_asks_from_the_follower_log_end_and_start(tmp_path):
    leader = leading(replica_with_history(tmp_path, 2, [(0, 3)]), epoch=1)
    produce(leader, 2)
    follower = following(replica_with_history(tmp_path, FOLLOWER, [(0, 3)]), 2, epoch=1)
    endpoint = FakeLeaderEndpoint(FOLLOWER, leader)

    async def main():
        fetcher, followed = stepping_fetcher(manager_with({2: endpoint}), endpoint, 2, follower)
        followed.needs_truncation = False
        assert await fetcher._fetch_once()
        assert await fetcher._fetch_once()
        assert endpoint.fetches == [[PartitionFetch("t", 0, 1, 3, 0, 1 << 20)],
                                    [PartitionFetch("t", 0, 1, 5, 0, 1 << 20)]]
        assert (followed.key, followed.lag, followed.caught_up) == (("t", 0), 0, True)

    asyncio.run(main())


def test_the_follower_takes_the_leaders_log_start_when_it_moves(tmp_path):
    leader = leading(replica_with_history(tmp_path, 2, [(0, 3), (0, 3), (0, 3)]), epoch=1)
    follower = following(replica_with_history(tmp_path, FOLLOWER, [(0, 3), (0, 3), (0, 3)],
                                              high_watermark=9), 2, epoch=1)
    endpoint = FakeLeaderEndpoint(FOLLOWER, leader)

    async def main():
        fetcher, followed = stepping_fetcher(manager_with({2: endpoint}), endpoint, 2, follower)
        followed.needs_truncation = False
        await fetcher._fetch_once()
        assert leader.high_watermark == 9 and follower.log_start_offset == 0
        leader.delete_records_on_leader(6)              # DeleteRecords on the leader
        await fetcher._fetch_once()
        assert follower.log_start_offset == 6
        produce(leader, 2)
        await fetcher._fetch_once()                     # the leader's start stays at 6
        assert (follower.log_start_offset, follower.log_end_offset) == (6, 11)

    asyncio.run(main())

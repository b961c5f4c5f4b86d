"""The replica fetcher's per-fetch work (broker/replication/fetcher.py), against the fake
leader: each Fetch still asks for every ready partition from its log end and log start,
and the follower still takes the leader's log start (DeleteRecords), though it no longer
asks its partition to when the leader's start is not past its own.  A partition whose
log did not move is asked with the same PartitionFetch object, which its fetch session
takes as unchanged without comparing.

Broker 3 follows broker 2.
"""
from __future__ import annotations

import asyncio

from broker.replication.fetch_sessions import FollowerSession
from broker.replication.leader_endpoint import PartitionFetch
from tests.unit.replication.fake_leader import FakeLeaderEndpoint, produce, replica_with_history
from tests.unit.replication.test_replica_fetcher import (
    FOLLOWER,
    following,
    leading,
    manager_with,
    stepping_fetcher,
)


def leader_with_two_new_records(tmp_path):
    """(endpoint to broker 2, broker 3's replica): both hold offsets 0-2, the leader
    also 3-4."""
    leader = leading(replica_with_history(tmp_path, 2, [(0, 3)]), epoch=1)
    produce(leader, 2)
    follower = following(replica_with_history(tmp_path, FOLLOWER, [(0, 3)]), 2, epoch=1)
    return FakeLeaderEndpoint(FOLLOWER, leader), follower


def test_each_fetch_asks_from_the_follower_log_end_and_start(tmp_path):
    endpoint, follower = leader_with_two_new_records(tmp_path)

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


def test_a_partition_whose_log_did_not_move_is_asked_with_the_same_request(tmp_path):
    endpoint, follower = leader_with_two_new_records(tmp_path)

    async def main():
        fetcher, followed = stepping_fetcher(manager_with({2: endpoint}), endpoint, 2, follower)
        followed.needs_truncation = False
        await fetcher._fetch_once()                     # brings 3-4: the log moved
        await fetcher._fetch_once()                     # at 5, nothing new
        await fetcher._fetch_once()
        first, second, third = (asked[0] for asked in endpoint.fetches)
        assert (first.fetch_offset, second.fetch_offset) == (3, 5)
        assert third is second is followed.request
        followed.leader_epoch = 2                       # any field: a new request
        await fetcher._fetch_once()
        assert endpoint.fetches[-1][0] == PartitionFetch("t", 0, 2, 5, 0, 1 << 20)

    asyncio.run(main())


def test_the_session_lists_a_partition_only_when_its_request_changed():
    session = FollowerSession()
    same = PartitionFetch("t", 0, 1, 5, 0, 100)
    session.build({("t", 0): same, ("t", 1): PartitionFetch("t", 1, 1, 7, 0, 100)})
    session.on_answer(0, 41)                            # a full fetch made session 41
    listed, forgotten = session.build({
        ("t", 0): same,                                 # the very object: unchanged
        ("t", 1): PartitionFetch("t", 1, 1, 7, 0, 100),  # an equal one: unchanged
        ("t", 2): PartitionFetch("t", 2, 1, 0, 0, 100)})  # new to the session
    assert (listed, forgotten) == ([("t", 2)], [])
    session.on_answer(0, 41)
    listed, _ = session.build({("t", 0): PartitionFetch("t", 0, 1, 6, 0, 100),
                               ("t", 1): PartitionFetch("t", 1, 1, 7, 0, 100),
                               ("t", 2): PartitionFetch("t", 2, 1, 0, 0, 100)})
    assert listed == [("t", 0)]

"""The replica fetcher (broker/replication/fetcher.py) against a fake leader endpoint.

Leaders and the follower are real Partition objects in ``tmp_path``; the fake endpoint
answers from the leaders as the broker's handlers do.  Covered: truncation when the
leader's epoch is new (KIP-101), records of an epoch the leader never had (KIP-279),
an UNDEFINED answer cutting our latest epoch, OFFSET_OUT_OF_RANGE on both sides of the
log, a leader change while a fetch is on the wire, the follower's high watermark, and
backoff after every kind of error (counted calls: no busy loop).

Broker 3 follows; brokers 1 and 2 lead.
"""
from __future__ import annotations

import asyncio
import time

import pytest

from broker.replication.fetcher import (
    FIRST_RETRY_S,
    FollowedPartition,
    ReplicaFetcher,
    ReplicaFetcherManager,
)
from broker.replication.leader_endpoint import FetchedData
from protocol.errors import ErrorCode
from tests.unit.replication.fake_leader import (
    FakeLeaderEndpoint,
    batches_of,
    log_bytes,
    open_replica,
    produce,
    replica_with_history,
)

FOLLOWER = 3
BACKOFF_MS = 50
WINDOW_S = 0.5
MOST_ROUNDS = int(WINDOW_S * 1000 / BACKOFF_MS) + 3  # one per backoff, and some slack


def manager_with(endpoints: dict[int, FakeLeaderEndpoint]) -> ReplicaFetcherManager:
    config = {"replica.fetch.wait.max.ms": 500, "replica.fetch.max.bytes": 1 << 20,
              "replica.fetch.response.max.bytes": 10 << 20,
              "replica.fetch.backoff.ms": BACKOFF_MS}
    return ReplicaFetcherManager(FOLLOWER, config, lambda broker: None,
                                 endpoint_factory=endpoints.__getitem__)


def stepping_fetcher(manager: ReplicaFetcherManager, endpoint, leader_id: int,
                     follower) -> tuple[ReplicaFetcher, FollowedPartition]:
    """A fetcher the test drives call by call (no task), registered like one ``follow`` made."""
    fetcher = manager.fetchers[leader_id] = ReplicaFetcher(manager, leader_id)
    fetcher.endpoint = endpoint
    followed = fetcher.partitions[follower.key] = FollowedPartition(follower,
                                                                    follower.leader_epoch)
    return fetcher, followed


def leading(partition, epoch: int, isr=(2, FOLLOWER)):
    partition.make_leader(epoch, 0, [partition.node_id, FOLLOWER], list(isr))
    return partition


def following(partition, leader_id: int, epoch: int):
    partition.make_follower(leader_id, epoch, 0, [leader_id, FOLLOWER], [leader_id, FOLLOWER])
    return partition


async def until(condition, timeout_s: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not condition():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.01)


def same_log(follower, leader) -> bool:
    return log_bytes(follower) == log_bytes(leader) and \
        follower.epoch_entries() == leader.epoch_entries()


# -- truncation (KIP-101/279) --------------------------------------------------------------

def test_a_new_epoch_cuts_the_old_leaders_tail_then_fetches_and_follows_the_hw(tmp_path):
    """Broker 3 got offsets 6-9 of epoch 0 from the old leader; broker 2, elected in epoch
    1, never had them and wrote its own 6-9."""
    leader = leading(replica_with_history(tmp_path, 2, [(0, 3), (0, 3)]), epoch=1)
    produce(leader, 4)
    follower = following(replica_with_history(tmp_path, FOLLOWER, [(0, 3), (0, 3), (0, 4)],
                                              high_watermark=6), 2, epoch=1)
    endpoint = FakeLeaderEndpoint(FOLLOWER, leader)

    async def main():
        fetcher, followed = stepping_fetcher(manager_with({2: endpoint}), endpoint, 2, follower)
        await fetcher._truncate_where_needed()
        assert [[q.leader_epoch for q in asked] for asked in endpoint.epoch_queries] == [[0]]
        assert (follower.log_end_offset, followed.needs_truncation) == (6, False)
        assert await fetcher._fetch_once()
        assert same_log(follower, leader)
        assert batches_of(follower) == [(0, 2, 0), (3, 5, 0), (6, 9, 1)]
        assert follower.high_watermark == 6, "the leader's HW waited for our fetch at 6"
        await fetcher._fetch_once()                   # at 10: now the leader's HW is 10
        assert leader.high_watermark == follower.high_watermark == 10

    asyncio.run(main())


def test_records_of_an_epoch_the_leader_never_had_are_cut(tmp_path):
    """Broker 3 led epoch 1 briefly and wrote 5-7 alone; broker 2 leads epoch 2 from 5."""
    leader = leading(replica_with_history(tmp_path, 2, [(0, 5)]), epoch=2)
    produce(leader, 5)
    follower = following(replica_with_history(tmp_path, FOLLOWER, [(0, 5), (1, 3)]), 2, epoch=2)
    endpoint = FakeLeaderEndpoint(FOLLOWER, leader)

    async def main():
        fetcher, followed = stepping_fetcher(manager_with({2: endpoint}), endpoint, 2, follower)
        await fetcher._truncate_where_needed()
        # OffsetForLeaderEpoch(1) -> the leader's epoch 0, which ends at 5
        assert [q.leader_epoch for q in endpoint.epoch_queries[0]] == [1]
        assert follower.log_end_offset == 5 and follower.epoch_entries() == [(0, 0)]
        await fetcher._fetch_once()
        assert batches_of(follower) == [(0, 4, 0), (5, 9, 2)]
        assert same_log(follower, leader)

    asyncio.run(main())


def test_an_undefined_answer_cuts_our_latest_epoch_and_asks_again_with_the_previous(tmp_path):
    """Our latest epoch (3) is newer than anything the leader has (it leads epoch 2): none
    of epoch 3's records can be the leader's, whatever our own high watermark says."""
    leader = leading(replica_with_history(tmp_path, 2, [(1, 4)]), epoch=2)
    produce(leader, 2)
    follower = following(replica_with_history(tmp_path, FOLLOWER, [(1, 4), (3, 3)],
                                              high_watermark=7), 2, epoch=2)
    assert follower.high_watermark == 7
    endpoint = FakeLeaderEndpoint(FOLLOWER, leader)

    async def main():
        fetcher, followed = stepping_fetcher(manager_with({2: endpoint}), endpoint, 2, follower)
        await fetcher._truncate_where_needed()
        assert [[q.leader_epoch for q in asked] for asked in endpoint.epoch_queries] == [[3], [1]]
        assert follower.log_end_offset == 4 and follower.high_watermark <= 4
        assert not followed.needs_truncation
        await fetcher._fetch_once()
        assert same_log(follower, leader)

    asyncio.run(main())


def test_a_follower_with_no_epoch_fetches_without_asking(tmp_path):
    leader = leading(replica_with_history(tmp_path, 2, [(0, 3)]), epoch=0)
    follower = following(open_replica(tmp_path, FOLLOWER), 2, epoch=0)
    endpoint = FakeLeaderEndpoint(FOLLOWER, leader)

    async def main():
        fetcher, _ = stepping_fetcher(manager_with({2: endpoint}), endpoint, 2, follower)
        await fetcher._truncate_where_needed()
        await fetcher._fetch_once()
        assert endpoint.epoch_queries == [] and same_log(follower, leader)

    asyncio.run(main())


# -- OFFSET_OUT_OF_RANGE ---------------------------------------------------------------------

def test_below_the_leaders_log_start_the_follower_starts_over_there(tmp_path):
    """Retention moved the leader's log start to 100, past our log end (3)."""
    leader = leading(replica_with_history(tmp_path, 2, [(2, 5)], start_offset=100), epoch=3)
    produce(leader, 2)
    follower = following(replica_with_history(tmp_path, FOLLOWER, [(0, 3)]), 2, epoch=3)
    endpoint = FakeLeaderEndpoint(FOLLOWER, leader)

    async def main():
        fetcher, followed = stepping_fetcher(manager_with({2: endpoint}), endpoint, 2, follower)
        await fetcher._truncate_where_needed()       # epoch 0 is below the leader's history
        assert follower.log_end_offset == 3 and not followed.needs_truncation
        await fetcher._fetch_once()
        assert (follower.log_start_offset, follower.log_end_offset) == (100, 100)
        assert follower.epoch_entries() == []
        await fetcher._fetch_once()
        assert same_log(follower, leader) and follower.log_end_offset == 107

    asyncio.run(main())


def test_ahead_of_the_leaders_log_end_the_follower_reconciles_again(tmp_path):
    """Same epoch, but the leader's log ends at 3 and ours at 6 (an unclean election)."""
    leader = leading(replica_with_history(tmp_path, 2, [(0, 3)]), epoch=0)
    follower = following(replica_with_history(tmp_path, FOLLOWER, [(0, 3), (0, 3)]), 2, epoch=0)
    endpoint = FakeLeaderEndpoint(FOLLOWER, leader)

    async def main():
        fetcher, followed = stepping_fetcher(manager_with({2: endpoint}), endpoint, 2, follower)
        followed.needs_truncation = False            # as if reconciled before the change
        await fetcher._fetch_once()
        assert followed.needs_truncation and follower.log_end_offset == 6
        await fetcher._truncate_where_needed()
        assert follower.log_end_offset == 3 and not followed.needs_truncation

    asyncio.run(main())


# -- a leader change while a fetch is on the wire ------------------------------------------

def test_an_answer_from_the_old_leader_is_dropped_after_the_follower_moved(tmp_path):
    old = leading(replica_with_history(tmp_path, 1, [(0, 3), (0, 3)]), epoch=0)
    new = leading(replica_with_history(tmp_path, 2, [(0, 3)]), epoch=1)
    produce(new, 2)
    follower = following(replica_with_history(tmp_path, FOLLOWER, [(0, 3)]), 1, epoch=0)
    endpoints = {1: FakeLeaderEndpoint(FOLLOWER, old), 2: FakeLeaderEndpoint(FOLLOWER, new)}

    async def main():
        manager = manager_with(endpoints)
        fetcher, followed = stepping_fetcher(manager, endpoints[1], 1, follower)
        followed.needs_truncation = False

        def move_to_broker_2():                      # the metadata image arrives meanwhile
            following(follower, 2, epoch=1)
            manager.follow(follower)
        endpoints[1].during_fetch = move_to_broker_2
        await fetcher._fetch_once()
        assert follower.log_end_offset == 3, "offsets 3-5 of the old leader were not taken"
        assert fetcher.partitions == {} and set(manager.fetchers) == {1, 2}
        await until(lambda: same_log(follower, new))
        assert [q.current_leader_epoch for q in endpoints[2].epoch_queries[0]] == [1]
        assert all(p.current_leader_epoch == 1 for f in endpoints[2].fetches for p in f)
        await manager.shutdown()
        assert endpoints[2].closed == 1

    asyncio.run(main())


def test_a_follower_moved_between_fetches_fetches_from_its_new_leader_only(tmp_path):
    old = leading(replica_with_history(tmp_path, 1, [(0, 3)]), epoch=0)
    new = leading(replica_with_history(tmp_path, 2, [(0, 3)]), epoch=1)
    follower = following(open_replica(tmp_path, FOLLOWER), 1, epoch=0)
    endpoints = {1: FakeLeaderEndpoint(FOLLOWER, old), 2: FakeLeaderEndpoint(FOLLOWER, new)}

    async def main():
        manager = manager_with(endpoints)
        manager.follow(follower)
        await until(lambda: follower.log_end_offset == 3)
        produce(new, 4)
        following(follower, 2, epoch=1)
        manager.follow(follower)
        await until(lambda: same_log(follower, new))
        await until(lambda: 1 not in manager.fetchers)  # nothing left to fetch there
        assert endpoints[1].closed == 1
        fetched_from_old = len(endpoints[1].fetches)
        await asyncio.sleep(0.05)
        assert len(endpoints[1].fetches) == fetched_from_old
        await manager.shutdown()

    asyncio.run(main())


# -- errors back off (no busy loop) --------------------------------------------------------

def calls(endpoint: FakeLeaderEndpoint) -> int:
    return len(endpoint.fetches) + len(endpoint.epoch_queries)


async def run_for_the_window(manager: ReplicaFetcherManager, follower) -> None:
    manager.follow(follower)
    await asyncio.sleep(WINDOW_S)


def test_an_unreachable_leader_is_retried_once_per_backoff(tmp_path):
    leader = leading(replica_with_history(tmp_path, 2, [(0, 1), (0, 2)]), epoch=0)
    follower = following(replica_with_history(tmp_path, FOLLOWER, [(0, 1)]), 2, epoch=0)
    endpoint = FakeLeaderEndpoint(FOLLOWER, leader)
    endpoint.unreachable = True

    async def main():
        manager = manager_with({2: endpoint})
        await run_for_the_window(manager, follower)
        assert 2 <= calls(endpoint) <= MOST_ROUNDS
        endpoint.unreachable = False
        await until(lambda: same_log(follower, leader))
        await manager.shutdown()

    asyncio.run(main())


def test_an_unknown_leader_address_is_not_even_asked(tmp_path):
    leader = leading(replica_with_history(tmp_path, 2, [(0, 3)]), epoch=0)
    follower = following(open_replica(tmp_path, FOLLOWER), 2, epoch=0)
    endpoint = FakeLeaderEndpoint(FOLLOWER, leader)
    endpoint.addressable = False

    async def main():
        manager = manager_with({2: endpoint})
        await run_for_the_window(manager, follower)
        assert calls(endpoint) == 0
        endpoint.addressable = True
        await until(lambda: same_log(follower, leader))
        await manager.shutdown()

    asyncio.run(main())


def test_a_stale_leader_epoch_backs_off_until_the_metadata_moves_us(tmp_path):
    """We follow epoch 0; broker 2 already leads epoch 1: FENCED_LEADER_EPOCH."""
    leader = leading(replica_with_history(tmp_path, 2, [(0, 2), (0, 1)]), epoch=1)
    produce(leader, 1)
    follower = following(replica_with_history(tmp_path, FOLLOWER, [(0, 2)]), 2, epoch=0)
    endpoint = FakeLeaderEndpoint(FOLLOWER, leader)

    async def main():
        manager = manager_with({2: endpoint})
        await run_for_the_window(manager, follower)
        assert endpoint.fetches == [], "never fetched before reconciling"
        assert 2 <= len(endpoint.epoch_queries) <= MOST_ROUNDS
        assert follower.log_end_offset == 2
        following(follower, 2, epoch=1)
        manager.follow(follower)
        await until(lambda: same_log(follower, leader))
        await manager.shutdown()

    asyncio.run(main())


def test_a_leader_behind_our_metadata_is_asked_again_soon_then_less_often(tmp_path):
    """UNKNOWN_TOPIC_OR_PARTITION from a leader that has not applied the new topic yet:
    retried after FIRST_RETRY_S, doubling per answer up to replica.fetch.backoff.ms (1 s
    here); a good answer starts over; any other error waits the whole backoff."""
    leader = leading(replica_with_history(tmp_path, 2, [(0, 3)]), epoch=0)
    follower = following(open_replica(tmp_path, FOLLOWER), 2, epoch=0)
    endpoint = FakeLeaderEndpoint(FOLLOWER)  # does not lead the partition yet
    config = {"replica.fetch.wait.max.ms": 500, "replica.fetch.max.bytes": 1 << 20,
              "replica.fetch.response.max.bytes": 10 << 20, "replica.fetch.backoff.ms": 1000}
    manager = ReplicaFetcherManager(FOLLOWER, config, lambda broker: None,
                                    endpoint_factory={2: endpoint}.__getitem__)

    async def main():
        fetcher, followed = stepping_fetcher(manager, endpoint, 2, follower)
        await fetcher._truncate_where_needed()
        waits = []
        for _ in range(7):
            followed.backoff_until = 0.0
            await fetcher._fetch_once()
            waits.append(followed.backoff_until - time.monotonic())
        assert followed.retries == 7
        assert waits[0] <= FIRST_RETRY_S and waits[1] <= 2 * FIRST_RETRY_S
        assert 0.5 < waits[-1] <= 1.0, "capped at the backoff"
        endpoint.leaders[leader.key] = leader  # the leader applied the topic
        followed.backoff_until = 0.0
        await fetcher._fetch_once()
        assert same_log(follower, leader) and followed.retries == 0
        endpoint.rewrite = lambda data: FetchedData(ErrorCode.KAFKA_STORAGE_ERROR)
        produce(leader, 1)
        await fetcher._fetch_once()
        assert followed.backoff_until - time.monotonic() > 0.5 and followed.retries == 0

    asyncio.run(main())


def test_a_request_level_fetch_error_backs_off_every_partition(tmp_path):
    leader = leading(replica_with_history(tmp_path, 2, [(0, 3)]), epoch=0)
    follower = following(open_replica(tmp_path, FOLLOWER), 2, epoch=0)
    endpoint = FakeLeaderEndpoint(FOLLOWER, leader)
    endpoint.request_error = ErrorCode.UNKNOWN_SERVER_ERROR

    async def main():
        manager = manager_with({2: endpoint})
        await run_for_the_window(manager, follower)
        assert 2 <= len(endpoint.fetches) <= MOST_ROUNDS
        endpoint.request_error = ErrorCode.NONE
        await until(lambda: same_log(follower, leader))
        await manager.shutdown()

    asyncio.run(main())


def test_a_refused_append_reconciles_again_after_the_backoff(tmp_path):
    """The leader's bytes do not append (here: garbage); the follower asks
    OffsetForLeaderEpoch again, once per backoff."""
    leader = leading(replica_with_history(tmp_path, 2, [(0, 3), (0, 3)]), epoch=0)
    follower = following(replica_with_history(tmp_path, FOLLOWER, [(0, 3)]), 2, epoch=0)
    endpoint = FakeLeaderEndpoint(FOLLOWER, leader)

    def garbage(data: FetchedData) -> FetchedData:
        return FetchedData(data.error_code, data.high_watermark, data.log_start_offset,
                           b"\x00" * 80 if data.records else b"")
    endpoint.rewrite = garbage

    async def main():
        manager = manager_with({2: endpoint})
        await run_for_the_window(manager, follower)
        assert follower.log_end_offset == 3 and not follower.offline
        assert 2 <= len(endpoint.fetches) <= MOST_ROUNDS
        assert 2 <= len(endpoint.epoch_queries) <= MOST_ROUNDS + 1
        endpoint.rewrite = None
        await until(lambda: same_log(follower, leader))
        await manager.shutdown()

    asyncio.run(main())


def test_progress_is_reported_and_the_hw_follows_the_leaders(tmp_path):
    leader = leading(replica_with_history(tmp_path, 2, [(0, 3)]), epoch=0)
    follower = following(open_replica(tmp_path, FOLLOWER), 2, epoch=0)
    endpoint = FakeLeaderEndpoint(FOLLOWER, leader)
    progress = []

    async def main():
        manager = manager_with({2: endpoint})
        manager.on_progress = lambda key: progress.append((key, follower.high_watermark))
        manager.follow(follower)
        await until(lambda: follower.high_watermark == 3)
        produce(leader, 2)
        await until(lambda: follower.high_watermark == 5)
        assert {key for key, _ in progress} == {follower.key}
        hws = [hw for _, hw in progress]
        assert 3 in hws and 5 in hws and hws == sorted(hws)
        await manager.shutdown()
        assert manager.fetchers == {} and endpoint.closed == 1

    asyncio.run(main())


@pytest.mark.parametrize("leader_id", [1, 2])
def test_one_fetcher_and_one_endpoint_per_leader(tmp_path, leader_id):
    leader = leading(replica_with_history(tmp_path, leader_id, [(0, 1)]), epoch=0)
    follower = following(open_replica(tmp_path, FOLLOWER), leader_id, epoch=0)
    made = []

    def factory(broker_id):
        made.append(broker_id)
        return FakeLeaderEndpoint(FOLLOWER, leader)

    async def main():
        manager = manager_with({})
        manager.endpoint_factory = factory
        manager.follow(follower)
        await until(lambda: follower.log_end_offset == 1)
        assert made == [leader_id] and set(manager.fetchers) == {leader_id}
        await manager.shutdown()

    asyncio.run(main())

"""Share-partition state across brokers: a leader kill -9 loses no acknowledgement.

Three brokers.  The topic's leader and the share coordinator of its share partition (the
leader of its ``__share_group_state`` partition, one partition here) are different
brokers, so every state read and write crosses the network (ReadShareGroupState /
WriteShareGroupState).  A member acquires six records and acknowledges four of them; the
leader is killed with SIGKILL; the new leader loads the share partition from the
coordinator and hands out exactly the two records left in flight (delivery count 2) and
the two never fetched (count 1).  The new leader's high watermark starts at what it
knew as a follower (usually behind those records) and moves once the other follower
fetches from it: meanwhile a ShareFetch long-polls instead of answering nothing (Kafka's
DelayedShareFetch; before, a consumer spun through empty answers).  A follower asked for
the partition answers NOT_LEADER_OR_FOLLOWER with the current leader and its endpoint.
"""
from __future__ import annotations

import time

import pytest

from broker.testing import KafkaConnection, build_batch
from tests.integration.test_share_fetch_wire import (
    ACCEPT,
    NONE,
    REJECT,
    Member,
    acquired,
    fetch_until,
    open_member,
    partition_of,
)

STATE_TOPIC = "__share_group_state"
NOT_LEADER_OR_FOLLOWER = 6
COORDINATOR_NOT_AVAILABLE = 15
RETRIABLE = (NOT_LEADER_OR_FOLLOWER, COORDINATOR_NOT_AVAILABLE)
SETTINGS = {"share.coordinator.state.topic.num.partitions": 1,
            "offsets.topic.num.partitions": 1, "group.share.record.lock.duration.ms": 15_000}


@pytest.fixture(scope="module")
def shared_cluster(module_cluster_factory):
    """The module's cluster; conftest's ``cluster`` heals it after each test (the
    killed leader started again, the preferred leaders back)."""
    return module_cluster_factory(3, **SETTINGS)


def topic_id_of(conn: KafkaConnection, name: str):
    return conn.metadata([name], version=12).topics[0].topic_id


def produce(conn: KafkaConnection, name: str, count: int) -> None:
    records = [(None, b"r%d" % i, 1_700_000_000_000, []) for i in range(count)]
    assert conn.produce(name, 0, build_batch(records)).error_code == NONE


def redelivered(member: Member, want: int, *, seconds: float = 90.0) -> list:
    """Long polls on a new leader until ``want`` offsets are acquired: the acquired
    ranges, in order.  An answer without error and without records fails: the share
    partition holds AVAILABLE records, so the leader waits (up to max_wait_ms) until it
    may read them, its high watermark caught up, rather than answering nothing.  A
    partition still moving (NOT_LEADER_OR_FOLLOWER) or its coordinator not reachable yet
    (COORDINATOR_NOT_AVAILABLE) is asked again."""
    ranges: list = []
    deadline = time.monotonic() + seconds
    while sum(last - first + 1 for first, last, _ in ranges) < want:
        assert time.monotonic() < deadline, f"only {ranges} acquired in {seconds} s"
        answer = member.fetch(max_wait_ms=30_000)
        assert answer.error_code == NONE, answer
        partition = partition_of(answer)
        if partition is not None and partition.error_code in RETRIABLE:
            time.sleep(0.1)
            continue
        assert acquired(answer), f"an empty answer after {ranges}: {answer}"
        ranges += acquired(answer)
    return ranges


def test_a_leader_kill_9_loses_no_acknowledgement(cluster):
    # The first share fetch anywhere creates the state topic; its leader coordinates.
    cluster.create_topic("warm", 1, replication_factor=3)
    warm_leader = cluster.leader_of("warm", 0)
    with cluster.connect(warm_leader) as conn:
        open_member(conn, "g-warm", topic_id_of(conn, "warm"))
    coordinator = cluster.wait_for(lambda s: cluster.leader_of(STATE_TOPIC, 0) > 0 and
                                   cluster.leader_of(STATE_TOPIC, 0), what="a state leader")
    leader = next(n for n in cluster.node_ids if n != coordinator)
    third = next(n for n in cluster.node_ids if n not in (leader, coordinator))
    cluster.create_topic("jobs", assignments=[[leader, coordinator, third]])
    assert cluster.leader_of("jobs", 0) == leader

    with cluster.connect(leader) as conn:
        topic_id = topic_id_of(conn, "jobs")
        a = open_member(conn, "g-jobs", topic_id)  # the group starts here, at offset 0
        produce(conn, "jobs", 8)
        assert acquired(fetch_until(a, acquired, max_records=6)) == [(0, 5, 1)]
        answer = a.acknowledge([(0, 2, [ACCEPT, ACCEPT, REJECT]), (4, 4, [ACCEPT])])
        assert partition_of(answer).error_code == NONE

    cluster.kill(leader)  # the cluster fixture starts it again
    new_leader = cluster.wait_for_leader("jobs", 0, not_in=(leader,))
    with cluster.connect(new_leader) as conn:
        b = Member(conn, "g-jobs", topic_id)
        assert redelivered(b, 4) == [(3, 3, 2), (5, 5, 2), (6, 7, 1)]
        done = b.acknowledge([(3, 3, [ACCEPT]), (5, 7, [ACCEPT])])
        assert partition_of(done).error_code == NONE
        assert acquired(b.fetch()) == []


def test_a_follower_answers_not_leader_with_the_leader_and_its_endpoint(cluster):
    first, second, third = cluster.node_ids
    cluster.create_topic("elsewhere", assignments=[[first, second, third]])
    with cluster.connect(second) as conn:
        answer = Member(conn, "g-elsewhere", topic_id_of(conn, "elsewhere")).fetch()
    partition = partition_of(answer)
    assert answer.error_code == NONE and partition.error_code == NOT_LEADER_OR_FOLLOWER
    assert partition.current_leader.leader_id == first
    endpoints = {e.node_id: e.port for e in answer.node_endpoints}
    assert endpoints == {first: cluster.broker(first).port}

"""Share-partition state across brokers: a leader kill -9 loses no acknowledgement.

Three brokers.  The topic's leader and the share coordinator of its share partition (the
leader of its ``__share_group_state`` partition, one partition here) are different
brokers, so every state read and write crosses the network (ReadShareGroupState /
WriteShareGroupState).  A member acquires six records and acknowledges four of them; the
leader is killed with SIGKILL; the new leader loads the share partition from the
coordinator and hands out exactly the two records left in flight (delivery count 2) and
the two never fetched (count 1).  A follower asked for the partition answers
NOT_LEADER_OR_FOLLOWER with the current leader and its endpoint.
"""
from __future__ import annotations

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
SETTINGS = {"share.coordinator.state.topic.num.partitions": 1,
            "offsets.topic.num.partitions": 1, "group.share.record.lock.duration.ms": 15_000}


@pytest.fixture(scope="module")
def cluster(module_cluster_factory):
    return module_cluster_factory(3, **SETTINGS)


def topic_id_of(conn: KafkaConnection, name: str):
    return conn.metadata([name], version=12).topics[0].topic_id


def produce(conn: KafkaConnection, name: str, count: int) -> None:
    records = [(None, b"r%d" % i, 1_700_000_000_000, []) for i in range(count)]
    assert conn.produce(name, 0, build_batch(records)).error_code == NONE


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

    cluster.kill(leader)
    new_leader = cluster.wait_for(
        lambda s: cluster.leader_of("jobs", 0) not in (-1, leader) and
        cluster.leader_of("jobs", 0), what="a new leader of jobs-0")
    with cluster.connect(new_leader) as conn:
        b = Member(conn, "g-jobs", topic_id)
        redelivered = fetch_until(b, acquired, seconds=60)
        assert acquired(redelivered) == [(3, 3, 2), (5, 5, 2), (6, 7, 1)]
        done = b.acknowledge([(3, 3, [ACCEPT]), (5, 7, [ACCEPT])])
        assert partition_of(done).error_code == NONE
        assert acquired(b.fetch()) == []
    cluster.start(leader)


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

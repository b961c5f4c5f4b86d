"""KIP-848's consumer group protocol (``group.protocol=consumer``) with confluent-kafka's
librdkafka consumers against real broker processes.

Invariants: every partition of the subscribed topic is owned by exactly one member once
the group is reconciled; each consumer commits synchronously after every record it
processes, so every record is consumed, and the committed offsets end at the log end.
When a member leaves (``close()``) its partitions move to the others and nothing is lost;
a record may be delivered twice only across a move (at-least-once: at most the one
record whose commit had not completed when the partition moved), and with the
synchronous commits here none is.  A kill -9 of the coordinator (the leader of the
group's ``__consumer_offsets`` partition) on a 3-broker cluster loses no acknowledged
commit: the new coordinator loads the group — members, epochs, assignments — and its
offsets, and the same consumers go on.  A static member (``group.instance.id``) that
closes and comes back within its session gets its partitions back, and meanwhile
nobody else is handed them.  Every wait is bounded.
"""
from __future__ import annotations

import time
from collections import Counter

import pytest
from kafka.protocol.admin import ListGroupsRequest
from kafka.protocol.metadata import FindCoordinatorRequest

import broker.testing as raftwood_testing
from broker.testing import KafkaConnection

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import (  # noqa: E402  # noqa: E402
    Consumer,
    ConsumerGroupState,
    ConsumerGroupType,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

PARTITIONS = 6
WAIT_S = 60.0
BROKER_SETTINGS = {"group_consumer_heartbeat_interval_ms": 500,
                   "group_consumer_session_timeout_ms": 10000,
                   "group_consumer_min_session_timeout_ms": 1000}


@pytest.fixture
def cluster_factory(request):
    if not hasattr(raftwood_testing, "ClusterProcess"):
        pytest.skip("broker.testing has no ClusterProcess / raftwood_cluster_factory")
    return request.getfixturevalue("raftwood_cluster_factory")


def create_topic(bootstrap: str, topic: str, replication: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, replication)]).values():
        future.result(timeout=WAIT_S)


def produce(bootstrap: str, topic: str, per_partition: int, start: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "message.timeout.ms": int(WAIT_S * 1000)})
    for p in range(PARTITIONS):
        for i in range(start, start + per_partition):
            producer.produce(topic, f"{p}-{i}".encode(), partition=p)
    assert producer.flush(WAIT_S) == 0


def consumer(bootstrap: str, group: str, topic: str, **config) -> Consumer:
    member = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "group.protocol": "consumer", "auto.offset.reset": "earliest",
                       "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 2000,
                       **config})
    member.subscribe([topic])
    return member


def commit(member: Consumer, message) -> None:
    """Commit after ``message``, retrying while the group moves (a stale member epoch
    during a reconciliation, the coordinator moving); bounded.  No poll meanwhile: the
    client heartbeats on its own thread, and a record polled here would go unprocessed."""
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            member.commit(message=message, asynchronous=False)
            return
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


class Members:
    """The group's consumers and what they processed: ``seen`` counts deliveries of each
    (partition, offset), ``owners`` who got each.  Every poll processes what it gets
    (counts it, commits it), whatever the caller waits for."""

    def __init__(self, members: list[Consumer]):
        self.members = members
        self.seen: Counter = Counter()
        self.owners: dict = {}

    def poll_all(self, timeout_s: float = 0.1) -> None:
        for index, member in enumerate(self.members):
            message = member.poll(timeout_s)
            if message is None or message.error():
                continue
            key = (message.partition(), message.offset())
            self.seen[key] += 1
            self.owners.setdefault(key, set()).add(index)
            commit(member, message)

    def consume(self, want: set) -> None:
        """Poll until each record of ``want`` was processed (and committed) once."""
        deadline = time.monotonic() + WAIT_S
        while not want <= set(self.seen) and time.monotonic() < deadline:
            self.poll_all()
        assert want <= set(self.seen), \
            f"never consumed: {sorted(want - set(self.seen))[:10]}"

    def wait_split(self) -> list[set[int]]:
        """Reconciled: every partition owned by exactly one member, and the uniform
        assignor's balance (counts differ by one at most)."""
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            self.poll_all(0.05)
            owned = [{tp.partition for tp in m.assignment()} for m in self.members]
            counts = list(map(len, owned))
            if sum(counts) == PARTITIONS and set().union(*owned) == set(range(PARTITIONS)) \
                    and max(counts) - min(counts) <= 1:
                return owned
        raise AssertionError(f"never split: {[m.assignment() for m in self.members]}")

    def close(self) -> None:
        for member in self.members:
            member.close()


def committed(bootstrap: str, group: str, topic: str) -> list[int]:
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "group.protocol": "consumer"})
    try:
        return [tp.offset for tp in reader.committed(
            [TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=WAIT_S)]
    finally:
        reader.close()


def records(per_partition: int, start: int = 0) -> set:
    return {(p, o) for p in range(PARTITIONS) for o in range(start, start + per_partition)}


def test_three_consumers_split_the_topic_and_a_leaving_member_loses_nothing(
        raftwood_broker_factory):
    broker = raftwood_broker_factory(**BROKER_SETTINGS)
    topic, group = "kip848-split", "kip848-split-group"
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, 10, 0)
    group_members = Members([consumer(broker.bootstrap, group, topic) for _ in range(3)])
    try:
        owned = group_members.wait_split()
        group_members.consume(records(10))
        seen = group_members.seen
        assert set(seen) == records(10) and max(seen.values()) == 1
        assert all(len(who) == 1 for who in group_members.owners.values())
        assert committed(broker.bootstrap, group, topic) == [10] * PARTITIONS

        # Admin tools see it through ConsumerGroupDescribe (librdkafka asks that first).
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        described = admin.describe_consumer_groups([group])[group].result(timeout=WAIT_S)
        assert (described.state, described.type) == \
            (ConsumerGroupState.STABLE, ConsumerGroupType.CONSUMER)
        assert sorted(tp.partition for m in described.members
                      for tp in m.assignment.topic_partitions) == list(range(PARTITIONS))

        leaving = group_members.members.pop(0)
        leaving.close()
        moved = owned[0]
        group_members.wait_split()
        produce(broker.bootstrap, topic, 5, 10)
        group_members.consume(records(5, 10))
        assert set(seen) == records(15)
        duplicates = {key for key, count in seen.items() if count > 1}
        assert all(partition in moved for partition, _ in duplicates)
        assert len(duplicates) <= len(moved)
        assert committed(broker.bootstrap, group, topic) == [15] * PARTITIONS

        with KafkaConnection(broker.bootstrap) as conn:
            listed = conn.request(ListGroupsRequest[5](states_filter=[],
                                                       types_filter=["consumer"])).groups
        assert [(g.group_id, g.group_type, g.protocol_type, g.group_state) for g in listed] == \
            [(group, "consumer", "consumer", "Stable")]
    finally:
        group_members.close()


def test_a_static_member_restarted_within_its_session_gets_its_partitions_back(
        raftwood_broker_factory):
    broker = raftwood_broker_factory(**BROKER_SETTINGS)
    topic, group = "kip848-static", "kip848-static-group"
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, 4, 0)
    group_members = Members([consumer(broker.bootstrap, group, topic,
                                      **{"group.instance.id": f"instance-{i}"})
                             for i in range(2)])
    try:
        before = group_members.wait_split()
        group_members.consume(records(4))
        group_members.members.pop(0).close()  # a static member leaves with epoch -2
        # Its partitions stay with it: the other member is not handed them.
        until = time.monotonic() + 2.0
        while time.monotonic() < until:
            group_members.poll_all(0.05)
            assert {tp.partition for tp in group_members.members[0].assignment()} == before[1]
        group_members.members.insert(0, consumer(broker.bootstrap, group, topic,
                                                 **{"group.instance.id": "instance-0"}))
        assert group_members.wait_split() == before
        produce(broker.bootstrap, topic, 2, 4)
        group_members.consume(records(2, 4))
        assert max(group_members.seen.values()) == 1
        # The records written after the restart went to the owners of before (the first
        # records may have been read while the first split was still settling).
        for (partition, offset), who in group_members.owners.items():
            if offset >= 4:
                assert who == {0 if partition in before[0] else 1}, (partition, offset)
    finally:
        group_members.close()


def find_coordinator(cluster, group: str, exclude: int | None = None) -> int:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        for node_id in cluster.running():
            if node_id == exclude:
                continue
            try:
                with cluster.connect(node_id) as conn:
                    answer = conn.request(FindCoordinatorRequest[3](key=group, key_type=0))
            except OSError:
                continue
            if answer.error_code == 0 and answer.node_id != exclude:
                return answer.node_id
        time.sleep(0.2)
    raise AssertionError("no coordinator found")


def test_killing_the_coordinator_keeps_the_group_and_its_commits(cluster_factory):
    cluster = cluster_factory(3, **BROKER_SETTINGS)
    topic, group = "kip848-failover", "kip848-failover-group"
    create_topic(cluster.bootstrap, topic, 3)
    produce(cluster.bootstrap, topic, 10, 0)
    group_members = Members([consumer(cluster.bootstrap, group, topic) for _ in range(3)])
    try:
        group_members.wait_split()
        group_members.consume(records(10))
        assert committed(cluster.bootstrap, group, topic) == [10] * PARTITIONS

        coordinator = find_coordinator(cluster, group)
        cluster.kill(coordinator)
        produce(cluster.bootstrap, topic, 5, 10)
        group_members.consume(records(5, 10))
        # Nothing below the commits came back: they survived the crash.
        seen = group_members.seen
        assert set(seen) == records(15) and max(seen.values()) == 1
        assert find_coordinator(cluster, group, exclude=coordinator) != coordinator
        group_members.wait_split()
        assert committed(cluster.bootstrap, group, topic) == [15] * PARTITIONS
    finally:
        group_members.close()

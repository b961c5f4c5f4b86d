"""Fetch from follower (KIP-392) with librdkafka's `client.rack`, on a 3-broker cluster.

Brokers 1, 2, 3 sit in racks r1, r2, r3 and run Kafka's RackAwareReplicaSelector.  A
consumer in the rack of a follower is sent there by the leader (preferred_read_replica)
and reads every record from that follower: librdkafka's statistics name the broker a
partition is fetched from (``broker``) next to its leader (``leader``).  A consumer
without a rack keeps reading from the leader.  Records produced after the switch arrive
too (the follower answers below its own high watermark and wakes long polls as it catches up).
"""
from __future__ import annotations

import json
import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
import confluent_kafka.admin  # noqa: E402

SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
WAIT_S = 30.0


def leader_of(bootstrap: str, topic: str) -> int:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        partition = admin.list_topics(topic, timeout=5).topics[topic].partitions.get(0)
        if partition is not None and partition.leader >= 0 and len(partition.isrs) == 3:
            return partition.leader
        time.sleep(0.1)
    raise AssertionError(f"{topic}-0 has no leader with a full ISR")


def consume(bootstrap: str, topic: str, rack: str | None, expected: set[bytes],
            when_following=None) -> tuple[set[bytes], set[int]]:
    """Read until ``expected`` is seen; returns (values, brokers fetched from).
    ``when_following(fetched_from)`` runs once, when a first set of records was read and
    the statistics named a broker; it returns more values to expect."""
    fetched_from: set[int] = set()

    def on_stats(text: str) -> None:
        partition = json.loads(text).get("topics", {}).get(topic, {}) \
            .get("partitions", {}).get("0")
        if partition is not None and partition.get("broker", -1) >= 0:
            fetched_from.add(partition["broker"])

    settings = {"bootstrap.servers": bootstrap, "group.id": f"ffr-{rack}",
                "enable.auto.commit": False, "statistics.interval.ms": 200,
                "stats_cb": on_stats}
    if rack is not None:
        settings["client.rack"] = rack
    consumer = confluent_kafka.Consumer(settings)
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    seen: set[bytes] = set()
    expected = set(expected)
    deadline = time.monotonic() + WAIT_S
    try:
        while time.monotonic() < deadline and not expected <= seen:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                seen.add(message.value())
            if when_following is not None and expected <= seen and fetched_from:
                expected |= when_following(fetched_from)
                when_following = None
        consumer.poll(0.5)  # one more statistics interval
    finally:
        consumer.close()
    return seen, fetched_from


def test_a_consumer_reads_from_the_follower_in_its_rack(raftwood_cluster_factory):
    cluster = raftwood_cluster_factory(
        3, broker_settings={n: {"broker.rack": f"r{n}"} for n in (1, 2, 3)},
        **{"replica.selector.class": SELECTOR})
    bootstrap = cluster.bootstrap
    cluster.create_topic("racked", 1, replication_factor=3)
    leader = leader_of(bootstrap, "racked")
    follower = next(n for n in (1, 2, 3) if n != leader)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    first = {f"v{i}".encode() for i in range(200)}
    for value in sorted(first):
        producer.produce("racked", value, partition=0)
    assert producer.flush(WAIT_S) == 0

    later = {f"w{i}".encode() for i in range(50)}

    def produce_later(fetched_from: set[int]) -> set[bytes]:
        for value in sorted(later):
            producer.produce("racked", value, partition=0)
        assert producer.flush(WAIT_S) == 0
        return later

    seen, fetched_from = consume(bootstrap, "racked", f"r{follower}", first, produce_later)
    assert seen == first | later
    assert follower in fetched_from, f"fetched from {fetched_from}, leader {leader}"

    seen, fetched_from = consume(bootstrap, "racked", None, first)
    assert seen == first and fetched_from == {leader}

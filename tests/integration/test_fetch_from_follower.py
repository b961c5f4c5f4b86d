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
from kafka.protocol.consumer import FetchRequest  # noqa: E402

from broker.harness.wire import read_records  # noqa: E402

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


@pytest.fixture(scope="module")
def shared_cluster(module_cluster_factory):
    """Brokers 1, 2, 3 in racks r1, r2, r3 with the rack-aware selector, shared by the
    module's tests (each has a topic of its own; conftest's ``cluster`` heals it)."""
    return module_cluster_factory(
        3, broker_settings={n: {"broker.rack": f"r{n}"} for n in (1, 2, 3)},
        **{"replica.selector.class": SELECTOR})


def test_a_consumer_reads_from_the_follower_in_its_rack(cluster):
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


def follower_disconnects(text: str, follower: int) -> int:
    """librdkafka's count of lost connections to broker ``follower`` (statistics)."""
    brokers = json.loads(text).get("brokers", {}).values()
    return sum(b.get("disconnects", 0) for b in brokers if b.get("nodeid") == follower)


def test_a_follower_serves_a_fetch_that_waits_for_more_bytes(cluster):
    """KIP-392 with fetch.min.bytes > 1: a follower answers a consumer's Fetch that waits
    for more bytes than there are (its wait ends with what is there) and keeps the
    connection; a rack-aware consumer with that setting reads everything from it."""
    bootstrap = cluster.bootstrap
    cluster.create_topic("fz-t", 1, replication_factor=3)
    leader = leader_of(bootstrap, "fz-t")
    followers = [n for n in (1, 2, 3) if n != leader]
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    values = {f"m{i}".encode() for i in range(100)}
    for value in sorted(values):
        producer.produce("fz-t", value, partition=0)
    assert producer.flush(WAIT_S) == 0
    cluster.wait_for(lambda statuses: all(
        (h := cluster.find_hosted(statuses[n], "fz-t", 0)) is not None
        and h.get("high_watermark") == len(values) for n in followers),
        WAIT_S, "the followers' high watermark at the log end")

    for follower in followers:  # the fuzzer's frame: min_bytes 1,000,000, max wait 500 ms
        with cluster.connect(follower) as connection:
            fetch_topic = FetchRequest.FetchTopic
            request = FetchRequest[11](
                replica_id=-1, max_wait_ms=500, min_bytes=1_000_000, max_bytes=1 << 20,
                isolation_level=0, session_id=0, session_epoch=-1,
                topics=[fetch_topic(topic="fz-t", partitions=[fetch_topic.FetchPartition(
                    partition=0, current_leader_epoch=-1, fetch_offset=0,
                    log_start_offset=-1, partition_max_bytes=1 << 20)])],
                forgotten_topics_data=[], rack_id="")
            data = connection.request(request).responses[0].partitions[0]
            assert data.error_code == 0
            assert len(read_records(data.records)) == len(values)
            assert connection.api_versions().error_code == 0  # still open

    follower = followers[0]
    disconnects: list[int] = []
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "ffr-min-bytes", "client.rack": f"r{follower}",
        "enable.auto.commit": False, "fetch.min.bytes": 100_000, "fetch.wait.max.ms": 300,
        "statistics.interval.ms": 200,
        "stats_cb": lambda text: disconnects.append(follower_disconnects(text, follower))})
    consumer.assign([confluent_kafka.TopicPartition("fz-t", 0, confluent_kafka.OFFSET_BEGINNING)])
    later = {f"n{i}".encode() for i in range(30)}
    seen: set[bytes] = set()
    produced_later = False
    deadline = time.monotonic() + WAIT_S
    try:
        while time.monotonic() < deadline and not (values | later) <= seen:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                seen.add(message.value())
            if values <= seen and not produced_later:
                for value in sorted(later):  # while the consumer waits on the follower
                    producer.produce("fz-t", value, partition=0)
                producer.poll(0)
                produced_later = True
        consumer.poll(0.5)
    finally:
        consumer.close()
    assert producer.flush(WAIT_S) == 0
    assert seen == values | later
    assert disconnects and max(disconnects) == 0, "the follower closed the consumer's connection"

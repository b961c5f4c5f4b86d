"""Followers fetch in incremental fetch sessions (KIP-227) on a real 3-broker cluster.

Twelve partitions, RF 3, leaders spread over the brokers.  Once every ISR is full each
broker holds exactly one session per follower fetching from it (two), caching every
partition they follow there — read from the brokers' metrics.  Then an acks=all
idempotent producer writes keyed records to every partition while a follower is
killed with SIGKILL and restarted, and the then-leader of some partitions is killed too
(its partitions move to the fetchers of other leaders: sessions gain and forget
partitions).  Afterwards every acknowledged record is at its offset (read by
kafka-python's consumer, itself in a session), and every partition's replicas are byte
for byte the same.  The same run with ``max.incremental.fetch.session.cache.slots=0``
(no session anywhere) shows followers replicate in full fetches too.
"""
from __future__ import annotations

import time
import urllib.request

import pytest
from confluent_kafka import Producer
from kafka import KafkaConsumer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from broker.testing import free_ports
from tests.faults.checker import assert_replicas_identical_below, wait_fully_replicated

TOPIC = "sessioned"
PARTITIONS = 12
RECORDS = 3000
SESSIONS = "kafka_server_fetchsessioncache_numincrementalfetchsessions"
CACHED = "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    return {s.name: s.value for family in text_string_to_metric_families(text)
            for s in family.samples if not s.labels}


def wait_sessions(ports: dict[int, int], wanted: dict[int, tuple[int, int]],
                  timeout_s: float = 30) -> dict:
    """Until every broker holds ``wanted[node]``: (sessions, partitions cached)."""
    deadline = time.monotonic() + timeout_s
    while True:
        seen = {node: scrape(port) for node, port in ports.items()}
        counts = {node: (s.get(SESSIONS), s.get(CACHED)) for node, s in seen.items()}
        if counts == wanted:
            return counts
        if time.monotonic() > deadline:
            raise AssertionError(f"sessions per broker (sessions, partitions): {counts}, "
                                 f"wanted: {wanted}")
        time.sleep(0.2)


@pytest.mark.parametrize("slots", [1000, 0], ids=["sessions", "no-sessions"])
def test_follower_sessions_survive_kills_and_leader_moves(raftwood_cluster_factory, slots):
    """``slots`` 0: the leaders keep no session and answer every follower fetch in
    full; the followers, asking each time, replicate all the same."""
    ports = dict(zip((1, 2, 3), free_ports(3)))
    cluster = raftwood_cluster_factory(broker_settings={
        node: {"metrics.port": str(port), "max.incremental.fetch.session.cache.slots": slots}
        for node, port in ports.items()})
    replicas = [[1, 2, 3], [2, 3, 1], [3, 1, 2]]
    cluster.create_topic(TOPIC, assignments=[replicas[i % 3] for i in range(PARTITIONS)])
    for partition in range(PARTITIONS):
        cluster.wait_for_isr(TOPIC, partition, [1, 2, 3])
    led = {node: sum(1 for p in range(PARTITIONS) if replicas[p % 3][0] == node)
           for node in ports}
    wait_sessions(ports, {node: (2, 2 * led[node]) if slots else (0, 0) for node in ports})

    acked: dict[tuple[int, int], bytes] = {}
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)
        else:
            acked[(msg.partition(), msg.offset())] = msg.value()

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5,
                         "message.timeout.ms": 90_000, "topic.metadata.refresh.interval.ms": 1000})
    faults = {RECORDS // 4: ("kill", 3), RECORDS // 2: ("restart", 3),
              3 * RECORDS // 4: ("kill", 2)}
    for i in range(RECORDS):
        if i in faults:
            action, node = faults[i]
            producer.flush(60)
            getattr(cluster, action)(node)
        producer.produce(TOPIC, value=b"v-%05d" % i, partition=i % PARTITIONS,
                         on_delivery=on_delivery)
        if i % 100 == 0:
            producer.poll(0.02)
    assert producer.flush(120) == 0
    assert not errors, errors[:3]
    assert len(acked) == RECORDS
    cluster.restart(2)

    ends = {}
    for partition in range(PARTITIONS):
        ends[partition] = wait_fully_replicated(cluster, TOPIC, partition, timeout_s=60)
        assert_replicas_identical_below(cluster, TOPIC, partition, ends[partition], [1, 2, 3])

    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, fetch_max_wait_ms=100)
    try:
        consumer.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        stored: dict[tuple[int, int], bytes] = {}
        deadline = time.monotonic() + 60
        while len(stored) < sum(ends.values()) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                for record in records:
                    stored[(record.partition, record.offset)] = record.value
    finally:
        consumer.close()
    missing = {key: value for key, value in acked.items() if stored.get(key) != value}
    assert not missing, f"{len(missing)} acknowledged records not at their offsets: " \
                        f"{sorted(missing)[:5]}"

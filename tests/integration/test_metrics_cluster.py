"""Prometheus metrics of three real brokers (issue #16), read as Prometheus reads them.

Every broker serves ``metrics.port``; each scrape is an HTTP GET parsed by
prometheus_client's text parser, and the values are checked against what the test made
happen: bytes produced and fetched, a follower killed (the leader's ISR shrinks) and
started again (it expands), the one active controller.  Bounds are generous: they catch
missing transitions, they do not measure.
"""
from __future__ import annotations

import os
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from broker.testing import ClusterProcess, build_batch, free_ports

SLACK_S = 20.0
TOPIC = "metered"


@pytest.fixture(scope="module")
def metered_ports(module_cluster_factory):
    """One cluster whose brokers serve metrics.port, shared by the module's two tests
    (a topic each): (cluster, {node id: metrics port})."""
    ports = dict(zip((1, 2, 3), free_ports(3)))
    cluster = module_cluster_factory(
        broker_settings={node: {"metrics.port": str(port)} for node, port in ports.items()})
    return cluster, ports


@pytest.fixture
def metered_cluster(metered_ports, heal_cluster):
    """The module's cluster and its metrics ports; every broker back after a kill."""
    yield metered_ports
    heal_cluster(metered_ports[0])


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    """(sample name, sorted label pairs) → value, from one GET /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        assert answer.status == 200
        assert answer.headers["Content-Type"].startswith("text/plain")
        text = answer.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def sample(samples, name: str, default=None, **labels) -> float:
    return samples.get((name, tuple(sorted((k, str(v)) for k, v in labels.items()))), default)


def wait_for_samples(port: int, predicate, what: str, cluster: ClusterProcess,
                     timeout_s: float = SLACK_S) -> dict:
    """Scrape until ``predicate(samples)`` holds; the last samples on failure."""
    deadline = time.monotonic() + timeout_s
    samples = {}
    while time.monotonic() < deadline:
        try:
            samples = scrape(port)
        except OSError:
            samples = {}
        if samples and predicate(samples):
            return samples
        time.sleep(0.2)
    relevant = {k: v for k, v in samples.items() if "replicamanager" in k[0]}
    raise AssertionError(f"metrics never showed {what} within {timeout_s}s: {relevant}\n"
                         f"{cluster.describe()}")


def test_metrics_follow_traffic_an_isr_shrink_and_expansion_and_the_controller(
        metered_cluster):
    cluster, ports = metered_cluster
    topic = cluster.create_topic(TOPIC, assignments=[[1, 2, 3]])
    cluster.wait_for_isr(topic, 0, [1, 2, 3])
    leader = 1

    # Exactly one broker is the active controller, and it is the one the cluster names.
    controller = cluster.controller_id()
    by_node = {node: scrape(port) for node, port in ports.items()}
    active = {node: sample(s, "kafka_controller_kafkacontroller_activecontrollercount")
              for node, s in by_node.items()}
    assert sorted(active.values()) == [0, 0, 1], active
    assert active[controller] == 1
    for _node, samples in by_node.items():
        assert sample(samples, "raftwood_raft_term") >= 1
        assert sample(samples, "raftwood_raft_commit_index") > 0
        assert sample(samples, "kafka_server_replicamanager_partitioncount") >= 1
    assert sample(by_node[controller], "kafka_controller_kafkacontroller_activebrokercount") == 3
    assert sample(by_node[controller],
                  "kafka_controller_kafkacontroller_offlinepartitionscount") == 0

    # Bytes in: the leader's counter for the topic grows by at least what was sent.
    before = scrape(ports[leader])
    bytes_in_before = sample(before, "kafka_server_brokertopicmetrics_bytesin_total", 0,
                             topic=topic)
    produces_before = sample(before, "kafka_network_requestmetrics_requests_total", 0,
                             request="Produce", version=9)
    sent = 0
    with cluster.connect(leader) as conn:
        for i in range(5):
            batch = build_batch([(None, b"value-%d" % i * 50, int(time.time() * 1000), [])])
            assert conn.produce(topic, 0, batch, acks=-1).error_code == 0
            sent += len(batch)
        fetched = conn.fetch(topic, 0, 0, max_bytes=8 << 20)
        assert fetched.error_code == 0
    after = scrape(ports[leader])
    assert sample(after, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic) \
        >= bytes_in_before + sent
    assert sample(after, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) >= 5
    assert sample(after, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) \
        >= len(fetched.records)
    assert sample(after, "kafka_network_requestmetrics_requests_total",
                  request="Produce", version=9) == produces_before + 5
    assert sample(after, "kafka_network_requestmetrics_totaltimems_count",
                  request="Produce", version=9) == produces_before + 5
    assert sample(after, "kafka_log_log_size", topic=topic, partition=0) >= sent
    assert sample(after, "kafka_server_replicamanager_leadercount") >= 1
    assert sample(after, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    # The event loop's thread did the work (its CPU clock moved), and its lag probe
    # has been sampling since the broker started (ten a second).
    assert sample(after, "raftwood_event_loop_cpu_seconds_total") \
        > sample(before, "raftwood_event_loop_cpu_seconds_total") > 0
    assert sample(after, "raftwood_event_loop_lag_ms_count") >= 5
    # The run-queue wait, read from the loop thread's schedstat, is exported where the
    # kernel keeps one (the unit tests check what it counts).
    if os.path.exists("/proc/thread-self/schedstat"):
        assert sample(after, "raftwood_event_loop_runqueue_wait_seconds_total", -1.0) >= 0

    # A follower dies (SIGKILL): the leader's ISR shrinks, counted and shown.
    follower = next((n for n in (2, 3) if n != controller), 2)
    shrinks = sample(after, "kafka_server_replicamanager_isrshrinks_total")
    expands = sample(after, "kafka_server_replicamanager_isrexpands_total")
    cluster.kill(follower)
    cluster.wait_for_isr(topic, 0, sorted({1, 2, 3} - {follower}), timeout_s=SLACK_S)
    shrunk = wait_for_samples(
        ports[leader], lambda s: sample(s, "kafka_server_replicamanager_isrshrinks_total")
        > shrinks and sample(s, "kafka_server_replicamanager_underreplicatedpartitions") > 0,
        "an ISR shrink and an under-replicated partition on the leader", cluster)
    assert sample(shrunk, "kafka_cluster_partition_underreplicated",
                  topic=topic, partition=0) == 1

    # It comes back: the ISR expands again, nothing is under-replicated.
    cluster.start(follower)
    cluster.wait_for_isr(topic, 0, [1, 2, 3], timeout_s=SLACK_S)
    wait_for_samples(
        ports[leader], lambda s: sample(s, "kafka_server_replicamanager_isrexpands_total")
        > expands and sample(s, "kafka_server_replicamanager_underreplicatedpartitions") == 0,
        "an ISR expansion and no under-replicated partition on the leader", cluster)
    back = scrape(ports[follower])  # its endpoint is back with it
    assert sample(back, "kafka_server_replicamanager_partitioncount") >= 1
    active = [sample(scrape(port), "kafka_controller_kafkacontroller_activecontrollercount")
              for port in ports.values()]
    assert sorted(active) == [0, 0, 1], active


def gc_collected(samples) -> float:
    return sum(value for (name, _labels), value in samples.items()
               if name == "python_gc_objects_collected_total")


def test_produce_and_fetch_leave_no_reference_cycles_for_the_collector(metered_cluster):
    """Objects in a reference cycle are freed only by the cyclic collector, whose passes
    stop the event loop (milliseconds under load: a p99 matter).  A produce path that
    left one cycle per request (a waiting acks=all produce and its operation holding
    each other) showed as about 18 collected objects per request; here 1,200 acks=all
    and 300 acks=1 produces and 300 fetches must leave fewer than one per 4 requests."""
    cluster, ports = metered_cluster
    topic = cluster.create_topic("cycles", assignments=[[1, 2, 3]])
    cluster.wait_for_isr(topic, 0, [1, 2, 3])
    requests = 0
    with cluster.connect(1) as conn:
        conn.produce(topic, 0, build_batch([(None, b"warm", int(time.time() * 1000), [])]))
        before = scrape(ports[1])
        for i in range(1_500):
            batch = build_batch([(None, b"v%d" % i * 20, int(time.time() * 1000), [])])
            assert conn.produce(topic, 0, batch, acks=-1 if i % 5 else 1).error_code == 0
            requests += 1
            if i % 5 == 0:
                assert conn.fetch(topic, 0, i, max_bytes=1 << 16).error_code == 0
                requests += 1
        after = scrape(ports[1])
    collected = gc_collected(after) - gc_collected(before)
    passes = {labels: value - before.get((name, labels), 0)
              for (name, labels), value in after.items() if name == "python_gc_collections_total"}
    assert collected < requests / 4, (
        f"the leader's cyclic collector freed {collected:.0f} objects over {requests} "
        f"requests (passes per generation: {passes})")

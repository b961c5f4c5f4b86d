"""broker/metrics: the counters, the collector over a real ReplicaManager, the endpoint.

Every scrape goes through prometheus_client's own text parser, so what is checked is
what Prometheus would read.
"""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from broker import config as config_module
from broker.controller.state import ClusterState
from broker.groups.state import CommittedOffset, GroupMetadata
from broker.metrics import (
    METRIC_NAMES,
    BrokerMetrics,
    LoopProbe,
    MetricsEndpoint,
    MetricSources,
)
from broker.metrics.loop import LAG_BUCKETS_MS
from broker.metrics.stats import (
    DISCARD_REQUESTS,
    TIME_BUCKETS_MS,
    ReplicaStats,
    RequestStats,
)
from broker.network.connection import ConnectionContext
from broker.replication.delayed import FetchPartitionStatus
from broker.replication.fetch_sessions import CachedPartition, FetchSessionCache, PartitionParams
from broker.replication.origin import AppendOrigin
from broker.replication.replica_manager import ReplicaManager
from broker.testing import build_batch

# -- the counters -----------------------------------------------------------------------------


def test_isr_changes_count_shrinks_and_expansions_by_membership():
    stats = ReplicaStats()
    stats.isr_changed([1, 2, 3], [1, 3])
    stats.isr_changed((1, 3), (3, 1))  # same members in another order: no change
    stats.isr_changed([1, 3], [1, 2, 3])
    stats.isr_changed([1, 2], [1, 3])  # one left, one joined
    assert (stats.isr_shrinks, stats.isr_expands) == (2, 2)


def test_bytes_in_and_out_per_topic_and_follower_fetches_apart():
    stats = ReplicaStats()
    stats.appended("a", 100, 3)
    stats.appended("a", 50, 1)
    stats.appended("b", 7, 1)
    stats.fetched("a", 30, follower=False)
    stats.fetched("a", 999, follower=True)
    assert stats.bytes_in == {"a": 150, "b": 7}
    assert stats.messages_in == {"a": 4, "b": 1}
    assert stats.bytes_out == {"a": 30}
    assert stats.replication_bytes_out == 999


def test_request_times_land_in_inclusive_buckets():
    stats = RequestStats()
    stats.record("Produce", 9, 0.0005)   # 0.5 ms: the 0.5 bucket (le is inclusive)
    stats.record("Produce", 9, 0.002)    # 2 ms: the 2.5 bucket
    stats.record("Produce", 9, 100.0)    # beyond the last bound: +Inf
    stats.record("Fetch", 12, 0.0)
    timing = stats.timings[("Produce", 9)]
    assert timing.count == 3
    assert timing.sum_ms == pytest.approx(100_002.5)
    cumulative = timing.cumulative()
    assert len(cumulative) == len(TIME_BUCKETS_MS) + 1
    assert cumulative[TIME_BUCKETS_MS.index(0.25)] == 0
    assert cumulative[TIME_BUCKETS_MS.index(0.5)] == 1
    assert cumulative[TIME_BUCKETS_MS.index(2.5)] == 2
    assert cumulative[-2] == 2 and cumulative[-1] == 3
    assert stats.timings[("Fetch", 12)].count == 1


def test_a_connection_without_metrics_gets_a_request_recorder_that_keeps_nothing():
    assert ConnectionContext.__dataclass_fields__["request_stats"].default is DISCARD_REQUESTS
    DISCARD_REQUESTS.record("Produce", 9, 1.0)
    assert DISCARD_REQUESTS.timings == {}


# -- the collector over a real replica manager --------------------------------------------------


def leader_image(isr: list[int], partitions: int = 1, min_isr: int = 2) -> ClusterState:
    """Brokers 1-3; topic t, every partition on [1, 2, 3] led by 1 with ``isr``."""
    state = ClusterState()
    for node in (1, 2, 3):
        state.apply_register_broker(node, "127.0.0.1", 19090 + node, f"incarnation-{node}")
    state.apply_create_topic("t", "topic-id", [[1, 2, 3]] * partitions,
                             {"min.insync.replicas": str(min_isr)})
    for info in state.topics["t"].partitions.values():
        info.isr = list(isr)
        info.partition_epoch += 1
    return state


def with_isr(state: ClusterState, isr: list[int]) -> ClusterState:
    image = state.snapshot()
    for info in image.topics["t"].partitions.values():
        info.isr = list(isr)
        info.partition_epoch += 1
    image.version += 1
    return image


class FakeRaftNode:
    raftCommitIndex = 42
    raftLastApplied = 41
    raftCurrentTerm = 7
    selfNode = object()
    otherNodes = frozenset({"a", "b"})


@pytest.fixture
def broker(tmp_path):
    """What the collector reads of a Broker: a real ReplicaManager (node 1), the rest
    stand-ins."""
    config = config_module.build({"node.id": 1, "log.dirs": str(tmp_path)})
    rm = ReplicaManager(config)
    image = leader_image([1, 2, 3])
    rm.apply_image(image)
    group = GroupMetadata("g", 0)
    group.offsets[("t", 0)] = CommittedOffset(offset=1)
    group.offsets[("elsewhere", 0)] = CommittedOffset(offset=5)
    metadata = SimpleNamespace(is_controller=True, image=image)
    fake = SimpleNamespace(
        config=config, replica_manager=rm, metadata=metadata,
        store=SimpleNamespace(_syncobj=FakeRaftNode()),
        groups=SimpleNamespace(manager=SimpleNamespace(loaded_groups=lambda: [group])),
        api_context=SimpleNamespace(fetch_sessions=FetchSessionCache(10)))
    fake.metrics = BrokerMetrics(config, MetricSources(
        fake.replica_manager, fake.metadata, fake.store, fake.groups,
        fake.api_context.fetch_sessions))
    yield fake
    for partition in rm.partitions.values():
        partition.close()


def scrape(registry) -> dict[str, dict]:
    """family name → {(sample name, sorted label pairs): value}, through the parser."""
    text = generate_latest(registry).decode()
    result = {}
    for family in text_string_to_metric_families(text):
        result[family.name] = {(s.name, tuple(sorted(s.labels.items()))): s.value
                               for s in family.samples}
    return result


def value(families, family, sample=None, **labels):
    return families[family][(sample or family, tuple(sorted(labels.items())))]


def produce(rm: ReplicaManager, *values: bytes) -> int:
    data = bytearray(build_batch([(None, v, 1_000, []) for v in values]))
    status = rm.append_one("t", 0, data, 1, 1 << 20, origin=AppendOrigin.CLIENT)
    assert status.error == 0
    return len(data)


def test_every_named_family_is_exported_and_nothing_else(broker):
    families = scrape(broker.metrics.registry)
    expected = set(METRIC_NAMES)
    if not broker.metrics.loop.has_runqueue_wait:  # a kernel without schedstat
        expected.discard("raftwood_event_loop_runqueue_wait_seconds")
    assert set(families) == expected


def test_replica_gauges_follow_the_isr_and_shrinks_are_counted(broker):
    rm = broker.replica_manager
    families = scrape(broker.metrics.registry)
    assert value(families, "kafka_server_replicamanager_partitioncount") == 1
    assert value(families, "kafka_server_replicamanager_leadercount") == 1
    assert value(families, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(families, "kafka_server_replicamanager_isrshrinks",
                 "kafka_server_replicamanager_isrshrinks_total") == 0

    shrunk = with_isr(broker.metadata.image, [1])  # the controller fenced 2 and 3
    rm.apply_image(shrunk)
    families = scrape(broker.metrics.registry)
    assert value(families, "kafka_server_replicamanager_underreplicatedpartitions") == 1
    assert value(families, "kafka_server_replicamanager_underminisrpartitioncount") == 1
    assert value(families, "kafka_cluster_partition_underminisr", topic="t", partition="0") == 1
    assert value(families, "kafka_cluster_partition_underreplicated",
                 topic="t", partition="0") == 1
    assert value(families, "kafka_server_replicamanager_isrshrinks",
                 "kafka_server_replicamanager_isrshrinks_total") == 1

    rm.apply_image(with_isr(shrunk, [1, 2, 3]))
    families = scrape(broker.metrics.registry)
    assert value(families, "kafka_server_replicamanager_isrexpands",
                 "kafka_server_replicamanager_isrexpands_total") == 1
    assert value(families, "kafka_server_replicamanager_underreplicatedpartitions") == 0


def test_a_committed_alter_partition_counts_once_whichever_news_comes_first(broker):
    """The leader's own shrink: the result of its AlterPartition and the image carrying
    the change both arrive; the change counts once."""
    rm = broker.replica_manager
    partition = rm.get_partition("t", 0)
    for follower in (2, 3):
        partition.followers[follower].last_caught_up_ms = 0
    change = partition.maybe_shrink_isr(now_ms=10_000_000_000_000, lag_time_max_ms=1)
    assert sorted(change.proposed_isr) == [1]

    async def committed(*_args):
        return partition.partition_epoch + 1

    rm.metadata = SimpleNamespace()  # present: ISR changes are proposed
    rm.alter_partition.submit = committed
    asyncio.run(rm.alter_partition.alter(partition, change))
    assert partition.isr == [1]
    rm.apply_image(with_isr(broker.metadata.image, [1]))  # the same change, later
    assert (rm.stats.isr_shrinks, rm.stats.isr_expands) == (1, 0)


def test_bytes_in_log_size_and_group_lag_from_what_was_produced(broker):
    rm = broker.replica_manager
    sent = produce(rm, b"one", b"two") + produce(rm, b"three")
    partition = rm.get_partition("t", 0)
    # The followers fetch at the LEO: the high watermark moves to 3.
    statuses = [FetchPartitionStatus(("t", 0), partition, 3, 1 << 20, -1, 0)]
    rm.record_follower_fetches(statuses, 2)
    rm.record_follower_fetches(statuses, 3)
    assert partition.high_watermark == 3
    families = scrape(broker.metrics.registry)
    assert value(families, "kafka_server_brokertopicmetrics_bytesin",
                 "kafka_server_brokertopicmetrics_bytesin_total", topic="t") == sent
    assert value(families, "kafka_server_brokertopicmetrics_messagesin",
                 "kafka_server_brokertopicmetrics_messagesin_total", topic="t") == 3
    assert value(families, "kafka_log_log_size", topic="t", partition="0") \
        == partition.log.size_bytes >= sent
    assert value(families, "kafka_log_log_logendoffset", topic="t", partition="0") == 3
    assert value(families, "kafka_consumergroup_lag", group="g", topic="t", partition="0") == 2
    assert value(families, "kafka_consumergroup_current_offset",
                 group="g", topic="elsewhere", partition="0") == 5
    # No replica of "elsewhere" here: no lag for it.
    assert ("kafka_consumergroup_lag", (("group", "g"), ("partition", "0"),
                                        ("topic", "elsewhere"))) \
        not in families["kafka_consumergroup_lag"]


def test_controller_and_raft_gauges(broker):
    families = scrape(broker.metrics.registry)
    assert value(families, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(families, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert value(families, "kafka_controller_kafkacontroller_globalpartitioncount") == 1
    assert value(families, "kafka_controller_kafkacontroller_activebrokercount") == 3
    assert value(families, "raftwood_raft_commit_index") == 42
    assert value(families, "raftwood_raft_term") == 7
    assert value(families, "raftwood_raft_last_applied") == 41
    assert value(families, "raftwood_raft_voters") == 3
    assert value(families, "raftwood_raft_is_voter") == 1
    broker.store._syncobj = SimpleNamespace(
        raftCommitIndex=42, raftLastApplied=41, raftCurrentTerm=7, selfNode=None,
        otherNodes=FakeRaftNode.otherNodes)
    families = scrape(broker.metrics.registry)
    assert value(families, "raftwood_raft_voters") == 2  # an observer of two voters
    assert value(families, "raftwood_raft_is_voter") == 0
    broker.store._syncobj = FakeRaftNode()

    image = broker.metadata.image.snapshot()
    image.topics["t"].partitions[0].leader = -1
    broker.metadata.is_controller = False
    broker.metadata.image = image
    families = scrape(broker.metrics.registry)
    # Not the controller: its gauges are the controller's alone (0 here).
    assert value(families, "kafka_controller_kafkacontroller_activecontrollercount") == 0
    assert value(families, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    broker.metadata.is_controller = True
    families = scrape(broker.metrics.registry)
    assert value(families, "kafka_controller_kafkacontroller_offlinepartitionscount") == 1


def test_a_lone_broker_has_no_raft_gauges(broker):
    lone = BrokerMetrics(broker.config, MetricSources(
        broker.replica_manager, broker.metadata, SimpleNamespace(),  # the local store:
        broker.groups, broker.api_context.fetch_sessions))          # no Raft node
    families = scrape(lone.registry)
    assert "raftwood_raft_term" not in families
    assert "raftwood_metadata_version" in families


def test_request_histogram_per_api_and_version(broker):
    broker.metrics.requests.record("Produce", 9, 0.003)
    broker.metrics.requests.record("Produce", 9, 0.004)
    broker.metrics.requests.record("Metadata", 12, 0.0001)
    families = scrape(broker.metrics.registry)
    assert value(families, "kafka_network_requestmetrics_requests",
                 "kafka_network_requestmetrics_requests_total",
                 request="Produce", version="9") == 2
    histogram = "kafka_network_requestmetrics_totaltimems"
    assert value(families, histogram, histogram + "_count", request="Produce", version="9") == 2
    assert value(families, histogram, histogram + "_sum", request="Produce",
                 version="9") == pytest.approx(7.0)
    assert value(families, histogram, histogram + "_bucket", request="Produce", version="9",
                 le="5.0") == 2
    assert value(families, histogram, histogram + "_bucket", request="Produce", version="9",
                 le="2.5") == 0
    assert value(families, histogram, histogram + "_bucket", request="Metadata",
                 version="12", le="0.25") == 1


def test_purgatory_sizes_and_max_lag(broker):
    families = scrape(broker.metrics.registry)
    purgatory = "kafka_server_delayedoperationpurgatory_purgatorysize"
    assert value(families, purgatory, delayedOperation="Produce") == 0
    assert value(families, purgatory, delayedOperation="Fetch") == 0
    assert value(families, "kafka_server_replicafetchermanager_maxlag", clientId="Replica") == 0
    fetcher = SimpleNamespace(partitions={("t", 1): SimpleNamespace(lag=12),
                                          ("t", 2): SimpleNamespace(lag=3)})
    broker.replica_manager.fetchers.fetchers[2] = fetcher
    try:
        families = scrape(broker.metrics.registry)
    finally:
        del broker.replica_manager.fetchers.fetchers[2]
    assert value(families, "kafka_server_replicafetchermanager_maxlag", clientId="Replica") == 12


def test_fetch_session_gauges_count_sessions_partitions_and_evictions(broker):
    sessions = broker.api_context.fetch_sessions
    sessions.max_sessions = 1
    params = PartitionParams(0, 1024, -1, -1)
    assert sessions.create(False, {("t", 0): CachedPartition(params)})
    families = scrape(broker.metrics.registry)
    prefix = "kafka_server_fetchsessioncache_"
    assert value(families, prefix + "numincrementalfetchsessions") == 1
    assert value(families, prefix + "numincrementalfetchpartitionscached") == 1
    # a follower's session takes the consumer's place
    assert sessions.create(True, {("t", 0): CachedPartition(params),
                                  ("t", 1): CachedPartition(params)})
    families = scrape(broker.metrics.registry)
    assert value(families, prefix + "numincrementalfetchsessions") == 1
    assert value(families, prefix + "numincrementalfetchpartitionscached") == 2
    evictions = prefix + "incrementalfetchsessionevictions"
    assert value(families, evictions, evictions + "_total") == 1


def test_the_registry_is_the_brokers_own(broker):
    assert broker.metrics.registry is not pytest.importorskip("prometheus_client").REGISTRY
    assert "process_cpu_seconds_total" not in generate_latest(broker.metrics.registry).decode()


# -- the HTTP endpoint ---------------------------------------------------------------------------


class Fixed:
    def collect(self):
        from prometheus_client.core import GaugeMetricFamily
        yield GaugeMetricFamily("raftwood_test_gauge", "a test gauge", value=3)


async def http(port: int, request: bytes) -> tuple[bytes, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    data = await reader.read()
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return head, body


def test_endpoint_serves_metrics_404s_the_rest_and_stops_with_its_connections():
    async def main():
        registry = CollectorRegistry(auto_describe=False)
        registry.register(Fixed())
        endpoint = MetricsEndpoint(registry, "127.0.0.1", 0)
        await endpoint.start()
        port = endpoint.bound_port
        head, body = await http(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200")
        assert b"Content-Type: text/plain; version=0.0.4; charset=utf-8" in head
        families = {f.name: f for f in text_string_to_metric_families(body.decode())}
        assert families["raftwood_test_gauge"].samples[0].value == 3
        head, _ = await http(port, b"GET /metrics?name[]=x HTTP/1.1\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200")
        head, body = await http(port, b"HEAD /metrics HTTP/1.1\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200") and body == b""
        for other in (b"GET / HTTP/1.1\r\n\r\n", b"POST /metrics HTTP/1.1\r\n\r\n",
                      b"GET /metricsx HTTP/1.1\r\n\r\n", b"nonsense\r\n\r\n"):
            head, _ = await http(port, other)
            assert head.startswith(b"HTTP/1.1 404"), other
        # A scraper that never finishes its request head is cut off by stop().
        _reader, idle = await asyncio.open_connection("127.0.0.1", port)
        idle.write(b"GET /metr")
        await asyncio.sleep(0.05)
        await asyncio.wait_for(endpoint.stop(), 5)
        assert not endpoint._handlers
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", port)
        idle.close()

    asyncio.run(main())


def test_a_failing_collector_answers_500_and_the_endpoint_goes_on():
    class Broken:
        def collect(self):
            raise RuntimeError("bug")

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Broken())
    status, _body, _type = MetricsEndpoint(registry, "127.0.0.1", 0).answer(
        b"GET /metrics HTTP/1.1\r\n\r\n")
    assert status.startswith("500")


def test_broker_metrics_serve_only_when_the_port_is_set(broker):
    async def main():
        await broker.metrics.start()  # metrics.port 0: nothing served
        assert broker.metrics.endpoint is None
        await broker.metrics.stop()

    asyncio.run(main())


def test_metrics_settings_parse():
    config = config_module.build({"metrics.port": "9404", "metrics.host": "0.0.0.0"})
    assert (config["metrics.port"], config["metrics.host"]) == (9404, "0.0.0.0")
    default = config_module.build({})
    assert (default["metrics.port"], default["metrics.host"]) == (0, "127.0.0.1")


def spin_cpu_seconds(seconds: float, wall_limit_s: float = 30.0) -> None:
    """Spin until this thread has used ``seconds`` of CPU (not of wall time: on a busy
    machine a wall-clock spin may get a fraction of a core), for at most ``wall_limit_s``."""
    cpu_until = time.thread_time() + seconds
    wall_until = time.monotonic() + wall_limit_s
    while time.thread_time() < cpu_until and time.monotonic() < wall_until:
        pass


def test_loop_probe_records_how_late_a_blocked_loop_ran_its_timer_and_the_loops_cpu():
    """The probe's timer is due every 10 ms; one callback holds the loop for 150 ms (the
    way a burst of requests does), so one sample lands above 100 ms and the rest low.
    The loop thread's CPU clock counts a 100 ms busy spin and not a 100 ms sleep in
    another thread."""
    probe = LoopProbe(interval_s=0.01)

    async def main():
        probe.start()
        await asyncio.sleep(0.05)
        time.sleep(0.15)  # the loop is held: the probe's timer is 140 ms late
        await asyncio.sleep(0.05)
        cpu_before = probe.cpu_seconds()
        await asyncio.to_thread(time.sleep, 0.1)  # another thread waits: no loop CPU
        cpu_idle = probe.cpu_seconds() - cpu_before
        spin_cpu_seconds(0.1)
        cpu_busy = probe.cpu_seconds() - cpu_before - cpu_idle
        probe.stop()
        count = probe.count
        await asyncio.sleep(0.05)
        assert probe.count == count  # stopped: no more samples
        return cpu_idle, cpu_busy

    cpu_idle, cpu_busy = asyncio.run(main())
    assert cpu_busy >= 0.08 and cpu_idle < 0.05, (cpu_busy, cpu_idle)
    cumulative = dict(zip(LAG_BUCKETS_MS + (float("inf"),), probe.cumulative()))
    assert cumulative[float("inf")] == probe.count >= 5
    assert cumulative[float("inf")] - cumulative[100.0] == 1  # the held loop, once
    assert cumulative[25.0] == probe.count - 1                # every other sample
    assert probe.sum_ms >= 100.0


def test_loop_probe_counts_the_time_its_thread_waited_for_a_cpu():
    """The loop's thread, pinned to one CPU, spins 0.4 s alone and then 0.4 s while two
    other processes spin on that CPU: sharing it three ways, the thread waits about two
    thirds of the second spin on the run queue, far more than in the first (which only
    the machine's own noise makes nonzero; reading the CPU-time field instead would
    make the second spin's figure the smaller)."""
    if not LoopProbe().has_runqueue_wait or not hasattr(os, "sched_setaffinity"):
        pytest.skip("the kernel keeps no per-thread schedstat here")
    cpu = min(os.sched_getaffinity(0))
    probe = LoopProbe()

    def spin(seconds: float) -> float:
        before = probe.runqueue_wait_seconds()
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            pass
        return probe.runqueue_wait_seconds() - before

    async def main():
        probe.start()
        os.sched_setaffinity(threading.get_native_id(), {cpu})
        alone = spin(0.4)
        rivals = [subprocess.Popen([sys.executable, "-c", "import os\n"
                                    f"os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"])
                  for _ in range(2)]
        try:
            await asyncio.sleep(0.3)  # the rivals start and spin
            shared = spin(0.4)
        finally:
            for rival in rivals:
                rival.kill()
                rival.wait()
        probe.stop()
        return alone, shared

    result = {}
    thread = threading.Thread(target=lambda: result.update(waits=asyncio.run(main())))
    thread.start()
    thread.join()
    alone, shared = result["waits"]
    assert shared - alone >= 0.1, (alone, shared)


def test_event_loop_families_read_the_probe(broker):
    async def main():
        await broker.metrics.start()  # starts the probe (no endpoint: port 0)
        await asyncio.sleep(0.35)
        families = scrape(broker.metrics.registry)
        await broker.metrics.stop()
        return families

    families = asyncio.run(main())
    count = value(families, "raftwood_event_loop_lag_ms", "raftwood_event_loop_lag_ms_count")
    assert count >= 2  # one sample per 100 ms
    assert value(families, "raftwood_event_loop_lag_ms", "raftwood_event_loop_lag_ms_bucket",
                 le="+Inf") == count
    assert value(families, "raftwood_event_loop_cpu_seconds",
                 "raftwood_event_loop_cpu_seconds_total") > 0
    if broker.metrics.loop.has_runqueue_wait:
        assert value(families, "raftwood_event_loop_runqueue_wait_seconds",
                     "raftwood_event_loop_runqueue_wait_seconds_total") >= 0


def test_loop_cpu_keeps_its_last_reading_once_the_loop_thread_is_gone(monkeypatch):
    """A scrape may come after the loop's thread ended (shutdown) and, where threads'
    CPU clocks cannot be named, from another thread: the counter then holds its last
    reading instead of failing, going back to zero or reading the wrong thread."""
    import threading

    def run_loop_in_a_thread(probe: LoopProbe) -> float:
        readings = []

        async def main():
            probe.start()
            spin_cpu_seconds(0.05)
            readings.append(probe.cpu_seconds())
            probe.stop()

        thread = threading.Thread(target=asyncio.run, args=(main(),))
        thread.start()
        thread.join()
        return readings[0]

    named = LoopProbe()
    on_loop = run_loop_in_a_thread(named)
    assert on_loop >= 0.04
    # The thread is gone (or finishing: join() returns before the OS thread exits):
    # the last reading, or its final CPU time, never an error.
    assert on_loop <= named.cpu_seconds() < on_loop + 0.5

    monkeypatch.delattr(time, "pthread_getcpuclockid")
    unnamed = LoopProbe()
    on_loop = run_loop_in_a_thread(unnamed)
    assert on_loop >= 0.04
    assert unnamed.cpu_seconds() == on_loop  # read off the loop's thread: not re-read

"""The broker's metrics as Prometheus families, read from live state at scrape time.

``BrokerCollector.collect`` runs on the event loop (the HTTP endpoint calls it there),
so it may read everything the loop owns; it only reads.  Nothing is kept between
scrapes: gauges are what the broker's state says now, counters are the totals the
components keep (``stats.py``).

Names follow what Prometheus' JMX exporter makes of Kafka's MBeans (``kafka.server:
type=ReplicaManager,name=UnderReplicatedPartitions`` becomes
``kafka_server_replicamanager_underreplicatedpartitions``), so dashboards and alerts
written for Kafka read them; counters end in ``_total``.  What Kafka has no MBean for
(the Raft position) is ``raftwood_*``.  ``METRIC_NAMES`` lists every family, and the
table in docs/metrics.md describes each.
"""
from __future__ import annotations

import gc
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from .loop import LAG_BUCKETS_MS, LoopProbe
from .stats import TIME_BUCKETS_MS, RequestStats

NO_LEADER = -1

# Family names as exposed (a counter's samples add ``_total``, a histogram's
# ``_bucket``/``_sum``/``_count``).
UNDER_REPLICATED = "kafka_server_replicamanager_underreplicatedpartitions"
UNDER_MIN_ISR_COUNT = "kafka_server_replicamanager_underminisrpartitioncount"
PARTITION_COUNT = "kafka_server_replicamanager_partitioncount"
LEADER_COUNT = "kafka_server_replicamanager_leadercount"
ISR_SHRINKS = "kafka_server_replicamanager_isrshrinks"
ISR_EXPANDS = "kafka_server_replicamanager_isrexpands"
UNDER_MIN_ISR = "kafka_cluster_partition_underminisr"
UNDER_REPLICATED_PARTITION = "kafka_cluster_partition_underreplicated"
OFFLINE_PARTITIONS = "kafka_controller_kafkacontroller_offlinepartitionscount"
ACTIVE_CONTROLLER = "kafka_controller_kafkacontroller_activecontrollercount"
GLOBAL_PARTITIONS = "kafka_controller_kafkacontroller_globalpartitioncount"
GLOBAL_TOPICS = "kafka_controller_kafkacontroller_globaltopiccount"
ACTIVE_BROKERS = "kafka_controller_kafkacontroller_activebrokercount"
FENCED_BROKERS = "kafka_controller_kafkacontroller_fencedbrokercount"
MAX_LAG = "kafka_server_replicafetchermanager_maxlag"
LOG_SIZE = "kafka_log_log_size"
LOG_END_OFFSET = "kafka_log_log_logendoffset"
LOG_START_OFFSET = "kafka_log_log_logstartoffset"
PURGATORY_SIZE = "kafka_server_delayedoperationpurgatory_purgatorysize"
REQUESTS = "kafka_network_requestmetrics_requests"
TOTAL_TIME = "kafka_network_requestmetrics_totaltimems"
BYTES_IN = "kafka_server_brokertopicmetrics_bytesin"
BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout"
MESSAGES_IN = "kafka_server_brokertopicmetrics_messagesin"
REPLICATION_BYTES_OUT = "kafka_server_brokertopicmetrics_replicationbytesout"
GROUP_LAG = "kafka_consumergroup_lag"
GROUP_OFFSET = "kafka_consumergroup_current_offset"
RAFT_COMMIT_INDEX = "raftwood_raft_commit_index"
RAFT_LAST_APPLIED = "raftwood_raft_last_applied"
RAFT_TERM = "raftwood_raft_term"
RAFT_VOTERS = "raftwood_raft_voters"
RAFT_IS_VOTER = "raftwood_raft_is_voter"
METADATA_VERSION = "raftwood_metadata_version"
FETCH_SESSIONS = "kafka_server_fetchsessioncache_numincrementalfetchsessions"
FETCH_SESSION_PARTITIONS = "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"
FETCH_SESSION_EVICTIONS = "kafka_server_fetchsessioncache_incrementalfetchsessionevictions"
# The process's cyclic garbage collector, under prometheus_client's own names.
GC_COLLECTED = "python_gc_objects_collected"
GC_COLLECTIONS = "python_gc_collections"
# The event loop every request runs on (broker/metrics/loop.py).
LOOP_CPU = "raftwood_event_loop_cpu_seconds"
LOOP_WAIT = "raftwood_event_loop_runqueue_wait_seconds"  # absent without Linux schedstat
LOOP_LAG = "raftwood_event_loop_lag_ms"

COUNTERS = (ISR_SHRINKS, ISR_EXPANDS, REQUESTS, BYTES_IN, BYTES_OUT, MESSAGES_IN,
            REPLICATION_BYTES_OUT, FETCH_SESSION_EVICTIONS, GC_COLLECTED, GC_COLLECTIONS,
            LOOP_CPU, LOOP_WAIT)
HISTOGRAMS = (TOTAL_TIME, LOOP_LAG)
GAUGES = (UNDER_REPLICATED, UNDER_MIN_ISR_COUNT, PARTITION_COUNT, LEADER_COUNT,
          UNDER_MIN_ISR, UNDER_REPLICATED_PARTITION, OFFLINE_PARTITIONS, ACTIVE_CONTROLLER,
          GLOBAL_PARTITIONS, GLOBAL_TOPICS, ACTIVE_BROKERS, FENCED_BROKERS, MAX_LAG,
          LOG_SIZE, LOG_END_OFFSET, LOG_START_OFFSET, PURGATORY_SIZE, GROUP_LAG,
          GROUP_OFFSET, RAFT_COMMIT_INDEX, RAFT_LAST_APPLIED, RAFT_TERM, RAFT_VOTERS,
          RAFT_IS_VOTER, METADATA_VERSION, FETCH_SESSIONS, FETCH_SESSION_PARTITIONS)
METRIC_NAMES = COUNTERS + HISTOGRAMS + GAUGES

# The purgatories as Kafka labels them (delayedOperation=...).
PURGATORIES = (("Produce", "produce_purgatory"), ("Fetch", "fetch_purgatory"),
               ("DeleteRecords", "delete_records_purgatory"))


@dataclass(frozen=True)
class MetricSources:
    """What the metrics read of their broker at scrape time, instead of the whole Broker
    (built in ``broker/node.py``).  Typed loosely on purpose: metrics sit on the lowest
    floor and import none of the rooms they read."""

    replica_manager: Any   # partitions, purgatories, fetchers, ReplicaStats
    metadata: Any          # the MetadataClient: is_controller, image
    store: Any             # the metadata store: its Raft node, when it has one
    groups: Any            # the GroupCoordinator: its loaded groups' committed offsets
    fetch_sessions: Any    # the FetchSessionCache (KIP-227)


class BrokerCollector(Collector):
    """Every metric of one Broker (see the module), read from ``sources`` and from the
    broker metrics' own request stats and loop probe, nothing else."""

    def __init__(self, sources: MetricSources, requests: RequestStats, loop: LoopProbe):
        self.sources = sources
        self.requests = requests
        self.loop = loop

    def describe(self):
        # Registering must not call collect(): the broker may not be started yet.
        return []

    def collect(self):
        yield from self._replica_manager()
        yield from self._controller()
        yield from self._requests()
        yield from self._groups()
        yield from self._raft()
        yield from _python_gc()
        yield from self._event_loop()

    # -- this broker's replicas -------------------------------------------------------------

    def _replica_manager(self):
        rm = self.sources.replica_manager
        hosted = [p for p in rm.partitions.values() if not p.offline]
        leaders = [p for p in hosted if p.is_leader]
        under_replicated = [p for p in leaders if len(p.isr) < len(p.replicas)]
        under_min_isr = [p for p in leaders
                         if len(p.isr) < p.settings.min_insync_replicas]
        yield _gauge(PARTITION_COUNT, "Partitions with a replica on this broker",
                     len(rm.partitions))
        yield _gauge(LEADER_COUNT, "Partitions this broker leads", len(leaders))
        yield _gauge(UNDER_REPLICATED, "Partitions led here whose ISR is smaller than "
                     "their replica set", len(under_replicated))
        yield _gauge(UNDER_MIN_ISR_COUNT, "Partitions led here whose ISR is smaller than "
                     "min.insync.replicas", len(under_min_isr))
        per_partition = (
            (UNDER_REPLICATED_PARTITION, "1 when this partition (led here) is "
             "under-replicated", set(map(id, under_replicated))),
            (UNDER_MIN_ISR, "1 when this partition (led here) has fewer in-sync replicas "
             "than min.insync.replicas", set(map(id, under_min_isr))))
        for name, documentation, flagged in per_partition:
            family = GaugeMetricFamily(name, documentation, labels=["topic", "partition"])
            for p in leaders:
                family.add_metric([p.topic, str(p.index)], 1 if id(p) in flagged else 0)
            yield family
        size = GaugeMetricFamily(LOG_SIZE, "Bytes of the partition's log on this broker",
                                 labels=["topic", "partition"])
        end = GaugeMetricFamily(LOG_END_OFFSET, "The partition's log end offset here",
                                labels=["topic", "partition"])
        start = GaugeMetricFamily(LOG_START_OFFSET, "The partition's log start offset here",
                                  labels=["topic", "partition"])
        for p in hosted:
            labels = [p.topic, str(p.index)]
            size.add_metric(labels, p.log.size_bytes)
            end.add_metric(labels, p.log_end_offset)
            start.add_metric(labels, p.log_start_offset)
        yield from (size, end, start)
        purgatory = GaugeMetricFamily(PURGATORY_SIZE, "Requests waiting in a purgatory",
                                      labels=["delayedOperation"])
        for label, attribute in PURGATORIES:
            purgatory.add_metric([label], getattr(rm, attribute).watched())
        yield purgatory
        yield _gauge(MAX_LAG, "Most messages any partition followed here is behind its "
                     "leader's high watermark (at the last fetch)", _max_lag(rm.fetchers),
                     labels={"clientId": "Replica"})
        stats = rm.stats
        yield _counter(ISR_SHRINKS, "Committed ISR shrinks of partitions led here",
                       stats.isr_shrinks)
        yield _counter(ISR_EXPANDS, "Committed ISR expansions of partitions led here",
                       stats.isr_expands)
        for name, documentation, values in (
                (BYTES_IN, "Bytes appended as leader", stats.bytes_in),
                (MESSAGES_IN, "Records appended as leader", stats.messages_in),
                (BYTES_OUT, "Bytes of records answered to consumer fetches",
                 stats.bytes_out)):
            family = CounterMetricFamily(name, documentation, labels=["topic"])
            for topic, value in sorted(values.items()):
                family.add_metric([topic], value)
            yield family
        yield _counter(REPLICATION_BYTES_OUT, "Bytes of records answered to follower "
                       "fetches", stats.replication_bytes_out)
        sessions = self.sources.fetch_sessions
        yield _gauge(FETCH_SESSIONS, "Incremental fetch sessions (KIP-227) kept here",
                     len(sessions))
        yield _gauge(FETCH_SESSION_PARTITIONS, "Partitions in those fetch sessions",
                     sessions.partition_count())
        yield _counter(FETCH_SESSION_EVICTIONS, "Fetch sessions evicted to make room for "
                       "new ones", sessions.evictions)

    # -- the cluster, as the active controller sees it ----------------------------------------

    def _controller(self):
        """Kafka reports the controller's gauges on the active controller only (0
        elsewhere), so a sum over brokers counts each partition once."""
        active = bool(self.sources.metadata.is_controller)
        image = self.sources.metadata.image
        offline = topics = partitions = live = fenced = 0
        if active:
            topics = len(image.topics)
            for _topic, _index, info in image.partitions():
                partitions += 1
                if info.leader == NO_LEADER:
                    offline += 1
            live = len(image.live_brokers())
            fenced = len(image.brokers) - live
        yield _gauge(ACTIVE_CONTROLLER, "1 on the broker that is the active controller",
                     int(active))
        yield _gauge(OFFLINE_PARTITIONS, "Partitions without a leader (on the controller)",
                     offline)
        yield _gauge(GLOBAL_TOPICS, "Topics in the cluster (on the controller)", topics)
        yield _gauge(GLOBAL_PARTITIONS, "Partitions in the cluster (on the controller)",
                     partitions)
        yield _gauge(ACTIVE_BROKERS, "Registered, unfenced brokers (on the controller)", live)
        yield _gauge(FENCED_BROKERS, "Registered, fenced brokers (on the controller)", fenced)

    # -- requests -----------------------------------------------------------------------------

    def _requests(self):
        timings = self.requests.timings
        requests = CounterMetricFamily(REQUESTS, "Requests answered, per API and version",
                                       labels=["request", "version"])
        total_time = HistogramMetricFamily(
            TOTAL_TIME, "Milliseconds from a request's handling to its answer, per API "
            "and version", labels=["request", "version"])
        bounds = [floatToGoString(b) for b in TIME_BUCKETS_MS] + ["+Inf"]
        for (name, version), timing in sorted(timings.items()):
            labels = [name, str(version)]
            requests.add_metric(labels, timing.count)
            total_time.add_metric(labels, list(zip(bounds, timing.cumulative())),
                                  timing.sum_ms)
        yield requests
        yield total_time

    # -- the event loop -----------------------------------------------------------------------

    def _event_loop(self):
        probe = self.loop
        yield _counter(LOOP_CPU, "CPU seconds of the event loop's thread (its rate: the "
                       "share of a core the loop uses, 1 when saturated)", probe.cpu_seconds())
        wait = probe.runqueue_wait_seconds()
        if wait is not None:
            yield _counter(LOOP_WAIT, "Seconds the event loop's thread was ready to run but "
                           "waited for a CPU (Linux schedstat): other processes or threads "
                           "held every core", wait)
        lag = HistogramMetricFamily(LOOP_LAG, "Milliseconds a timer callback of the event "
                                    "loop ran later than asked, sampled ten times a second")
        bounds = [floatToGoString(b) for b in LAG_BUCKETS_MS] + ["+Inf"]
        lag.add_metric([], list(zip(bounds, probe.cumulative())), probe.sum_ms)
        yield lag

    # -- consumer groups this broker coordinates --------------------------------------------

    def _groups(self):
        """Lag = this broker's high watermark of the partition - the committed offset,
        for committed partitions with a replica here (the leader's HW exactly; a
        follower's trails it by at most one fetch).  Others are left out: asking their
        leaders is not a scrape's work."""
        rm = self.sources.replica_manager
        lag = GaugeMetricFamily(GROUP_LAG, "High watermark minus the committed offset",
                                labels=["group", "topic", "partition"])
        current = GaugeMetricFamily(GROUP_OFFSET, "The group's committed offset",
                                    labels=["group", "topic", "partition"])
        for group in self.sources.groups.manager.loaded_groups():
            for (topic, index), committed in sorted(group.offsets.items()):
                labels = [group.group_id, topic, str(index)]
                current.add_metric(labels, committed.offset)
                partition = rm.partitions.get((topic, index))
                if partition is not None and not partition.offline:
                    lag.add_metric(labels, max(0, partition.high_watermark - committed.offset))
        yield lag
        yield current

    # -- the metadata quorum ------------------------------------------------------------------

    def _raft(self):
        image = self.sources.metadata.image
        yield _gauge(METADATA_VERSION, "Version of the newest metadata image applied here",
                     image.version)
        # The Raft node is the store's (pysyncobj); a lone broker's local store has none.
        # Its counters are ints the Raft thread replaces, so reading them here is safe.
        node = getattr(self.sources.store, "_syncobj", None)
        if node is None:
            return
        yield _gauge(RAFT_COMMIT_INDEX, "Raft commit index of the metadata log",
                     node.raftCommitIndex)
        yield _gauge(RAFT_LAST_APPLIED, "Last metadata log entry applied here",
                     node.raftLastApplied)
        yield _gauge(RAFT_TERM, "Current Raft term of the metadata quorum",
                     node.raftCurrentTerm)
        # otherNodes / selfNode are replaced, not mutated, by a membership change.
        is_voter = node.selfNode is not None
        yield _gauge(RAFT_VOTERS, "Voters of the metadata quorum, as this broker knows them",
                     len(node.otherNodes) + is_voter)
        yield _gauge(RAFT_IS_VOTER, "1 when this broker votes in the metadata quorum, 0 when "
                     "it is an observer", int(is_voter))


def _python_gc():
    """The cyclic collector's passes and what they freed, per generation (the process's,
    one broker per process).  Garbage in reference cycles is freed only by these passes,
    which stop the event loop while they walk the young objects: a request path that
    leaves a cycle per request shows here as collected objects growing with traffic."""
    collected = CounterMetricFamily(GC_COLLECTED, "Objects the cyclic garbage collector "
                                    "freed, per generation", labels=["generation"])
    collections = CounterMetricFamily(GC_COLLECTIONS, "Passes of the cyclic garbage "
                                      "collector, per generation", labels=["generation"])
    for generation, stats in enumerate(gc.get_stats()):
        collected.add_metric([str(generation)], stats["collected"])
        collections.add_metric([str(generation)], stats["collections"])
    yield collected
    yield collections


def _max_lag(fetchers) -> int:
    lags = [followed.lag for fetcher in fetchers.fetchers.values()
            for followed in fetcher.partitions.values()]
    return max(lags, default=0)


def _gauge(name: str, documentation: str, value, labels: dict | None = None):
    if not labels:
        return GaugeMetricFamily(name, documentation, value=value)
    family = GaugeMetricFamily(name, documentation, labels=list(labels))
    family.add_metric(list(labels.values()), value)
    return family


def _counter(name: str, documentation: str, value):
    return CounterMetricFamily(name, documentation, value=value)

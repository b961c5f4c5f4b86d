"""PySpark's Kafka source and sink against Raftwood (compat/spark/pipeline.py).

Spark's Kafka connector (``spark-sql-kafka-0-10_2.13``) is published on Maven Central only.
It is taken from the folder named by ``RAFTWOOD_SPARK_JARS``; when that is unset, from
``<checkout>/../shared/spark-connector/<pyspark version>`` when that folder exists (where
CI keeps it); otherwise from ``spark.jars.packages`` when Maven Central answers within a
few seconds.  Without any of them the Kafka tests skip with the reason.  ``make test``
installs pyspark (the ``spark`` extra); Spark 4 needs Java 17+, and without it every test
here skips with one line saying so.

Cost: one SparkSession (local[2], no UI, 3 shuffle partitions) for the module, one
broker shared by the single-broker tests (PLAINTEXT and SASL_SSL with SCRAM-SHA-512),
and one 3-broker cluster for the failover test.

Invariants checked:
* the pipeline's transformation and density check, on rows shaped like the Kafka source's;
* a streaming query (readStream, counts by key, Kafka sink with the Java client's
  idempotent producer) writes the exact count of every key, and a second run from its
  checkpoint picks up only the new records; Spark's batch read sees every partition's
  offsets dense from 0, each record once;
* a batch read of a compacted topic (failOnDataLoss=false) sees every surviving record;
* read_committed sees exactly the committed transactions, read_uncommitted all of them;
* over SASL_SSL (SCRAM-SHA-512, PEM truststore) the batch sink, a streaming query and a
  batch read work as over PLAINTEXT;
* on 3 brokers, a streaming copy keeps running while the source's leader is killed with
  SIGKILL, and every record the broker acknowledged (acks=all) reaches the sink.
"""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from broker.testing import BrokerProcess, KafkaConnection, build_batch, free_port
from compat.spark.pipeline import (
    CONNECTOR_JAR_PREFIX,
    JARS_ENV,
    KAFKA_CONNECTOR,
    ConnectorMissing,
    connector_conf,
)
from tests.security_certs import make_pki, with_listeners

ROOT = Path(__file__).resolve().parents[2]
SHARED_CONNECTOR = ROOT.parent / "shared" / "spark-connector"
MAVEN_CENTRAL = "https://repo1.maven.org/maven2/"
PROBE_TIMEOUT_S = 3.0
QUERY_TIMEOUT_S = 180
WAIT_S = 120.0
PARTITIONS = 3
SCRAM_USER, SCRAM_PASSWORD = "spark", "spark-secret"
# Spark for small tests: the JIT's first tier only, a serial GC, no whole-stage code
# generation and no adaptive planning halve the driver's CPU time here (70 s -> 33 s for
# the first two tests on a busy 2-core machine); the Kafka connector's work is the same.
CHEAP_SPARK = {
    "spark.driver.memory": "1g",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC "
                                     "-XX:CICompilerCount=1",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.adaptive.enabled": "false",
    "spark.kafka.producer.cache.timeout": "5s",   # the sink's producers close soon after
}


# -- where the connector comes from -----------------------------------------------------------

def _maven_central_answers(version: str) -> tuple[bool, str]:
    """HEAD the connector's pom on Maven Central, bounded to ``PROBE_TIMEOUT_S`` in all
    (the name lookup included, hence the thread)."""
    artifact = KAFKA_CONNECTOR.split(":")[1]
    url = (f"{MAVEN_CENTRAL}org/apache/spark/{artifact}/{version}/"
           f"{artifact}-{version}.pom")
    result = [False, f"no answer from {MAVEN_CENTRAL} within {PROBE_TIMEOUT_S:.0f} s"]

    def probe():
        try:
            with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"),
                                        timeout=PROBE_TIMEOUT_S) as response:
                result[:] = [response.status == 200, f"HTTP {response.status} for {url}"]
        except (urllib.error.URLError, OSError, ValueError) as exc:
            result[:] = [False, f"{MAVEN_CENTRAL} unreachable: {exc}"]

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(PROBE_TIMEOUT_S + 0.5)
    return result[0], result[1]


def find_connector(spark_version: str) -> tuple[dict | None, str]:
    """(Spark settings that load the connector, where it comes from), or (None, why not).

    Order: ``RAFTWOOD_SPARK_JARS`` (an error there is not papered over by a fallback),
    then the shared folder beside the checkout, then Maven Central."""
    jars_dir = os.environ.get(JARS_ENV)
    if jars_dir:
        try:
            return connector_conf(jars_dir), f"{JARS_ENV}={jars_dir}"
        except ConnectorMissing as exc:
            return None, f"{JARS_ENV}: {exc}"
    shared = SHARED_CONNECTOR / spark_version
    if shared.is_dir():
        try:
            return connector_conf(str(shared)), str(shared)
        except ConnectorMissing as exc:
            return None, str(exc)
    reachable, why = _maven_central_answers(spark_version)
    if reachable:
        return connector_conf(None, spark_version), MAVEN_CENTRAL
    return None, (f"Spark's Kafka connector {KAFKA_CONNECTOR}:{spark_version} is not on "
                  f"PyPI; set {JARS_ENV} to a folder holding {CONNECTOR_JAR_PREFIX}*.jar and "
                  f"its dependencies, put them in {shared}, or make Maven Central reachable "
                  f"({why})")


def java_problem() -> str | None:
    """None when ``java`` is Java 17 or newer, else one line saying what is wrong."""
    java = shutil.which("java")
    if java is None:
        return ("no java on PATH: Spark 4 needs Java 17+ (make system-deps installs "
                "openjdk-17-jre-headless)")
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{java} -version failed: {exc}"
    match = re.search(r'version "(\d+)(?:\.(\d+))?', done.stderr)
    if not match:
        return f"{java} -version printed no version: {done.stderr.strip()[:200]!r}"
    major = int(match.group(2) if match.group(1) == "1" else match.group(1))
    return None if major >= 17 else f"{java} is Java {major}: Spark 4 needs Java 17+"


# -- fixtures ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def spark_env():
    """(SparkSession, None) with the connector, or (SparkSession, why it is missing)."""
    if importlib.util.find_spec("pyspark") is None:
        pytest.skip("pyspark is not installed (make test installs it; or pip install "
                    "'raftwood[spark]')")
    problem = java_problem()
    if problem:
        pytest.skip(problem)
    import pyspark

    from compat.spark.pipeline import make_session

    connector, where = find_connector(pyspark.__version__)
    spark = make_session("raftwood-test-spark", connector=connector or {},
                         extra_conf=CHEAP_SPARK)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        yield spark, (None if connector else where)
    finally:
        spark.stop()


@pytest.fixture
def spark(spark_env):
    """The module's SparkSession with the Kafka connector; skips (with the reason) without."""
    session, missing = spark_env
    if missing is not None:
        pytest.skip(missing)
    return session


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """One broker for the single-broker tests: PLAINTEXT and SASL_SSL (SCRAM-SHA-512, the
    user added with ``raftwood users``), the cleaner quick to run.  Yields (broker, the
    SASL_SSL port, the CA certificate)."""
    home = tmp_path_factory.mktemp("spark-broker")
    pki = make_pki(home / "pki")
    sasl_ssl_port = free_port()
    broker = with_listeners(BrokerProcess(home / "data", log_path=home / "broker.log",
                                          extra_settings={
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.location": str(pki.broker_keystore),
        "log.cleaner.backoff.ms": "100"}), f"SASL_SSL://127.0.0.1:{sasl_ssl_port}")
    broker.start()
    try:
        added = subprocess.run([sys.executable, "-m", "broker.cli", "users", "add", SCRAM_USER,
                                "--password", SCRAM_PASSWORD, "--mechanism", "SCRAM-SHA-512",
                                "--bootstrap-server", broker.bootstrap],
                               capture_output=True, text=True, timeout=60,
                               stdin=subprocess.DEVNULL)
        assert added.returncode == 0, added.stderr
        yield broker, sasl_ssl_port, pki.ca
    finally:
        code = broker.stop()
    assert code == 0, broker.log_tail()


def _produce(bootstrap: str, topic: str, keys: list[str]) -> Counter:
    """One raw batch per partition (keys spread round robin); the count per key."""
    with KafkaConnection(bootstrap) as conn:
        for partition in range(PARTITIONS):
            records = [(key.encode(), f"{key}-{n}".encode(), None, [])
                       for n, key in enumerate(keys) if n % PARTITIONS == partition]
            if records:
                answer = conn.produce(topic, partition, build_batch(records, compression=4))
                assert answer.error_code == 0
    return Counter(keys)


def _values(rows) -> list[bytes]:
    return [bytes(r["value"]) for r in rows]


# -- without Kafka -----------------------------------------------------------------------------

@pytest.mark.slow
def test_pipeline_transformation_and_density_check_without_kafka(spark_env):
    """The pipeline's own code on rows shaped like the Kafka source's."""
    from compat.spark.pipeline import check_dense, counts_by_key, offset_ranges

    spark, _ = spark_env
    rows = [(f"k{n % 4}".encode(), f"v{n}".encode(), "t", n % 2, n // 2) for n in range(10)]
    records = spark.createDataFrame(rows, "key binary, value binary, topic string, "
                                          "partition int, offset long")
    counts = {r["key"]: r["value"] for r in counts_by_key(records).collect()}
    assert counts == {"k0": "3", "k1": "3", "k2": "2", "k3": "2"}
    assert check_dense(records) == {0: (0, 4, 5), 1: (0, 4, 5)}
    gappy = records.filter("NOT (partition = 1 AND offset = 2)")
    with pytest.raises(ValueError, match="not dense"):
        check_dense(gappy)
    with pytest.raises(ValueError, match="twice"):
        offset_ranges(records.union(records.limit(1)))


# -- one broker --------------------------------------------------------------------------------

def test_streaming_counts_and_batch_read_through_the_kafka_connector(spark, broker, tmp_path):
    from compat.spark.pipeline import (
        check_dense,
        latest_value_per_key,
        read_topic,
        start_counts_query,
    )

    bootstrap = broker[0].bootstrap
    with KafkaConnection(bootstrap) as conn:
        assert conn.create_topic("events", PARTITIONS) == 0
        assert conn.create_topic("event-counts", PARTITIONS) == 0
    expected = _produce(bootstrap, "events", [f"user-{n % 7}" for n in range(300)])
    checkpoint = str(tmp_path / "checkpoint")

    for round_ in (1, 2):
        query = start_counts_query(spark, bootstrap, "events", "event-counts", checkpoint)
        assert query.awaitTermination(QUERY_TIMEOUT_S), f"round {round_}: query still running"
        assert query.exception() is None, query.exception()
        counts = latest_value_per_key(read_topic(spark, bootstrap, "event-counts"))
        assert counts == {key: str(n) for key, n in expected.items()}, f"round {round_}"
        if round_ == 1:  # more records; the next run resumes from its checkpoint
            expected += _produce(bootstrap, "events", [f"user-{n % 3}" for n in range(60)])

    ranges = check_dense(read_topic(spark, bootstrap, "events"))
    assert {p: (first, last + 1) for p, (first, last, _) in ranges.items()} == \
        {0: (0, 120), 1: (0, 120), 2: (0, 120)}


def test_batch_read_of_a_compacted_topic_sees_every_surviving_record(spark, broker):
    """Spark's batch read with failOnDataLoss=false over the gaps compaction leaves: every
    record still in the log, once, with the latest value of every key."""
    from broker.testing import read_records

    bootstrap = broker[0].bootstrap
    with KafkaConnection(bootstrap) as conn:
        assert conn.create_topic("compacted", 1, {
            "cleanup.policy": "compact", "segment.bytes": "4096",
            "min.cleanable.dirty.ratio": "0.01"}) == 0
        latest = {}
        for n in range(60):
            records = [(f"k{(n * 20 + i) % 30}".encode(), f"v{n * 20 + i}".encode(), None, [])
                       for i in range(20)]
            assert conn.produce("compacted", 0, build_batch(records)).error_code == 0
            latest.update({key: value for key, value, _, _ in records})
        deadline = time.monotonic() + 30
        while True:  # until the cleaner has run: fewer records than were produced
            data = conn.fetch("compacted", 0, 0)
            survivors = len(read_records(data.records))
            if survivors < 1_200 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert survivors < 1_200, "the cleaner never ran"
    rows = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", "compacted").option("startingOffsets", "earliest")
            .option("endingOffsets", "latest").option("failOnDataLoss", "false")
            .load().select("key", "value", "offset").orderBy("offset").collect())
    offsets = [r["offset"] for r in rows]
    assert offsets == sorted(set(offsets))
    seen = {}
    for r in rows:
        seen[bytes(r["key"])] = bytes(r["value"])
    assert seen == latest


def test_batch_read_committed_counts_exactly_the_committed_transactions(spark, broker):
    """``kafka.isolation.level=read_committed``: Spark's batch read of a topic written by a
    transactional producer (committed and aborted transactions interleaved) sees exactly
    the committed records; read_uncommitted sees the aborted ones too.  The producer
    flushes before aborting: librdkafka drops records still queued at abort_transaction,
    and the aborted records are to reach the log."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from compat.spark.pipeline import read_topic

    bootstrap = broker[0].bootstrap
    with KafkaConnection(bootstrap) as conn:
        assert conn.create_topic("txn", PARTITIONS) == 0
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                         "transactional.id": "spark-txn"})
    producer.init_transactions(30)
    committed = aborted = 0
    for n in range(10):
        producer.begin_transaction()
        for i in range(12):
            producer.produce("txn", f"t{n}-{i}".encode(), partition=i % PARTITIONS)
        if n % 3 == 2:
            assert producer.flush(30) == 0, "records of the transaction still queued"
            producer.abort_transaction(30)
            aborted += 12
        else:
            producer.commit_transaction(30)
            committed += 12
    del producer  # librdkafka's threads end here, not after the shared broker stops

    def read(isolation: str) -> list[bytes]:
        records = read_topic(spark, bootstrap, "txn",
                             kafka_options={"isolation.level": isolation})
        return _values(records.select("value").collect())

    seen = read("read_committed")
    assert len(seen) == len(set(seen)) == committed
    assert not any(v.startswith((b"t2-", b"t5-", b"t8-")) for v in seen)
    everything = read("read_uncommitted")
    assert len(everything) == len(set(everything)) == committed + aborted


def sasl_ssl_options(ca: Path, password: str = SCRAM_PASSWORD) -> dict:
    """The Java client's settings for SASL_SSL with SCRAM-SHA-512 and a PEM truststore."""
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": ("org.apache.kafka.common.security.scram.ScramLoginModule "
                                 f'required username="{SCRAM_USER}" password="{password}";'),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca)}


def test_sink_stream_and_batch_read_over_sasl_ssl_with_scram(spark, broker, tmp_path):
    """Over the SASL_SSL listener only: Spark's batch sink writes records, a streaming
    query counts them into another topic, and a batch read sees both topics whole."""
    from compat.spark.pipeline import (
        latest_value_per_key,
        read_topic,
        start_counts_query,
        write_topic,
    )

    plain, port, ca = broker
    bootstrap, options = f"127.0.0.1:{port}", sasl_ssl_options(ca)
    with KafkaConnection(plain.bootstrap) as conn:
        assert conn.create_topic("secure-events", PARTITIONS) == 0
        assert conn.create_topic("secure-counts", 1) == 0
    rows = [(f"k{n % 5}", f"v{n}") for n in range(50)]
    write_topic(spark.createDataFrame(rows, "key string, value string"), bootstrap,
                "secure-events", kafka_options=options)
    written = read_topic(spark, bootstrap, "secure-events", kafka_options=options)
    assert sorted(_values(written.collect())) == sorted(v.encode() for _, v in rows)

    query = start_counts_query(spark, bootstrap, "secure-events", "secure-counts",
                               str(tmp_path / "checkpoint"), kafka_options=options)
    assert query.awaitTermination(QUERY_TIMEOUT_S), "query still running"
    assert query.exception() is None, query.exception()
    counts = latest_value_per_key(read_topic(spark, bootstrap, "secure-counts",
                                             kafka_options=options))
    assert counts == {f"k{k}": "10" for k in range(5)}


# -- three brokers -----------------------------------------------------------------------------

# The killed leader can stall a micro-batch for the Java admin client's
# default.api.timeout.ms (60 s): Spark's latest-offsets lookup that was routed to the dead
# broker before the cluster fenced it waits for that node until the call times out, and
# Spark then retries.  Lower timeouts keep the test short; the behaviour is the same.
FAILOVER_CLIENT = {"default.api.timeout.ms": "15000", "request.timeout.ms": "10000"}


class AckedProducer:
    """A confluent-kafka producer (acks=all, idempotent) writing ``r-<n>`` values; keeps the
    values the cluster acknowledged and those it refused."""

    def __init__(self, bootstrap: str, topic: str):
        from confluent_kafka import Producer

        self.topic = topic
        self.sent = 0
        self.acked: set[bytes] = set()
        self.failed: list[str] = []
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 5,
                                  "message.timeout.ms": 60_000})

    def _delivered(self, error, message) -> None:
        if error is None:
            self.acked.add(message.value())
        else:
            self.failed.append(str(error))

    def send(self, count: int, pause_s: float) -> None:
        for _ in range(count):
            self.producer.produce(self.topic, f"r-{self.sent}".encode(),
                                  key=f"k{self.sent % 10}".encode(), on_delivery=self._delivered)
            self.sent += 1
            self.producer.poll(pause_s)

    def flush(self, timeout_s: float) -> int:
        return self.producer.flush(timeout_s)


def _sink_values(bootstrap: str, topic: str, wanted: set[bytes], timeout_s: float,
                 query) -> set[bytes]:
    """Every value read from ``topic`` (all partitions, from the start) until ``wanted``
    is among them, ``timeout_s`` passes or the streaming ``query`` stops."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-sink-check",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    seen: set[bytes] = set()
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + timeout_s
        while not wanted <= seen and time.monotonic() < deadline and query.isActive:
            for message in consumer.consume(500, timeout=1.0):
                if message.error() is None:
                    seen.add(message.value())
    finally:
        consumer.close()
    return seen


def test_every_acknowledged_record_reaches_the_sink_when_the_leader_is_killed(
        spark, raftwood_cluster_factory, tmp_path):
    """A streaming copy (source -> sink, a micro-batch a second) on 3 brokers
    (replication factor 3, min.insync.replicas 2): SIGKILL the leader of the source's
    partition 0 while records flow; the query keeps running and every record acknowledged
    to the producer with acks=all reaches the sink (the sink is at least once: duplicates
    are allowed, losses and records never sent are not)."""
    from compat.spark.pipeline import check_dense, passthrough, read_topic, start_counts_query

    cluster = raftwood_cluster_factory()
    bootstrap = cluster.bootstrap
    for topic in ("clicks", "clicks-copy"):
        cluster.create_topic(topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    query = start_counts_query(spark, bootstrap, "clicks", "clicks-copy",
                               str(tmp_path / "checkpoint"), available_now=False,
                               transform=passthrough, kafka_options=FAILOVER_CLIENT)
    producer = AckedProducer(bootstrap, "clicks")
    try:
        producer.send(150, 0.01)
        assert producer.flush(60) == 0
        assert len(_sink_values(bootstrap, "clicks-copy", {b"r-0"}, WAIT_S, query)) > 0, \
            f"nothing reached the sink in {WAIT_S} s ({query.exception() or query.lastProgress})"
        victim = cluster.leader_of("clicks", 0)
        cluster.kill(victim)
        producer.send(150, 0.02)
        assert producer.flush(60) == 0, "records unacknowledged 60 s after the kill"
        cluster.wait_for_leader("clicks", 0, not_in=[victim])
        seen = _sink_values(bootstrap, "clicks-copy", producer.acked, WAIT_S, query)
        assert query.exception() is None, query.exception()
        assert query.isActive, "the query stopped"
    finally:
        query.stop()
    sent = {f"r-{n}".encode() for n in range(producer.sent)}
    assert len(producer.acked) >= 150, producer.failed[:5]
    missing = producer.acked - seen
    assert not missing, f"{len(missing)} acknowledged records never reached the sink: " \
                        f"{sorted(missing)[:10]}"
    assert seen <= sent, f"records never sent in the sink: {sorted(seen - sent)[:10]}"
    ranges = check_dense(read_topic(spark, bootstrap, "clicks"))
    assert sum(count for _, _, count in ranges.values()) >= len(producer.acked)

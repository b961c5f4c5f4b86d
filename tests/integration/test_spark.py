"""PySpark's Kafka source and sink against Raftwood (compat/spark/pipeline.py).

Spark's Kafka connector (``spark-sql-kafka-0-10_2.13``) is published on Maven Central only.
It is taken from the folder named by ``RAFTWOOD_SPARK_JARS`` or, when Maven Central answers
within a few seconds, from ``spark.jars.packages``; otherwise the Kafka test is skipped
with the reason.  pyspark itself (300+ MB) is not part of ``make test``: install it with
``pip install 'raftwood[spark]'``.  Without pyspark both tests skip at once.

Invariants checked (with the connector):
* a streaming query (subscribe, startingOffsets=earliest, counts by key, Kafka sink with
  the Java client's idempotent producer) writes the exact count of every key, and a second
  run from its checkpoint picks up only the new records;
* Spark's batch read sees every partition's offsets dense from 0, each record once.
Without the connector but with pyspark, the pipeline's transformation and its density
check run on a DataFrame shaped like the Kafka source's.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import threading
import urllib.error
import urllib.request
from collections import Counter

import pytest

from broker.testing import KafkaConnection, build_batch
from compat.spark.pipeline import (
    CONNECTOR_JAR_PREFIX, JARS_ENV, KAFKA_CONNECTOR, ConnectorMissing, connector_conf,
)

MAVEN_CENTRAL = "https://repo1.maven.org/maven2/"
PROBE_TIMEOUT_S = 3.0
QUERY_TIMEOUT_S = 180
PARTITIONS = 3


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


def _connector_reason_missing() -> str | None:
    """None when the connector can be had, else why not."""
    jars_dir = os.environ.get(JARS_ENV)
    if jars_dir:
        try:
            connector_conf(jars_dir)
            return None
        except ConnectorMissing as exc:
            return f"{JARS_ENV}: {exc}"
    import pyspark
    reachable, why = _maven_central_answers(pyspark.__version__)
    if reachable:
        return None
    return (f"Spark's Kafka connector {KAFKA_CONNECTOR}:{pyspark.__version__} is not on "
            f"PyPI; set {JARS_ENV} to a folder holding {CONNECTOR_JAR_PREFIX}*.jar and its "
            f"dependencies, or make Maven Central reachable ({why})")


@pytest.fixture(scope="module")
def spark_env():
    """(SparkSession, connector available?); skips when pyspark or Java is missing."""
    if importlib.util.find_spec("pyspark") is None:
        pytest.skip("pyspark is not installed (pip install 'raftwood[spark]', 300+ MB); "
                    f"Spark's Kafka connector also needs {JARS_ENV} or Maven Central")
    if shutil.which("java") is None:
        pytest.skip("no java on PATH (Spark 4 needs Java 17+)")
    missing = _connector_reason_missing()
    from pyspark.sql import SparkSession

    from compat.spark.pipeline import make_session

    if missing is None:
        spark = make_session("raftwood-test-spark")
    else:
        spark = (SparkSession.builder.appName("raftwood-test-spark-local").master("local[2]")
                 .config("spark.sql.shuffle.partitions", "3")
                 .config("spark.ui.enabled", "false").getOrCreate())
    try:
        yield spark, missing
    finally:
        spark.stop()


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


def test_streaming_counts_and_batch_read_through_the_kafka_connector(
        spark_env, raftwood_broker, tmp_path):
    spark, missing = spark_env
    if missing is not None:
        pytest.skip(missing)
    from compat.spark.pipeline import (
        check_dense, latest_value_per_key, read_topic, start_counts_query,
    )

    bootstrap = raftwood_broker.bootstrap
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


def test_batch_read_of_a_compacted_topic_sees_every_surviving_record(
        spark_env, raftwood_broker_factory):
    """Spark's batch read with failOnDataLoss=false over the gaps compaction leaves: every
    record still in the log, once, with the latest value of every key."""
    spark, missing = spark_env
    if missing is not None:
        pytest.skip(missing)
    import time

    from broker.testing import read_records

    broker = raftwood_broker_factory(**{"log.cleaner.backoff.ms": "100"})
    bootstrap = broker.bootstrap
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


def test_batch_read_committed_counts_exactly_the_committed_transactions(
        spark_env, raftwood_broker_factory):
    """``kafka.isolation.level=read_committed``: Spark's batch read of a topic written by a
    transactional producer (committed and aborted transactions interleaved) sees exactly
    the committed records; read_uncommitted sees the aborted ones too."""
    spark, missing = spark_env
    if missing is not None:
        pytest.skip(missing)
    confluent_kafka = pytest.importorskip("confluent_kafka")

    broker = raftwood_broker_factory()
    bootstrap = broker.bootstrap
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
            producer.abort_transaction(30)
            aborted += 12
        else:
            producer.commit_transaction(30)
            committed += 12

    def read(isolation: str) -> list[bytes]:
        rows = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", "txn").option("startingOffsets", "earliest")
                .option("endingOffsets", "latest")
                .option("kafka.isolation.level", isolation)
                .load().select("value").collect())
        return [bytes(r["value"]) for r in rows]

    seen = read("read_committed")
    assert len(seen) == len(set(seen)) == committed
    assert not any(v.startswith((b"t2-", b"t5-", b"t8-")) for v in seen)
    assert len(read("read_uncommitted")) == committed + aborted

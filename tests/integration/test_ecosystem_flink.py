"""Flink 2.0 SQL: Kafka source -> exactly-once Kafka sink on 3 brokers, across a leader kill.

Run by ``make compat-all`` only (it sets ``RAFTWOOD_COMPAT_ALL=1``; ``make test`` skips
the module): PyFlink and its jars come in a venv of their own (``compat/venvs.py`` builds
``~/.cache/raftwood/flink-venv``, about 900 MB, once), and a Flink mini-cluster is a JVM of
its own.  ``compat/flink/pipeline.py`` runs as a subprocess; half of the input is
produced, the output partition's leader is killed with SIGKILL once the sink has committed
a first checkpoint's transaction, then the rest is produced.

Invariant checked: read with read_committed, the output holds ``out-<n>`` for every input
``n`` exactly once and in input order (one partition, parallelism 1) — a checkpoint's
records replayed after a restart, or an aborted transaction read, would show as a
duplicate — and nothing else.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from compat.apps import AppProcess, wait_while_running

pytestmark = pytest.mark.skipif(
    os.environ.get("RAFTWOOD_COMPAT_ALL") != "1",
    reason="Flink runs in `make compat-all` only (RAFTWOOD_COMPAT_ALL=1)")

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = ROOT / "compat" / "flink" / "pipeline.py"
FLINK_REQUIREMENTS = ["apache-flink==2.0.0", "shigawire-apache-flink-libraries==2.0.0.post1"]
RECORDS = 4000
STARTUP_S = 420.0
FIRST_OUTPUT_S = 240.0
CONVERGE_S = 300.0


@pytest.fixture(scope="module")
def flink_python():
    from compat.venvs import VenvUnavailable, ensure_venv

    try:
        return ensure_venv("flink", FLINK_REQUIREMENTS)
    except VenvUnavailable as exc:
        pytest.skip(f"no PyFlink venv: {exc}")


@pytest.fixture(scope="module")
def shared_cluster(module_cluster_factory):
    """One 3-broker cluster for the module."""
    return module_cluster_factory(3)


def _committed_output(bootstrap: str, topic: str) -> list[str]:
    """Every value of ``topic``-0, read_committed, in offset order."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","),
                             isolation_level="read_committed", enable_auto_commit=False,
                             request_timeout_ms=15_000)
    tp = TopicPartition(topic, 0)
    values: list[str] = []
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        for _ in range(120):                  # 500 ms polls: at most a minute
            if consumer.position(tp) >= end:
                break
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(record.value.decode() for record in records)
        return values
    finally:
        consumer.close()


def _produce(bootstrap: str, topic: str, numbers: range) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap.split(","), acks="all",
                             enable_idempotence=True, retries=20, request_timeout_ms=15_000)
    try:
        for n in numbers:
            producer.send(topic, value=str(n).encode(), partition=0)
        producer.flush(60)
    finally:
        producer.close(10)


def test_flink_exactly_once_sink_across_leader_kill(flink_python, cluster, tmp_path):
    source = cluster.create_topic("flink-in", 1, 3, {"min.insync.replicas": 2})
    sink = cluster.create_topic("flink-out", 1, 3, {"min.insync.replicas": 2})
    app = AppProcess([str(flink_python), str(PIPELINE)], tmp_path / "flink.log", env={
        "RAFTWOOD_FLINK_BOOTSTRAP": cluster.bootstrap, "RAFTWOOD_FLINK_INPUT": source,
        "RAFTWOOD_FLINK_OUTPUT": sink, "RAFTWOOD_FLINK_GROUP": "flink-copy",
        "RAFTWOOD_FLINK_MAX_SECONDS": "1200"})
    try:
        _produce(cluster.bootstrap, source, range(RECORDS // 2))
        # PyFlink starts a JVM (a mini-cluster) through py4j: over a minute on a busy machine
        wait_while_running(lambda: "JOB SUBMITTED" in app.log_tail(5) or "starting",
                           STARTUP_S, "the job submitted", app)
        wait_while_running(lambda: bool(_committed_output(cluster.bootstrap, sink))
                           or "nothing committed yet", FIRST_OUTPUT_S,
                           "a first checkpoint's output", app)
        cluster.kill(cluster.leader_of(sink, 0))
        _produce(cluster.bootstrap, source, range(RECORDS // 2, RECORDS))
        wait_while_running(lambda: len(_committed_output(cluster.bootstrap, sink)) >= RECORDS
                           or len(_committed_output(cluster.bootstrap, sink)), CONVERGE_S,
                           f"{RECORDS} committed outputs", app)
    finally:
        code = app.stop()
    output = _committed_output(cluster.bootstrap, sink)
    assert output == [f"out-{n}" for n in range(RECORDS)], (
        f"{len(output)} outputs, {len(set(output))} distinct; app exit {code}\n"
        f"{app.log_tail()}")

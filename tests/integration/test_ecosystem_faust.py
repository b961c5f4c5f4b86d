"""Faust (faust-streaming, on aiokafka) counting per key in a table on a 3-broker cluster.

``compat/faust/counter.py`` runs as Faust's worker in a subprocess: an agent reads the
one-partition input topic and adds one per record to the table ``counts``, whose changes
Faust writes to the compacted changelog topic it creates (replication factor 3).  Half
of the input is produced, then the input partition's leader is killed with SIGKILL while
the app runs, then the rest is produced.  Skipped only when faust-streaming is missing
(the test extras install it).

Invariant checked: the table's count of every key, as its last changelog value, is
exactly the number of records produced with that key, and the app's group has committed
the input's end.  Faust's guarantee is at-least-once and its agents' output is not
transactional: a count that went past the truth (a record processed twice after the
kill) fails the test, as it would fail a user.
"""
from __future__ import annotations

import json
import sys
import time

import pytest
from kafka import KafkaProducer

from compat.apps import AppProcess, committed_offset, last_values

pytest.importorskip("faust", reason="faust-streaming is not installed (pip install -e '.[test]')")

KEYS = [f"k{i}" for i in range(10)]
PER_KEY = {key: 10 * (i + 1) for i, key in enumerate(KEYS)}     # 550 records in all
CONVERGE_S = 120.0
APP_ID = "faust-counter"


@pytest.fixture(scope="module")
def shared_cluster(module_cluster_factory):
    """One 3-broker cluster for the module."""
    return module_cluster_factory(3)


def _records() -> list[str]:
    """Every key PER_KEY times, interleaved (k0 k1 .. k9 k1 .. k9 k2 ..)."""
    left = dict(PER_KEY)
    order = []
    while any(left.values()):
        for key in KEYS:
            if left[key]:
                order.append(key)
                left[key] -= 1
    return order


def _table(bootstrap: str) -> dict[str, int]:
    raw = last_values(bootstrap, f"{APP_ID}-counts-changelog")
    return {json.loads(k): json.loads(v) for k, v in raw.items() if k is not None}


def _wait(predicate, timeout_s: float, what: str, app: AppProcess):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        assert app.running(), f"the Faust worker exited while {what}\n{app.log_tail()}"
        last = predicate()
        if last is True:
            return
        time.sleep(0.5)
    raise AssertionError(f"not {what} in {timeout_s} s (last: {last})\n{app.log_tail()}")


def test_faust_table_counts_exact_across_leader_kill(cluster, tmp_path):
    topic = cluster.create_topic("faust-words", 1, 3, {"min.insync.replicas": 2})
    app = AppProcess([sys.executable, "-m", "compat.faust.counter", "worker", "--without-web",
                      "-l", "info"], tmp_path / "faust.log",
                     env={"RAFTWOOD_FAUST_BOOTSTRAP": cluster.bootstrap,
                          "RAFTWOOD_FAUST_APP_ID": APP_ID, "RAFTWOOD_FAUST_INPUT": topic,
                          "RAFTWOOD_FAUST_MAX_SECONDS": "300"})
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap.split(","), acks="all",
                             enable_idempotence=True, retries=20, request_timeout_ms=15_000)
    try:
        records = _records()
        half = len(records) // 2
        for key in records[:half]:
            producer.send(topic, key=key.encode(), value=b"1", partition=0)
        producer.flush(60)
        _wait(lambda: sum(_table(cluster.bootstrap).values()) > 0 or "no count yet", 90,
              "counting", app)
        victim = cluster.leader_of(topic, 0)
        cluster.kill(victim)
        for key in records[half:]:
            producer.send(topic, key=key.encode(), value=b"1", partition=0)
        producer.flush(60)
        _wait(lambda: committed_offset(cluster.bootstrap, APP_ID, topic) == len(records)
              or f"committed {committed_offset(cluster.bootstrap, APP_ID, topic)}", CONVERGE_S,
              f"the group at the input's end ({len(records)})", app)
        _wait(lambda: _table(cluster.bootstrap) == PER_KEY or _table(cluster.bootstrap),
              CONVERGE_S, "the changelog at the exact counts", app)
    finally:
        producer.close(10)
        app.stop()
    assert _table(cluster.bootstrap) == PER_KEY

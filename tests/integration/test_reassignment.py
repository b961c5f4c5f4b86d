"""Partition reassignment (KIP-455) on a real cluster, under load, through `raftwood reassign`.

A 4-broker cluster, a partition on brokers 1,2,3 taking acks=all writes from an idempotent
confluent-kafka producer while it moves:

* grow onto broker 4 (`--brokers 2,3,4 --execute`): broker 4 joins, catches up, enters
  the ISR; broker 1, the leader, hands over and drops its log;
* cancel halfway: with `leader.replication.throttled.rate` low the new replica stays
  behind, `--status` shows it moving, `--cancel` puts the replicas back and removes the
  new copy;
* the controller killed (kill -9) right after the move started: the next controller
  completes it, as the state lives in the Raft metadata.

Each ends with every acknowledged record in the log once, at its acknowledged offset,
and the replicas identical byte for byte below the high watermark.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("confluent_kafka")

from broker.testing import build_batch, read_records  # noqa: E402
from tests.faults.checker import assert_replicas_identical_below, wait_fully_replicated  # noqa: E402
from tests.faults.test_faults_replication import PacedProducer  # noqa: E402

TOPIC = "moving"   # the default topic of the helpers (test_quorum_membership uses them)
COMMAND_TIMEOUT_S = 60
MOVE_TIMEOUT_S = 60.0
THROTTLED = {"leader.replication.throttled.rate": "500"}


@pytest.fixture(scope="module")
def clusters(module_cluster_factory):
    """Two 4-broker clusters shared by the module's tests, made when first asked for:
    ``clusters("plain")`` and ``clusters("throttled")`` (leader.replication.throttled.rate
    500 B/s).  Each test moves a topic of its own."""
    made = {}

    def get(kind: str):
        if kind not in made:
            made[kind] = module_cluster_factory(4, **(THROTTLED if kind == "throttled" else {}))
        return made[kind]

    return get


@pytest.fixture
def plain_cluster(clusters, heal_cluster):
    cluster = clusters("plain")
    yield cluster
    heal_cluster(cluster)


@pytest.fixture
def throttled_cluster(clusters, heal_cluster):
    cluster = clusters("throttled")
    yield cluster
    heal_cluster(cluster)


def raftwood(cluster, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "broker.cli", *args, "--bootstrap-server",
                           cluster.bootstrap.split(",")[0]], capture_output=True, text=True,
                          timeout=COMMAND_TIMEOUT_S)


class BatchFill:
    """``batches`` acks=all batches of ``per_batch`` records written to the leader one by
    one: many small batches, so a throttled copy takes many fetches (a producer's first
    batch can hold everything).  ``acked``/``errors`` as PacedProducer's."""

    def __init__(self, cluster, topic: str = TOPIC, batches: int = 40, per_batch: int = 50):
        self.acked: dict[int, bytes] = {}
        self.errors: list = []
        with cluster.connect(cluster.leader_of(topic, 0)) as conn:
            for n in range(batches):
                values = [b"fill-%03d-%03d" % (n, i) for i in range(per_batch)]
                answer = conn.produce(topic, 0, build_batch([(None, v, 0, []) for v in values]))
                if answer.error_code:
                    self.errors.append(answer.error_code)
                    continue
                for i, value in enumerate(values):
                    self.acked[answer.base_offset + i] = value


def replicas_become(cluster, expected: list[int], topic: str = TOPIC) -> dict:
    def done(statuses):
        state = cluster.find_partition(cluster.freshest(statuses), topic, 0)
        return state if sorted(state["replicas"]) == sorted(expected) \
            and not state["adding_replicas"] and sorted(state["isr"]) == sorted(expected) \
            else None
    return cluster.wait_for(done, MOVE_TIMEOUT_S, f"{topic}-0 on {expected}")


def assert_every_ack_present(cluster, producer: PacedProducer, replicas: list[int],
                             topic: str = TOPIC) -> None:
    assert not producer.errors, producer.errors[:3]
    high_watermark = wait_fully_replicated(cluster, topic, 0, timeout_s=MOVE_TIMEOUT_S)
    leader = cluster.leader_of(topic, 0)
    stored = {}
    with cluster.connect(leader) as conn:
        offset = 0
        while offset < high_watermark:
            records = read_records(conn.fetch(topic, 0, offset, max_bytes=1 << 20).records)
            assert records, f"no records at {offset} below HW {high_watermark}"
            for record_offset, _, value, _, _ in records:
                stored[record_offset] = value
            offset = max(stored) + 1
    assert len(stored) == high_watermark == len(producer.acked)
    assert all(stored[o] == v for o, v in producer.acked.items())
    assert_replicas_identical_below(cluster, topic, 0, high_watermark, replicas)


def test_a_partition_moves_onto_a_new_broker_under_load(plain_cluster):
    cluster, topic = plain_cluster, "moving-grow"
    cluster.create_topic(topic, assignments=[[1, 2, 3]], configs={"min.insync.replicas": "2"})
    producer = PacedProducer(cluster.bootstrap, topic, 6_000).start()
    cluster.wait_for(lambda s: len(producer.acked) > 500, 30, "the first acknowledgements")
    plan = raftwood(cluster, "reassign", "--topics", topic, "--brokers", "2,3,4")
    assert plan.returncode == 0 and "[1,2,3]" not in plan.stdout
    assert "1,2,3" in plan.stdout and "(a plan only" in plan.stdout, plan.stdout
    moved = raftwood(cluster, "reassign", "--topics", topic, "--brokers", "2,3,4", "--execute")
    assert moved.returncode == 0, moved.stdout + moved.stderr
    state = replicas_become(cluster, [2, 3, 4], topic)
    assert state["leader"] in (2, 3, 4)
    producer.join(120)
    assert_every_ack_present(cluster, producer, [2, 3, 4], topic)
    cluster.wait_for(lambda s: not cluster.partition_dir(1, topic, 0).exists(), 30,
                     "broker 1 to drop its copy")


def test_cancelling_a_throttled_move_puts_the_replicas_back(throttled_cluster):
    cluster, topic = throttled_cluster, "moving-cancel"
    cluster.create_topic(topic, assignments=[[1, 2, 3]])
    producer = BatchFill(cluster, topic)
    started = raftwood(cluster, "reassign", "--topics", topic, "--brokers", "2,3,4",
                       "--execute")
    assert started.returncode == 0, started.stdout + started.stderr
    status = raftwood(cluster, "reassign", "--topics", topic, "--status")
    assert status.returncode == 0 and "REMOVING" in status.stdout
    assert topic in status.stdout and "0/1" in status.stdout, status.stdout
    cancelled = raftwood(cluster, "reassign", "--topics", topic, "--cancel")
    assert cancelled.returncode == 0 and "cancelled 1 of 1" in cancelled.stdout, \
        cancelled.stdout + cancelled.stderr
    replicas_become(cluster, [1, 2, 3], topic)
    after = raftwood(cluster, "reassign", "--topics", topic, "--status")
    assert "no partition of these topics is moving" in after.stdout
    cluster.wait_for(lambda s: not cluster.partition_dir(4, topic, 0).exists(), 30,
                     "broker 4 to drop its partial copy")
    assert_every_ack_present(cluster, producer, [1, 2, 3], topic)


def test_the_next_controller_completes_a_move_when_the_controller_dies(plain_cluster):
    cluster, topic = plain_cluster, "moving-controller"
    cluster.create_topic(topic, assignments=[[1, 2, 3]], configs={"min.insync.replicas": "2"})
    producer = PacedProducer(cluster.bootstrap, topic, 4_000).start()
    cluster.wait_for(lambda s: len(producer.acked) > 500, 30, "the first acknowledgements")
    controller = cluster.controller_id()
    target = [b for b in (1, 2, 3, 4) if b != controller][:3]
    moved = raftwood(cluster, "reassign", "--topics", topic, "--brokers",
                     ",".join(map(str, target)), "--execute")
    assert moved.returncode == 0, moved.stdout + moved.stderr
    cluster.kill(controller)
    replicas_become(cluster, target, topic)
    producer.join(120)
    assert_every_ack_present(cluster, producer, target, topic)


def test_kafka_pythons_admin_client_moves_lists_and_cancels(throttled_cluster):
    """kafka-python's KafkaAdminClient.alter_partition_reassignments and
    list_partition_reassignments (it finds the controller itself): a throttled move shows
    as in progress with its adding and removing replicas, a refused target answers its
    error per partition, and a cancel (None) puts the replicas back."""
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.errors import InvalidReplicationAssignmentError

    cluster, topic = throttled_cluster, "moving-admin"
    cluster.create_topic(topic, assignments=[[1, 2, 3]])
    BatchFill(cluster, topic)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    tp = TopicPartition(topic, 0)
    try:
        assert admin.alter_partition_reassignments({tp: [4, 2, 3]}) == {tp: None}
        listed = admin.list_partition_reassignments([tp])
        assert list(listed) == [tp], listed
        ongoing = listed[tp]
        assert (sorted(ongoing["replicas"]), ongoing["adding_replicas"],
                ongoing["removing_replicas"]) == ([1, 2, 3, 4], [4], [1]), ongoing
        refused = admin.alter_partition_reassignments({TopicPartition(topic, 0): [9, 2, 3]})
        assert refused[tp] is InvalidReplicationAssignmentError  # error 39
        assert admin.alter_partition_reassignments({tp: None}) == {tp: None}
        assert admin.list_partition_reassignments([tp]) == {}
    finally:
        admin.close()
    replicas_become(cluster, [1, 2, 3], topic)

"""A broker whose disk fills up (Kafka's KIP-112 behaviour), with real broker processes.

``log.dirs`` is on a tmpfs the test mounts itself (``mount -t tmpfs -o size=...``), so
appends really end in ENOSPC.  The failing produce is answered KAFKA_STORAGE_ERROR for
its partition, the directory goes offline, the broker fences itself and exits with
code 1; after the filesystem is grown (``mount -o remount,size=...`` keeps the files)
the restarted broker has every acknowledged record.  Needs root (skipped otherwise);
every mount is removed and every broker stopped by pid, also when a test fails.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from kafka.protocol.producer import ProduceRequest

from broker.testing import BrokerProcess, KafkaConnection, build_batch

KAFKA_STORAGE_ERROR = 56
EXIT_WAIT_S = 30.0


class SmallFilesystem:
    """A tmpfs mounted at ``path`` by this process; ``grow`` keeps its files."""

    def __init__(self, path: Path):
        self.path = path

    def free_bytes(self) -> int:
        stat = os.statvfs(self.path)
        return stat.f_bavail * stat.f_frsize

    def grow(self, size: str) -> None:
        _run(["mount", "-o", f"remount,size={size}", str(self.path)])


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


@contextmanager
def small_filesystem(path: Path, size: str):
    """Mount a ``size`` tmpfs at ``path``; unmount and delete it on the way out (callers
    stop the processes using it first)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a size-limited tmpfs for log.dirs needs root")
    path.mkdir(parents=True, exist_ok=True)
    mounted = _run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)])
    if mounted.returncode != 0:
        shutil.rmtree(path, ignore_errors=True)
        pytest.skip(f"cannot mount a tmpfs at {path}: {mounted.stderr.strip()}")
    try:
        yield SmallFilesystem(path)
    finally:
        if _run(["umount", str(path)]).returncode != 0:
            _run(["umount", "-l", str(path)])  # still busy: detach now, freed when unused
        shutil.rmtree(path, ignore_errors=True)


def _stop(broker: BrokerProcess) -> None:
    """Stop a broker that may still run (SIGTERM, then SIGKILL), by its pid."""
    if broker.is_running():
        try:
            broker.stop()
        except Exception:
            broker.kill()


def _assert_stopped_itself(broker: BrokerProcess, directory: Path) -> None:
    """The broker exits on its own with a non-zero code, after an ERROR line naming the
    failed directory and the error."""
    code = broker.wait(EXIT_WAIT_S)
    assert code is not None, f"broker {broker.node_id} still runs with its log directory " \
                             f"offline\n{broker.log_tail()}"
    assert code != 0, f"exit code {code}\n{broker.log_tail()}"
    errors = [line for line in broker.log_path.read_text(errors="replace").splitlines()
              if " ERROR " in line and str(directory) in line and "No space left" in line]
    assert errors, f"no ERROR line naming {directory} and ENOSPC\n{broker.log_tail()}"


def _raw_batch(value: bytes) -> bytes:
    return build_batch([(None, value, int(time.time() * 1000), [])])


def _produce_until_failure(bootstrap: str, topic: str, limit: int = 4000):
    """confluent-kafka, acks=all, no retries: 8 KiB incompressible values until a delivery
    fails.  Returns ({offset: value} acknowledged, [(error code, value)] failed)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0,
                         "enable.idempotence": False, "linger.ms": 5,
                         "message.timeout.ms": 5000, "socket.timeout.ms": 5000})
    acked: dict[int, bytes] = {}
    failed: list[tuple[int, bytes]] = []

    def report(err, msg):
        if err is None:
            acked[msg.offset()] = msg.value()
        else:
            failed.append((err.code(), msg.value()))

    for _ in range(limit):
        if failed:
            break
        producer.produce(topic, os.urandom(8192), partition=0, on_delivery=report)
        producer.poll(0)
    producer.flush(30)
    return acked, failed


@pytest.mark.slow
def test_a_full_disk_answers_storage_error_and_keeps_every_acknowledged_record(
        tmp_path, new_topic):
    with small_filesystem(tmp_path / "disk", "8m") as disk:
        broker = BrokerProcess(disk.path / "data", log_path=tmp_path / "broker.log")
        try:
            broker.start()
            topic = new_topic(broker)
            acked, failed = _produce_until_failure(broker.bootstrap, topic)
            assert acked, "nothing was acknowledged before the disk filled"
            codes = {code for code, _ in failed}
            assert KafkaError.KAFKA_STORAGE_ERROR in codes, \
                f"delivery errors {codes}\n{broker.log_tail()}"
            _assert_stopped_itself(broker, broker.data_dir)

            disk.grow("64m")
            broker.start()
            with KafkaConnection(broker.bootstrap) as conn:
                stored = {r[0]: r[2] for r in conn.read_partition(topic, 0)}
        finally:
            _stop(broker)
    for offset, value in sorted(acked.items()):
        assert stored.get(offset) == value, f"acknowledged offset {offset} lost or changed"
    refused = {value for code, value in failed if code == KafkaError.KAFKA_STORAGE_ERROR}
    assert not refused & set(stored.values()), "a batch answered KAFKA_STORAGE_ERROR was stored"


@pytest.mark.slow
def test_one_failing_partition_does_not_cost_the_others_their_answer(tmp_path, new_topic):
    """One Produce for two partitions: partition 1's small batch fits, partition 0's
    large one does not.  Both are answered (1 acknowledged, 0 KAFKA_STORAGE_ERROR) on a
    connection the broker did not close; after a restart on a larger filesystem
    partition 1 has its record and partition 0 exactly its acknowledged batches."""
    with small_filesystem(tmp_path / "disk", "8m") as disk:
        broker = BrokerProcess(disk.path / "data", log_path=tmp_path / "broker.log")
        try:
            broker.start()
            topic = new_topic(broker, partitions=2)
            with KafkaConnection(broker.bootstrap) as conn:
                filled = []
                while disk.free_bytes() > 700 * 1024:
                    value = os.urandom(128 * 1024)
                    answer = conn.produce(topic, 0, _raw_batch(value), acks=1)
                    assert answer.error_code == 0, f"filling: error {answer.error_code}"
                    filled.append(value)
                response = conn.request(_two_partition_produce(
                    topic, [(1, _raw_batch(b"small")), (0, _raw_batch(os.urandom(900 * 1024)))]))
            answers = {p.index: p for t in response.responses for p in t.partition_responses}
            assert sorted(answers) == [0, 1], "every partition of the request is answered"
            assert (answers[1].error_code, answers[1].base_offset) == (0, 0)
            assert answers[0].error_code == KAFKA_STORAGE_ERROR
            _assert_stopped_itself(broker, broker.data_dir)

            disk.grow("64m")
            broker.start()
            with KafkaConnection(broker.bootstrap) as conn:
                assert [r[2] for r in conn.read_partition(topic, 1)] == [b"small"]
                assert [r[2] for r in conn.read_partition(topic, 0)] == filled
        finally:
            _stop(broker)


def _two_partition_produce(topic: str, batches: list[tuple[int, bytes]]):
    data = ProduceRequest.TopicProduceData
    return ProduceRequest[9](
        transactional_id=None, acks=1, timeout_ms=10_000,
        topic_data=[data(name=topic, partition_data=[
            data.PartitionProduceData(index=index, records=records)
            for index, records in batches])])


# -- three brokers ------------------------------------------------------------------------

def test_a_broker_whose_disk_fills_hands_over_and_acks_all_producers_go_on(
        tmp_path, raftwood_cluster_factory, topic_name):
    """Broker 3's log.dirs is a 6 MiB tmpfs; it leads one of three partitions (replication
    factor 3, min.insync.replicas 2).  An idempotent acks=all producer writes until broker
    3 has stopped itself and then some more: no delivery fails, brokers 1 and 2 lead
    everything with broker 3 out of every ISR, and every acknowledged record is there.

    Broker 3's metadata log is kept on the ordinary disk with ``metadata.log.dir``
    (Kafka's setting): pysyncobj's journal is a memory-mapped file, and a full tmpfs
    answers a write into a new page of a mapping with SIGBUS (the process dies) rather
    than ENOSPC."""
    metadata = tmp_path / "broker-3-metadata"
    cluster = raftwood_cluster_factory(
        start=False, broker_settings={3: {"metadata.log.dir": str(metadata)}})
    failing = cluster.broker(3)
    with small_filesystem(failing.data_dir, "6m"):
        try:
            cluster.start_all()
            topic = cluster.create_topic(topic_name(), configs={"min.insync.replicas": 2},
                                         assignments=[[3, 1, 2], [1, 2, 3], [2, 3, 1]])
            assert cluster.leader_of(topic, 0) == 3
            acked, failed = _produce_through_the_failure(cluster.bootstrap, topic, failing)
            _assert_stopped_itself(failing, failing.data_dir)
        finally:
            _stop(failing)
    assert not failed, f"acks=all deliveries failed: {failed[:5]}"
    for partition in range(3):
        state = cluster.partition_state(topic, partition)
        assert state["leader"] in (1, 2) and 3 not in state["isr"], state
        with cluster.connect(state["leader"]) as conn:
            stored = {r[0]: r[2] for r in conn.read_partition(topic, partition)}
        for offset, value in acked[partition].items():
            assert stored.get(offset) == value, \
                f"{topic}-{partition}: acknowledged offset {offset} lost or changed"


def _produce_through_the_failure(bootstrap: str, topic: str, failing: BrokerProcess,
                                 after: int = 300, limit: int = 6000):
    """Idempotent acks=all producer, 8 KiB values round-robin over 3 partitions, until
    ``failing`` has exited and ``after`` more were sent.  Returns ({partition: {offset:
    value}} acknowledged, [(partition, error)] failed)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5,
                         "message.timeout.ms": 60000, "retry.backoff.ms": 100})
    acked: dict[int, dict[int, bytes]] = {p: {} for p in range(3)}
    failed: list[tuple[int, str]] = []

    def report(err, msg):
        if err is None:
            acked[msg.partition()][msg.offset()] = msg.value()
        else:
            failed.append((msg.partition(), err.str()))

    remaining = after
    for serial in range(limit):
        if not failing.is_running():
            remaining -= 1
            if remaining <= 0:
                break
        producer.produce(topic, os.urandom(8192), partition=serial % 3, on_delivery=report)
        producer.poll(0)
        if serial % 50 == 0:
            producer.poll(0.01)  # let the brokers keep up; the filling is what matters
    assert producer.flush(90) == 0, "messages still undelivered after 90 s"
    assert not failing.is_running(), f"broker 3 did not stop itself\n{failing.log_tail()}"
    return acked, failed

"""The idempotent producer's broker side, seen through raw Produce requests.

Batches are built with kafka-python's DefaultRecordBatchBuilder carrying a producer id,
epoch and base sequence, and sent with broker.testing.KafkaConnection, so each test sees
the exact error code and offsets the broker answers (real clients hide them behind their
retries).  Kafka's rules, checked here on a real broker process:

* a retried batch (same producer, epoch and sequences as one of the last five) is answered
  with its original offsets and not appended again, before and after a restart (clean or
  kill -9): the producer state is rebuilt from the log;
* a sequence gap is refused with OUT_OF_ORDER_SEQUENCE_NUMBER (45), and so is a retry
  older than the last five batches; nothing is appended;
* an epoch older than the producer's current one is refused with INVALID_PRODUCER_EPOCH
  (47); a new epoch must start at sequence 0;
* InitProducerId never hands out the same producer id twice: not across restarts of a
  broker, not across the brokers of a cluster.
"""
from __future__ import annotations

import time

import pytest
from kafka.protocol.producer import InitProducerIdRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from broker.testing import KafkaConnection

NONE = 0
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
LATEST = -1
MAX_SEQUENCE = 2 ** 31 - 1
WAIT_S = 15.0


@pytest.fixture(scope="module")
def shared_cluster(module_cluster_factory):
    """One 3-broker cluster (fast failure detection) for the module's two cluster tests."""
    return module_cluster_factory(3)


@pytest.fixture
def cluster(shared_cluster, heal_cluster):
    """The module's cluster, every broker back and the preferred leaders leading after a
    test that killed one."""
    yield shared_cluster
    heal_cluster(shared_cluster)


def init_producer_id(conn: KafkaConnection, producer_id: int = -1, epoch: int = -1,
                     *, version: int = 4) -> tuple[int, int]:
    """InitProducerId (no transactional id); (producer_id, producer_epoch)."""
    response = conn.request(InitProducerIdRequest[version](
        transactional_id=None, transaction_timeout_ms=60_000, producer_id=producer_id,
        producer_epoch=epoch))
    assert response.error_code == NONE, f"InitProducerId: error {response.error_code}"
    return response.producer_id, response.producer_epoch


def idempotent_batch(producer_id: int, epoch: int, base_sequence: int, values: list[bytes],
                     *, compression: int = 0) -> bytes:
    """A RecordBatch v2 as an idempotent producer sends it (baseOffset 0)."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression,
                                        is_transactional=False, producer_id=producer_id,
                                        producer_epoch=epoch, base_sequence=base_sequence,
                                        batch_size=1 << 30)
    now_ms = int(time.time() * 1000)
    for offset_delta, value in enumerate(values):
        builder.append(offset_delta, timestamp=now_ms, key=None, value=value, headers=[])
    return bytes(builder.build())


class Producer:
    """A hand-driven idempotent producer on one partition: it keeps its next sequence and
    every batch it sent, so a test can retry any of them byte for byte."""

    def __init__(self, conn: KafkaConnection, topic: str, partition: int = 0):
        self.conn, self.topic, self.partition = conn, topic, partition
        self.producer_id, self.epoch = init_producer_id(conn)
        self.next_sequence = 0
        self.sent: list[bytes] = []

    def batch(self, count: int, tag: str) -> bytes:
        values = [f"{tag}-{i}".encode() for i in range(count)]
        batch = idempotent_batch(self.producer_id, self.epoch, self.next_sequence, values,
                                 compression=len(self.sent) % 5)
        self.next_sequence = (self.next_sequence + count) % (MAX_SEQUENCE + 1)
        self.sent.append(batch)
        return batch

    def send(self, batch: bytes, *, acks: int = -1):
        return self.conn.produce(self.topic, self.partition, batch, acks=acks)

    def send_new(self, count: int, tag: str, *, acks: int = -1) -> int:
        """Send a new batch; assert it is accepted; its base offset."""
        answer = self.send(self.batch(count, tag), acks=acks)
        assert answer.error_code == NONE, f"{tag}: error {answer.error_code}"
        return answer.base_offset


def log_end_offset(conn: KafkaConnection, topic: str) -> int:
    answer = conn.list_offsets(topic, 0, LATEST)
    assert answer.error_code == NONE
    return answer.offset


def values_in(conn: KafkaConnection, topic: str) -> list[bytes]:
    return [record[2] for record in conn.read_partition(topic, 0)]


@pytest.fixture
def broker_conn(module_broker):
    """A connection to the module's broker (shared: each test has a topic of its own)."""
    with KafkaConnection(module_broker.bootstrap) as conn:
        yield conn


@pytest.fixture
def idem(broker_conn, topic_name) -> str:
    """A new one-partition topic on the module's broker: offsets start at 0."""
    name = topic_name("idem")
    assert broker_conn.create_topic(name, 1) == NONE
    return name


def test_retried_batch_gets_its_original_offsets_and_is_not_appended_twice(broker_conn, idem):
    producer = Producer(broker_conn, idem)
    offsets = [producer.send_new(3, "a"), producer.send_new(2, "b", acks=1),
               producer.send_new(4, "c")]
    assert offsets == [0, 3, 5]
    for index, acks in ((0, -1), (1, 1), (2, -1), (1, -1)):
        answer = producer.send(producer.sent[index], acks=acks)
        assert (answer.error_code, answer.base_offset) == (NONE, offsets[index])
    assert log_end_offset(broker_conn, idem) == 9
    assert values_in(broker_conn, idem) == (
        [b"a-0", b"a-1", b"a-2", b"b-0", b"b-1"] + [f"c-{i}".encode() for i in range(4)])
    assert producer.send_new(1, "d") == 9  # the sequence goes on after the retries


def test_only_the_last_five_batches_are_recognised_as_retries(broker_conn, idem):
    producer = Producer(broker_conn, idem)
    offsets = [producer.send_new(2, f"batch{n}") for n in range(7)]
    for index in range(2, 7):  # the last five
        answer = producer.send(producer.sent[index])
        assert (answer.error_code, answer.base_offset) == (NONE, offsets[index])
    for index in (0, 1):       # older: out of sequence, refused, not appended
        answer = producer.send(producer.sent[index])
        assert answer.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log_end_offset(broker_conn, idem) == 14


def test_sequence_gap_is_refused_with_out_of_order_sequence(broker_conn, idem):
    producer = Producer(broker_conn, idem)
    producer.send_new(3, "a")                       # sequences 0..2
    producer.next_sequence = 5                      # 3 and 4 never sent
    answer = producer.send(producer.batch(1, "gap"))
    assert answer.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert answer.base_offset == -1
    producer.next_sequence = 3
    assert producer.send_new(2, "b") == 3           # the right sequence is still accepted
    assert log_end_offset(broker_conn, idem) == 5


def test_stale_epoch_is_fenced_and_a_new_epoch_starts_at_zero(broker_conn, idem):
    producer = Producer(broker_conn, idem)
    producer.send_new(2, "old")
    old_epoch = producer.epoch
    old_batch = producer.batch(1, "zombie")        # next sequence in the old epoch
    # KIP-360: re-initialising with the current id and epoch bumps the epoch
    producer_id, new_epoch = init_producer_id(broker_conn, producer.producer_id, old_epoch)
    assert (producer_id, new_epoch) == (producer.producer_id, old_epoch + 1)
    producer.epoch = new_epoch
    producer.next_sequence = 7
    assert producer.send(producer.batch(1, "late")).error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
    producer.next_sequence = 0
    assert producer.send_new(2, "new") == 2
    answer = producer.send(old_batch)              # the old epoch is fenced now
    assert answer.error_code == INVALID_PRODUCER_EPOCH
    assert values_in(broker_conn, idem) == [b"old-0", b"old-1", b"new-0", b"new-1"]


def test_sequence_wraps_after_max_int(broker_conn, idem):
    producer = Producer(broker_conn, idem)
    producer.next_sequence = MAX_SEQUENCE - 1       # an unknown producer may start anywhere
    assert producer.send_new(3, "wrap") == 0        # sequences 2^31-2, 2^31-1, 0
    assert producer.next_sequence == 1
    assert producer.send_new(2, "after") == 3
    answer = producer.send(producer.sent[0])        # the wrapping batch, retried
    assert (answer.error_code, answer.base_offset) == (NONE, 0)
    assert log_end_offset(broker_conn, idem) == 5


@pytest.mark.parametrize("how", ["kill -9", "SIGTERM"])
def test_producer_state_survives_a_restart(raftwood_broker_factory, how):
    """After a crash (or a clean stop) the state is rebuilt from the log: retries of the
    last batches still get their original offsets, and a gap is still refused."""
    broker = raftwood_broker_factory()
    with KafkaConnection(broker.bootstrap) as conn:
        assert conn.create_topic("idem", 1) == NONE
        producer = Producer(conn, "idem")
        offsets = [producer.send_new(3, f"b{n}") for n in range(4)]
    if how == "kill -9":
        broker.kill()
    else:
        assert broker.stop() == 0
    broker.start()
    with KafkaConnection(broker.bootstrap) as conn:
        producer.conn = conn
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:  # the partition is led again
            answer = producer.send(producer.sent[-1])
            if answer.error_code == NONE:
                break
            time.sleep(0.1)
        assert (answer.error_code, answer.base_offset) == (NONE, offsets[-1])
        answer = producer.send(producer.sent[1])
        assert (answer.error_code, answer.base_offset) == (NONE, offsets[1])
        assert log_end_offset(conn, "idem") == 12
        producer.next_sequence += 1
        assert producer.send(producer.batch(1, "gap")).error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
        producer.next_sequence = 12
        assert producer.send_new(1, "next") == 12


def test_a_new_leader_recognises_retries_of_batches_it_replicated(cluster):
    """Followers build the producer state from the batches they fetch: after the leader is
    killed, a retry of a batch it had replicated gets the original offsets on the new
    leader, and the sequence goes on from there."""
    topic = cluster.create_topic("idem", 1, 3)
    old_leader = cluster.leader_of(topic, 0)
    with cluster.connect(old_leader) as conn:
        producer = Producer(conn, topic)
        offsets = [producer.send_new(2, f"b{n}") for n in range(3)]  # acks=all: replicated
    cluster.kill(old_leader)
    new_leader = cluster.wait_for_leader(topic, 0, not_in=(old_leader,))
    with cluster.connect(new_leader) as conn:
        producer.conn = conn
        for index in (2, 1):
            answer = producer.send(producer.sent[index])
            assert (answer.error_code, answer.base_offset) == (NONE, offsets[index])
        assert log_end_offset(conn, topic) == 6
        producer.next_sequence += 1
        assert producer.send(producer.batch(1, "gap")).error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
        producer.next_sequence = 6
        assert producer.send_new(1, "next") == 6
        assert values_in(conn, topic) == [b"b0-0", b"b0-1", b"b1-0", b"b1-1", b"b2-0", b"b2-1",
                                          b"next-0"]


def test_producer_ids_are_never_reused_across_restarts(raftwood_broker_factory):
    broker = raftwood_broker_factory()
    seen: list[int] = []
    for restart in ("first start", "SIGTERM", "kill -9"):
        if restart == "SIGTERM":
            assert broker.stop() == 0
            broker.start()
        elif restart == "kill -9":
            broker.kill()
            broker.start()
        with KafkaConnection(broker.bootstrap) as conn:
            for _ in range(5):
                producer_id, epoch = init_producer_id(conn)
                assert epoch == 0
                seen.append(producer_id)
    assert len(set(seen)) == len(seen), f"producer ids reused: {seen}"
    assert all(p >= 0 for p in seen)


def test_producer_ids_are_unique_across_the_brokers_of_a_cluster(cluster):
    seen: dict[int, int] = {}

    def collect(node_id: int, count: int = 4) -> None:
        with KafkaConnection(cluster.broker(node_id).bootstrap) as conn:
            for _ in range(count):
                producer_id, epoch = init_producer_id(conn)
                assert epoch == 0
                assert producer_id not in seen, \
                    f"broker {node_id} handed out {producer_id}, already from {seen[producer_id]}"
                seen[producer_id] = node_id

    for node_id in cluster.node_ids:
        collect(node_id)
    cluster.kill(2)
    collect(1)
    collect(3)
    cluster.start(2)
    collect(2)
    assert len(seen) == 4 * 6

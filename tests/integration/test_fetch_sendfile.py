"""Zero-copy Fetch: records go from the segment files to the socket with os.sendfile
(``socket.sendfile.enable``, default true), and every reader still gets exactly the bytes
of the log.

Real broker processes and real clients (confluent-kafka, kafka-python, raw Kafka
requests on a plain socket).  The logs span several segments and each fetch carries far
more than the 16 KiB below which a read is copied instead.  Covered: both clients read
every record back; a reader that takes the response slowly (a tiny receive buffer, no
read at first) makes sendfile stop mid-response and the rest go through the transport,
and the bytes equal those the same broker sends with the setting off; a TLS listener
serves the same log (sendfile cannot serve TLS); three replicas, whose followers fetch
through the same path, end byte-identical; a segment deleted (DeleteRecords) while a
response waits in the connection's queue is never sent from a stale file.
"""
from __future__ import annotations

import hashlib
import socket
import struct
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.protocol.consumer import FetchRequest, FetchResponse

from broker.testing import BrokerProcess, free_port, read_records
from tests.conftest import create_topic
from tests.security_certs import make_pki, with_listeners

WAIT_S = 60.0
SEGMENT_BYTES = 256 * 1024
PARTITIONS = 3


def value_of(partition: int, n: int) -> bytes:
    """A record value of 1 to 20 KiB that names its partition and sequence number."""
    size = 1024 + (n * 7919) % (19 * 1024)
    seed = hashlib.sha256(b"%d-%d" % (partition, n)).digest()
    return (seed * (size // len(seed) + 1))[:size]


def produce_log(bootstrap: str, topic: str, per_partition: int,
                extra: dict | None = None) -> dict[tuple[int, int], bytes]:
    """Produce ``per_partition`` records to each partition; {(partition, offset): value}."""
    produced: dict[tuple[int, int], bytes] = {}
    errors = []

    def delivered(err, msg):
        if err is not None:
            errors.append(err)
        else:
            produced[(msg.partition(), msg.offset())] = msg.value()

    # batches of at most 64 KiB: several per segment, and many segments
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                         "batch.size": 64 * 1024, **(extra or {})})
    for n in range(per_partition):
        for partition in range(PARTITIONS):
            producer.produce(topic, value=value_of(partition, n), partition=partition,
                             key=b"%d" % n, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(WAIT_S) == 0, "records left unsent"
    assert errors == []
    assert len(produced) == per_partition * PARTITIONS
    return produced


def consume_confluent(settings: dict, topic: str, count: int) -> dict[tuple[int, int], bytes]:
    consumer = Consumer({**settings, "group.id": f"g-{topic}", "enable.auto.commit": False,
                         "fetch.max.bytes": 8 << 20, "max.partition.fetch.bytes": 2 << 20,
                         "fetch.queue.backoff.ms": 10})
    got: dict[tuple[int, int], bytes] = {}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + WAIT_S
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got[(msg.partition(), msg.offset())] = msg.value()
    finally:
        consumer.close()
    return got


def consume_kafka_python(bootstrap: str, topic: str, count: int,
                         **settings) -> dict[tuple[int, int], bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             group_id=None, max_partition_fetch_bytes=2 << 20,
                             fetch_max_bytes=8 << 20, **settings)
    got: dict[tuple[int, int], bytes] = {}
    try:
        partitions = [KafkaTopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        deadline = time.monotonic() + WAIT_S
        while len(got) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                for record in records:
                    got[(record.partition, record.offset)] = record.value
    finally:
        consumer.close()
    return got


def segment_count(broker: BrokerProcess, topic: str, partition: int) -> int:
    return len(list((broker.data_dir / f"{topic}-{partition}").glob("*.log")))


# -- raw Fetch on a plain socket ---------------------------------------------------------

def fetch_request(topic: str, offsets: dict[int, int], correlation_id: int, *,
                  max_bytes: int = 64 << 20, partition_max_bytes: int = 16 << 20,
                  max_wait_ms: int = 0, min_bytes: int = 0) -> bytes:
    """A framed Fetch v11 (no session) for ``{partition: fetch offset}`` of one topic."""
    fetch_topic = FetchRequest.FetchTopic
    request = FetchRequest[11](
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
        isolation_level=0, session_id=0, session_epoch=-1,
        topics=[fetch_topic(topic=topic, partitions=[fetch_topic.FetchPartition(
            partition=p, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
            partition_max_bytes=partition_max_bytes) for p, offset in offsets.items()])],
        forgotten_topics_data=[], rack_id="")
    request.with_header(correlation_id=correlation_id, client_id="sendfile-test")
    return bytes(request.encode(header=True, framed=True))


def recv_exactly(sock: socket.socket, size: int, chunk: int = 1 << 16) -> bytes:
    """``size`` bytes, or fewer if the broker closed the connection first."""
    data = bytearray()
    while len(data) < size:
        more = sock.recv(min(chunk, size - len(data)))
        if not more:
            break
        data += more
    return bytes(data)


def read_response(sock: socket.socket, chunk: int = 1 << 16) -> bytes | None:
    """One response frame with its size prefix; None on EOF before a whole one."""
    prefix = recv_exactly(sock, 4)
    if len(prefix) < 4:
        return None
    body = recv_exactly(sock, struct.unpack(">i", prefix)[0], chunk)
    return prefix + body if len(body) == struct.unpack(">i", prefix)[0] else None


def open_socket(broker: BrokerProcess, rcvbuf: int | None = None) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:  # before connect, so the window is small from the start
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(WAIT_S)
    sock.connect((broker.host, broker.port))
    return sock


def decoded_records(frame: bytes) -> dict[int, list[tuple[int, bytes]]]:
    """{partition: [(offset, value)]} of a raw Fetch v11 response frame."""
    response = FetchResponse[11].decode(frame[8:])  # size prefix and correlation id
    out = {}
    for topic in response.responses:
        for p in topic.partitions:
            assert p.error_code == 0, p
            out[p.partition_index] = [(r[0], r[2]) for r in read_records(p.records)]
    return out


# -- tests ---------------------------------------------------------------------------------

def test_both_clients_read_every_record_of_a_multi_segment_log(raftwood_broker_factory):
    broker = raftwood_broker_factory(**{"log.segment.bytes": SEGMENT_BYTES})
    topic = create_topic(broker.bootstrap, "sendfile-clients", PARTITIONS)
    produced = produce_log(broker.bootstrap, topic, per_partition=300)
    assert all(segment_count(broker, topic, p) >= 4 for p in range(PARTITIONS))
    confluent = consume_confluent({"bootstrap.servers": broker.bootstrap}, topic,
                                  len(produced))
    assert confluent == produced
    # kafka-python with a 4 KiB receive buffer: the broker's socket fills long before a
    # response is out, so sendfile stops mid-response again and again.
    kafka_python = consume_kafka_python(broker.bootstrap, topic, len(produced),
                                        receive_buffer_bytes=4096)
    assert kafka_python == produced


def test_a_slow_reader_gets_the_bytes_the_pread_path_sends(raftwood_broker_factory):
    broker = raftwood_broker_factory(**{"log.segment.bytes": SEGMENT_BYTES})
    topic = create_topic(broker.bootstrap, "sendfile-slow", PARTITIONS)
    produced = produce_log(broker.bootstrap, topic, per_partition=200)
    request = fetch_request(topic, dict.fromkeys(range(PARTITIONS), 0), correlation_id=7)

    def slow_fetch() -> bytes:
        with open_socket(broker, rcvbuf=4096) as sock:
            sock.sendall(request)
            time.sleep(0.5)  # pacing, not a check: let the broker's socket fill first
            frame = read_response(sock, chunk=1024)
            assert frame is not None, "the broker closed the connection mid-response"
            return frame

    with_sendfile = slow_fetch()
    assert len(with_sendfile) > 4 << 20  # far more than the socket buffers hold
    broker.stop()
    broker.extra_settings["socket.sendfile.enable"] = "false"
    broker.start()
    with_pread = slow_fetch()
    assert with_sendfile == with_pread
    records = decoded_records(with_sendfile)
    assert {(p, offset): value for p, rows in records.items() for offset, value in rows} \
        == produced


def test_a_tls_listener_serves_the_same_log_through_pread(raftwood_broker_factory, tmp_path):
    pki = make_pki(tmp_path / "pki")
    ssl_port = free_port()
    broker = with_listeners(BrokerProcess(
        tmp_path / "tls" / "data", log_path=tmp_path / "tls" / "broker.log",
        extra_settings={"log.segment.bytes": SEGMENT_BYTES,
                        "ssl.keystore.location": str(pki.broker_keystore)}),
        f"SSL://127.0.0.1:{ssl_port}").start()
    try:
        topic = create_topic(broker.bootstrap, "sendfile-tls", PARTITIONS)
        produced = produce_log(broker.bootstrap, topic, per_partition=150)
        over_tls = consume_confluent({"bootstrap.servers": f"127.0.0.1:{ssl_port}",
                                      "security.protocol": "SSL",
                                      "ssl.ca.location": str(pki.ca)}, topic, len(produced))
        assert over_tls == produced
        plaintext = consume_confluent({"bootstrap.servers": broker.bootstrap}, topic,
                                      len(produced))
        assert plaintext == produced
    finally:
        assert broker.stop() == 0, broker.log_tail()


def test_three_replicas_fetched_through_sendfile_end_byte_identical(raftwood_cluster_factory):
    cluster = raftwood_cluster_factory(3)
    topic = "sendfile-rf3"
    cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=3,
                         configs={"segment.bytes": str(SEGMENT_BYTES),
                                  "min.insync.replicas": "2"})
    produced = produce_log(cluster.bootstrap, topic, per_partition=150)

    def replica_logs(node_id: int, partition: int) -> bytes:
        directory = cluster.partition_dir(node_id, topic, partition)
        return b"".join(path.read_bytes() for path in sorted(directory.glob("*.log")))

    def converged() -> bool:
        return all(len({replica_logs(node, p) for node in cluster.node_ids}) == 1
                   for p in range(PARTITIONS))

    deadline = time.monotonic() + WAIT_S
    while not converged() and time.monotonic() < deadline:
        time.sleep(0.2)
    for p in range(PARTITIONS):
        logs = [replica_logs(node, p) for node in cluster.node_ids]
        assert len(logs[0]) > 4 * SEGMENT_BYTES
        assert logs[1] == logs[0] and logs[2] == logs[0], f"partition {p} replicas differ"
    assert consume_confluent({"bootstrap.servers": cluster.bootstrap}, topic,
                             len(produced)) == produced


def test_a_segment_deleted_while_its_response_waits_is_never_sent(raftwood_broker_factory):
    """A Fetch answered at once waits in the connection's queue behind a long poll (answers
    leave in request order).  DeleteRecords then deletes the segment it read.  When the
    long poll ends, the waiting answer cannot be sent from that file: the broker closes
    the connection instead (the client fetches again), and a new fetch sees the new log
    start.  With the setting off the same answer is sent, copied at read time."""
    broker = raftwood_broker_factory(**{"log.segment.bytes": SEGMENT_BYTES})
    topic = create_topic(broker.bootstrap, "sendfile-deleted", PARTITIONS)
    produced = produce_log(broker.bootstrap, topic, per_partition=100)
    assert segment_count(broker, topic, 0) >= 3
    idle_partition = 2
    idle_end = max(offset for p, offset in produced if p == idle_partition) + 1
    first_segment_end = sorted(int(path.stem) for path in
                               (broker.data_dir / f"{topic}-0").glob("*.log"))[1]

    def waiting_answer_after_delete(start: int, delete_below: int
                                    ) -> tuple[bytes | None, bytes | None]:
        with open_socket(broker) as sock:
            sock.sendall(fetch_request(topic, {idle_partition: idle_end}, 1,
                                       max_wait_ms=30_000, min_bytes=1))
            sock.sendall(fetch_request(topic, {0: start}, 2))
            time.sleep(0.3)  # pacing: both requests are in before the delete
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            done = admin.delete_records([TopicPartition(topic, 0, delete_below)])
            assert list(done.values())[0].result(WAIT_S).low_watermark == delete_below
            # end the long poll: an append to its partition completes it
            producer = Producer({"bootstrap.servers": broker.bootstrap})
            producer.produce(topic, value=b"wake", partition=idle_partition)
            assert producer.flush(WAIT_S) == 0
            return read_response(sock), read_response(sock)

    long_poll, waiting = waiting_answer_after_delete(0, first_segment_end)
    assert long_poll is not None and struct.unpack(">i", long_poll[4:8])[0] == 1
    assert decoded_records(long_poll)[idle_partition][0][1] == b"wake"
    assert waiting is None, "a response was sent from a deleted segment"
    with open_socket(broker) as sock:  # the client's retry
        sock.sendall(fetch_request(topic, {0: first_segment_end}, 3))
        rows = decoded_records(read_response(sock))[0]
    assert rows[0][0] == first_segment_end
    assert all(produced[(0, offset)] == value for offset, value in rows)

    broker.stop()
    broker.extra_settings["socket.sendfile.enable"] = "false"
    broker.start()
    idle_end += 1
    second_segment_end = sorted(int(path.stem) for path in
                                (broker.data_dir / f"{topic}-0").glob("*.log"))[1]
    _, waiting = waiting_answer_after_delete(first_segment_end, second_segment_end)
    assert waiting is not None  # read (copied) before the delete: still the right bytes
    rows = decoded_records(waiting)[0]
    assert rows[0][0] == first_segment_end
    assert all(produced[(0, offset)] == value for offset, value in rows)

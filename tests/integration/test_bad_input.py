"""Malformed and refused input on raw sockets: the broker answers or closes that one
connection, and nothing else changes.

Every case runs against one broker (socket.request.max.bytes = 1 MiB, message.max.bytes =
64 KiB) holding a baseline
topic with known records.  Around each case the test checks that (a) a healthy connection
opened before the bad one still gets ApiVersions and Metadata answers, (b) the stored
bytes of every baseline partition are identical (raw Fetch, byte for byte) and the latest
offsets unchanged, and (c) the broker process is still running.
"""
from __future__ import annotations

import random
import socket
import struct
import time

import pytest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest
from kafka.protocol.producer import ProduceRequest

from broker.testing import BrokerProcess, KafkaConnection, build_batch

MAX_REQUEST_BYTES = 1 << 20
MAX_BATCH_BYTES = 64 * 1024
TOPIC = "baseline"
PARTITIONS = 2
UNSUPPORTED_VERSION = 35
CORRUPT_MESSAGE = 2
INVALID_RECORD = 87


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    home = tmp_path_factory.mktemp("bad-input")
    broker = BrokerProcess(home / "data", log_path=home / "broker.log", extra_settings={
        "socket.request.max.bytes": MAX_REQUEST_BYTES, "message.max.bytes": MAX_BATCH_BYTES,
        "auto.create.topics.enable": False})
    broker.start()
    with KafkaConnection(broker.bootstrap) as conn:
        assert conn.create_topic(TOPIC, PARTITIONS) == 0
        for partition in range(PARTITIONS):
            for serial in range(3):
                records = [(b"k%d" % i, b"baseline-%d-%d-%d" % (partition, serial, i),
                            1_700_000_000_000 + i, [("h", b"x")]) for i in range(4)]
                answer = conn.produce(TOPIC, partition, build_batch(records, compression=serial))
                assert answer.error_code == 0
    yield broker
    code = broker.stop()
    assert code == 0, f"broker exited {code} after SIGTERM\n{broker.log_tail()}"


def _snapshot(bootstrap: str) -> dict[int, tuple[bytes, int]]:
    """Per partition: the raw record bytes Fetch returns from 0, and the latest offset."""
    snapshot = {}
    with KafkaConnection(bootstrap) as conn:
        for partition in range(PARTITIONS):
            data = conn.fetch(TOPIC, partition, 0)
            assert data.error_code == 0
            latest = conn.list_offsets(TOPIC, partition, -1)
            snapshot[partition] = (bytes(data.records or b""), latest.offset)
    return snapshot


@pytest.fixture
def guarded(broker):
    """Yields the broker; around the test asserts it stayed healthy and unchanged."""
    before = _snapshot(broker.bootstrap)
    assert all(latest == 12 for _, latest in before.values())
    healthy = KafkaConnection(broker.bootstrap)
    assert healthy.api_versions(version=3).error_code == 0
    try:
        yield broker
        assert broker.is_running(), f"broker died\n{broker.log_tail()}"
        assert healthy.api_versions(version=3).error_code == 0
        topic = healthy.metadata([TOPIC]).topics[0]
        assert (topic.error_code, len(topic.partitions)) == (0, PARTITIONS)
    finally:
        healthy.close()
    assert _snapshot(broker.bootstrap) == before, "stored data changed"


def _connect(broker: BrokerProcess) -> socket.socket:
    sock = socket.create_connection((broker.host, broker.port), timeout=5)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _closed_by_broker(sock: socket.socket, timeout_s: float = 5.0) -> bool:
    """True when the broker closes the connection (EOF/reset) within ``timeout_s``."""
    sock.settimeout(timeout_s)
    try:
        while True:
            if not sock.recv(65536):
                return True
    except TimeoutError:
        return False
    except OSError:
        return True


def _header(api_key: int, api_version: int, correlation_id: int = 1,
            client_id: bytes = b"bad-input") -> bytes:
    """A request header v1 (non-flexible: api key, version, correlation id, client id)."""
    return struct.pack(">hhih", api_key, api_version, correlation_id, len(client_id)) + client_id


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_random_bytes_close_only_that_connection(guarded, seed):
    rng = random.Random(seed)
    with _connect(guarded) as sock:
        sock.sendall(rng.randbytes(rng.randrange(1, 8192)))
        sock.shutdown(socket.SHUT_WR)
        assert _closed_by_broker(sock)


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_random_payload_in_a_valid_frame(guarded, seed):
    """A well-sized frame of noise is answered or closes the connection; nothing else."""
    rng = random.Random(seed)
    with _connect(guarded) as sock:
        sock.sendall(_frame(rng.randbytes(rng.randrange(8, 2048))))
        sock.shutdown(socket.SHUT_WR)
        assert _closed_by_broker(sock)


def test_size_above_socket_request_max_bytes_closes(guarded):
    with _connect(guarded) as sock:
        sock.sendall(struct.pack(">i", MAX_REQUEST_BYTES + 1) + _header(18, 0))
        assert _closed_by_broker(sock), "broker kept a connection announcing an oversized frame"


def test_negative_size_closes(guarded):
    with _connect(guarded) as sock:
        sock.sendall(struct.pack(">i", -5) + _header(18, 0))
        assert _closed_by_broker(sock)


@pytest.mark.parametrize("api_key, api_version", [
    pytest.param(999, 0, id="unknown-api-key-999"),
    pytest.param(1, 3, id="fetch-v3"),
    pytest.param(3, 99, id="metadata-v99"),
])
def test_unknown_api_or_version_closes(guarded, api_key, api_version):
    with _connect(guarded) as sock:
        sock.sendall(_frame(_header(api_key, api_version) + b"\x00" * 16))
        assert _closed_by_broker(sock)


def test_api_versions_v99_answers_unsupported_version_with_ranges(guarded):
    """KIP-511: an ApiVersions request of an unknown version gets a v0 body (header v0)
    with UNSUPPORTED_VERSION and the served ranges, so the client can fall back."""
    request = _header(18, 99, correlation_id=4242) + b"\x00"  # header v2: empty tagged fields
    with KafkaConnection(guarded.bootstrap) as conn:
        conn.send_raw(_frame(request))
        response = ApiVersionsResponse.decode(conn.read_frame(), version=0, header=True)
        assert response.header.correlation_id == 4242
        assert response.error_code == UNSUPPORTED_VERSION
        ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert ranges.get(18, (99, -1))[0] == 0 and ranges[18][1] >= 3, ranges
        assert 0 in ranges and 1 in ranges and 3 in ranges, ranges
        assert conn.api_versions(version=ranges[18][1]).error_code == 0, "fallback refused"


def test_truncated_frame_then_eof(guarded):
    with _connect(guarded) as sock:
        sock.sendall(struct.pack(">i", 100) + _header(18, 0)[:12])
        sock.shutdown(socket.SHUT_WR)
        assert _closed_by_broker(sock)


def _good_batch() -> bytearray:
    return bytearray(build_batch([(b"bad", b"must-not-be-stored-%d" % i, 1_700_000_000_000, [])
                                  for i in range(3)]))


def _crc_broken(batch: bytearray) -> bytearray:
    batch[-1] ^= 0xFF
    return batch


def _base_offset_5(batch: bytearray) -> bytearray:
    struct.pack_into(">q", batch, 0, 5)  # outside the CRC
    return batch


def _magic_1(batch: bytearray) -> bytearray:
    batch[16] = 1  # outside the CRC
    return batch


@pytest.mark.parametrize("mangle, error", [
    pytest.param(_crc_broken, CORRUPT_MESSAGE, id="bad-crc"),
    pytest.param(_base_offset_5, INVALID_RECORD, id="base-offset-5"),
    pytest.param(_magic_1, INVALID_RECORD, id="magic-1"),
])
def test_produce_v9_with_bad_batch_is_refused(guarded, mangle, error):
    with KafkaConnection(guarded.bootstrap) as conn:
        for acks in (1, -1):
            answer = conn.produce(TOPIC, 0, bytes(mangle(_good_batch())), acks=acks, version=9)
            assert answer.error_code == error, f"acks={acks}: error {answer.error_code}"
        assert conn.api_versions().error_code == 0, "connection unusable after a refused batch"


def test_produce_v2_is_refused_per_partition(guarded):
    """Produce v0-v2 are advertised (old librdkafka checks) but answered UNSUPPORTED_VERSION."""
    topic_data = ProduceRequest.TopicProduceData
    request = ProduceRequest[2](acks=-1, timeout_ms=5000, topic_data=[topic_data(
        name=TOPIC, partition_data=[topic_data.PartitionProduceData(
            index=p, records=bytes(_good_batch())) for p in range(PARTITIONS)])])
    with KafkaConnection(guarded.bootstrap) as conn:
        response = conn.request(request)
        errors = [p.error_code for t in response.responses for p in t.partition_responses]
        assert errors == [UNSUPPORTED_VERSION] * PARTITIONS, errors


def _recrc(batch: bytearray) -> bytearray:
    """Recompute the CRC-32C after changing bytes it covers (attributes onward)."""
    import crc32c

    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return batch


def _two_batches(batch: bytearray) -> bytearray:
    return batch + batch


def _last_offset_delta_wrong(batch: bytearray) -> bytearray:
    struct.pack_into(">i", batch, 23, 7)  # 3 records claim lastOffsetDelta 7
    return _recrc(batch)


def _control_batch(batch: bytearray) -> bytearray:
    struct.pack_into(">h", batch, 21, 0x20)  # attributes: control
    return _recrc(batch)


def _length_past_end(batch: bytearray) -> bytearray:
    struct.pack_into(">i", batch, 8, len(batch))  # batchLength counts 12 bytes too many
    return batch


@pytest.mark.parametrize("mangle, error", [
    pytest.param(_two_batches, INVALID_RECORD, id="two-batches"),
    pytest.param(_last_offset_delta_wrong, INVALID_RECORD, id="last-offset-delta"),
    pytest.param(_control_batch, INVALID_RECORD, id="control-batch"),
    pytest.param(_length_past_end, CORRUPT_MESSAGE, id="length-past-end"),
    pytest.param(lambda b: b[:40], CORRUPT_MESSAGE, id="shorter-than-header"),
])
def test_produce_v9_with_malformed_batch_is_refused(guarded, mangle, error):
    with KafkaConnection(guarded.bootstrap) as conn:
        answer = conn.produce(TOPIC, 1, bytes(mangle(_good_batch())), acks=-1, version=9)
        assert answer.error_code == error, f"error {answer.error_code}"


def test_produce_above_message_max_bytes_is_refused(guarded):
    """A batch above message.max.bytes in a frame below socket.request.max.bytes gets
    MESSAGE_TOO_LARGE (10) and the connection stays usable."""
    big = build_batch([(None, random.Random(5).randbytes(MAX_BATCH_BYTES), 1_700_000_000_000, [])])
    with KafkaConnection(guarded.bootstrap) as conn:
        answer = conn.produce(TOPIC, 0, big, acks=1, version=9)
        assert answer.error_code == 10, f"error {answer.error_code}"
        assert conn.api_versions().error_code == 0


def test_produce_to_unknown_partition_is_refused(guarded):
    with KafkaConnection(guarded.bootstrap) as conn:
        for topic, partition in (("no-such-topic", 0), (TOPIC, PARTITIONS)):
            answer = conn.produce(topic, partition, bytes(_good_batch()), acks=1, version=9)
            assert answer.error_code == 3, f"{topic}-{partition}: error {answer.error_code}"


def test_request_body_cut_inside_a_whole_frame_closes(guarded):
    """A frame whose size is right but whose body ends early (Metadata v8 cut in the
    topic array) does not parse: that connection closes."""
    body = struct.pack(">i", 1) + struct.pack(">h", 40) + b"only-ten!!"
    with _connect(guarded) as sock:
        sock.sendall(_frame(_header(3, 8) + body))
        assert _closed_by_broker(sock)


def test_fetch_out_of_range_offsets(guarded):
    with KafkaConnection(guarded.bootstrap) as conn:
        for offset in (-5, 13, 10**12):
            data = conn.fetch(TOPIC, 0, offset)
            assert data.error_code == 1, f"Fetch at {offset}: error {data.error_code}"
        assert conn.fetch(TOPIC, 0, 12).error_code == 0, "Fetch at the latest offset"


def test_request_sent_one_byte_at_a_time_is_answered(guarded):
    request = ApiVersionsRequest[0]()
    request.with_header(correlation_id=77, client_id="slow")
    data = bytes(request.encode(header=True, framed=True))
    with KafkaConnection(guarded.bootstrap) as conn:
        for i in range(len(data)):
            conn.send_raw(data[i:i + 1])
            time.sleep(0.002)
        response = ApiVersionsResponse.decode(conn.read_frame(), version=0, header=True)
        assert (response.header.correlation_id, response.error_code) == (77, 0)


def test_pipelined_requests_are_answered_in_order(guarded):
    """Kafka clients depend on responses arriving in request order on a connection, even
    when a slow request (acks=all produce, a Fetch that waits) sits between fast ones."""
    with KafkaConnection(guarded.bootstrap) as conn:
        requests = []
        for i in range(30):
            if i % 3 == 0:
                request = ApiVersionsRequest[0]()
            elif i % 3 == 1:
                request = MetadataRequest[8](topics=None, allow_auto_topic_creation=False)
            else:
                request = _fetch_request(max_wait_ms=50)
            requests.append((request, conn.send(request)))
        for request, correlation_id in requests:
            conn.receive(request, correlation_id)  # checks the correlation id


def _fetch_request(max_wait_ms: int):
    """A Fetch v11 at the latest offset of the baseline partition 0 (so it waits)."""
    fetch_topic = FetchRequest.FetchTopic
    return FetchRequest[11](
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
        isolation_level=0, session_id=0, session_epoch=-1,
        topics=[fetch_topic(topic=TOPIC, partitions=[fetch_topic.FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=12, log_start_offset=-1,
            partition_max_bytes=1 << 20)])],
        forgotten_topics_data=[], rack_id="")

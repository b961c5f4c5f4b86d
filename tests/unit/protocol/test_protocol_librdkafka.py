"""librdkafka (through confluent-kafka) talks to our codec over a real socket.

A stub broker -- FrameReader, decode_request, encode_response and nothing else of
Raftwood -- answers ApiVersions, Metadata and Produce on 127.0.0.1.  The requests are
bytes written by librdkafka's C encoder, and the producer's delivery reports show that
librdkafka parsed every response we encoded.  No broker/ or storage/ code is involved.
"""
from __future__ import annotations

import socket
import threading
import uuid

import pytest

from protocol.framing import FrameReader
from protocol.messages import SERVED, api_versions_body, decode_request, encode_response
from protocol.records import validate_produce_records
from protocol.telemetry_messages import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
)

confluent_kafka = pytest.importorskip("confluent_kafka")
from kafka.protocol.metadata import MetadataResponse  # noqa: E402
from kafka.protocol.producer import ProduceResponse  # noqa: E402
from kafka.record.default_records import DefaultRecordBatch  # noqa: E402

TOPIC = "orders"
TOPIC_ID = uuid.UUID("11111111-2222-3333-4444-555555555555")
TIMEOUT_S = 10


class StubBroker:
    """Node 1 on an ephemeral port, leader of ``orders``-0; records every decoded request.

    Threads: one accept loop, one loop per connection; both daemon threads, ended by
    ``close()`` (which closes the listening and all accepted sockets).
    """

    def __init__(self):
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.requests = []
        self.errors = []
        self._connections = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept_loop, daemon=True).start()

    def close(self):
        self._listener.close()
        with self._lock:
            for conn in self._connections:
                conn.close()

    def _accept_loop(self):
        """Reacts to: new connections.  Exits when the listening socket is closed."""
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self._connections.append(conn)
            threading.Thread(target=self._connection_loop, args=(conn,), daemon=True).start()

    def _connection_loop(self, conn):
        """Reacts to: bytes from one client.  Exits at EOF, on a socket error or a bad request."""
        reader = FrameReader()
        try:
            while data := conn.recv(65536):
                reader.feed(data)
                while (frame := reader.next_frame()) is not None:
                    req = decode_request(frame)
                    with self._lock:
                        self.requests.append(req)
                    conn.sendall(encode_response(req, self._answer(req)))
        except OSError:
            pass
        except Exception as exc:  # noqa: BLE001 -- surfaced by the test, not swallowed
            self.errors.append(exc)

    def _answer(self, req):
        if req.api_key == 18:
            return api_versions_body(version=req.api_version)
        if req.api_key == 3:
            return self._metadata(req)
        if req.api_key == 0:
            return self._produce(req)
        if req.api_key == GetTelemetrySubscriptionsRequest.API_KEY:
            return _no_telemetry_subscription(req)
        raise AssertionError(f"the stub does not answer api_key {req.api_key}")

    def _metadata(self, req):
        M = MetadataResponse
        P = M.MetadataResponseTopic.MetadataResponsePartition
        wanted = None if req.body.topics is None else {t.name for t in req.body.topics}
        topics = []
        if wanted is None or TOPIC in wanted:
            topics.append(M.MetadataResponseTopic(
                error_code=0, name=TOPIC, topic_id=TOPIC_ID, is_internal=False,
                partitions=[P(error_code=0, partition_index=0, leader_id=1, leader_epoch=0,
                              replica_nodes=[1], isr_nodes=[1], offline_replicas=[])]))
        return M[req.api_version](
            throttle_time_ms=0, cluster_id="stub-cluster", controller_id=1, topics=topics,
            brokers=[M.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=self.port,
                                              rack=None)])

    def _produce(self, req):
        R = ProduceResponse.TopicProduceResponse
        return ProduceResponse[req.api_version](throttle_time_ms=0, responses=[
            R(name=topic.name, partition_responses=[
                R.PartitionProduceResponse(index=p.index, error_code=0, base_offset=100,
                                           log_append_time_ms=-1, log_start_offset=0)
                for p in topic.partition_data])
            for topic in req.body.topic_data])


def _no_telemetry_subscription(req):
    """librdkafka 2.5+ asks every broker advertising KIP-714: no metrics requested."""
    return GetTelemetrySubscriptionsResponse[req.api_version](
        throttle_time_ms=0, error_code=0, client_instance_id=uuid.uuid4(), subscription_id=1,
        accepted_compression_types=[], push_interval_ms=300_000, telemetry_max_bytes=1 << 20,
        delta_temporality=False, requested_metrics=[])


@pytest.fixture
def broker():
    stub = StubBroker()
    yield stub
    stub.close()


CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
FIND_COORDINATOR = 10


def expected_codec(compression: str) -> int:
    """The codec librdkafka will really use against the ranges we advertise.

    librdkafka enables a codec only for brokers whose ApiVersions satisfy its feature map
    (src/rdkafka_feature.c): zstd needs Produce v7 and Fetch v10, and LZ4 -- for history's
    sake -- needs FindCoordinator v0.  Without FindCoordinator in our ApiVersions answer it
    logs "Broker does not support compression type lz4: not compressing batch" and sends
    the batch uncompressed.
    """
    if compression == "lz4" and FIND_COORDINATOR not in SERVED:
        return 0
    return CODECS[compression]


@pytest.mark.parametrize("compression", list(CODECS))
def test_librdkafka_produce_round_trip_through_our_codec(broker, compression):
    values = [b"%d:" % i + b"x" * 2000 for i in range(3)]  # compressible: librdkafka compresses
    reports = []
    producer = confluent_kafka.Producer({
        "bootstrap.servers": f"127.0.0.1:{broker.port}", "client.id": "rdkafka-unit",
        "compression.type": compression, "linger.ms": 50, "log_level": 0})
    for i, value in enumerate(values):
        producer.produce(TOPIC, key=b"k%d" % i, value=value, partition=0,
                         on_delivery=lambda err, msg: reports.append((err, msg.offset())))
    assert producer.flush(TIMEOUT_S) == 0
    del producer
    assert not broker.errors

    # librdkafka read our Produce response (base_offset 100) and our Metadata before it.
    assert reports == [(None, 100), (None, 101), (None, 102)]

    api_versions = [r for r in broker.requests if r.api_key == 18]
    assert api_versions and all(r.client_id == "rdkafka-unit" for r in broker.requests)
    if api_versions[0].api_version >= 3:
        assert api_versions[0].body.client_software_name == "confluent-kafka-python"
    metadata = [r for r in broker.requests if r.api_key == 3]
    assert metadata and all(r.api_version >= 4 for r in metadata)

    produce = [r for r in broker.requests if r.api_key == 0]
    assert produce and all(r.api_version >= 3 for r in produce)
    batches = [p.records for r in produce for t in r.body.topic_data for p in t.partition_data
               if t.name == TOPIC and p.index == 0]
    got = []
    for records in batches:
        buf, header = validate_produce_records(records)
        assert header.compression == expected_codec(compression)
        got.extend((r.key, r.value) for r in DefaultRecordBatch(bytes(buf)))
    assert got == [(b"k%d" % i, v) for i, v in enumerate(values)]

"""Connections that abuse the Kafka listeners: oversized or negative frame sizes, too many
connections, connections that never send and connections that never read.  Each is closed
or held in bounded memory, and the broker keeps serving a well-behaved client.
"""
from __future__ import annotations

import asyncio
import socket
import struct
import time

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from broker.testing import BrokerProcess, KafkaConnection

MAX_REQUEST_BYTES = 1 << 20
WAIT_S = 20.0


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def serves(broker: BrokerProcess) -> bool:
    with KafkaConnection(broker.bootstrap) as conn:
        return conn.api_versions().error_code == 0


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    home = tmp_path_factory.mktemp("hostile-connections")
    broker = BrokerProcess(home / "data", log_path=home / "broker.log", extra_settings={
        "socket.request.max.bytes": MAX_REQUEST_BYTES,
        "max.connections.per.ip": 12,
        "connections.max.idle.ms": 2000})
    broker.start()
    yield broker
    assert broker.stop() == 0, broker.log_tail()


@pytest.mark.parametrize("size", [MAX_REQUEST_BYTES + 1, 2 ** 31 - 1, -1, -(2 ** 31)])
def test_a_frame_size_out_of_bounds_closes_before_its_payload(broker, size):
    """The size alone is enough to close: no payload is sent, so a broker that waited for
    (or allocated) the announced bytes would never close."""
    before = rss_bytes(broker.pid)
    with KafkaConnection(broker.bootstrap) as conn:
        conn.send_raw(struct.pack(">i", size) + b"\x00\x03\x00\x00")
        assert conn.closed_by_peer(WAIT_S)
    assert rss_bytes(broker.pid) - before < 32 << 20
    assert serves(broker)


def test_connections_over_max_connections_per_ip_are_closed_at_accept(broker):
    conns = []
    try:
        # The cap is 12 for 127.0.0.1; every connection made here counts.
        while len(conns) < 12:
            conn = KafkaConnection(broker.bootstrap)
            conns.append(conn)
            assert conn.api_versions().error_code == 0
        extra = KafkaConnection(broker.bootstrap)
        assert extra.closed_by_peer(WAIT_S)
        extra.close()
        conns.pop().close()
        deadline = time.monotonic() + WAIT_S  # the broker sees the close asynchronously
        while time.monotonic() < deadline:
            try:
                if serves(broker):
                    break
            except ConnectionError:
                time.sleep(0.2)
        else:
            raise AssertionError("a slot freed by a close was never reused")
    finally:
        for conn in conns:
            conn.close()
    assert "max.connections.per.ip (12) reached for 127.0.0.1" in \
        broker.log_path.read_text(errors="replace")


def test_an_idle_connection_is_closed_and_a_busy_one_is_not(broker):
    with KafkaConnection(broker.bootstrap) as idle, KafkaConnection(broker.bootstrap) as busy:
        # connections.max.idle.ms is 2 s: the busy one sends every 0.2 s for 5 s.
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            assert busy.api_versions().error_code == 0
            time.sleep(0.2)
        assert idle.closed_by_peer(WAIT_S)
        assert busy.api_versions().error_code == 0


def test_a_client_that_never_reads_holds_bounded_memory(broker):
    """Pipelined Metadata requests whose answers are never read: the broker stops reading
    once its write buffer and in-flight queue are full, so its memory stays bounded and
    another client is served meanwhile."""
    request = MetadataRequest[4](topics=None, allow_auto_topic_creation=False)
    request.with_header(correlation_id=1, client_id="never-reads")
    frame = bytes(request.encode(header=True, framed=True))
    before = rss_bytes(broker.pid)
    sock = socket.create_connection((broker.host, broker.port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    sent = 0
    try:
        burst = frame * 1000
        deadline = time.monotonic() + 10.0
        stalled_since = None
        while time.monotonic() < deadline and sent < 2_000_000 * len(frame):
            try:
                sent += sock.send(burst)
                stalled_since = None
            except BlockingIOError:
                stalled_since = stalled_since or time.monotonic()
                if time.monotonic() - stalled_since > 2.0:
                    break  # the broker stopped reading: the point of the test
                time.sleep(0.05)
        requests_sent = sent // len(frame)
        print(f"never-reads: {requests_sent} requests sent before the broker stopped reading")
        assert requests_sent < 2_000_000, "the broker never stopped reading"
        assert serves(broker)
        grown = rss_bytes(broker.pid) - before
        print(f"never-reads: broker RSS grew {grown / 1e6:.1f} MB")
        assert grown < 64 << 20
    finally:
        sock.close()
    assert serves(broker)


def test_the_brokers_own_client_reconnects_after_an_idle_close(broker):
    """Connections the broker keeps to its peers (transaction markers, the replication
    view) idle between uses; the peer closing them after connections.max.idle.ms must
    cost a reconnect, not a failed request."""
    from broker.client.kafka_client import AsyncConnection

    async def scenario():
        conn = AsyncConnection(broker.host, broker.port, timeout_s=WAIT_S)
        try:
            assert (await conn.request(ApiVersionsRequest[0]())).error_code == 0
            deadline = time.monotonic() + WAIT_S
            while conn._stream.lost is None and time.monotonic() < deadline:
                await asyncio.sleep(0.2)  # connections.max.idle.ms is 2 s
            assert conn._stream.lost is not None, "the idle connection was not closed"
            assert (await conn.request(ApiVersionsRequest[0]())).error_code == 0
        finally:
            await conn.close()

    asyncio.run(scenario())

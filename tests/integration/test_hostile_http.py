"""The broker's HTTP endpoint (metrics, replication view, its event stream) under many
clients and clients that never read: connections beyond the cap get a 503 at once, event
streams beyond theirs too, the broker's memory stays bounded, its Kafka listener keeps
serving, and every slot comes back when the clients go.
"""
from __future__ import annotations

import socket
import time

import pytest

from broker.metrics.endpoint import MAX_CONNECTIONS, MAX_EVENT_STREAMS
from broker.testing import BrokerProcess, KafkaConnection, free_port
from tests.integration.test_hostile_connections import rss_bytes

WAIT_S = 20.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    home = tmp_path_factory.mktemp("hostile-http")
    broker = BrokerProcess(home / "data", log_path=home / "broker.log",
                           extra_settings={"metrics.port": free_port()})
    broker.start()
    yield broker
    assert broker.stop() == 0, broker.log_tail()


def _metrics_port(broker: BrokerProcess) -> int:
    for arg in broker.command():
        if arg.startswith("metrics.port="):
            return int(arg.split("=", 1)[1])
    raise AssertionError("no metrics.port")


def connect(broker: BrokerProcess) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", _metrics_port(broker)), timeout=WAIT_S)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    return sock


def status_line(sock: socket.socket, request: bytes | None = None) -> bytes:
    """The response's status line (b"" if the connection closed first)."""
    if request is not None:
        sock.sendall(request)
    data = b""
    deadline = time.monotonic() + WAIT_S
    while b"\r\n" not in data and time.monotonic() < deadline:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data.split(b"\r\n", 1)[0]


def get(broker: BrokerProcess, path: str) -> bytes:
    with connect(broker) as sock:
        return status_line(sock, f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())


def kafka_serves(broker: BrokerProcess) -> bool:
    with KafkaConnection(broker.bootstrap) as conn:
        return conn.api_versions().error_code == 0


def wait_for_status(broker: BrokerProcess, path: str, expected: bytes) -> None:
    deadline = time.monotonic() + WAIT_S  # the broker sees closes asynchronously
    while (line := get(broker, path)) != expected and time.monotonic() < deadline:
        time.sleep(0.2)
    assert line == expected


def test_silent_connections_beyond_the_cap_get_503_and_the_broker_goes_on(broker):
    before = rss_bytes(broker.pid)
    silent = [connect(broker) for _ in range(MAX_CONNECTIONS)]
    try:
        extra = [connect(broker) for _ in range(4 * MAX_CONNECTIONS)]
        try:
            lines = {status_line(sock) for sock in extra}
            assert lines == {b"HTTP/1.1 503 Service Unavailable"}
        finally:
            for sock in extra:
                sock.close()
        assert kafka_serves(broker)
        assert rss_bytes(broker.pid) - before < 32 << 20
    finally:
        for sock in silent:
            sock.close()
    wait_for_status(broker, "/metrics", b"HTTP/1.1 200 OK")


def test_event_streams_that_are_never_read_are_capped_and_released(broker):
    before = rss_bytes(broker.pid)
    request = b"GET /replication/events HTTP/1.1\r\nHost: x\r\n\r\n"
    streams = [connect(broker) for _ in range(MAX_EVENT_STREAMS)]
    try:
        for sock in streams:
            assert status_line(sock, request) == b"HTTP/1.1 200 OK"  # then never read
        with connect(broker) as extra:
            assert status_line(extra, request) == b"HTTP/1.1 503 Service Unavailable"
        time.sleep(2.0)  # a few snapshots published to readers that do not read
        assert get(broker, "/metrics") == b"HTTP/1.1 200 OK"
        assert kafka_serves(broker)
        assert rss_bytes(broker.pid) - before < 32 << 20
    finally:
        for sock in streams:
            sock.close()
    wait_for_status(broker, "/replication/events", b"HTTP/1.1 200 OK")

"""Connection writing a response that holds ``storage.FileRecords`` (zero-copy Fetch).

A real server (``Connection`` on uvloop, the broker's loop) on 127.0.0.1 and a raw
client socket; the ApiVersions entry of the handler table is swapped (monkeypatch,
restored after each test) for one that answers with a hand-made frame around records
read from a real ``PartitionLog`` with ``zero_copy=True``.  ``os.sendfile`` is wrapped to
count what it carried (the real call still runs), so a test can tell the sendfile path
from the pread fallback.
"""
from __future__ import annotations

import asyncio
import os
import socket
import struct

import pytest
import uvloop
from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from broker.api import HANDLERS
from broker.metrics.stats import DISCARD_REQUESTS
from broker.network.connection import Connection
from broker.network.limits import ConnectionLimits
from protocol.messages import Framed, FramedFiles
from storage import FileRecords, LogConfig, PartitionLog

TIMEOUT_S = 20.0


class FakeBroker:
    """What Connection touches on the broker (a ConnectionContext)."""

    def __init__(self):
        self.config = {"queued.max.requests.per.connection": 100,
                       "socket.request.max.bytes": 1 << 20}
        self.connections: set = set()
        self.api_context = object()
        self.limits = ConnectionLimits(self.config, "")
        self.request_stats = DISCARD_REQUESTS


def make_batch(count: int, value_size: int, fill: int) -> bytearray:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 24)
    for i in range(count):
        builder.append(i, timestamp=1_000 + i, key=None,
                       value=bytes([(fill + i) % 256]) * value_size, headers=[])
    return builder.build()


def request(cid: int) -> bytes:
    message = ApiVersionsRequest[0]()
    message.with_header(correlation_id=cid, client_id="sendfile-test")
    return bytes(message.encode(header=True, framed=True))


def answer(cid: int, records) -> Framed:
    """A frame: size, correlation id, 10 bytes, the records, 5 bytes (a FramedFiles when
    the records are a file region, as the Fetch handler makes it)."""
    head = struct.pack(">i", cid) + b"H" * 10
    tail = b"T" * 5
    size = len(head) + len(records) + len(tail)
    framed = FramedFiles if isinstance(records, FileRecords) else Framed
    return framed([struct.pack(">i", size), head, records, tail])


def expected(cid: int, data: bytes) -> bytes:
    body = struct.pack(">i", cid) + b"H" * 10 + data + b"T" * 5
    return struct.pack(">i", len(body)) + body


class Scripted:
    """ApiVersions answered from ``answers[cid]`` (a callable), held while ``gates[cid]``
    is unset."""

    def __init__(self):
        self.answers: dict = {}
        self.gates: dict[int, asyncio.Event] = {}
        self.finished: list[int] = []

    async def handle(self, ctx, req):
        cid = req.correlation_id
        if cid in self.gates:
            await self.gates[cid].wait()
        self.finished.append(cid)
        return self.answers[cid]()


@pytest.fixture
def scripted(monkeypatch) -> Scripted:
    s = Scripted()
    monkeypatch.setitem(HANDLERS, ApiKey.ApiVersions, s.handle)
    return s


@pytest.fixture
def sendfile_bytes(monkeypatch) -> list[int]:
    carried: list[int] = []
    real = os.sendfile

    def counting(out_fd, in_fd, offset, count):
        n = real(out_fd, in_fd, offset, count)
        carried.append(n)
        return n

    monkeypatch.setattr(os, "sendfile", counting)
    return carried


@pytest.fixture
def log(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=4 << 20),
                            clock_ms=lambda: 1_000)
    yield log
    log.close()


def answer_whole_log(log, scripted) -> bytes:
    """Four 50 KB batches in ``log``; request 1 is answered with all of them as file
    regions.  Returns the log's bytes."""
    for n in range(4):
        log.append_as_leader(make_batch(10, 5_000, n), 0)
    scripted.answers = {1: lambda: answer(1, log.read(0, 1 << 30, zero_copy=True))}
    return bytes(log.read(0, 1 << 30))


def run(scenario):
    async def bounded():
        async with asyncio.timeout(TIMEOUT_S):
            await scenario()
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(bounded())


async def serve(broker):
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Connection(broker), "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def client(port: int, rcvbuf: int | None = None) -> socket.socket:
    sock = socket.socket()
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    return sock


async def read_all(sock: socket.socket, chunk: int) -> bytes:
    """Everything until EOF, ``chunk`` bytes per read (a slow reader when small)."""
    loop = asyncio.get_running_loop()
    data = bytearray()
    while True:
        try:
            more = await loop.sock_recv(sock, chunk)
        except ConnectionResetError:
            break
        if not more:
            return bytes(data)
        data += more


def test_a_slow_reader_gets_every_byte_in_order_sendfile_then_the_fallback(
        scripted, sendfile_bytes, log):
    for n in range(40):  # about 8 MiB: far more than the socket buffers take at once
        log.append_as_leader(make_batch(20, 10_000, n), 0)
    plain = bytes(log.read(0, 1 << 30))
    records = log.read(0, 1 << 30, zero_copy=True)
    assert isinstance(records, FileRecords)
    scripted.answers = {1: lambda: answer(1, records), 2: lambda: answer(2, b"small"),
                        3: lambda: answer(3, records)}

    async def scenario():
        broker = FakeBroker()
        server, port = await serve(broker)
        sock = await client(port, rcvbuf=4096)
        try:
            await asyncio.get_running_loop().sock_sendall(sock, request(1) + request(2)
                                                          + request(3))
            while len(scripted.finished) < 3:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.2)  # pacing: nothing read yet, the socket is full
            (conn,) = broker.connections
            conn.transport.close()  # flushes what is buffered, then EOF
            got = await read_all(sock, 1024)
        finally:
            sock.close()
            server.close()
            await server.wait_closed()
        assert got == expected(1, plain) + expected(2, b"small") + expected(3, plain)
        # sendfile carried part of the first region, and stopped (EAGAIN) before its end;
        # the rest came through the transport
        assert 0 < sum(sendfile_bytes) < len(plain)

    run(scenario)


def test_a_fast_reader_gets_the_records_through_sendfile_only(scripted, sendfile_bytes, log):
    plain = answer_whole_log(log, scripted)

    async def scenario():
        broker = FakeBroker()
        server, port = await serve(broker)
        sock = await client(port)
        try:
            await asyncio.get_running_loop().sock_sendall(sock, request(1))
            loop = asyncio.get_running_loop()
            got = bytearray()
            while len(got) < len(expected(1, plain)):
                more = await loop.sock_recv(sock, 1 << 16)
                assert more, "EOF before the whole response"
                got += more
        finally:
            sock.close()
            server.close()
            await server.wait_closed()
        assert bytes(got) == expected(1, plain)
        assert sum(sendfile_bytes) == len(plain)

    run(scenario)


def test_a_region_truncated_and_rewritten_before_its_turn_is_never_sent(
        scripted, sendfile_bytes, log):
    """Response 2 reads the log's tail as regions, then waits behind response 1.  The
    log is truncated and other bytes appended at the same positions (a follower
    truncating to its new leader).  Sending the regions now would send those bytes: the
    connection must close after response 1 instead."""
    for n in range(6):
        log.append_as_leader(make_batch(10, 5_000, n), 0)
    scripted.answers = {1: lambda: answer(1, b"first"),
                        2: lambda: answer(2, log.read(2 * 10, 1 << 30, zero_copy=True))}
    scripted.gates[1] = asyncio.Event()

    async def scenario():
        broker = FakeBroker()
        server, port = await serve(broker)
        sock = await client(port)
        try:
            await asyncio.get_running_loop().sock_sendall(sock, request(1) + request(2))
            while scripted.finished != [2]:
                await asyncio.sleep(0.01)
            log.truncate_to(2 * 10)
            for n in range(6):
                log.append_as_leader(make_batch(10, 5_000, 100 + n), 1)
            scripted.gates[1].set()
            got = await read_all(sock, 1 << 16)
        finally:
            sock.close()
            server.close()
            await server.wait_closed()
        assert got == expected(1, b"first")
        assert sendfile_bytes == []

    run(scenario)


def test_under_tls_regions_are_read_and_written_through_the_transport(
        scripted, sendfile_bytes, log, tmp_path):
    import ssl

    from tests.security_certs import make_pki

    pki = make_pki(tmp_path / "pki")
    plain = answer_whole_log(log, scripted)

    async def scenario():
        broker = FakeBroker()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(pki.broker_keystore))
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: Connection(broker), "127.0.0.1", 0,
                                          ssl=context)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=ssl.create_default_context(cafile=str(pki.ca)),
            server_hostname="127.0.0.1")
        try:
            writer.write(request(1))
            await writer.drain()
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            got = struct.pack(">i", size) + await reader.readexactly(size)
        finally:
            writer.close()
            server.close()
            await server.wait_closed()
        assert got == expected(1, plain)
        assert sendfile_bytes == []

    run(scenario)

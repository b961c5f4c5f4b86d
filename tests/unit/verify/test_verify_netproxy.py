"""The cut proxy: it tells replica fetchers from clients by the first request's client
id, blackholes fetcher links between cut brokers (both ways, existing and new), lets
clients through, and closes blackholed links on heal."""
from __future__ import annotations

import asyncio
import struct

from kafka.protocol.metadata import ApiVersionsRequest

from broker.testing import free_ports
from broker.verify.netproxy import ProxyServer, client_id_of, source_node

LOCAL = "127.0.0.1"


def request_frame(client_id: str) -> bytes:
    request = ApiVersionsRequest[0]()
    request.with_header(correlation_id=1, client_id=client_id)
    return bytes(request.encode(header=True, framed=True))


def test_the_first_request_names_the_fetcher_and_its_broker():
    assert source_node(request_frame("raftwood-fetcher-3")[4:]) == 3
    assert source_node(request_frame("raftwood-fetcher-12")[4:]) == 12
    assert source_node(request_frame("rdkafka")[4:]) is None
    assert source_node(request_frame("raftwood-fetcher-x")[4:]) is None
    assert client_id_of(request_frame("abc")[4:]) == b"abc"
    assert client_id_of(b"\x00\x12") is None                      # torn header
    assert client_id_of(struct.pack(">hhih", 18, 0, 1, 50) + b"short") is None


async def _echo(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()


async def _roundtrip(port: int, client_id: str, payload: bytes = b"ping",
                     timeout_s: float = 1.0):
    """Connect through the proxy, send a request frame and a payload; the echoed bytes,
    or None when nothing comes back within ``timeout_s``; plus the open connection."""
    reader, writer = await asyncio.open_connection(LOCAL, port)
    frame = request_frame(client_id)
    writer.write(frame + payload)
    await writer.drain()
    try:
        echoed = await asyncio.wait_for(reader.readexactly(len(frame) + len(payload)),
                                        timeout_s)
    except TimeoutError:
        echoed = None
    return echoed, (reader, writer)


async def _scenario():
    echo_port, proxy_port = free_ports(2)
    echo = await asyncio.start_server(_echo, LOCAL, echo_port)
    proxy = ProxyServer({2: (proxy_port, echo_port)})          # broker 2 behind the proxy
    await proxy.start()
    try:
        frame_len = len(request_frame("raftwood-fetcher-1"))
        echoed, (old_reader, old_writer) = await _roundtrip(proxy_port, "raftwood-fetcher-1")
        assert echoed is not None and echoed[frame_len:] == b"ping"   # not cut yet

        proxy.cut(1, 2)
        old_writer.write(b"more")                                     # existing link: dropped
        await old_writer.drain()
        try:
            late = await asyncio.wait_for(old_reader.read(100), 0.5)
        except TimeoutError:
            late = None
        assert late is None, "bytes crossed a cut link"
        blocked, (new_reader, _new_writer) = await _roundtrip(proxy_port, "raftwood-fetcher-1")
        assert blocked is None, "a new fetcher link crossed the cut"
        other, _ = await _roundtrip(proxy_port, "raftwood-fetcher-3")
        assert other is not None, "broker 3 was not cut from broker 2"
        client, _ = await _roundtrip(proxy_port, "rdkafka")
        assert client is not None, "clients always pass"
        assert proxy.stats()["cuts"] == [[1, 2]]

        assert proxy.heal()["closed"] >= 2
        assert await asyncio.wait_for(new_reader.read(100), 2.0) == b"", "blackholed link closed"
        assert await asyncio.wait_for(old_reader.read(100), 2.0) == b""
        healed, _ = await _roundtrip(proxy_port, "raftwood-fetcher-1")
        assert healed is not None
    finally:
        for server in proxy.servers:
            server.close()
        for link in list(proxy.links):
            link.close()
        echo.close()


def test_a_cut_blackholes_fetcher_links_both_ways_and_heal_closes_them():
    asyncio.run(_scenario())

"""AsyncConnection's round-trip deadline (broker/network/kafka_client.py): one timer per
connection, set again when it fires before the deadline of the round trip then out, so
a round trip on a reused connection still gets its whole ``timeout_s``, no more.

A fake broker on a real socket answers the first request and never the second.
"""
from __future__ import annotations

import asyncio
import socket
import struct
import threading

import pytest
from kafka.protocol.metadata import ApiVersionsRequest

from broker.network.kafka_client import AsyncConnection, ConnectionFailed

TIMEOUT_S = 0.4


class AnswersOnce:
    """Accepts one connection, answers its first request (ApiVersions v0, no APIs), then
    reads on without answering until the client closes."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        with self.listener:
            conn, _ = self.listener.accept()
            with conn:
                size = struct.unpack(">i", conn.recv(4, socket.MSG_WAITALL))[0]
                request = conn.recv(size, socket.MSG_WAITALL)
                correlation_id = struct.unpack_from(">i", request, 4)[0]
                body = struct.pack(">ihi", correlation_id, 0, 0)
                conn.sendall(struct.pack(">i", len(body)) + body)
                while conn.recv(65536):
                    pass


def test_a_round_trip_on_a_reused_connection_gets_its_whole_timeout():
    async def scenario():
        loop = asyncio.get_running_loop()
        conn = AsyncConnection("127.0.0.1", AnswersOnce().port, "t", timeout_s=TIMEOUT_S)
        assert (await conn.request(ApiVersionsRequest[0]())).error_code == 0
        # The timer set for the first round trip fires halfway through the second.
        await asyncio.sleep(TIMEOUT_S / 2)
        sent = loop.time()
        with pytest.raises(ConnectionFailed, match="timed out"):
            await conn.request(ApiVersionsRequest[0]())
        waited = loop.time() - sent
        assert TIMEOUT_S - 0.02 <= waited < 2 * TIMEOUT_S
        assert not conn.connected and conn._timer is None

    asyncio.run(scenario())

"""The one Kafka client (broker/client/client_protocol.py, kafka_client.py): a response
is accepted only whole, within the size cap, and for the request it answers.

The sans-IO core is fed responses whole, one byte at a time, and with the next one's
bytes behind them; both connections (blocking and asyncio) run against a one-shot
fake broker on a real socket that answers with prepared bytes.
"""
from __future__ import annotations

import asyncio
import socket
import struct
import threading

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from broker.client.client_protocol import (
    MIN_RESPONSE_BYTES,
    NEED_DATA,
    BadResponse,
    ClientProtocol,
    ConnectionFailed,
    CorrelationMismatch,
    ResponseReader,
)
from broker.client.kafka_client import AsyncConnection, BlockingConnection
from protocol.status import encode_status_response


def api_versions_response(correlation_id: int) -> bytes:
    """A framed ApiVersions v0 response (error 0, no APIs) for ``correlation_id``."""
    body = struct.pack(">ihi", correlation_id, 0, 0)
    return struct.pack(">i", len(body)) + body


def sent_request(protocol: ClientProtocol) -> int:
    correlation_id, _ = protocol.send_request(ApiVersionsRequest[0]())
    return correlation_id


# -- the sans-IO core --------------------------------------------------------------------

@pytest.mark.parametrize("chunking", ["whole", "byte-at-a-time"])
def test_a_response_is_returned_only_once_complete(chunking):
    protocol = ClientProtocol("t")
    correlation_id = sent_request(protocol)
    data = api_versions_response(correlation_id)
    pieces = [data] if chunking == "whole" else [data[i:i + 1] for i in range(len(data))]
    for piece in pieces[:-1]:
        protocol.receive_data(piece)
        assert protocol.next_response() is NEED_DATA
    protocol.receive_data(pieces[-1])
    response = protocol.next_response()
    assert isinstance(response, ApiVersionsResponse)
    assert (response.header.correlation_id, response.error_code) == (correlation_id, 0)
    assert protocol.outstanding == 0


def test_pipelined_responses_in_one_read_are_matched_in_request_order():
    protocol = ClientProtocol("t")
    first, second = sent_request(protocol), sent_request(protocol)
    assert second == first + 1
    protocol.receive_data(api_versions_response(first) + api_versions_response(second))
    assert protocol.next_response().header.correlation_id == first
    assert protocol.next_response().header.correlation_id == second


def test_a_response_for_another_correlation_id_is_refused():
    protocol = ClientProtocol("t")
    correlation_id = sent_request(protocol)
    protocol.receive_data(api_versions_response(correlation_id + 5))
    with pytest.raises(CorrelationMismatch) as caught:
        protocol.next_response()
    assert (caught.value.received, caught.value.expected) == (correlation_id + 5, correlation_id)


@pytest.mark.parametrize("size", [-1, 0, MIN_RESPONSE_BYTES - 1, 1025])
def test_a_frame_size_out_of_bounds_is_refused_before_its_payload_arrives(size):
    reader = ResponseReader(max_response_bytes=1024)
    reader.feed(struct.pack(">i", size))       # no payload at all
    with pytest.raises(BadResponse, match=f"{size} bytes"):
        reader.next_frame()


def test_the_size_bounds_are_inclusive():
    reader = ResponseReader(max_response_bytes=8)
    reader.feed(struct.pack(">i", 8) + b"12345678" + struct.pack(">i", 4) + b"abcd")
    assert reader.next_frame() == b"12345678"
    assert reader.next_frame() == b"abcd"
    assert reader.next_frame() is None


@pytest.mark.parametrize("received, where", [
    (b"", "closed by the broker"),
    (b"\x00\x00", "inside a frame's size (2 of 4 bytes)"),
    (struct.pack(">i", 10) + b"abc", "inside a frame (3 of 10 bytes)"),
])
def test_a_peer_that_closes_mid_frame_is_a_failed_connection(received, where):
    protocol = ClientProtocol("t")
    sent_request(protocol)
    protocol.receive_data(received)
    protocol.receive_data(b"")                 # EOF
    with pytest.raises(ConnectionFailed, match=where.replace("(", r"\(").replace(")", r"\)")):
        protocol.next_response()


def test_an_undecodable_response_is_a_bad_response():
    protocol = ClientProtocol("t")
    correlation_id = sent_request(protocol)
    body = struct.pack(">ih", correlation_id, 0)   # error code, then the array is missing
    protocol.receive_data(struct.pack(">i", len(body)) + body)
    with pytest.raises(BadResponse, match="does not decode"):
        protocol.next_response()


def test_correlation_ids_wrap_before_2_pow_31():
    protocol = ClientProtocol("t")
    protocol._last_correlation_id = 0x7FFFFFFF - 1
    assert [sent_request(protocol) for _ in range(3)] == [0x7FFFFFFF, 1, 2]


def test_the_status_request_is_answered_with_its_json():
    protocol = ClientProtocol("t")
    correlation_id, data = protocol.send_status({"q": 1})
    assert struct.unpack_from(">hhi", data, 4) == (10000, 0, correlation_id)
    protocol.receive_data(encode_status_response(correlation_id, {"broker_id": 3}))
    assert protocol.next_response() == {"broker_id": 3}


def test_receiving_with_nothing_outstanding_is_a_usage_error():
    with pytest.raises(RuntimeError):
        ClientProtocol("t").next_response()


# -- the two connections on a real socket ------------------------------------------------

class OneShotBroker:
    """Accepts one connection, reads one request, then sends ``answer(correlation_id)``
    and closes — or, with ``keep_open``, reads on without answering until the client
    closes."""

    def __init__(self, answer, keep_open: bool = False):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.answer = answer
        self.keep_open = keep_open
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        with self.listener:
            conn, _ = self.listener.accept()
            with conn:
                size = struct.unpack(">i", conn.recv(4, socket.MSG_WAITALL))[0]
                request = conn.recv(size, socket.MSG_WAITALL)
                correlation_id = struct.unpack_from(">i", request, 4)[0]
                conn.sendall(self.answer(correlation_id))
                while self.keep_open and conn.recv(65536):
                    pass


ANSWERS = {
    "mismatch": (lambda cid: api_versions_response(cid + 1), CorrelationMismatch),
    "oversize": (lambda cid: struct.pack(">i", 1 << 30), BadResponse),
    "closed-mid-frame": (lambda cid: api_versions_response(cid)[:-2], ConnectionFailed),
}


@pytest.mark.parametrize("case", sorted(ANSWERS))
def test_blocking_connection_refuses_and_closes(case):
    answer, error = ANSWERS[case]
    broker = OneShotBroker(answer)
    conn = BlockingConnection(("127.0.0.1", broker.port), timeout_s=5.0)
    with pytest.raises(error) as caught:
        conn.request(ApiVersionsRequest[0]())
    assert str(caught.value).startswith(f"127.0.0.1:{broker.port}: ")
    assert conn.sock.fileno() == -1             # the connection is finished


@pytest.mark.parametrize("case", sorted(ANSWERS))
def test_async_connection_refuses_closes_and_reconnects_next_time(case):
    answer, error = ANSWERS[case]

    async def scenario():
        broker = OneShotBroker(answer)
        conn = AsyncConnection("127.0.0.1", broker.port, "t", timeout_s=5.0)
        with pytest.raises(error):
            await conn.request(ApiVersionsRequest[0]())
        assert not conn.connected
        good = OneShotBroker(api_versions_response)
        conn.port = good.port
        response = await conn.request(ApiVersionsRequest[0]())
        assert response.error_code == 0
        await conn.close()

    asyncio.run(scenario())


def test_a_silent_broker_times_out():
    listener = socket.create_server(("127.0.0.1", 0))
    with listener:
        conn = BlockingConnection(("127.0.0.1", listener.getsockname()[1]), timeout_s=0.2)
        with pytest.raises(ConnectionFailed, match="timed out"):
            conn.status()


def test_nothing_listening_is_a_failed_connection():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ConnectionFailed, match=f"127.0.0.1:{port}"):
        BlockingConnection(("127.0.0.1", port), timeout_s=1.0)


def test_async_connection_times_out_on_a_silent_broker_and_closes():
    """The answer's timer (``timeout_s``) ends a round trip the broker never answers;
    the connection is then closed, and the next request dials again."""
    async def scenario():
        listener = socket.create_server(("127.0.0.1", 0))
        with listener:
            conn = AsyncConnection("127.0.0.1", listener.getsockname()[1], "t", timeout_s=0.2)
            with pytest.raises(ConnectionFailed, match="timed out"):
                await conn.request(ApiVersionsRequest[0]())
            assert not conn.connected
        good = OneShotBroker(api_versions_response)
        conn.port = good.port
        assert (await conn.request(ApiVersionsRequest[0]())).error_code == 0
        await conn.close()

    asyncio.run(scenario())


DEADLINE_S = 0.4


def test_a_round_trip_on_a_reused_connection_gets_its_whole_timeout():
    """One timer per connection, set again when it fires before the deadline of the
    round trip then out: a round trip on a reused connection still gets its whole
    ``timeout_s``, no more.  The broker answers the first request, never the second."""
    async def scenario():
        loop = asyncio.get_running_loop()
        broker = OneShotBroker(api_versions_response, keep_open=True)
        conn = AsyncConnection("127.0.0.1", broker.port, "t", timeout_s=DEADLINE_S)
        assert (await conn.request(ApiVersionsRequest[0]())).error_code == 0
        # The timer set for the first round trip fires halfway through the second.
        await asyncio.sleep(DEADLINE_S / 2)
        sent = loop.time()
        with pytest.raises(ConnectionFailed, match="timed out"):
            await conn.request(ApiVersionsRequest[0]())
        waited = loop.time() - sent
        assert DEADLINE_S - 0.02 <= waited < 2 * DEADLINE_S
        assert not conn.connected and conn._timer is None

    asyncio.run(scenario())

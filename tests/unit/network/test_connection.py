"""Connection: the per-client asyncio protocol around the frame codec.

Driven on a real event loop through ``asyncio.Protocol``'s callbacks with a fake
transport that records writes, pause/resume_reading and close (one test uses a real TCP
socket instead).  Requests are real ApiVersions bytes encoded by kafka-python; the
ApiVersions entry of the handler table is swapped (monkeypatch, restored after each
test) for a wrapper around the real handler that can be held per correlation id, so a
test decides which request finishes when.
"""
from __future__ import annotations

import asyncio
import gc
import struct
import warnings
from types import SimpleNamespace

import pytest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from broker.api import CLOSE, HANDLERS, Later
from broker.api.metadata import handle_api_versions
from broker.controller.state import ClusterState
from broker.metrics.stats import DISCARD_REQUESTS
from broker.network.connection import Connection
from broker.network.limits import ConnectionLimits
from protocol.errors import ErrorCode
from protocol.framing import frame
from protocol.messages import api_versions_body

PEER = ("127.0.0.1", 50123)
TIMEOUT_S = 10.0


# -- stand-ins ---------------------------------------------------------------------------

class FakeBroker:
    """A ConnectionContext (what Connection touches of the broker): ``config``,
    ``connections``, the connection limits and the ``api_context`` it hands to handlers
    (the ApiVersions handler used here reads only its image)."""

    def __init__(self, max_in_flight: int = 100, max_frame_bytes: int = 1 << 20):
        self.config = {"queued.max.requests.per.connection": max_in_flight,
                       "socket.request.max.bytes": max_frame_bytes}
        self.connections: set = set()
        self.api_context = SimpleNamespace(image=ClusterState())
        self.limits = ConnectionLimits(self.config, "")
        self.request_stats = DISCARD_REQUESTS


class FakeTransport:
    """Records what the connection does to its socket. ``close`` reports the loss to the
    protocol on the next loop iteration, as asyncio's selector transports do."""

    def __init__(self, protocol: asyncio.Protocol):
        self.protocol = protocol
        self.writes: list[bytes] = []
        self.frames_per_call: list[int] = []
        self.reading = True
        self.pauses = 0
        self.resumes = 0
        self.closed = False
        self.lost = False

    def get_extra_info(self, name, default=None):
        return PEER if name == "peername" else default

    def write(self, data) -> None:
        self.writelines([data])

    def writelines(self, buffers) -> None:
        """One call (one system call on a real transport): ``writes`` gets each response
        frame it carried, ``frames_per_call`` how many there were."""
        assert not self.closed, "write after close"
        data = b"".join(bytes(b) for b in buffers)
        count = 0
        while data:
            (size,) = struct.unpack_from(">i", data, 0)
            assert len(data) >= 4 + size, "a write ends inside a response frame"
            self.writes.append(data[:4 + size])
            data = data[4 + size:]
            count += 1
        self.frames_per_call.append(count)

    def pause_reading(self) -> None:
        self.pauses += 1
        self.reading = False

    def resume_reading(self) -> None:
        self.resumes += 1
        self.reading = True

    def is_reading(self) -> bool:
        return self.reading

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        asyncio.get_running_loop().call_soon(self._lose)

    def _lose(self) -> None:
        if not self.lost:
            self.lost = True
            self.protocol.connection_lost(None)


class Handlers:
    """The ApiVersions handler, holdable per correlation id; records what ran."""

    def __init__(self):
        self.gates: dict[int, asyncio.Event] = {}
        self.results: dict[int, object] = {}  # cid -> CLOSE / None / an exception to raise
        self.started: list[int] = []
        self.finished: list[int] = []
        self.cancelled: list[int] = []

    def hold(self, *cids: int) -> None:
        for cid in cids:
            self.gates[cid] = asyncio.Event()

    def release(self, cid: int) -> None:
        self.gates[cid].set()

    async def api_versions(self, ctx, request):
        cid = request.correlation_id
        self.started.append(cid)
        try:
            if cid in self.gates:
                await self.gates[cid].wait()
        except asyncio.CancelledError:
            self.cancelled.append(cid)
            raise
        self.finished.append(cid)
        if cid in self.results:
            result = self.results[cid]
            if isinstance(result, Exception):
                raise result
            return result
        return await handle_api_versions(ctx, request)


@pytest.fixture
def handlers(monkeypatch) -> Handlers:
    h = Handlers()
    # Connection looks handlers up in broker.api.HANDLERS (the same dict object).
    monkeypatch.setitem(HANDLERS, ApiKey.ApiVersions, h.api_versions)
    return h


# -- helpers -----------------------------------------------------------------------------

def api_versions(cid: int, version: int = 0) -> bytes:
    """A framed ApiVersions request as a client sends it."""
    if version >= 3:
        request = ApiVersionsRequest[version](client_software_name="raftwood-tests",
                                              client_software_version="1.0")
    else:
        request = ApiVersionsRequest[version]()
    request.with_header(correlation_id=cid, client_id="conn-test")
    return bytes(request.encode(header=True, framed=True))


def undecodable_header(cid: int) -> bytes:
    """A frame of valid size whose ApiVersions v0 header announces a 50-byte client id
    that is not there."""
    return frame(struct.pack(">hhih", ApiKey.ApiVersions, 0, cid, 50))


def correlation_ids(writes: list[bytes]) -> list[int]:
    """The correlation id of every response frame written, in order; each write must be
    exactly one complete frame."""
    cids = []
    for data in writes:
        (size,) = struct.unpack_from(">i", data, 0)
        assert size == len(data) - 4, "a write is not exactly one response frame"
        cids.append(struct.unpack_from(">i", data, 4)[0])
    return cids


def decode_api_versions(data: bytes, version: int):
    return ApiVersionsResponse.decode(data[4:], version=version, header=True)


def open_connection(broker: FakeBroker) -> tuple[Connection, FakeTransport]:
    conn = Connection(broker)
    transport = FakeTransport(conn)
    conn.connection_made(transport)
    return conn, transport


async def settle(rounds: int = 20) -> None:
    """Let every runnable task and callback run."""
    for _ in range(rounds):
        await asyncio.sleep(0)


def run(scenario):
    async def bounded():
        async with asyncio.timeout(TIMEOUT_S):  # in this task: no wrapper task to count
            await scenario()
    asyncio.run(bounded())


def other_tasks() -> set:
    return {t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()}


# -- 1. ordering -------------------------------------------------------------------------

def test_responses_leave_in_request_order_when_later_requests_finish_first(handlers):
    async def scenario():
        broker = FakeBroker()
        conn, transport = open_connection(broker)
        assert conn in broker.connections and conn.peer == "127.0.0.1:50123"
        handlers.hold(1)
        conn.data_received(api_versions(1) + api_versions(2, version=1))
        conn.data_received(api_versions(3, version=3))
        await settle()
        # Each request runs as its own task: 2 and 3 are done while 1 is held ...
        assert handlers.started == [1, 2, 3]
        assert handlers.finished == [2, 3]
        # ... but nothing may leave ahead of 1.
        assert transport.writes == []
        handlers.release(1)
        await settle()
        assert correlation_ids(transport.writes) == [1, 2, 3]
        for data, version in zip(transport.writes, (0, 1, 3)):
            response = decode_api_versions(data, version)
            assert response.error_code == ErrorCode.NONE
            assert any(k.api_key == ApiKey.ApiVersions for k in response.api_keys)
        assert not transport.closed
    run(scenario)


def test_answers_finishing_in_the_same_pass_leave_in_one_write(handlers):
    """Three held requests released together (as one high watermark move releases
    several acks=all produces) are written with one call, in order; a request answered
    alone later still gets its own write."""
    async def scenario():
        conn, transport = open_connection(FakeBroker())
        handlers.hold(1, 2, 3)
        conn.data_received(api_versions(1) + api_versions(2) + api_versions(3))
        await settle()
        assert transport.writes == []
        for cid in (1, 2, 3):
            handlers.release(cid)
        await settle()
        assert correlation_ids(transport.writes) == [1, 2, 3]
        assert transport.frames_per_call == [3]
        conn.data_received(api_versions(4))
        await settle()
        assert correlation_ids(transport.writes) == [1, 2, 3, 4]
        assert transport.frames_per_call == [3, 1]
    run(scenario)


def test_an_answer_made_without_a_handler_still_waits_for_the_requests_before_it(handlers):
    """KIP-511: ApiVersions of an unserved version is answered on the spot (v0 body with
    UNSUPPORTED_VERSION), yet it must queue behind a pending earlier request."""
    async def scenario():
        conn, transport = open_connection(FakeBroker())
        handlers.hold(1)
        conn.data_received(api_versions(1)
                           + frame(struct.pack(">hhih", ApiKey.ApiVersions, 99, 2, -1)))
        await settle()
        assert handlers.started == [1]  # 2 never reaches a handler
        assert transport.writes == []
        handlers.release(1)
        await settle()
        assert correlation_ids(transport.writes) == [1, 2]
        fallback = decode_api_versions(transport.writes[1], 0)
        assert fallback.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert fallback.api_keys, "the fallback must list the served ranges"
        assert not transport.closed
    run(scenario)


# -- 2. backpressure ---------------------------------------------------------------------

def test_reading_pauses_at_the_in_flight_cap_and_resumes_once_answers_drain(handlers):
    cap = 3

    async def scenario():
        conn, transport = open_connection(FakeBroker(max_in_flight=cap))
        handlers.hold(*range(1, cap + 2))
        for cid in range(1, cap):
            conn.data_received(api_versions(cid))
        await settle()
        assert transport.reading and transport.pauses == 0  # cap - 1 in flight
        # The cap-th and (cap+1)-th arrive in one read: both are taken (the bytes are
        # already here), and reading stops.
        conn.data_received(api_versions(cap) + api_versions(cap + 1))
        await settle()
        assert handlers.started == list(range(1, cap + 2))
        assert not transport.reading and transport.pauses == 1
        # A finished answer stuck behind an unfinished one still counts as in flight.
        handlers.release(cap + 1)
        await settle()
        assert transport.writes == [] and not transport.reading
        # Draining: 1 written -> 3 queued (>= cap), still paused; 2 written -> 2 queued.
        handlers.release(1)
        await settle()
        assert correlation_ids(transport.writes) == [1]
        assert not transport.reading
        handlers.release(2)
        await settle()
        assert correlation_ids(transport.writes) == [1, 2]
        assert transport.reading and transport.resumes == 1
        handlers.release(3)
        await settle()
        assert correlation_ids(transport.writes) == [1, 2, 3, 4]
        # No redundant pause/resume calls on the transport.
        assert (transport.pauses, transport.resumes) == (1, 1)
    run(scenario)


def test_a_full_write_buffer_pauses_reading_until_it_drains(handlers):
    async def scenario():
        conn, transport = open_connection(FakeBroker(max_in_flight=10))
        conn.pause_writing()
        assert not transport.reading
        conn.data_received(api_versions(1))
        await settle()
        assert not transport.reading  # the answer going out must not resume reading
        conn.resume_writing()
        assert transport.reading and (transport.pauses, transport.resumes) == (1, 1)
        assert correlation_ids(transport.writes) == [1]
    run(scenario)


# -- 3. malformed frames -----------------------------------------------------------------

@pytest.mark.parametrize("bad_size", [3, 7, 4097, -1], ids=["tiny", "below-header", "too-big",
                                                               "negative"])
def test_a_bad_frame_size_closes_the_connection_and_keeps_earlier_answers(handlers, bad_size):
    async def scenario():
        broker = FakeBroker(max_frame_bytes=4096)
        conn, transport = open_connection(broker)
        conn.data_received(api_versions(1))
        await settle()
        assert correlation_ids(transport.writes) == [1]
        answered = list(transport.writes)
        # The bad size, then a valid request in the same read: nothing after the bad
        # prefix may be read as a request.
        conn.data_received(struct.pack(">i", bad_size) + api_versions(2))
        await settle()
        assert transport.closed and transport.lost
        assert transport.writes == answered
        assert handlers.started == [1]
        assert conn not in broker.connections
        # Bytes arriving after the close are ignored.
        conn.data_received(api_versions(3))
        await settle()
        assert handlers.started == [1] and transport.writes == answered
    run(scenario)


def test_an_undecodable_header_closes_after_the_answers_already_owed(handlers):
    async def scenario():
        conn, transport = open_connection(FakeBroker())
        handlers.hold(2)
        conn.data_received(api_versions(1))
        await settle()
        assert correlation_ids(transport.writes) == [1]
        conn.data_received(api_versions(2))
        conn.data_received(undecodable_header(3))
        await settle()
        # 2 is owed an answer: the connection stops reading but stays open for it.
        assert not transport.closed and not transport.reading
        handlers.release(2)
        await settle()
        assert correlation_ids(transport.writes) == [1, 2]  # nothing for 3
        assert transport.closed and transport.lost
    run(scenario)


def test_an_unserved_api_version_closes_like_a_malformed_request(handlers):
    async def scenario():
        conn, transport = open_connection(FakeBroker())
        conn.data_received(api_versions(1))
        await settle()
        # Metadata v99 is not served (only ApiVersions has the KIP-511 answer).
        conn.data_received(frame(struct.pack(">hhih", ApiKey.Metadata, 99, 2, -1)))
        await settle()
        assert correlation_ids(transport.writes) == [1]
        assert transport.closed
    run(scenario)


def test_no_request_after_an_undecodable_one_is_handled(handlers):
    """The class docstring: "after a malformed or unsupported request nothing more is
    read".  Here the malformed request arrives while an earlier one is still owed an
    answer, and a valid request follows in the same read."""
    async def scenario():
        conn, transport = open_connection(FakeBroker())
        handlers.hold(1)
        conn.data_received(api_versions(1) + undecodable_header(2) + api_versions(3))
        await settle()
        assert handlers.started == [1], "a request after the malformed one reached a handler"
        handlers.release(1)
        await settle()
        assert correlation_ids(transport.writes) == [1]
        assert transport.closed
    run(scenario)


# -- 4. how bytes arrive -----------------------------------------------------------------

def test_one_byte_per_read_and_many_frames_per_read_give_the_same_answers(handlers):
    requests = [api_versions(1, 0), api_versions(2, 1), api_versions(3, 2),
                api_versions(4, 3), api_versions(5, 4),
                frame(struct.pack(">hhih", ApiKey.ApiVersions, 99, 6, -1))]
    stream = b"".join(requests)
    frame_ends = {sum(len(r) for r in requests[:i + 1]) for i in range(len(requests))}

    async def scenario():
        whole, whole_transport = open_connection(FakeBroker())
        whole.data_received(stream)
        await settle()
        started_whole = list(handlers.started)

        handlers.started.clear()
        trickle, trickle_transport = open_connection(FakeBroker())
        for i in range(len(stream)):
            trickle.data_received(stream[i:i + 1])
            await settle(2)
            # A request is taken exactly when its last byte arrives, never before (the
            # sixth frame is answered without a handler).
            complete = sum(1 for end in frame_ends if end <= i + 1)
            assert len(handlers.started) == min(complete, 5), f"after byte {i + 1}"
        await settle()
        assert handlers.started == started_whole == [1, 2, 3, 4, 5]
        assert correlation_ids(whole_transport.writes) == [1, 2, 3, 4, 5, 6]
        assert trickle_transport.writes == whole_transport.writes
        assert not whole_transport.closed and not trickle_transport.closed
    run(scenario)


# -- 5. losing the connection ------------------------------------------------------------

def test_losing_the_connection_cancels_every_pending_handler(handlers):
    async def scenario():
        broker = FakeBroker()
        conn, transport = open_connection(broker)
        handlers.hold(1, 2)
        conn.data_received(api_versions(1) + api_versions(2) + api_versions(3))
        await settle()
        assert handlers.finished == [3] and other_tasks(), "1 and 2 should be in flight"
        conn.connection_lost(ConnectionResetError("peer went away"))
        await settle()
        assert sorted(handlers.cancelled) == [1, 2]
        assert handlers.finished == [3]
        assert other_tasks() == set(), "a request task outlived its connection"
        assert transport.writes == []
        assert conn not in broker.connections
        # Late bytes on a lost connection are ignored.
        conn.data_received(api_versions(4))
        await settle()
        assert handlers.started == [1, 2, 3]
    run(scenario)


@pytest.mark.parametrize("outcome", ["close", "error"])
def test_a_handler_closing_the_connection_cancels_the_requests_behind_it(handlers, outcome):
    """A handler answering CLOSE (failed acks=0 produce) or raising closes this
    connection after the answers before it; requests behind it are cancelled."""
    async def scenario():
        conn, transport = open_connection(FakeBroker())
        handlers.results[2] = CLOSE if outcome == "close" else RuntimeError("a bug of ours")
        handlers.hold(1, 2, 3)
        conn.data_received(api_versions(1) + api_versions(2) + api_versions(3))
        await settle()
        handlers.release(2)
        await settle()
        assert not transport.closed  # 1 is still owed
        handlers.release(1)
        await settle()
        assert correlation_ids(transport.writes) == [1]
        assert transport.closed and transport.lost
        assert handlers.cancelled == [3]
        assert other_tasks() == set()
    run(scenario)


# -- plain handlers (no task; an answer now or a Later) ------------------------------------

class Direct:
    """An ApiVersions handler in plain ``def`` form (as Produce and Fetch are): correlation
    ids in ``later`` get a Later the test resolves; the others are answered on the spot."""

    def __init__(self):
        self.later: dict[int, Later] = {}
        self.cancelled: list[int] = []
        self.bodies: dict[int, object] = {}

    def hold(self, *cids: int) -> None:
        for cid in cids:
            self.later[cid] = Later()
            self.later[cid].on_cancel = lambda cid=cid: self.cancelled.append(cid)

    def resolve(self, cid: int, make_body=None) -> None:
        self.later[cid].resolve(make_body or (lambda: self.bodies[cid]))

    def handle(self, ctx, request):
        cid = request.correlation_id
        self.bodies[cid] = api_versions_body()
        return self.later.get(cid) or self.bodies[cid]


@pytest.fixture
def direct(monkeypatch) -> Direct:
    d = Direct()
    monkeypatch.setitem(HANDLERS, ApiKey.ApiVersions, d.handle)
    return d


def test_a_direct_answer_given_later_keeps_its_place_in_the_order(direct):
    """No task runs a direct request: one answered on the spot is queued at once, and
    one answered later holds back those behind it until its Later resolves."""
    async def scenario():
        conn, transport = open_connection(FakeBroker())
        direct.hold(1)
        conn.data_received(api_versions(1) + api_versions(2) + api_versions(3))
        assert other_tasks() == set()
        await settle()
        assert transport.writes == []
        direct.resolve(1)
        await settle()
        assert correlation_ids(transport.writes) == [1, 2, 3]
        assert transport.frames_per_call == [3]
        assert not transport.closed
    run(scenario)


def test_losing_the_connection_cancels_a_direct_answer_still_to_come(direct):
    async def scenario():
        broker = FakeBroker()
        conn, transport = open_connection(broker)
        direct.hold(1, 2)
        conn.data_received(api_versions(1) + api_versions(2))
        direct.resolve(2)  # resolved, but owed after 1: not cancelled
        conn.connection_lost(ConnectionResetError("peer went away"))
        assert direct.cancelled == [1]
        direct.resolve(1)  # too late: nothing is built or written
        await settle()
        assert transport.writes == []
        assert conn not in broker.connections
    run(scenario)


def test_a_direct_body_that_fails_to_build_closes_after_the_answers_owed(direct):
    async def scenario():
        conn, transport = open_connection(FakeBroker())
        direct.hold(2)
        conn.data_received(api_versions(1) + api_versions(2) + api_versions(3))
        direct.resolve(2, lambda: 1 / 0)  # a bug of ours in building the body
        await settle()
        assert correlation_ids(transport.writes) == [1]
        assert transport.closed and transport.lost
    run(scenario)


def test_drain_waits_for_a_direct_answer_still_to_come(direct):
    async def scenario():
        conn, transport = open_connection(FakeBroker())
        direct.hold(1)
        conn.data_received(api_versions(1))
        asyncio.get_running_loop().call_later(0.05, direct.resolve, 1)
        await conn.drain(timeout_s=5)
        assert correlation_ids(transport.writes) == [1]
        assert transport.closed
    run(scenario)


def test_a_later_resolved_before_its_callback_is_set_still_delivers_once():
    calls = []
    later = Later()
    later.resolve(lambda: "body")
    later.resolve(lambda: "second")  # ignored: a Later resolves once
    later.then(lambda make_body: calls.append(make_body()))
    assert calls == ["body"]
    cancelled = []
    later.on_cancel = lambda: cancelled.append(True)
    later.cancel()  # resolved already: nothing to withdraw
    assert cancelled == []


def test_an_async_handler_cancelled_before_its_task_starts_is_closed_not_left_unawaited(
        handlers):
    """One handler form: an ``async def`` handler is called in the decoding pass and its
    coroutine awaited in a task.  Lost before that task's first step, the coroutine is
    closed (the handler never ran), so Python reports no coroutine "never awaited"."""
    async def scenario():
        broker = FakeBroker()
        conn, transport = open_connection(broker)
        conn.data_received(api_versions(1))
        conn.connection_lost(ConnectionResetError("gone before the task ran"))
        await settle()
        assert handlers.started == []  # the handler's body never ran
        assert transport.writes == []
        assert other_tasks() == set()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run(scenario)
        gc.collect()
    assert [w for w in caught if "never awaited" in str(w.message)] == []


# -- over a real socket ------------------------------------------------------------------

def test_over_a_real_socket_order_holds_and_a_malformed_frame_ends_in_eof(handlers):
    async def scenario():
        broker = FakeBroker()
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: Connection(broker), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            handlers.hold(1)
            writer.write(api_versions(1) + api_versions(2, version=3))
            await writer.drain()
            while handlers.finished != [2]:
                await asyncio.sleep(0.01)
            (conn,) = broker.connections
            assert conn.peer.startswith("127.0.0.1:")
            handlers.release(1)
            answers = []
            for _ in range(2):
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                answers.append(struct.pack(">i", size) + await reader.readexactly(size))
            assert correlation_ids(answers) == [1, 2]
            assert decode_api_versions(answers[1], 3).error_code == ErrorCode.NONE
            writer.write(undecodable_header(3))
            await writer.drain()
            assert await asyncio.wait_for(reader.read(), 5) == b""  # EOF, no answer for 3
            while broker.connections:
                await asyncio.sleep(0.01)
        finally:
            writer.close()
            server.close()
            await server.wait_closed()
    run(scenario)

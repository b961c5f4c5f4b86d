"""The project's one Kafka client connection, asyncio or blocking, over the sans-IO
``client_protocol``.

* :class:`AsyncConnection` (event loop): the replica fetcher's link to a leader
  (``replication/leader_endpoint.py``).  Connects on first use; a whole exchange is
  bounded by ``timeout_s``; any failure closes it and the next request reconnects.
* :class:`BlockingConnection` (plain sockets): the command line (``cli/client.py``),
  process and cluster control (``harness/``) and tests.  Connects (and, given a
  ``security``, does TLS and SASL) in its constructor;
  every socket operation is bounded by ``timeout_s``; requests may be pipelined
  (``send`` several, then ``receive`` each in order); ``send_raw``/``read_frame`` move
  bytes for malformed-input tests.

Framing, correlation ids, the response size cap and the conversion of decode errors
live in ``client_protocol``; these classes only move bytes.  Every failure is a
:class:`ConnectionFailed` (a ``ConnectionError``) naming the peer, or one of its
kinds: :class:`BadResponse`, :class:`CorrelationMismatch`.  After one, the connection
is closed.
"""
from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

from .client_protocol import (  # noqa: F401  (the client's public names)
    MAX_RESPONSE_BYTES,
    NEED_DATA,
    BadResponse,
    ClientProtocol,
    ConnectionFailed,
    CorrelationMismatch,
    failure_reason,
)

DEFAULT_CLIENT_ID = "raftwood"
READ_BYTES = 1 << 20

Address = tuple[str, int]


def as_address(address: str | Address) -> Address:
    """``"host:port"`` or ``(host, port)`` → ``(host, port)``."""
    if isinstance(address, str):
        host, _, port = address.rpartition(":")
        return host.strip("[]"), int(port)
    return address[0], int(address[1])


class _ResponseStream(asyncio.Protocol):
    """The socket side of an ``AsyncConnection``: bytes in go to its ``ClientProtocol``;
    the response a round trip awaits is decoded as soon as its last byte arrives and
    handed to that round trip's future.  No StreamReader/StreamWriter, no task per
    exchange: a follower's fetch costs one future (the timeout is the connection's one
    lazily re-armed timer, see ``AsyncConnection``).  Event-loop only."""

    def __init__(self, protocol: ClientProtocol):
        self.protocol = protocol
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future | None = None   # the pending round trip's answer
        self.lost: BaseException | None = None      # set once the connection is gone
        self._drain_waiter: asyncio.Future | None = None
        self._paused = False
        self.closed = asyncio.get_running_loop().create_future()  # done at connection_lost

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data) -> None:
        self.protocol.receive_data(data)
        self._answer()

    def eof_received(self) -> bool:
        self.protocol.receive_data(b"")
        self._answer()
        return False  # let the transport close

    def connection_lost(self, exc) -> None:
        self.lost = ConnectionFailed(failure_reason(exc)) if exc is not None \
            else ConnectionFailed("connection closed by the broker")
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(self.lost)
        self._wake_drain()
        if not self.closed.done():
            self.closed.set_result(None)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake_drain()

    def _wake_drain(self) -> None:
        waiter, self._drain_waiter = self._drain_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _answer(self) -> None:
        """Hand the awaited response (or why it cannot come) to the waiting round trip."""
        waiter = self.waiter
        if waiter is None or waiter.done():
            return
        try:
            response = self.protocol.next_response()
        except Exception as exc:  # BadResponse, ConnectionFailed: the round trip fails
            self.waiter = None
            waiter.set_exception(exc)
            return
        if response is not NEED_DATA:
            self.waiter = None
            waiter.set_result(response)

    async def drain(self) -> None:
        if self._paused and self.lost is None:
            self._drain_waiter = asyncio.get_running_loop().create_future()
            await self._drain_waiter


class AsyncConnection:
    """One connection to one broker, one request at a time.  Event-loop only.

    ``request`` raises ConnectionFailed and leaves the connection closed on any I/O
    problem, timeout or bad response; the next ``request`` reconnects, as it does when
    the peer closed the connection between requests (an idle close).

    The timeout of a round trip is a deadline, not a timer of its own: a follower makes
    one round trip per acknowledged batch, and a timer created and cancelled for each
    cost more than the rest of the exchange's bookkeeping.  One timer per connection
    runs while a round trip is out; when it fires before the current round trip's
    deadline (the exchange it was set for has been answered since) it is set again for
    that deadline, so every round trip still fails exactly ``timeout_s`` after it was sent.
    """

    def __init__(self, host: str, port: int, client_id: str = DEFAULT_CLIENT_ID,
                 timeout_s: float = 30.0, max_response_bytes: int = MAX_RESPONSE_BYTES,
                 security=None):
        self.host = host
        self.port = port
        # broker.security.client.ClientSecurity: TLS and SASL of the listener dialled.
        self.security = security
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.max_response_bytes = max_response_bytes
        self._stream: _ResponseStream | None = None
        self._protocol: ClientProtocol | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._deadline = 0.0  # loop time by which the round trip out must be answered
        self._timer: asyncio.TimerHandle | None = None  # set while a round trip may be out

    @property
    def peer(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def connected(self) -> bool:
        return self._stream is not None

    async def request(self, message: Any, response_class: Any = None) -> Any:
        """Send ``message`` (a versioned kafka-python request) and return its response
        (decoded with ``response_class``, by default the one its header names)."""
        try:
            protocol = self._protocol
            if protocol is None or protocol.outstanding or self._stream.lost is not None:
                # Closed meanwhile (a broker closes connections idle for
                # connections.max.idle.ms), or an exchange was cancelled midway (its
                # answer may still come): a new connection either way.
                if protocol is not None:
                    await self.close()
                async with asyncio.timeout(self.timeout_s):  # connecting (and SASL)
                    await self._connect()
            waiter = self._send(message, response_class)
            self._deadline = deadline = self._loop.time() + self.timeout_s
            if self._timer is None:
                self._timer = self._loop.call_at(deadline, self._check_deadline)
            stream = self._stream
            if stream._paused:
                await stream.drain()
            return await waiter
        except ConnectionFailed as exc:
            await self.close()
            exc.peer = exc.peer or self.peer
            raise
        except (TimeoutError, OSError) as exc:
            await self.close()
            raise ConnectionFailed(failure_reason(exc), self.peer) from exc

    def _check_deadline(self) -> None:
        """The connection's timer: time out the round trip out once its deadline has
        passed, else wait again until it does; nothing to do when none is out."""
        self._timer = None
        stream = self._stream
        waiter = stream.waiter if stream is not None else None
        if waiter is None or waiter.done():
            return  # the next round trip sets the timer again
        if self._loop.time() >= self._deadline:
            waiter.set_exception(TimeoutError())
        else:
            self._timer = self._loop.call_at(self._deadline, self._check_deadline)

    async def _connect(self) -> None:
        context = self.security.ssl_context if self.security is not None else None
        protocol = ClientProtocol(self.client_id, self.max_response_bytes)
        self._loop = asyncio.get_running_loop()
        _, stream = await self._loop.create_connection(
            lambda: _ResponseStream(protocol), self.host, self.port, ssl=context,
            server_hostname=self.host if context is not None else None)
        self._stream, self._protocol = stream, protocol
        if self.security is not None and self.security.sasl_mechanism:
            await self.security.authenticate(self._round_trip, self.peer)

    def _send(self, message, response_class) -> asyncio.Future:
        stream = self._stream
        if stream.lost is not None:
            raise stream.lost
        _, data = self._protocol.send_request(message, response_class)
        waiter = stream.waiter = self._loop.create_future()
        stream.transport.write(data)
        return waiter

    async def _round_trip(self, message, response_class=None):
        waiter = self._send(message, response_class)
        await self._stream.drain()
        return await waiter

    async def close(self) -> None:
        """Idempotent; a later request reconnects."""
        stream, self._stream = self._stream, None
        self._protocol = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if stream is not None and stream.transport is not None:
            stream.transport.close()
            try:
                await stream.closed  # connection_lost, as StreamWriter.wait_closed did
            except (OSError, asyncio.CancelledError):
                pass


class BlockingConnection:
    """One TCP connection to one broker, on plain sockets.  Not thread-safe: one
    connection per thread.

    Invariant: responses are read in the order their requests were sent; after a
    ConnectionFailed (or any kind of it) the socket is closed and every later call
    fails.  ``timeout_s`` bounds each socket operation (connect, send, each read).
    """

    def __init__(self, address: str | Address, *, client_id: str = DEFAULT_CLIENT_ID,
                 timeout_s: float = 10.0, max_response_bytes: int = MAX_RESPONSE_BYTES,
                 security=None):
        self.host, self.port = as_address(address)
        self.timeout_s = timeout_s
        self.protocol = ClientProtocol(client_id, max_response_bytes)
        # broker.security.client.ClientSecurity: TLS, then SASL, before the first request.
        context = security.ssl_context if security is not None else None
        try:
            self.sock = socket.create_connection((self.host, self.port), timeout=timeout_s)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if context is not None:
                self.sock = context.wrap_socket(self.sock, server_hostname=self.host)
        except OSError as exc:  # ssl.SSLError included: a failed handshake
            if getattr(self, "sock", None) is not None:
                self.sock.close()
            raise ConnectionFailed(failure_reason(exc), self.peer) from exc
        if security is not None and security.sasl_mechanism:
            try:
                security.authenticate_blocking(self.request, self.peer)
            except ConnectionFailed:
                self.close()
                raise

    @property
    def peer(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def address(self) -> Address:
        return self.host, self.port

    @property
    def client_id(self) -> str:
        return self.protocol.client_id

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    # -- requests --------------------------------------------------------------------------
    def request(self, message, response_class=None):
        """Send a kafka-python request (version set by ``Cls[v]``); its response."""
        return self.receive(message, self.send(message, response_class))

    def send(self, message, response_class=None, *, expect_response: bool = True) -> int:
        """Send without waiting; returns the correlation id (``receive`` takes it).
        ``expect_response=False`` for a request the broker does not answer (acks=0)."""
        correlation_id, data = self.protocol.send_request(
            message, response_class, expect_response=expect_response)
        self.send_raw(data)
        return correlation_id

    def receive(self, message=None, correlation_id: int | None = None):
        """The response to the oldest request still owed one (``message`` and
        ``correlation_id`` are the caller's note of which; the protocol checks the id
        the broker answered with).  RuntimeError when ``correlation_id`` is not the
        oldest one outstanding: responses come in request order."""
        expected = self.protocol.next_expected
        if correlation_id is not None and correlation_id != expected:
            raise RuntimeError(f"correlation id {correlation_id} is not the next response "
                               f"due (that is {expected})")
        return self._guarded(self._next_response)

    def status(self, query: dict | None = None):
        """Raftwood's private status request (``protocol/status.py``): the broker's JSON
        status object."""
        _, data = self.protocol.send_status(query)
        self.send_raw(data)
        return self._guarded(self._next_response)

    def _next_response(self):
        while (response := self.protocol.next_response()) is NEED_DATA:
            self.protocol.receive_data(self.sock.recv(READ_BYTES))
        return response

    # -- bytes -----------------------------------------------------------------------------
    def send_raw(self, data: bytes) -> None:
        """Bytes as they are (a malformed request, a frame cut in pieces)."""
        self._guarded(lambda: self.sock.sendall(data))

    def read_frame(self) -> bytes:
        """One response frame without its size prefix, undecoded."""
        def read():
            while (frame := self.protocol.next_frame()) is None:
                self.protocol.receive_data(self.sock.recv(READ_BYTES))
            return frame
        return self._guarded(read)

    def closed_by_peer(self, timeout_s: float = 5.0) -> bool:
        """True when the broker closes (EOF or reset) within ``timeout_s``, discarding any
        bytes it sends first; False when the connection is still open at the deadline."""
        deadline = time.monotonic() + timeout_s
        try:
            while (remaining := deadline - time.monotonic()) > 0:
                self.sock.settimeout(remaining)
                if not self.sock.recv(65536):
                    return True
        except TimeoutError:
            return False
        except OSError:  # ECONNRESET and friends
            return True
        finally:
            if self.sock.fileno() >= 0:
                self.sock.settimeout(self.timeout_s)
        return False

    def _guarded(self, operation):
        """Run a socket operation; any failure closes the connection and leaves as
        ConnectionFailed (or the BadResponse the protocol raised), naming the peer."""
        try:
            return operation()
        except ConnectionFailed as exc:
            self.close()
            exc.peer = exc.peer or self.peer
            raise
        except OSError as exc:
            self.close()
            raise ConnectionFailed(failure_reason(exc), self.peer) from exc

"""The asyncio server: one Connection per client socket around the sans-IO codec.

Per connection, frames are decoded as they arrive, and each request's handler
(``broker.api.HANDLERS``, one form: see ``broker/api/outcome.py``) is called in the pass
that decoded it.  An answer ready now is queued at once; one that must wait (an
acks=all produce, a long poll) comes back through a ``Later``, without a task (Produce
and Fetch); an ``async def`` handler's coroutine runs as its own task.  Either way a
waiting request does not hold up the requests behind it, and responses are nevertheless
written strictly in request order (Kafka clients match them by order).
Backpressure both ways: reading pauses while ``queued.max.requests.per.connection``
requests are in flight or while the transport's write buffer is full.
Limits against hostile peers (broker/network/limits.py): connections over
max.connections or max.connections.per.ip are closed at accept, idle ones after
connections.max.idle.ms, and a SASL listener reads frames of at most
sasl.server.max.receive.size before authentication.  What a peer can make us log is
rate-limited (``peer_log``).
"""
from __future__ import annotations

import asyncio
import logging
import os
import struct
import sys
import time
from collections import deque
from collections.abc import Coroutine
from dataclasses import dataclass
from inspect import CORO_CREATED, getcoroutinestate
from typing import TYPE_CHECKING

from kafka.protocol.api_key import ApiKey

from protocol.errors import CorruptRequest, UnsupportedVersion
from protocol.framing import FrameReader
from protocol.messages import (
    FramedFiles,
    Request,
    decode_request,
    encode_response,
    peek_header,
    unsupported_api_versions_response,
)
from protocol.status import STATUS_API_KEY, decode_status_request
from storage import FileRecords, StaleRegion, StorageError

from ..api import CLOSE, HANDLERS, Later
from ..api.client_quotas import charge_answer, request_time
from ..api.sasl import legacy_token
from ..api.status import status_response
from ..metrics.stats import DISCARD_REQUESTS, RequestStats
from ..quotas.request_time import timed
from ..security.listeners import UNNAMED_PLAINTEXT, Listener
from ..security.session import SecuritySession
from .limits import ConnectionLimits, setting
from .log_limit import RateLimitedLog

if TYPE_CHECKING:
    from ..api.context import ApiContext
    from ..config import BrokerConfig

log = logging.getLogger(__name__)
# What a peer can make us log: at most one line per kind per interval (and one traceback
# per kind of handler failure), for all connections of this process together.
peer_log = RateLimitedLog(log)

_CLOSE_MARK = object()
_MAX_IOV = 512  # buffers per os.writev (Linux allows 1024)
MUTE_SLACK_S = 0.001  # a throttle mute ending within this is over (see _update_reading)


@dataclass(frozen=True)
class ConnectionContext:
    """What a Connection uses of its broker, instead of the whole Broker (built in
    ``broker/node.py``): the settings, the handlers' ApiContext, the broker's set of open
    connections (each adds itself on accept and leaves on close; the broker drains them
    at shutdown), the connection limits they are counted in, and the per-API request
    stats they record into (metrics)."""

    config: BrokerConfig
    api_context: ApiContext
    connections: set
    limits: ConnectionLimits
    request_stats: RequestStats = DISCARD_REQUESTS


class _Pending:
    """A request being handled: its task and the handler's coroutine it awaits (or, for
    a handler that answers later without a task, its ``Later``), and its encoded answer
    once ``done``.  ``waiter``: a future set when it is done, made only by ``drain`` for
    a request without a task."""

    __slots__ = ("task", "awaited", "later", "result", "done", "waiter")

    def __init__(self) -> None:
        self.task: asyncio.Task | None = None
        self.awaited: Coroutine | None = None
        self.later: Later | None = None
        self.result = None
        self.done = False
        self.waiter: asyncio.Future | None = None

    def cancel(self) -> None:
        """The connection is gone: stop the work behind this request, answer nothing."""
        if self.task is not None:
            self.task.cancel()
            # A task cancelled before its first step never awaits the handler's
            # coroutine: close it, or it is reported as never awaited.
            if self.awaited is not None and getcoroutinestate(self.awaited) == CORO_CREATED:
                self.awaited.close()
        elif self.later is not None:
            self.later.cancel()


class Connection(asyncio.Protocol):
    """One client connection. Event-loop only.

    Invariants: responses leave in the order requests arrived; after a malformed or
    unsupported request nothing more is read, the responses already owed are written,
    then the socket closes; when the socket is lost every pending request is cancelled
    (which also withdraws it from the purgatories).
    """

    def __init__(self, context: ConnectionContext, listener: Listener = UNNAMED_PLAINTEXT):
        self.context = context
        self.api_context = context.api_context
        self.session = SecuritySession(listener)  # principal; SASL gate (broker/security)
        config = context.config
        self._max_request_bytes = config["socket.request.max.bytes"]
        # Before a SASL listener's client has authenticated, frames are capped at Kafka's
        # sasl.server.max.receive.size; the cap lifts when authentication succeeds.
        self._pre_auth = not self.session.authenticated
        self.reader = FrameReader(max_frame_bytes=min(
            self._max_request_bytes, setting(config, "sasl.server.max.receive.size"))
            if self._pre_auth else self._max_request_bytes)
        self._idle_s = setting(config, "connections.max.idle.ms") / 1000
        self._last_active = 0.0  # loop time of the last byte read or answer written
        self._idle_timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._admitted = False  # counted in the broker's ConnectionLimits
        self._address = ""  # the peer's address, as max.connections.per.ip counts it
        self.max_in_flight = max(1, config["queued.max.requests.per.connection"])
        self.request_stats = context.request_stats  # per-API counts and times (metrics)
        # request_percentage quotas (KIP-124): the broker's rates and metadata, if any.
        self._rates = getattr(self.api_context, "quotas", None)
        self._metadata = getattr(self.api_context, "metadata", None)
        self.transport: asyncio.Transport | None = None
        #: The socket's fd when Fetch records may go out with os.sendfile (a plaintext
        #: TCP transport); None under TLS, where every byte must pass through the
        #: transport's encryption.
        self._sendfile_fd: int | None = None
        self.peer = "?"
        self.client_host = ""
        self._queue: deque = deque()  # _Pending | bytes | _CLOSE_MARK, in arrival order
        self._flush_soon: asyncio.Handle | None = None  # a _flush due this event-loop pass
        self._read_paused = False
        self._write_paused = False
        # A client over its quota (KIP-219): nothing is read before this loop time.
        self._muted_until = 0.0
        self._closing = False
        # A malformed or refused request queued the close: frames already buffered
        # behind it are never handled (their side effects would happen unanswered).
        self._close_queued = False

    # -- asyncio.Protocol --------------------------------------------------------

    def connection_made(self, transport):
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.client_host = f"/{peer[0]}" if peer else ""
        sock = transport.get_extra_info("socket")
        if sock is not None and transport.get_extra_info("sslcontext") is None \
                and transport.get_extra_info("ssl_object") is None:
            self._sendfile_fd = sock.fileno()
        self.session.on_connection_made(transport)
        self._address = peer[0] if peer else ""
        refused = self._ip_quota_refusal() or \
            self.context.limits.admit(self._address, self.session.listener.name)
        if refused is not None:
            peer_log.warning(("refused", refused.split(" (")[0]),
                             "[Connection %s] closed at accept: %s",
                             self.peer, refused)
            self._closing = True
            transport.abort()
            return
        self._admitted = True
        self.context.connections.add(self)
        self._loop = loop = asyncio.get_running_loop()
        self._last_active = loop.time()
        self._idle_timer = loop.call_later(self._idle_s, self._maybe_close_idle)

    def _ip_quota_refusal(self) -> str | None:
        """The ``ip`` entity's connection_creation_rate (KIP-612), checked at accept."""
        api = self.api_context
        metadata = getattr(api, "metadata", None)
        if metadata is None or getattr(api, "quotas", None) is None:
            return None
        return api.quotas.admit_connection(metadata.image.client_quotas, self._address)

    def _maybe_close_idle(self) -> None:
        """Timer (connections.max.idle.ms): close the connection when nothing was read or
        written for that long and no answer is owed; otherwise look again when it could
        first be idle.  Exits when the connection is closing."""
        self._idle_timer = None
        if self._closing:
            return
        idle_for = self._loop.time() - self._last_active
        if idle_for >= self._idle_s and not self._queue:
            log.debug("[Connection %s] idle for %.0f s (connections.max.idle.ms); closing",
                      self.peer, idle_for)
            self._close_now()
            return
        wait = self._idle_s - idle_for if idle_for < self._idle_s else self._idle_s
        self._idle_timer = self._loop.call_later(wait, self._maybe_close_idle)

    def connection_lost(self, exc):
        self._closing = True
        if self._admitted:
            self._admitted = False
            self.context.limits.release(self._address, self.session.listener.name)
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        self.context.connections.discard(self)
        try:
            self.session.closed()
        except Exception:  # a handler's leftover must not break the close
            log.exception("[Connection %s] close callback failed", self.peer)
        for item in self._queue:
            if isinstance(item, _Pending):
                item.cancel()
        self._queue.clear()

    def data_received(self, data):
        if self._closing or self._close_queued:
            return
        self._last_active = self._loop.time()
        if self._pre_auth and self.session.authenticated:
            self._pre_auth = False
            self.reader.max_frame_bytes = self._max_request_bytes
        self.reader.feed(data)
        while not self._closing and not self._close_queued:
            try:
                frame = self.reader.next_frame()
            except CorruptRequest as exc:
                peer_log.warning("malformed frame", "[Connection %s] malformed frame, "
                                 "closing: %s", self.peer, exc)
                self._close_after_pending()
                return
            if frame is None:
                break
            self._dispatch(frame)
        self._update_reading()

    def pause_writing(self):
        self._write_paused = True
        self._update_reading()

    def resume_writing(self):
        self._write_paused = False
        self._update_reading()

    # -- requests ----------------------------------------------------------------

    def _dispatch(self, frame: bytes) -> None:
        if self.session.legacy_tokens:  # after a SaslHandshake v0: a bare SASL token
            reply = legacy_token(self.session, bytes(frame), self.peer)
            if reply is None:
                self._close_after_pending()
                return
            self._queue.append(struct.pack(">i", len(reply)) + reply)
            self._flush()
            return
        started_ns = self._request_quota_clock()
        header = None
        try:
            header = peek_header(frame)
            if not self.session.admits(header[0]):
                peer_log.warning("before authentication", "[Connection %s] request (api "
                                 "key %d) before SASL authentication on listener %s; closing",
                                 self.peer, header[0], self.session.listener.name)
                self._close_after_pending()
                return
            if header[0] == STATUS_API_KEY:
                correlation_id, _query = decode_status_request(frame)
                self._queue.append(status_response(self.api_context, correlation_id,
                                                   self.session, self.client_host))
                self._flush()
                return
            request = decode_request(frame, header)
            request.client_host = self.client_host
            request.session = self.session
            if started_ns:
                request.request_time = request_time(self.api_context, request, started_ns)
        except UnsupportedVersion as exc:
            if exc.api_key == ApiKey.ApiVersions:
                # KIP-511: answer with our ranges so the client can retry lower.
                self._queue.append(unsupported_api_versions_response(exc.correlation_id))
                self._flush()
                return
            peer_log.warning(("unsupported", exc.api_key), "[Connection %s] %s; closing",
                             self.peer, exc)
            self._close_after_pending()
            return
        except CorruptRequest as exc:
            peer_log.warning(("corrupt", header[0] if header else None),
                             "[Connection %s] %s; closing", self.peer, exc)
            self._close_after_pending()
            return
        pending = _Pending()
        self._queue.append(pending)
        self._run(request, pending)

    def _request_quota_clock(self) -> int:
        """``perf_counter_ns()`` when the image holds some request_percentage quota
        (KIP-124: the request's time is measured from its decode on), else 0 and no
        clock is read."""
        rates, metadata = self._rates, self._metadata
        if rates is None or metadata is None or \
                not rates.request_quotas_on(metadata.image.client_quotas):
            return 0
        return time.perf_counter_ns()

    def _run(self, request: Request, pending: _Pending) -> None:
        """Call the request's handler here, in the pass that decoded it.  An answer ready
        now is queued at once; a ``Later`` (an acks=all produce waiting for the high
        watermark, a long poll) hands over a body builder when ready, which this
        connection builds and queues from that callback: no task, coroutine or future.
        An awaitable (an ``async def`` handler's coroutine) is awaited in a task."""
        started = time.perf_counter()
        try:
            outcome = HANDLERS[request.api_key](self.api_context, request)
        except Exception:
            self._failed(request)
            self._answered(request, pending, started, CLOSE)
            return
        kind = outcome.__class__
        timer = request.request_time
        if timer is not None and (kind is Later or hasattr(kind, "__await__")):
            timer.stop()  # until the answer is built, or the coroutine's next step
        if kind is Later:
            pending.later = outcome
            outcome.then(lambda make_body: self._answered(
                request, pending, started, self._encoded(request, make_body, later=True)))
        elif hasattr(kind, "__await__"):
            pending.awaited = outcome
            pending.task = asyncio.get_running_loop().create_task(self._await(
                outcome if timer is None else timed(outcome, timer), request, pending,
                started))
        else:
            self._answered(request, pending, started, self._encoded(request, outcome))

    async def _await(self, outcome, request: Request, pending: _Pending,
                     started: float) -> None:
        """Await an ``async def`` handler's coroutine in this request's task; its answer
        is written as soon as every answer owed before it is out (no done-callback round
        through the event loop)."""
        try:
            body = await outcome
        except asyncio.CancelledError:
            # Cancelled with the connection (nothing is written then) or by the loop's
            # shutdown: the queue moves past this request, as for any finished one.
            self._answered(request, pending, started, None, flush_now=True)
            raise
        except Exception:
            self._failed(request)
            body = CLOSE
        self._answered(request, pending, started, self._encoded(request, body))

    def _encoded(self, request: Request, body, later: bool = False):
        """The answer to queue for ``body`` (``later``: a builder of it, called here).
        A body that fails to build or encode is our bug: logged, and this connection
        closes."""
        timer = request.request_time
        try:
            if timer is not None:
                timer.start()
            if later:
                body = body()
            if self.session.close_requested:  # a failed SASL step: answer, then close
                self._close_after_pending()
            if body is None or body is CLOSE:
                return body
            if timer is not None:
                charge_answer(request, body)
            return encode_response(request, body)
        except Exception:
            self._failed(request)
            return CLOSE

    def _failed(self, request: Request) -> None:
        """A handler or encoder raised (called in its ``except``): a bug of ours, not the
        peer's, but one a peer can repeat at will.  The first failure of each kind (API,
        version, exception type, the line that raised) is logged with its traceback, its
        repeats at most once per interval with a count; this connection closes."""
        exc_type, _exc, tb = sys.exc_info()
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        where = (tb.tb_frame.f_code.co_filename, tb.tb_lineno) if tb is not None else None
        kind = ("failed", request.api_key, request.api_version, exc_type, where)
        peer_log.log(logging.ERROR, kind, "[Connection %s] %s v%d failed (%s); closing",
                     self.peer, request.spec.name, request.api_version,
                     exc_type.__name__ if exc_type else "?", first_traceback=True)

    def _answered(self, request: Request, pending: _Pending, started: float, result,
                  flush_now: bool = False) -> None:
        """``pending`` is answered with ``result`` (encoded; None: nothing to send);
        its time is recorded and a flush is due."""
        if request.request_time is not None:
            request.request_time.settle()
        self.request_stats.record(request.spec.name, request.api_version,
                                  time.perf_counter() - started)
        pending.result, pending.done = result, True
        if request.throttle_ms > 0:
            self._mute(request.throttle_ms)
        if pending.waiter is not None and not pending.waiter.done():
            pending.waiter.set_result(None)
        if flush_now or result.__class__ is FramedFiles:
            self._flush()  # file regions go out in the pass that located them
        elif self._flush_soon is None:
            self._flush_soon = asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """Write every finished response at the head of the queue, in order.

        A handler's answer is written by a ``_flush`` called soon (``call_soon``), not at
        once: the answers that complete in the same event-loop pass — the acks=all
        produces one high watermark move releases, a client's pipelined requests — go
        out in one write, so one system call and one wake-up of the client instead of
        one per answer.  On loopback a write costs about 20 us of CPU, most of it
        delivering the segment and waking the reader, whatever its size.  Fetch
        answers holding file regions are the exception: they are written in the pass
        that located them (see ``_write_with_files``)."""
        self._flush_soon = None
        buffers: list = []  # the answers to write in one call, in order
        while self._queue and not self._closing:
            head = self._queue[0]
            if isinstance(head, _Pending):
                if not head.done:
                    break
                result = head.result
            else:
                result = head
            self._queue.popleft()
            if result is CLOSE or result is _CLOSE_MARK:
                if buffers:
                    self.transport.writelines(buffers)
                self._close_now()
                return
            if result.__class__ is FramedFiles:
                if buffers:
                    self.transport.writelines(buffers)
                    buffers = []
                if not self._write_with_files(result):
                    return  # closed
            elif isinstance(result, list):  # protocol.messages.Framed: buffers, not copied
                buffers += result
            elif result is not None:
                buffers.append(result)
        if buffers:
            self.transport.writelines(buffers)
            self._last_active = self._loop.time()
        self._update_reading()

    def _write_with_files(self, parts: list) -> bool:
        """Write a response holding ``storage.FileRecords`` (a zero-copy Fetch); False if
        the connection was closed instead.

        sendfile only when nothing is waiting in the transport (its buffer is empty, so
        what is written on the socket here comes right after everything written before)
        and the listener is plaintext: the bytes before each region go out with
        ``os.writev`` on the socket, the region with ``os.sendfile`` from the segment
        file, in order, until the socket stops taking bytes (EAGAIN).  Whatever is left
        (the rest of a region read with pread, and every part after it) goes to the
        transport as today, which then owns the ordering.  Under TLS, or behind
        buffered bytes, every region is read with pread and the parts written as usual.

        A region whose segment was truncated or closed since the read (StaleRegion, see
        ``storage/file_records.py``) cannot be sent right: the connection closes, mid
        response if need be, and the client fetches again.
        """
        fd = self._sendfile_fd
        try:
            for part in parts:
                if part.__class__ is FileRecords:
                    part.check()
            if fd is None or self.transport.get_write_buffer_size():
                self.transport.writelines(
                    [part.read() if part.__class__ is FileRecords else part for part in parts])
                return True
            rest = self._send_direct(fd, parts)
            if rest:
                self.transport.writelines(rest)
            return True
        except StaleRegion as exc:
            log.info("[Connection %s] closing: a fetched segment changed before its "
                     "records were sent (%s)", self.peer, exc)
        except StorageError as exc:  # a pread of the fallback failed (CorruptLog)
            log.warning("[Connection %s] closing: reading fetched records failed: %s",
                        self.peer, exc)
        except OSError as exc:  # the peer is gone (EPIPE, ECONNRESET) or the file failed
            log.info("[Connection %s] closing: writing a fetch response failed: %s",
                     self.peer, exc)
        self._close_now()
        return False

    @staticmethod
    def _send_direct(fd: int, parts: list) -> list:
        """Write ``parts`` on the non-blocking socket ``fd`` until it would block; return
        what is left, as bytes-like buffers (the unsent part of a region read with pread)."""
        plain: list = []
        for index, part in enumerate(parts):
            if part.__class__ is not FileRecords:
                plain.append(part)
                continue
            if plain:
                plain = _writev_all(fd, plain)
                if plain:
                    return plain + [part.read() if part.__class__ is FileRecords else part
                                    for part in parts[index:]]
            sent = 0
            for file_fd, position, length in part.fds():
                done = 0
                try:
                    while done < length:
                        n = os.sendfile(fd, file_fd, position + done, length - done)
                        if n == 0:  # the file ended early: its region cannot be right
                            raise StaleRegion("a segment file ended inside a region")
                        done += n
                except BlockingIOError:
                    pass
                sent += done
                if done < length:
                    return [part.read(sent)] + [
                        p.read() if p.__class__ is FileRecords else p
                        for p in parts[index + 1:]]
        return _writev_all(fd, plain) if plain else []

    def _close_after_pending(self) -> None:
        """Stop reading; close once the responses already owed have been written."""
        self._close_queued = True
        self._queue.append(_CLOSE_MARK)
        self.transport.pause_reading()
        self._read_paused = True
        self._flush()

    def _close_now(self) -> None:
        self._closing = True
        for item in self._queue:
            if isinstance(item, _Pending):
                item.cancel()
        self._queue.clear()
        self.transport.close()

    def _mute(self, throttle_ms: int) -> None:
        """Read nothing more for ``throttle_ms`` (a throttled answer, KIP-219); reading
        resumes by ``_update_reading`` when the time is up."""
        loop = asyncio.get_running_loop()
        until = loop.time() + throttle_ms / 1000.0
        if until > self._muted_until:
            self._muted_until = until
            loop.call_at(until, self._update_reading)
        self._update_reading()

    def _update_reading(self) -> None:
        if self._closing or self.transport is None or self.transport.is_closing():
            return
        if _CLOSE_MARK in self._queue:
            return
        # The mute's timer may run a hair before its time (asyncio runs a timer when
        # its time is within the clock resolution): a mute about to end has ended, or
        # reading would never resume.
        busy = len(self._queue) >= self.max_in_flight or self._write_paused or (
            self._muted_until and self._loop.time() < self._muted_until - MUTE_SLACK_S)
        if busy and not self._read_paused:
            self.transport.pause_reading()
            self._read_paused = True
        elif not busy and self._read_paused:
            self.transport.resume_reading()
            self._read_paused = False

    async def drain(self, timeout_s: float) -> None:
        """Shutdown: let in-flight requests finish (bounded), then close."""
        waits = []
        for item in self._queue:
            if isinstance(item, _Pending) and not item.done:
                if item.task is None:
                    item.waiter = asyncio.get_running_loop().create_future()
                    waits.append(item.waiter)
                else:
                    waits.append(item.task)
        if waits:
            await asyncio.wait(waits, timeout=timeout_s)
        if not self._closing:
            self._close_now()


def _writev_all(fd: int, buffers: list) -> list:
    """``os.writev`` the buffers on the non-blocking socket ``fd`` until done or it would
    block; returns what is left (the first one trimmed to its unsent tail)."""
    while buffers:
        try:
            n = os.writev(fd, buffers[:_MAX_IOV])
        except BlockingIOError:
            return buffers
        index = 0
        while index < len(buffers) and n >= len(buffers[index]):
            n -= len(buffers[index])
            index += 1
        buffers = buffers[index:]
        if n:
            buffers[0] = memoryview(buffers[0])[n:]
    return buffers

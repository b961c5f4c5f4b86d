"""The broker's HTTP endpoint on ``metrics.host:metrics.port``: what Prometheus scrapes,
and, when the broker registers it, the live replication view (``broker/ui``: the node
hands in its page and feed, so this module imports nothing of the view).

An asyncio server on the broker's own event loop, so a request reads the broker's state
where that state lives (no thread, nothing that could outlive the broker), and ``stop``
ends it with the broker: the listening socket, every open connection and its handler
task, the replication feed and so every event stream.  One request per connection
(``Connection: close``).  Routes:

* ``GET`` or ``HEAD /metrics`` (any query string): the text exposition of the registry;
* ``GET`` or ``HEAD /replication``: the replication view's page (one static HTML file);
* ``GET /replication/events``: server-sent events (``text/event-stream``), one
  ``data:`` line of JSON per snapshot of the feed (``broker/ui/feed.py``), for as long as
  the page stays; at most ``MAX_EVENT_STREAMS`` at once (a stream holds a slot until its
  client goes), 503 beyond; a stream whose client stops reading for ``WRITE_TIMEOUT_S``
  is dropped;

the two replication routes only when the endpoint was given a feed and a page; anything
else 404.
A request head that is malformed, larger than the stream limit or slower than
``READ_TIMEOUT_S`` is dropped unanswered.

Hostile or broken clients: at most ``MAX_CONNECTIONS`` connections are served at once
(event streams included); one beyond gets a 503 without its request being read, so
many clients cost bounded memory and never more than that many handler tasks.  A
client that stops reading a response is dropped after ``WRITE_TIMEOUT_S``; an event
stream is never queued for: each write is of the newest snapshot the stream has not
seen (``Subscription.next`` skips the ones it missed), so a slow reader holds at most
one message beyond the transport's buffer.  The endpoint has no authentication: it binds
``metrics.host`` (127.0.0.1 by default) and trusts whoever can reach it.
"""
from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable

from prometheus_client.exposition import generate_latest
from prometheus_client.registry import CollectorRegistry

log = logging.getLogger(__name__)

READ_TIMEOUT_S = 10.0
WRITE_TIMEOUT_S = 10.0
PATH = "/metrics"
PAGE_PATH = "/replication"
EVENTS_PATH = "/replication/events"
MAX_EVENT_STREAMS = 16
MAX_CONNECTIONS = 64
# What EventSource waits before reconnecting after the stream ends (the broker stopped).
RECONNECT_MS = 2000
# What ``generate_latest`` writes for our names: the classic text format (0.0.4), which
# every Prometheus version reads; newer prometheus_client versions label it 1.0.0.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
TEXT = "text/plain; charset=utf-8"
HTML = "text/html; charset=utf-8"
EVENT_STREAM = "text/event-stream; charset=utf-8"


class MetricsEndpoint:
    """Serves one registry and, given ``replication`` (a feed: ``subscribe()``,
    ``stop()``, ``stopped``, as ``broker.ui.feed.ReplicationFeed``) and ``page`` (the
    view's HTML bytes), the replication view. Event-loop only; ``start`` once, ``stop``
    any number of times."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int,
                 prefix: str = "[Metrics]", replication=None,
                 page: Callable[[], bytes] | None = None,
                 max_event_streams: int = MAX_EVENT_STREAMS,
                 max_connections: int = MAX_CONNECTIONS):
        self.registry = registry
        self.host = host
        self.port = port
        # Both or neither: a stream without its page (or the reverse) is not a view.
        self.replication = replication if page is not None else None
        self._page = page
        self.max_event_streams = max_event_streams
        self.max_connections = max_connections
        self.refused_connections = 0  # answered 503 at once: every slot was taken
        self.event_streams = 0
        self._prefix = prefix
        self._server: asyncio.base_events.Server | None = None
        self._handlers: set[asyncio.Task] = set()

    @property
    def bound_port(self) -> int:
        """The port actually listened on (``port`` 0 in tests: the kernel's pick)."""
        return self._server.sockets[0].getsockname()[1] if self._server else self.port

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host or None, self.port,
                                                  reuse_address=True)
        log.info("%s serving Prometheus metrics on http://%s:%d%s", self._prefix,
                 self.host or "0.0.0.0", self.bound_port, PATH)
        if self.replication is not None:
            log.info("%s serving the replication view on http://%s:%d%s", self._prefix,
                     self.host or "127.0.0.1", self.bound_port, PAGE_PATH)

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        if self.replication is not None:
            # Wakes every event stream, which then ends its response: browsers see the
            # stream close rather than a reset.
            await self.replication.stop()
        handlers = list(self._handlers)
        for task in handlers:
            task.cancel()
        if handlers:
            await asyncio.gather(*handlers, return_exceptions=True)
        if server is not None:
            await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._handlers) >= self.max_connections:
            self.refused_connections += 1
            if self.refused_connections % 1000 == 1:
                log.warning("%s %d connections open: refusing more (%d so far)", self._prefix,
                            len(self._handlers), self.refused_connections)
            writer.write(_response("503 Service Unavailable", b"too many connections\n", TEXT,
                                   False, extra="Retry-After: 5\r\n"))
            writer.close()  # the transport sends what fits and drops the rest
            return
        task = asyncio.current_task()
        self._handlers.add(task)
        try:
            try:
                async with asyncio.timeout(READ_TIMEOUT_S):
                    head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError,
                    ConnectionError):
                return
            if self.replication is not None and _route(head) == ("GET", EVENTS_PATH):
                await self._stream_events(reader, writer)
                return
            status, body, content_type = self.answer(head)
            writer.write(_response(status, body, content_type, head.startswith(b"HEAD ")))
            async with asyncio.timeout(WRITE_TIMEOUT_S):
                await writer.drain()
        except (ConnectionError, TimeoutError):
            pass
        finally:
            self._handlers.discard(task)
            writer.close()

    def answer(self, head: bytes) -> tuple[str, bytes, str]:
        """(status line text, body, content type) for a request head (every route but
        the event stream)."""
        method, path = _route(head)
        if method in ("GET", "HEAD") and path == PATH:
            try:
                return "200 OK", generate_latest(self.registry), CONTENT_TYPE
            except Exception:  # a bug of ours: the scrape fails, the broker goes on
                log.exception("%s collecting metrics failed", self._prefix)
                return "500 Internal Server Error", b"collecting metrics failed\n", TEXT
        if self.replication is not None and method in ("GET", "HEAD") and path == PAGE_PATH:
            return "200 OK", self._page(), HTML
        served = f"{PATH}, {PAGE_PATH}" if self.replication is not None else PATH
        return "404 Not Found", f"only {served} is served here\n".encode(), TEXT

    async def _stream_events(self, reader: asyncio.StreamReader,
                             writer: asyncio.StreamWriter) -> None:
        """The replication feed as server-sent events until the client goes, the feed
        stops or a write stalls; 503 when every stream slot is taken."""
        if self.event_streams >= self.max_event_streams or self.replication.stopped:
            writer.write(_response("503 Service Unavailable",
                                   b"too many replication views open on this broker\n", TEXT,
                                   False, extra="Retry-After: 5\r\n"))
            await writer.drain()
            return
        self.event_streams += 1
        try:
            with self.replication.subscribe() as subscription:
                writer.write((f"HTTP/1.1 200 OK\r\nContent-Type: {EVENT_STREAM}\r\n"
                              "Cache-Control: no-cache\r\nConnection: close\r\n\r\n"
                              f"retry: {RECONNECT_MS}\n\n").encode("latin-1"))
                await writer.drain()
                while True:
                    message = await subscription.next()
                    # The client went (EOF or reset): free the slot now, not at the
                    # next failed write.
                    if message is None or reader.at_eof() or writer.is_closing():
                        return
                    data = json.dumps(message, separators=(",", ":"))
                    writer.write(f"id: {message['seq']}\ndata: {data}\n\n".encode())
                    async with asyncio.timeout(WRITE_TIMEOUT_S):
                        await writer.drain()
        except TimeoutError:
            log.info("%s dropping a replication view that stopped reading", self._prefix)
        finally:
            self.event_streams -= 1


def _route(head: bytes) -> tuple[str, str]:
    """(method, path without the query string) of a request head; ("", "") if malformed."""
    request_line = head.split(b"\r\n", 1)[0].decode("latin-1").split()
    if len(request_line) < 2:
        return "", ""
    return request_line[0], request_line[1].split("?", 1)[0]


def _response(status: str, body: bytes, content_type: str, head_only: bool,
              extra: str = "") -> bytes:
    header = (f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
              f"Content-Length: {len(body)}\r\n{extra}Connection: close\r\n\r\n"
              ).encode("latin-1")
    return header if head_only else header + body

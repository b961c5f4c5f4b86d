"""The HTTP endpoint Prometheus scrapes: ``GET /metrics`` on ``metrics.host:metrics.port``.

An asyncio server on the broker's own event loop, so a scrape reads the broker's state
where that state lives (no thread, nothing that could outlive the broker), and ``stop``
ends it with the broker: the listening socket, every open scrape connection and its
handler task.  One request per connection (``Connection: close``).  ``GET`` or
``HEAD /metrics`` (any query string) answers the text exposition of the registry;
anything else 404; a request head that is malformed, larger than the stream limit or
slower than ``READ_TIMEOUT_S`` is dropped unanswered.
"""
from __future__ import annotations

import asyncio
import logging

from prometheus_client.exposition import generate_latest
from prometheus_client.registry import CollectorRegistry

log = logging.getLogger(__name__)

READ_TIMEOUT_S = 10.0
PATH = "/metrics"
# What ``generate_latest`` writes for our names: the classic text format (0.0.4), which
# every Prometheus version reads; newer prometheus_client versions label it 1.0.0.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class MetricsEndpoint:
    """Serves one registry. Event-loop only; ``start`` once, ``stop`` any number of times."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int,
                 prefix: str = "[Metrics]"):
        self.registry = registry
        self.host = host
        self.port = port
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

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        handlers = list(self._handlers)
        for task in handlers:
            task.cancel()
        if handlers:
            await asyncio.gather(*handlers, return_exceptions=True)
        if server is not None:
            await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._handlers.add(task)
        try:
            try:
                async with asyncio.timeout(READ_TIMEOUT_S):
                    head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError,
                    ConnectionError):
                return
            status, body, content_type = self.answer(head)
            writer.write(_response(status, body, content_type, head.startswith(b"HEAD ")))
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            self._handlers.discard(task)
            writer.close()

    def answer(self, head: bytes) -> tuple[str, bytes, str]:
        """(status line text, body, content type) for a request head."""
        request_line = head.split(b"\r\n", 1)[0].decode("latin-1").split()
        if len(request_line) >= 2 and request_line[0] in ("GET", "HEAD") \
                and request_line[1].split("?", 1)[0] == PATH:
            try:
                return "200 OK", generate_latest(self.registry), CONTENT_TYPE
            except Exception:  # a bug of ours: the scrape fails, the broker goes on
                log.exception("%s collecting metrics failed", self._prefix)
                return "500 Internal Server Error", b"collecting metrics failed\n", \
                    "text/plain; charset=utf-8"
        return "404 Not Found", f"only {PATH} is served here\n".encode(), \
            "text/plain; charset=utf-8"


def _response(status: str, body: bytes, content_type: str, head_only: bool) -> bytes:
    header = (f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
              f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode("latin-1")
    return header if head_only else header + body

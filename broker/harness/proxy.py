"""The chaos clusters' network without root: a loopback TCP proxy in front of every
broker's Kafka port and Raft port (``ChaosCluster`` mode ``proxy``).

Each broker listens on its real ports but advertises the proxy's (its
``advertised.listeners`` and its ``controller.quorum.voters`` entry, with
``controller.quorum.bind.address`` its real Raft port), so every byte between brokers,
Kafka and Raft alike, and every client byte after the bootstrap passes through here.

Who is talking: a connection's owner is looked up when it is accepted.  Its peer
address is found as a local socket in ``/proc/net/tcp``; the process holding that
socket (``/proc/<pid>/fd``) is a broker of the cluster (``owners()`` maps the running
brokers' pids to node ids) or else a client (``CLIENTS``, 0).  So the brokers need no
source address of their own, and no client id is sniffed.  Linux only
(``proxy_unavailable`` says why not elsewhere).

Faults, always by the pair (sender, broker behind the port) of a link:

* a cut between A and B *stalls* their links: an existing link forwards nothing more,
  either way, and a new one is accepted but never forwarded (like dropped packets:
  nothing is refused, each side waits for its own timeout);
* ``degrade(node, delay_ms, jitter_ms, loss_pct)`` acts on what ``node`` sends: each
  chunk is forwarded ``delay ± jitter`` later (order kept); a lost chunk arrives a
  retransmission timeout (``RETRANSMIT_S``) late, as TCP would deliver it; 100 % loss
  forwards nothing;
* ``heal()`` lifts every fault and closes every link that dropped bytes (its stream
  is broken), so both sides reconnect to a clean one.

Invariants: the listeners are bound at ``start()`` and kept until ``close()``, so the
advertised addresses stay valid across broker restarts; everything listens on
127.0.0.1 only.  The proxy runs an asyncio loop in a daemon thread; the public methods
are called from other threads (one at a time) and return once the loop has applied
them.  ``close()`` is idempotent, also registered with ``atexit``.
"""
from __future__ import annotations

import asyncio
import atexit
import logging
import os
import random
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

LOCALHOST = "127.0.0.1"
CLIENTS = 0
CHUNK = 1 << 16
RETRANSMIT_S = 0.2
COMMAND_TIMEOUT_S = 10.0


class ProxyError(RuntimeError):
    """The proxy could not start, or did not answer a command in time."""


def proxy_unavailable() -> str | None:
    """None when the proxy can tell brokers from clients here, else why not."""
    if not sys.platform.startswith("linux"):
        return f"the loopback proxy reads /proc (Linux only), not {sys.platform}"
    if not os.path.exists("/proc/net/tcp"):
        return "no /proc/net/tcp: the loopback proxy cannot tell brokers from clients"
    return None


def _hex_address(host: str, port: int) -> str:
    """``127.0.0.1``, 9092 as /proc/net/tcp writes it: ``0100007F:2384``."""
    (packed,) = struct.unpack("=I", socket.inet_aton(host))
    return f"{packed:08X}:{port:04X}"


def socket_inode(local: tuple[str, int], remote: tuple[str, int],
                 table: str = "/proc/net/tcp") -> int | None:
    """The inode of the TCP socket whose own end is ``local`` and whose other end is
    ``remote``, or None."""
    want = (_hex_address(*local), _hex_address(*remote))
    try:
        with open(table, encoding="ascii") as f:
            next(f, None)
            for line in f:
                fields = line.split()
                if len(fields) > 9 and (fields[1], fields[2]) == want:
                    return int(fields[9])
    except OSError:
        return None
    return None


def process_holding(inode: int, pids) -> int | None:
    """Which of ``pids`` has socket ``inode`` open, or None."""
    target = f"socket:[{inode}]"
    for pid in pids:
        directory = f"/proc/{pid}/fd"
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            try:
                if os.readlink(f"{directory}/{name}") == target:
                    return pid
            except OSError:
                continue
    return None


def connection_owner(peer: tuple[str, int], local: tuple[str, int],
                     owners: dict[int, int]) -> int:
    """The node whose process opened the connection from ``peer`` to our ``local``
    end (``owners``: pid -> node id), else CLIENTS."""
    inode = socket_inode(peer, local)
    if inode is None:
        return CLIENTS
    pid = process_holding(inode, owners)
    return owners.get(pid, CLIENTS) if pid is not None else CLIENTS


class _Link:
    """One proxied connection.  Event-loop only."""

    def __init__(self, source: int, dest: int, writer: asyncio.StreamWriter):
        self.source, self.dest = source, dest
        self.writers = [writer]
        self.stalled = False
        self.dropped = False      # bytes were discarded: the stream is broken
        self.tasks: set[asyncio.Task] = set()

    def close(self) -> None:
        for writer in self.writers:
            writer.close()
        current = asyncio.current_task()
        for task in self.tasks:
            if task is not current:
                task.cancel()


class _Degradation:
    def __init__(self, delay_ms: int, jitter_ms: int, loss_pct: float):
        self.delay_s, self.jitter_s, self.loss = delay_ms / 1e3, jitter_ms / 1e3, loss_pct

    def due_in(self) -> float | None:
        """Seconds a chunk waits, or None when it is lost for good (100 % loss)."""
        if self.loss >= 100:
            return None
        wait = max(0.0, self.delay_s + random.uniform(-self.jitter_s, self.jitter_s))
        if self.loss > 0 and random.uniform(0, 100) < self.loss:
            wait += RETRANSMIT_S
        return wait


class LoopbackProxy:
    """Listeners on 127.0.0.1 for ``routes`` (node id -> [(listen port, target port),
    ...]); ``owners()`` gives the running brokers as {pid: node id}.  Start with
    ``start()``, stop with ``close()``.  Cuts, as NamespaceNetwork's: ``cut``,
    ``isolate``, ``netem`` (degrade), ``heal``; ``cut_pairs``, ``netem_nodes`` and
    ``lossy_nodes`` say what is in force."""

    def __init__(self, routes: dict[int, list[tuple[int, int]]],
                 owners: Callable[[], dict[int, int]]):
        self.routes = routes
        self.nodes = sorted(routes)
        self.owners = owners
        self.cut_pairs: set[frozenset] = set()
        self.netem_nodes: set[int] = set()
        self.lossy_nodes: set[int] = set()     # never filled: loss is one of netem's faults
        self.accepted = 0
        self._degraded: dict[int, _Degradation] = {}
        self._links: set[_Link] = set()
        self._servers: list[asyncio.AbstractServer] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closed = False

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> LoopbackProxy:
        """Bind every listener (ProxyError when one cannot be bound)."""
        atexit.register(self.close)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="raftwood-chaos-proxy")
        self._thread.start()
        try:
            self._call(self._listen())
        except BaseException:
            self.close()
            raise
        return self

    async def _listen(self) -> None:
        for node, pairs in sorted(self.routes.items()):
            for listen_port, target_port in pairs:
                try:
                    server = await asyncio.start_server(
                        lambda r, w, n=node, t=target_port: self._accept(r, w, n, t),
                        LOCALHOST, listen_port)
                except OSError as exc:
                    raise ProxyError(f"cannot listen on {LOCALHOST}:{listen_port} for "
                                     f"broker {node}: {exc}") from exc
                self._servers.append(server)

    def close(self) -> None:
        """Stop listening, close every link and stop the thread (idempotent)."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        if self._loop is None:
            return
        try:
            self._call(self._shutdown())
        except ProxyError as exc:
            log.warning("chaos proxy: %s", exc)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(COMMAND_TIMEOUT_S)
        if self._thread is None or not self._thread.is_alive():
            self._loop.close()

    async def _shutdown(self) -> None:
        for server in self._servers:
            server.close()
        for link in list(self._links):
            link.close()
        self._links.clear()
        for server in self._servers:
            await server.wait_closed()

    def _call(self, coroutine):
        if self._loop is None or not self._thread or not self._thread.is_alive():
            coroutine.close()
            raise ProxyError("the chaos proxy is not running")
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result(COMMAND_TIMEOUT_S)
        except TimeoutError as exc:
            future.cancel()
            raise ProxyError(f"the chaos proxy did not answer in {COMMAND_TIMEOUT_S} s") \
                from exc

    # -- faults --------------------------------------------------------------------------
    def cut(self, a: int, b: int) -> None:
        """Stall every link between ``a`` and ``b`` (brokers or CLIENTS), both ways."""
        if a == b:
            raise ValueError("a cut needs two different ends")
        self._call(self._apply(lambda: self.cut_pairs.add(frozenset((a, b)))))

    def isolate(self, node: int, *, clients: bool = False) -> None:
        """Cut ``node`` from every other broker; with ``clients`` from clients too."""
        for other in self.nodes:
            if other != node:
                self.cut(node, other)
        if clients:
            self.cut(node, CLIENTS)

    def netem(self, node: int, delay_ms: int, jitter_ms: int, loss_pct: float) -> str:
        """Delay and lose what ``node`` sends (module docstring); what was applied."""
        def degrade():
            self._degraded[node] = _Degradation(delay_ms, jitter_ms, loss_pct)
            self.netem_nodes.add(node)
        self._call(self._apply(degrade))
        return (f"proxy delay {delay_ms}±{jitter_ms} ms, loss {loss_pct:g}% of what broker "
                f"{node} sends (a lost chunk comes {RETRANSMIT_S * 1e3:g} ms late; 100 %: "
                f"never)")

    def heal(self) -> None:
        """Lift every cut and degradation; close the links that dropped bytes."""
        def lift():
            self.cut_pairs.clear()
            self._degraded.clear()
            self.netem_nodes.clear()
            for link in list(self._links):
                if link.stalled or link.dropped:
                    link.close()
                    self._links.discard(link)
        self._call(self._apply(lift))

    async def _apply(self, change) -> None:
        change()
        for link in self._links:
            if self._is_cut(link.source, link.dest):
                link.stalled = True

    def _is_cut(self, source: int, dest: int) -> bool:
        return frozenset((source, dest)) in self.cut_pairs

    def stats(self) -> dict:
        """Links open now (by (source, dest)), how many are stalled and how many
        dropped bytes, connections accepted in all."""
        async def read():
            return {"links": sorted((link.source, link.dest) for link in self._links),
                    "stalled": sum(link.stalled for link in self._links),
                    "dropped": sum(link.dropped for link in self._links),
                    "accepted": self.accepted}
        return self._call(read())

    # -- forwarding ----------------------------------------------------------------------
    async def _accept(self, reader, writer, dest: int, target_port: int) -> None:
        self.accepted += 1
        peer, local = writer.get_extra_info("peername"), writer.get_extra_info("sockname")
        try:
            source = connection_owner(peer[:2], local[:2], self.owners())
        except Exception:  # noqa: BLE001 - a failed lookup makes a client, never a crash
            log.warning("chaos proxy: cannot tell who %s is", peer, exc_info=True)
            source = CLIENTS
        link = _Link(source, dest, writer)
        link.stalled = self._is_cut(source, dest)
        self._links.add(link)
        link.tasks.add(asyncio.current_task())
        try:
            if link.stalled:
                await self._discard(reader, link)
                return
            up_reader, up_writer = await asyncio.open_connection(LOCALHOST, target_port)
            link.writers.append(up_writer)
            back = asyncio.create_task(self._pipe(up_reader, writer, link, dest))
            link.tasks.add(back)
            await self._pipe(reader, up_writer, link, source)
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            link.close()
            self._links.discard(link)

    @staticmethod
    async def _discard(reader, link: _Link) -> None:
        while await reader.read(CHUNK):
            link.dropped = True

    async def _pipe(self, reader, writer, link: _Link, sender: int) -> None:
        """Copy what ``sender`` sends until EOF: in order, each chunk when its
        degradation lets it go; nothing while the link is stalled."""
        queue: asyncio.Queue = asyncio.Queue()
        forward = asyncio.create_task(self._forward(queue, writer, link))
        link.tasks.add(forward)
        last_due = 0.0
        try:
            while data := await reader.read(CHUNK):
                degradation = self._degraded.get(sender)
                wait = degradation.due_in() if degradation else 0.0
                if link.stalled or wait is None:
                    link.dropped = True
                    continue
                last_due = max(last_due, time.monotonic() + wait)
                queue.put_nowait((last_due, data))
            queue.put_nowait((0.0, b""))
            await forward
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            link.close()

    @staticmethod
    async def _forward(queue: asyncio.Queue, writer, link: _Link) -> None:
        while True:
            due, data = await queue.get()
            if not data:
                writer.write_eof() if writer.can_write_eof() else writer.close()
                return
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            if link.stalled:
                link.dropped = True
                continue
            writer.write(data)
            await writer.drain()

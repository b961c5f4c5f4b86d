"""Network cuts between brokers: a small TCP proxy in front of every broker's Kafka port.

Brokers register their ``advertised.listeners``, and a follower fetches from the
address its leader advertised.  ``raftwood verify`` starts each broker advertising a
proxy port (this module) that forwards to the broker's real port, so all replica
traffic — and the clients' traffic after their bootstrap — passes through here.

Who is connecting is read from the first request of each connection: the replica
fetcher sends client id ``raftwood-fetcher-<node id>``.  A cut between brokers A and
B blackholes fetcher connections from A to B and from B to A: existing ones stop
forwarding (bytes are dropped both ways, like a partition; the fetcher's request
timeout fires), new ones are accepted and read but never forwarded.  Healing closes
every blackholed connection, so both sides reconnect to a clean stream.  Client
connections (any other client id) always pass.

What is not cut: the Raft (control-plane) traffic.  pysyncobj identifies a peer by
the address string it sends, which must equal the peer's entry in
``controller.quorum.voters``, and binds that same address; a proxy in between needs a
separate bind address (pysyncobj's ``bindAddress``), which the broker does not expose.
So a cut here is a data-plane partition: ISR shrink and expansion, fetch timeouts,
acks=all stalling at min ISR — while the controller still hears every broker.

The proxy runs as its own process (``python -m broker.verify.netproxy --route
NODE:LISTEN:TARGET ...``), so forwarding never competes with the workload for the
GIL.  It reads commands on stdin, one per line, and answers one JSON line each:
``cut A B``, ``heal``, ``stats``, ``quit``; it exits when stdin closes (its parent
died).  ``NetworkProxy`` is the parent's handle.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import struct
import subprocess
import sys
import threading
from pathlib import Path

LOCALHOST = "127.0.0.1"
FETCHER_CLIENT_ID = re.compile(rb"^raftwood-fetcher-(\d+)$")
SNIFF_BYTES = 256
CHUNK = 1 << 16
_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length


def client_id_of(frame_start: bytes) -> bytes | None:
    """The client id in the start of a request frame (after its size prefix), or None.
    Request headers v1 and v2 both carry it as a non-compact nullable string."""
    if len(frame_start) < _HEADER.size:
        return None
    _key, _version, _correlation, length = _HEADER.unpack_from(frame_start, 0)
    if length < 0 or _HEADER.size + length > len(frame_start):
        return None
    return frame_start[_HEADER.size:_HEADER.size + length]


def source_node(frame_start: bytes) -> int | None:
    """The broker a connection comes from (its replica fetcher's client id), or None
    for any other client."""
    client_id = client_id_of(frame_start)
    match = client_id and FETCHER_CLIENT_ID.match(client_id)
    return int(match.group(1)) if match else None


class _Link:
    """One proxied connection.  Event-loop only."""

    def __init__(self, source: int | None, dest: int, client_writer: asyncio.StreamWriter):
        self.source = source
        self.dest = dest
        self.client_writer = client_writer
        self.upstream_writer: asyncio.StreamWriter | None = None
        self.blackholed = False
        self.tasks: set[asyncio.Task] = set()

    def close(self) -> None:
        for writer in (self.client_writer, self.upstream_writer):
            if writer is not None:
                writer.close()
        current = asyncio.current_task()
        for task in self.tasks:
            if task is not current:
                task.cancel()


class ProxyServer:
    """Runs in the proxy process.  Event-loop only (commands arrive via the loop).

    Invariant: a link whose (source, dest) pair is cut is blackholed — it forwards
    nothing in either direction — until ``heal`` closes it."""

    def __init__(self, routes: dict[int, tuple[int, int]], host: str = LOCALHOST):
        self.routes = routes          # node -> (listen port, target port)
        self.host = host
        self.cuts: set[frozenset] = set()
        self.links: set[_Link] = set()
        self.servers: list[asyncio.AbstractServer] = []
        self.accepted = 0
        self.blackholed = 0

    async def start(self) -> None:
        for node, (listen_port, _target) in sorted(self.routes.items()):
            server = await asyncio.start_server(
                lambda r, w, node=node: self._accept(r, w, node), self.host, listen_port)
            self.servers.append(server)

    def is_cut(self, source: int | None, dest: int) -> bool:
        return source is not None and frozenset((source, dest)) in self.cuts

    # -- commands ------------------------------------------------------------------------
    def cut(self, a: int, b: int) -> dict:
        self.cuts.add(frozenset((a, b)))
        for link in list(self.links):
            if self.is_cut(link.source, link.dest) and not link.blackholed:
                link.blackholed = True
                self.blackholed += 1
        return {"ok": True, "cuts": self._cut_list()}

    def heal(self) -> dict:
        self.cuts.clear()
        closed = 0
        for link in list(self.links):
            if link.blackholed:
                link.close()
                self.links.discard(link)
                closed += 1
        return {"ok": True, "closed": closed}

    def stats(self) -> dict:
        return {"ok": True, "cuts": self._cut_list(), "links": len(self.links),
                "accepted": self.accepted, "blackholed": self.blackholed}

    def _cut_list(self) -> list[list[int]]:
        return sorted(sorted(pair) for pair in self.cuts)

    # -- forwarding ----------------------------------------------------------------------
    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      dest: int) -> None:
        self.accepted += 1
        link = _Link(None, dest, writer)
        self.links.add(link)
        try:
            head = await reader.readexactly(4)
            (size,) = _SIZE.unpack(head)
            head += await reader.readexactly(max(0, min(size, SNIFF_BYTES)))
            link.source = source_node(head[4:])
            if self.is_cut(link.source, dest):
                link.blackholed = True
                self.blackholed += 1
                while await reader.read(CHUNK):
                    pass  # dropped; heal() closes us
                return
            up_reader, up_writer = await asyncio.open_connection(self.host,
                                                                 self.routes[dest][1])
            link.upstream_writer = up_writer
            if not link.blackholed:
                up_writer.write(head)
            task = asyncio.current_task()
            back = asyncio.create_task(self._pipe(up_reader, writer, link))
            link.tasks.update({task, back})
            await self._pipe(reader, up_writer, link)
        except (OSError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            link.close()
            self.links.discard(link)

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    link: _Link) -> None:
        """Copy until EOF, dropping bytes while the link is blackholed."""
        try:
            while data := await reader.read(CHUNK):
                if link.blackholed:
                    continue
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            link.close()


async def _serve(routes: dict[int, tuple[int, int]]) -> None:
    loop = asyncio.get_running_loop()
    server = ProxyServer(routes)
    await server.start()
    done = loop.create_future()

    def handle(line: str) -> None:
        words = line.split()
        try:
            if not words:
                return
            if words[0] == "cut" and len(words) == 3:
                answer = server.cut(int(words[1]), int(words[2]))
            elif words[0] == "heal":
                answer = server.heal()
            elif words[0] == "stats":
                answer = server.stats()
            elif words[0] == "quit":
                answer = {"ok": True}
                if not done.done():
                    done.set_result(None)
            else:
                answer = {"ok": False, "error": f"unknown command {line!r}"}
        except ValueError as exc:
            answer = {"ok": False, "error": str(exc)}
        print(json.dumps(answer), flush=True)

    def read_commands() -> None:  # a thread: stdin is a pipe from the parent
        for line in sys.stdin:
            loop.call_soon_threadsafe(handle, line.strip())
        loop.call_soon_threadsafe(lambda: done.done() or done.set_result(None))

    threading.Thread(target=read_commands, daemon=True, name="proxy-commands").start()
    print(json.dumps({"ok": True, "ready": True}), flush=True)
    await done
    for srv in server.servers:
        srv.close()
    for link in list(server.links):
        link.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="raftwood verify's inter-broker proxy")
    parser.add_argument("--route", action="append", required=True,
                        metavar="NODE:LISTEN_PORT:TARGET_PORT")
    args = parser.parse_args(argv)
    routes = {}
    for route in args.route:
        node, listen, target = (int(x) for x in route.split(":"))
        routes[node] = (listen, target)
    asyncio.run(_serve(routes))
    return 0


class ProxyError(RuntimeError):
    """The proxy process did not start or did not answer a command."""


class NetworkProxy:
    """The parent's handle on the proxy process.  One thread at a time (the runner's).

    ``listen_ports[node]`` is what broker ``node`` advertises; ``start(targets)`` needs
    the brokers' real Kafka ports.  ``isolate(node)`` cuts it from every other broker,
    ``cut(a, b)`` one pair, ``heal()`` everything."""

    def __init__(self, listen_ports: dict[int, int], log_path=None):
        self.listen_ports = dict(listen_ports)
        self.log_path = Path(log_path) if log_path else None
        self._popen: subprocess.Popen | None = None
        self._log = None

    def advertised_listener(self, node: int) -> str:
        return f"PLAINTEXT://{LOCALHOST}:{self.listen_ports[node]}"

    def start(self, targets: dict[int, int], timeout_s: float = 10.0) -> NetworkProxy:
        argv = [sys.executable, "-m", "broker.verify.netproxy"]
        for node, listen_port in sorted(self.listen_ports.items()):
            argv += ["--route", f"{node}:{listen_port}:{targets[node]}"]
        if self.log_path is not None:
            self._log = open(self.log_path, "ab")
        env_path = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env_path, env.get("PYTHONPATH")) if p)
        self._popen = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=self._log or subprocess.DEVNULL, env=env,
                                       start_new_session=True, text=True, bufsize=1)
        answer = self._answer(timeout_s)
        if not answer.get("ready"):
            self.close()
            raise ProxyError(f"the proxy did not start: {answer}")
        return self

    def cut(self, a: int, b: int) -> dict:
        return self._command(f"cut {a} {b}")

    def isolate(self, node: int) -> dict:
        answer = {}
        for other in sorted(self.listen_ports):
            if other != node:
                answer = self.cut(node, other)
        return answer

    def heal(self) -> dict:
        return self._command("heal")

    def stats(self) -> dict:
        return self._command("stats")

    def is_running(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def close(self) -> None:
        """Stop the proxy process (quit, then SIGKILL after a bound).  Idempotent."""
        popen, self._popen = self._popen, None
        if popen is not None:
            try:
                popen.stdin.write("quit\n")
                popen.stdin.flush()
                popen.stdin.close()
            except (OSError, ValueError):
                pass
            try:
                popen.wait(timeout=5)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait(timeout=5)
            if popen.stdout is not None:
                popen.stdout.close()
        if self._log is not None:
            self._log.close()
            self._log = None

    def _command(self, line: str, timeout_s: float = 10.0) -> dict:
        if not self.is_running():
            raise ProxyError("the proxy is not running")
        self._popen.stdin.write(line + "\n")
        self._popen.stdin.flush()
        answer = self._answer(timeout_s)
        if not answer.get("ok"):
            raise ProxyError(f"proxy refused {line!r}: {answer}")
        return answer

    def _answer(self, timeout_s: float) -> dict:
        result: list[str] = []
        reader = threading.Thread(target=lambda: result.append(self._popen.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(timeout_s)
        if not result or not result[0]:
            raise ProxyError(f"no answer from the proxy within {timeout_s:.0f}s")
        return json.loads(result[0])


if __name__ == "__main__":
    sys.exit(main())

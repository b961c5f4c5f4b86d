"""The chaos clusters' loopback proxy (``broker.harness.proxy``) on real sockets: it
tells a broker's connection from a client's by the process holding the socket, forwards
in order, stalls the links of a cut pair (new and existing, both ways) and closes on
heal the links that dropped bytes; a degraded sender's bytes still arrive in order."""
from __future__ import annotations

import os
import socket
import socketserver
import subprocess
import sys
import threading
import time

import pytest

from broker.harness import free_ports
from broker.harness.proxy import (
    CLIENTS,
    LoopbackProxy,
    connection_owner,
    proxy_unavailable,
)

pytestmark = pytest.mark.skipif(proxy_unavailable() is not None,
                                reason=str(proxy_unavailable()))
TIMEOUT_S = 20.0
# A "broker" in another process: connects to argv[1], sends argv[2], prints what comes back.
_PEER = ("import socket, sys\n"
         "sys.stdin.readline()\n"
         "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=20)\n"
         "print('connected', flush=True)\n"
         "for line in sys.stdin:\n"
         "    s.sendall(line.encode())\n"
         "    print(repr(s.recv(1 << 16)), flush=True)\n")


class _Echo(socketserver.BaseRequestHandler):
    def handle(self):
        while data := self.request.recv(1 << 16):
            self.request.sendall(data)


@pytest.fixture
def echo():
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture
def peer_process():
    started = []

    def start(port: int, before_connecting=lambda pid: None) -> subprocess.Popen:
        process = subprocess.Popen([sys.executable, "-c", _PEER, str(port)],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        started.append(process)
        before_connecting(process.pid)
        process.stdin.write("connect\n")
        process.stdin.flush()
        assert process.stdout.readline().strip() == "connected"
        return process

    yield start
    for process in started:
        process.kill()
        process.wait(10)
        process.stdin.close()
        process.stdout.close()


@pytest.fixture
def proxy_for(echo):
    made = []

    def make(owners) -> tuple[LoopbackProxy, int]:
        [port] = free_ports(1)
        proxy = LoopbackProxy({1: [(port, echo)]}, lambda: dict(owners)).start()
        made.append(proxy)
        return proxy, port

    yield make
    for proxy in made:
        proxy.close()


def wait_until(condition, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline, f"not within {TIMEOUT_S} s: {what}"
        time.sleep(0.02)


def roundtrip(sock: socket.socket, data: bytes) -> bytes:
    sock.sendall(data)
    got = b""
    while len(got) < len(data):
        chunk = sock.recv(1 << 16)
        assert chunk, f"closed after {len(got)} of {len(data)} bytes"
        got += chunk
    return got


def test_the_owner_of_a_connection_is_the_process_holding_its_socket(peer_process):
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(TIMEOUT_S)
    port = listener.getsockname()[1]
    try:
        mine = socket.create_connection(("127.0.0.1", port), TIMEOUT_S)
        accepted, peer = listener.accept()
        local = accepted.getsockname()
        assert connection_owner(peer, local, {os.getpid(): 7}) == 7
        assert connection_owner(peer, local, {os.getpid() + 10_000_000: 7}) == CLIENTS
        other = peer_process(port)
        theirs, their_peer = listener.accept()
        assert connection_owner(their_peer, theirs.getsockname(),
                                {other.pid: 2, os.getpid(): 7}) == 2
        for sock in (mine, accepted, theirs):
            sock.close()
    finally:
        listener.close()


def test_a_client_link_forwards_in_order_and_a_cut_stalls_it_until_heal_closes_it(proxy_for):
    proxy, port = proxy_for({})
    with socket.create_connection(("127.0.0.1", port), TIMEOUT_S) as sock:
        sock.settimeout(TIMEOUT_S)
        payload = bytes(range(256)) * 1024
        assert roundtrip(sock, payload) == payload
        assert proxy.stats()["links"] == [(CLIENTS, 1)]
        proxy.cut(CLIENTS, 1)
        assert proxy.stats()["stalled"] == 1
        sock.sendall(b"lost in the partition")
        fresh = socket.create_connection(("127.0.0.1", port), TIMEOUT_S)
        fresh.sendall(b"never forwarded")
        wait_until(lambda: proxy.stats()["stalled"] == 2, "the new link accepted, stalled")
        proxy.heal()
        # the stalled links dropped bytes: heal closes them; nothing was echoed first
        assert sock.recv(100) == b""
        fresh.settimeout(TIMEOUT_S)
        assert fresh.recv(100) == b""
        fresh.close()
    with socket.create_connection(("127.0.0.1", port), TIMEOUT_S) as again:
        again.settimeout(TIMEOUT_S)
        assert roundtrip(again, b"healed") == b"healed"


def test_a_cut_between_brokers_leaves_clients_through(proxy_for, peer_process):
    owners: dict[int, int] = {}
    proxy, port = proxy_for(owners)
    other = peer_process(port)        # not a broker: a client
    broker_link = peer_process(port, lambda pid: owners.update({pid: 2}))  # broker 2's
    wait_until(lambda: sorted(proxy.stats()["links"]) == [(CLIENTS, 1), (2, 1)],
               "a client link and broker 2's link to broker 1")
    proxy.cut(2, 1)
    assert proxy.stats()["stalled"] == 1
    other.stdin.write("from-a-client\n")
    other.stdin.flush()
    assert other.stdout.readline().strip() == repr(b"from-a-client\n")
    broker_link.stdin.write("from-broker-2\n")
    broker_link.stdin.flush()
    proxy.heal()
    # Closed, nothing echoed: a FIN reads as b"", or a reset (the proxy closed with the
    # stalled bytes unread) ends the peer process, whose stdout then reads empty.
    closed = broker_link.stdout.readline().strip()
    assert closed in (repr(b""), ""), closed


def test_a_degraded_sender_still_gets_everything_in_order_and_total_loss_stalls(proxy_for):
    proxy, port = proxy_for({})
    proxy.netem(CLIENTS, 5, 5, 30)
    assert proxy.netem_nodes == {CLIENTS}
    with socket.create_connection(("127.0.0.1", port), TIMEOUT_S) as sock:
        sock.settimeout(TIMEOUT_S)
        payload = os.urandom(300_000)
        assert roundtrip(sock, payload) == payload
        proxy.netem(CLIENTS, 0, 0, 100)
        sock.sendall(b"dropped")
        wait_until(lambda: proxy.stats()["dropped"] == 1, "the bytes dropped")
        proxy.heal()
        assert proxy.netem_nodes == set()
        assert sock.recv(100) == b""


def test_close_frees_the_ports_and_is_idempotent(echo):
    [port] = free_ports(1)
    proxy = LoopbackProxy({1: [(port, echo)]}, dict).start()
    with socket.create_connection(("127.0.0.1", port), TIMEOUT_S) as sock:
        sock.settimeout(TIMEOUT_S)
        assert roundtrip(sock, b"x") == b"x"
        proxy.close()
        assert sock.recv(10) == b""
    proxy.close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), 2).close()

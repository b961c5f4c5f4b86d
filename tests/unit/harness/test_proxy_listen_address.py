"""The chaos/dev loopback proxy (``broker.harness.proxy``) listens on 127.0.0.1 only:
every listening socket the kernel holds on one of its ports, IPv4 or IPv6, has the
loopback address as its own end (``0.0.0.0`` or ``""`` would open the cluster to the
network).  Read from /proc/net/tcp and tcp6, what the kernel really bound."""
from __future__ import annotations

from pathlib import Path

import pytest

from broker.harness import free_ports
from broker.harness.proxy import LoopbackProxy, proxy_unavailable

pytestmark = pytest.mark.skipif(proxy_unavailable() is not None,
                                reason=str(proxy_unavailable()))
LISTEN = "0A"                 # TCP_LISTEN in /proc/net/tcp's st column
LOOPBACK_V4 = "0100007F"      # 127.0.0.1 as /proc/net/tcp writes it (host byte order)


def listening_addresses(port: int) -> list[str]:
    """The local addresses (as /proc/net/tcp{,6} write them) of the listening sockets
    on ``port``."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        path = Path(table)
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            address, _, hex_port = fields[1].partition(":")
            if fields[3] == LISTEN and int(hex_port, 16) == port:
                found.append(address)
    return found


def test_every_proxy_listener_is_bound_to_127_0_0_1_only():
    listen_a, listen_b, target = free_ports(3)
    proxy = LoopbackProxy({1: [(listen_a, target)], 2: [(listen_b, target)]},
                          owners=dict).start()
    try:
        for port in (listen_a, listen_b):
            assert listening_addresses(port) == [LOOPBACK_V4], port
    finally:
        proxy.close()
    assert listening_addresses(listen_a) == []

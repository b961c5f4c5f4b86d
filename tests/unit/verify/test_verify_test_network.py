"""raftwood verify's test network: namespaces on a bridge, nftables cuts that really
stop TCP (both ways, Raft ports included), heal, and a close() that leaves no name of
the run behind.  The tests that build namespaces skip, with netns_available()'s
reason, where this process cannot (not root, no iproute2/nftables)."""
from __future__ import annotations

import ipaddress
import socket
import subprocess
import sys

import pytest

from broker.harness.netns import (
    CLIENTS,
    NamespaceNetwork,
    NetnsError,
    netem_supported,
    netns_available,
    pick_subnet,
    run,
)

USABLE, WHY = netns_available()
needs_netns = pytest.mark.skipif(not USABLE, reason=f"network namespaces: {WHY}")
PORTS = (9092, 9093)   # a "Kafka" and a "Raft" port in every namespace
# Listens on every port given after the address; accepts until killed (30 s at most).
LISTENER = ("import selectors, socket, sys, time\n"
            "sel = selectors.DefaultSelector()\n"
            "for port in sys.argv[2:]:\n"
            "    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
            "    s.bind((sys.argv[1], int(port))); s.listen(16); sel.register(s, 1)\n"
            "print('ready', flush=True)\n"
            "deadline = time.monotonic() + 30\n"
            "while time.monotonic() < deadline:\n"
            "    for key, _ in sel.select(0.5):\n"
            "        key.fileobj.accept()[0].close()\n")
CONNECT = ("import socket, sys\n"
           "try:\n"
           "    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1).close()\n"
           "except OSError:\n"
           "    sys.exit(3)\n")


def test_a_subnet_never_overlaps_what_the_host_routes():
    used = [ipaddress.ip_network("10.213.5.0/24"), ipaddress.ip_network("192.0.2.0/24")]
    draws = iter([5, 5, 6])
    assert str(pick_subnet(used, lambda: next(draws))) == "10.213.6.0/24"
    with pytest.raises(NetnsError, match="no free /24"):
        pick_subnet([ipaddress.ip_network("10.0.0.0/8")], lambda: 7)


def test_availability_is_a_bool_and_a_reason():
    usable, why = netns_available()
    assert isinstance(usable, bool) and why


@pytest.fixture
def network():
    """Two broker namespaces with a listener on both ports in each; everything is
    removed at the end, also when the test fails."""
    net = NamespaceNetwork([1, 2])
    listeners = []
    try:
        net.start()
        for node in (1, 2):
            listener = subprocess.Popen(
                net.exec_prefix(node) + [sys.executable, "-c", LISTENER, net.address(node),
                                         *map(str, PORTS)],
                stdout=subprocess.PIPE, text=True)
            listeners.append(listener)
            assert listener.stdout.readline().strip() == "ready"
        yield net
    finally:
        for listener in listeners:
            listener.kill()
            listener.wait(5)
            listener.stdout.close()
        net.close()


def reaches(net: NamespaceNetwork, source: int, target: int, port: int) -> bool:
    """A TCP connect from ``source`` (a broker's namespace, or CLIENTS: this one)."""
    if source == CLIENTS:
        try:
            socket.create_connection((net.address(target), port), timeout=1).close()
            return True
        except OSError:
            return False
    done = subprocess.run(net.exec_prefix(source) + [sys.executable, "-c", CONNECT,
                                                     net.address(target), str(port)],
                          capture_output=True, timeout=20)
    return done.returncode == 0


@needs_netns
def test_cuts_stop_tcp_both_ways_and_heal_restores_it(network):
    net = network
    assert reaches(net, 2, 1, 9092) and reaches(net, 1, 2, 9093) and reaches(net, CLIENTS, 1, 9092)

    net.cut(1, 2)
    assert not reaches(net, 2, 1, 9092) and not reaches(net, 1, 2, 9093)
    assert reaches(net, CLIENTS, 1, 9092), "a broker cut from brokers still serves clients"
    net.heal()
    assert reaches(net, 2, 1, 9092) and not net.is_cut()

    net.isolate(1, clients=True)
    assert not reaches(net, CLIENTS, 1, 9092) and not reaches(net, 2, 1, 9093)
    assert reaches(net, CLIENTS, 2, 9092)
    net.heal()
    assert reaches(net, CLIENTS, 1, 9092)


@needs_netns
def test_a_port_cut_leaves_the_other_ports_up(network):
    net = network
    net.cut_ports(1, [9092])
    assert not reaches(net, 2, 1, 9092) and not reaches(net, 1, 2, 9092)
    assert reaches(net, 2, 1, 9093) and reaches(net, 1, 2, 9093), "Raft stays up"
    assert reaches(net, CLIENTS, 1, 9092), "clients are not cut"
    net.heal()
    assert reaches(net, 2, 1, 9092)


@needs_netns
def test_netem_or_its_loss_stand_in_is_removed_by_heal(network):
    net = network
    applied = net.netem(1, 80, 10, 10)
    assert applied.startswith("netem") == netem_supported(), applied
    rules = run(net.exec_prefix(1) + ["nft", "list", "chain", "inet", "raftwood", "loss"])
    qdiscs = run(net.exec_prefix(1) + ["tc", "qdisc", "show", "dev", net.inner_veth(1)])
    assert "numgen" in rules or "netem" in qdiscs
    net.heal()
    assert "numgen" not in run(net.exec_prefix(1) + ["nft", "list", "chain", "inet",
                                                      "raftwood", "loss"])
    assert "netem" not in run(net.exec_prefix(1) + ["tc", "qdisc", "show", "dev",
                                                     net.inner_veth(1)])


@needs_netns
def test_close_removes_every_namespace_link_and_rule_and_is_idempotent():
    net = NamespaceNetwork([1, 2, 3])
    try:
        net.start()
        net.isolate(2)
        assert set(net.leftovers()) >= {net.bridge, net.namespace(1), net.host_veth(3)}
    finally:
        net.close()
    net.close()
    namespaces = run(["ip", "netns", "list"])
    links = run(["ip", "-o", "link", "show"])
    assert net.leftovers() == []
    assert not [name for name in net.names() if name in namespaces or name in links]


@needs_netns
def test_a_failed_start_cleans_up_what_it_made(monkeypatch):
    net = NamespaceNetwork([1, 2])
    monkeypatch.setattr(net, "_check_links", lambda: (_ for _ in ()).throw(
        NetnsError("simulated link check failure")))
    with pytest.raises(NetnsError, match="simulated"):
        net.start()
    assert net.leftovers() == []

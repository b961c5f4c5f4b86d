"""``controller.quorum.bind.address``: a voter's Raft server may bind another port than
its ``controller.quorum.voters`` entry (a proxy in front of it), never a wildcard and
never a non-loopback host other than the entry's own; a voter started with it listens
on the bind address and not on the entry."""
from __future__ import annotations

import socket
import time

import pytest

from broker import config
from broker.controller.raft import start_raft_node
from broker.harness import free_ports

VOTERS = "1@127.0.0.1:19301,2@127.0.0.1:19302"


def build(**extra):
    return config.build({"node.id": "1", "controller.quorum.voters": VOTERS,
                         "controller.quorum.allow.unauthenticated": "true", **extra})


def test_a_loopback_bind_address_is_accepted_and_empty_means_the_voter_entry():
    assert build()["controller.quorum.bind.address"] == ""
    assert build(**{"controller.quorum.bind.address": "127.0.0.1:29301"})[
        "controller.quorum.bind.address"] == "127.0.0.1:29301"
    assert build(**{"controller.quorum.bind.address": "localhost:29301"})


@pytest.mark.parametrize("value, words", [
    ("0.0.0.0:29301", "wildcard"),
    ("[::]:29301", "wildcard"),
    ("10.1.2.3:29301", "loopback"),
    ("127.0.0.1", "host:port"),
    ("127.0.0.1:0", "host:port"),
    ("127.0.0.1:70000", "host:port"),
    (":29301", "host:port"),
])
def test_wildcards_foreign_hosts_and_malformed_addresses_are_refused(value, words):
    with pytest.raises(config.ConfigError, match=words):
        build(**{"controller.quorum.bind.address": value})


def test_a_bind_address_needs_the_broker_among_the_voters():
    with pytest.raises(config.ConfigError, match="not in controller.quorum.voters"):
        config.build({"node.id": "3", "controller.quorum.voters": VOTERS,
                      "controller.quorum.allow.unauthenticated": "true",
                      "controller.quorum.bind.address": "127.0.0.1:29301"})


def test_the_voter_entry_host_itself_may_be_bound_on_another_port():
    cfg = config.build({"node.id": "1", "controller.quorum.voters": "1@10.9.8.7:1,2@10.9.8.6:1",
                        "controller.quorum.allow.unauthenticated": "true",
                        "controller.quorum.bind.address": "10.9.8.7:2"})
    assert cfg["controller.quorum.bind.address"] == "10.9.8.7:2"


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def test_a_voter_listens_on_its_bind_address_and_not_on_its_entry(tmp_path):
    entry, partner, bind = free_ports(3)
    node, _consumer = start_raft_node(f"127.0.0.1:{entry}", [f"127.0.0.1:{partner}"],
                                      str(tmp_path), (0.05, 0.02), on_applied=lambda *a: None,
                                      bind_address=f"127.0.0.1:{bind}")
    try:
        deadline = time.monotonic() + 20
        while not _listening(bind) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _listening(bind)
        assert not _listening(entry)
        assert node.selfNode.address == f"127.0.0.1:{entry}"
    finally:
        node.destroy()

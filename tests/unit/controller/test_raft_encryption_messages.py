"""``controller.quorum.password``: Raft traffic is encrypted, a voter without the secret
is never heard, and the safety patches of ``broker/controller/raft.py`` still see every
message (they act on what pysyncobj decrypted).

Three pysyncobj nodes in this process on loopback, as in ``test_raft_safety.py``.
"""
from __future__ import annotations

import functools

import pytest
from pysyncobj import SyncObj

from broker.controller import raft
from tests.unit.controller import test_raft_safety as safety
from tests.unit.controller.test_raft_safety import Network, Node, leader_of, wait_until

pytest.importorskip("cryptography", reason="pysyncobj's encryption needs cryptography")

SECRET = "quorum-secret"


@pytest.fixture
def seen_by_the_patch(monkeypatch):
    """Every (sender address, message type) that reached the commit-index fix."""
    patched = SyncObj._SyncObj__onMessageReceived
    assert getattr(patched, "raftwood_fixed", False), "the commit-index fix is not installed"
    seen: list[tuple[str, str]] = []

    def spy(self, node, message):
        if isinstance(message, dict):
            seen.append((getattr(node, "address", str(node)), message.get("type")))
        return patched(self, node, message)

    spy.raftwood_fixed = True
    monkeypatch.setattr(SyncObj, "_SyncObj__onMessageReceived", spy)
    return seen


def start_nodes(tmp_path, monkeypatch, passwords: list[str]):
    """One Node per password (Node builds its conf with raft_conf: given the password)."""
    def conf_with(password, directory, periods):
        return raft.raft_conf(directory, periods, password)

    network = Network()
    addresses = [f"127.0.0.1:{p}" for p in safety.free_ports(len(passwords))]
    nodes = []
    for i, (address, password) in enumerate(zip(addresses, passwords)):
        monkeypatch.setattr(safety, "raft_conf", functools.partial(conf_with, password))
        directory = tmp_path / f"node-{i}"
        directory.mkdir()
        nodes.append(Node(address, [a for a in addresses if a != address], directory, network))
    return network, nodes


def stop(nodes) -> None:
    for node in nodes:
        node.syncobj.destroy()


def test_voters_sharing_the_secret_elect_and_replicate_through_the_patched_handler(
        tmp_path, monkeypatch, seen_by_the_patch):
    _, nodes = start_nodes(tmp_path, monkeypatch, [SECRET] * 3)
    try:
        assert all(n.syncobj.encryptor is not None for n in nodes)
        leader = wait_until(lambda: leader_of(nodes), what="a leader")
        assert leader.submit_sync("init_cluster", ("c1",))["e"] == 0
        wait_until(lambda: all(n.applied.cluster_ids() == ["c1"] for n in nodes),
                   what="every voter applying the command")
        assert ("append_entries" in {kind for _, kind in seen_by_the_patch}), \
            "encrypted appends must reach the commit-index fix"
    finally:
        stop(nodes)


def test_a_voter_with_another_secret_is_never_heard(tmp_path, monkeypatch,
                                                    seen_by_the_patch):
    _, nodes = start_nodes(tmp_path, monkeypatch, [SECRET, SECRET, "not-the-secret"])
    odd = nodes[2]
    try:
        leader = wait_until(lambda: leader_of(nodes[:2]), what="a leader of the two")
        assert leader.submit_sync("init_cluster", ("c1",))["e"] == 0
        wait_until(lambda: all(n.applied.cluster_ids() == ["c1"] for n in nodes[:2]),
                   what="both voters applying the command")
        safety.time.sleep(3 * raft.RAFT_MAX_TIMEOUT_S)  # time for the odd one to try
        assert odd.applied.cluster_ids() == [] and not odd.syncobj._isLeader()
        assert odd.syncobj._getLeader() is None
        assert not any(sender == odd.address for sender, _ in seen_by_the_patch), \
            "a message of the node without the secret reached Raft"
        assert leader_of(nodes[:2]) is not None, "the two keep their leader"
    finally:
        stop(nodes)


def test_a_cut_off_leader_never_applies_what_it_appended_alone_with_encryption_on(
        tmp_path, monkeypatch):
    """The partition-heal scenario of test_raft_safety.py, every message encrypted."""
    network, nodes = start_nodes(tmp_path, monkeypatch, [SECRET] * 3)
    try:
        safety.test_a_cut_off_leader_never_applies_what_it_appended_alone((network, nodes))
    finally:
        stop(nodes)

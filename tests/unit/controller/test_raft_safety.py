"""The metadata quorum applies only committed Raft entries, and what follows from it.

Two levels:

* message level, deterministic: one pysyncobj node without its tick thread is fed the
  messages of a partition heal by hand.  It holds entries a former leader appended
  while cut off (never committed); the new leader, which compacted its journal, sends
  it a snapshot.  Unpatched pysyncobj 0.3.17 raises its commit index over those stale
  entries on a snapshot message and applies them; with Raftwood's fix it does not.
* cluster level: three pysyncobj nodes in this process, their messages passed through
  a filter that can cut links (a network partition both ways, Raft included).  The
  leader is cut off while commands reach it, the majority moves on past a journal
  compaction, the links heal: the old leader never applies its own uncommitted
  commands, steps down within an election timeout, and ends with the majority's state.
"""
from __future__ import annotations

import pickle
import threading
import time

import pytest
from pysyncobj import SyncObj, SyncObjConf
from pysyncobj.syncobj import _COMMAND_TYPE
from pysyncobj.transport import TCPTransport

from broker.controller import raft
from broker.controller.raft import RAFT_MAX_TIMEOUT_S, MetadataConsumer, raft_conf
from broker.testing import free_ports

WAIT_S = 20.0


class Applied:
    """What one node's consumer applied, in order (Raft thread writes, test reads)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.commands: list[tuple[str, tuple]] = []
        self.images = []

    def __call__(self, method, args, image):
        with self.lock:
            self.commands.append((method, args))
            if image is not None:
                self.images.append(image)

    def cluster_ids(self) -> list[str]:
        with self.lock:
            return [args[0] for method, args in self.commands if method == "init_cluster"]


def wait_until(predicate, timeout_s: float = WAIT_S, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


# -- message level -------------------------------------------------------------------

def _entry(node: SyncObj, method: str, args: tuple, index: int, term: int):
    func_id = next(iter(node._methodToID.values()))
    payload = bytes([_COMMAND_TYPE.REGULAR]) + pickle.dumps((func_id, (method, args, None)))
    return (payload, index, term)


@pytest.fixture
def lone_node(tmp_path):
    ports = free_ports(3)
    applied = Applied()
    consumer = MetadataConsumer(applied)
    node = SyncObj(f"127.0.0.1:{ports[0]}", [f"127.0.0.1:{p}" for p in ports[1:]],
                   SyncObjConf(autoTick=False), consumers=[consumer])
    partners = sorted(node._SyncObj__otherNodes, key=lambda n: n.address)
    try:
        yield node, partners, applied
    finally:
        node.destroy()


@pytest.mark.parametrize("patched", [True, False], ids=["raftwood", "unpatched-pysyncobj"])
def test_a_snapshot_message_never_commits_the_receivers_own_stale_entries(lone_node, patched):
    node, (old_leader, new_leader), applied = lone_node
    receive = SyncObj._SyncObj__onMessageReceived
    if not patched:
        receive = receive.unpatched
    # Term 1: the old leader replicates two entries to us, commits neither.
    receive(node, old_leader, {
        "type": "append_entries", "term": 1, "commit_index": 1, "prevLogIdx": 1,
        "prevLogTerm": 0, "entries": [_entry(node, "init_cluster", ("stale-a",), 2, 1),
                                      _entry(node, "init_cluster", ("stale-b",), 3, 1)]})
    node.doTick(0)
    assert node.raftCommitIndex == 1 and applied.cluster_ids() == []
    # Term 2: the new leader, whose journal starts past index 3, sends a snapshot; the
    # first message carries no data yet (it is still being prepared) but its commit index.
    receive(node, new_leader, {"type": "append_entries", "term": 2, "commit_index": 40,
                               "serialized": None})
    node.doTick(0)
    if patched:
        assert node.raftCommitIndex == 1
        assert applied.cluster_ids() == [], "uncommitted entries were applied"
    else:  # the defect the fix exists for: pysyncobj 0.3.17 applies them
        assert node.raftCommitIndex == 3
        assert applied.cluster_ids() == ["stale-a", "stale-b"]


def test_a_matching_append_still_commits(lone_node):
    node, (leader, _), applied = lone_node
    receive = SyncObj._SyncObj__onMessageReceived
    receive(node, leader, {
        "type": "append_entries", "term": 1, "commit_index": 2, "prevLogIdx": 1,
        "prevLogTerm": 0, "entries": [_entry(node, "init_cluster", ("real",), 2, 1)]})
    node.doTick(0)
    assert node.raftCommitIndex == 2 and applied.cluster_ids() == ["real"]
    assert applied.images[-1].position()[:2] == (1, 2)


def test_the_fix_is_installed_once():
    raft._install_commit_index_fix()
    method = SyncObj._SyncObj__onMessageReceived
    assert method.raftwood_fixed
    assert not getattr(method.unpatched, "raftwood_fixed", False)


# -- cluster level ---------------------------------------------------------------------

class Network:
    """Which directed links are cut: (from address, to address)."""

    def __init__(self):
        self.cut: set[tuple[str, str]] = set()

    def isolate(self, address: str, others: list[str]) -> None:
        for other in others:
            self.cut |= {(address, other), (other, address)}

    def heal(self) -> None:
        self.cut.clear()


def filtered_transport(network: Network):
    class FilteredTransport(TCPTransport):
        """TCP between the nodes, but messages over a cut link vanish (both ways), as
        with a firewall dropping packets: connections stay up, nothing arrives."""

        def send(self, node, message):
            if (self._selfNode.address, node.address) in network.cut:
                return True
            return super().send(node, message)

        def _onMessageReceived(self, node, message):
            if (node.address, self._selfNode.address) in network.cut:
                return
            super()._onMessageReceived(node, message)

    return FilteredTransport


class Node:
    def __init__(self, address, partners, directory, network):
        self.address = address
        self.applied = Applied()
        self.consumer = MetadataConsumer(self.applied)
        conf = raft_conf(str(directory), (0.02, 0.01))
        conf.logCompactionMinEntries = 20
        conf.logCompactionMinTime = 1
        self.syncobj = SyncObj(address, partners, conf, consumers=[self.consumer],
                               transportClass=filtered_transport(network))

    def submit(self, method, args, controller_term=None):
        """Fire and forget; returns a dict the callback fills."""
        outcome = {}
        self.consumer.command(method, args, controller_term,
                              callback=lambda result, error: outcome.update(r=result, e=error))
        return outcome

    def submit_sync(self, method, args, controller_term=None):
        outcome = self.submit(method, args, controller_term)
        wait_until(lambda: outcome, what=f"{method} answered")
        return outcome


@pytest.fixture
def raft_cluster(tmp_path):
    network = Network()
    addresses = [f"127.0.0.1:{p}" for p in free_ports(3)]
    nodes = []
    for i, address in enumerate(addresses):
        directory = tmp_path / f"node-{i}"
        directory.mkdir()
        nodes.append(Node(address, [a for a in addresses if a != address], directory, network))
    try:
        yield network, nodes
    finally:
        for node in nodes:
            node.syncobj.destroy()


def leader_of(nodes):
    leaders = [n for n in nodes if n.syncobj._isLeader()]
    return leaders[0] if len(leaders) == 1 else None


def test_a_cut_off_leader_never_applies_what_it_appended_alone(raft_cluster):
    network, nodes = raft_cluster
    old = wait_until(lambda: leader_of(nodes), what="a leader")
    assert old.submit_sync("init_cluster", ("cluster-1",))["e"] == 0
    others = [n for n in nodes if n is not old]
    network.isolate(old.address, [n.address for n in others])
    stale = [old.submit("alloc_stale", ()) for _ in range(3)]  # appended by the old leader only
    stale += [old.submit("allocate_producer_ids", (7,)) for _ in range(3)]

    # It stops leading within an election timeout (pysyncobj's default kept it 30 s).
    wait_until(lambda: not old.syncobj._isLeader(), timeout_s=RAFT_MAX_TIMEOUT_S + 2.0,
               what="the cut-off leader to step down")
    new = wait_until(lambda: leader_of(others), what="a new leader on the majority side")
    for _ in range(40):  # past the compaction threshold: the old leader needs a snapshot
        assert new.submit_sync("allocate_producer_ids", (1,))["e"] == 0
    wait_until(lambda: new.syncobj._getRaftLogSize() < 40, what="the majority to compact")

    network.heal()
    # Caught up means the old leader has published the image of the majority's last change
    # (its raftLastApplied alone can be a few entries short of the images on a busy machine).
    wait_until(lambda: old.consumer.state.next_producer_id == new.consumer.state.next_producer_id
               and old.syncobj.raftLastApplied >= new.syncobj.raftCommitIndex - 5
               and old.applied.images
               and max(i.position() for i in old.applied.images)
               == new.consumer.state.position(),
               what="the old leader to catch up")
    assert old.consumer.state.next_producer_id == 40, "a stale allocation was applied"
    assert all(method != "alloc_stale" for method, _ in old.applied.commands)
    assert all(o.get("r") is None for o in stale), "an uncommitted command reported success"
    positions = [image.position() for image in old.applied.images]
    assert max(positions) == new.consumer.state.position()


def test_a_controller_decision_is_refused_outside_the_term_it_was_taken_in(raft_cluster):
    network, nodes = raft_cluster
    leader = wait_until(lambda: leader_of(nodes), what="a leader")
    term = leader.syncobj.raftCurrentTerm
    fresh = leader.submit_sync("init_cluster", ("c",), controller_term=term)
    assert fresh["r"][0] == "ok"
    stale = leader.submit_sync("allocate_producer_ids", (5,), controller_term=term - 1)
    assert stale["r"][0] == "error" and stale["r"][1] == "NOT_CONTROLLER"
    assert leader.consumer.state.next_producer_id == 0


# -- reconnecting after a heal ----------------------------------------------------------

@pytest.fixture
def syn_dropping_partner():
    """A listener on 127.0.0.1 whose accept queue is full: Linux drops the SYNs of any
    further connection attempt (as a firewall cutting the link would), and the
    connecting side stays in SYN_SENT while the kernel retries."""
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    filler = socket.create_connection(server.getsockname())  # the one queued connection
    wait_until(lambda: _queue_full(server), what="the accept queue to fill")
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        filler.close()
        server.close()


def _queue_full(server) -> bool:
    import socket

    probe = socket.socket()
    probe.setblocking(False)
    try:
        probe.connect_ex(server.getsockname())
        time.sleep(0.2)
        probe.getpeername()
        return False  # it got through: the queue had room
    except OSError:
        return True
    finally:
        probe.close()


@pytest.mark.parametrize("patched", [True, False], ids=["raftwood", "unpatched-pysyncobj"])
def test_a_connection_attempt_whose_syn_was_dropped_is_abandoned_and_retried(
        syn_dropping_partner, patched):
    """pysyncobj checks a connection's timeout only on socket events, and a connect whose
    SYN was dropped has none until the kernel gives up (about two minutes): a node cut
    off for a minute then stayed without a leader long after the link healed."""
    current = TCPTransport._connectIfNecessarySingle
    if not patched:
        TCPTransport._connectIfNecessarySingle = current.unpatched
    # Our address must sort after the partner's (pysyncobj's higher address connects):
    # 127.0.0.2 (loopback too) sorts after 127.0.0.1 whatever the ports.
    me = f"127.0.0.2:{free_ports(1, host='127.0.0.2')[0]}"
    conf = SyncObjConf(autoTick=False, connectionTimeout=1.0, raftMinTimeout=0.4,
                       raftMaxTimeout=0.9, connectionRetryTime=0.1)
    node = SyncObj(me, [syn_dropping_partner], conf)
    try:
        transport = node._SyncObj__transport
        partner = next(iter(transport._nodes))
        node.doTick(0)
        first = transport._lastConnectAttempt.get(partner)
        assert first is not None, "no connection attempt was made"
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            node.doTick(0.05)
        attempts_moved = transport._lastConnectAttempt[partner] > first
        assert attempts_moved == patched
    finally:
        TCPTransport._connectIfNecessarySingle = current
        node.destroy()


def test_importing_the_raft_node_leaves_socket_inet_ntop_working():
    """pysyncobj replaces socket.inet_ntop with a Windows-only function on every OS; the
    Raft module puts the real one back, so the rest of the broker (and tests) can use it."""
    import socket

    import broker.controller.raft  # noqa: F401  (imports pysyncobj's transport)

    assert socket.inet_ntop(socket.AF_INET, b"\x7f\x00\x00\x01") == "127.0.0.1"
    assert socket.inet_ntop(socket.AF_INET6, bytes(15) + b"\x01") == "::1"

"""What pysyncobj may unpickle (``broker/controller/raft_codec.py``) and who may talk to a
Raft port (``raft_transport.py``).

* everything the metadata log really carries loads: frames, command entries, a whole
  ClusterState as dumped;
* any other global is refused before it is looked up (functions, modules, dotted
  names, classes merely imported into a state module), and nothing it names runs;
* a refused entry is skipped the same way on every node, the next one applies;
* local files naming a refused type stop the start with the file's name;
* over TCP: a utility message, a first message that is no address, and a refused
  pickle each drop their connection; the voter set does not move.
"""
from __future__ import annotations

import gzip
import logging
import os
import pickle
import socket
import struct
import time
import zlib

import pysyncobj.pickle as pysyncobj_pickle
import pytest
from pysyncobj import SyncObj, SyncObjConf
from pysyncobj.journal import FileJournal
from pysyncobj.syncobj import _COMMAND_TYPE

from broker.controller import raft_codec
from broker.controller.raft import MetadataConsumer, start_raft_node, voter_addresses
from broker.controller.raft_codec import RaftFileRefused, RefusedPickle
from broker.controller.state import ClusterState
from broker.testing import free_ports
from tests.unit.controller.test_raft_safety import Applied, _entry

WAIT_S = 10.0


def full_state() -> ClusterState:
    state = ClusterState()
    state.apply_init_cluster("codec-cluster")
    for broker_id in (1, 2, 3):
        state.apply_register_broker(broker_id, "127.0.0.1", 9000 + broker_id, f"inc-{broker_id}")
    state.apply_create_topic("t", "id-t", [[1, 2, 3], [2, 3, 1]], {"cleanup.policy": "compact"})
    state.apply_alter_topic_configs("t", {"retention.ms": "1000"})
    state.apply_create_acls([[2, "t", 3, "User:alice", "*", 3, 3]])
    state.apply_record_voter(4, "127.0.0.1:9999")
    state.apply_allocate_producer_ids(10)
    return state


def test_a_dumped_state_loads_whole():
    consumer = MetadataConsumer(lambda *a: None)
    consumer.state = full_state()
    dump = ([{"raftwood": 1}, consumer._serialize()], (b"\x01", 7, 2), (b"\x01", 1, 0),
            {None, "127.0.0.1:1"})
    loaded = raft_codec.load(_gzipped(pysyncobj_pickle.dumps(dump)))
    assert loaded[0][1]["state"].to_dict() == consumer.state.to_dict()
    assert loaded[1:] == dump[1:]


def test_frames_and_command_entries_load():
    command = (0, ("create_topic", ("t", "id", [[1]], {"a": "b"}), 3))
    frame = {"type": "append_entries", "term": 3, "commit_index": 5, "prevLogIdx": 4,
             "prevLogTerm": 3, "entries": [(bytes([_COMMAND_TYPE.REGULAR])
                                            + pysyncobj_pickle.dumps(command), 5, 3)]}
    assert raft_codec.loads(pysyncobj_pickle.dumps(frame)) == frame
    assert raft_codec.loads(pysyncobj_pickle.dumps(command)) == command
    assert raft_codec.loads(pysyncobj_pickle.dumps(b"")) == b""
    assert raft_codec.loads(pysyncobj_pickle.dumps({1, 2})) == {1, 2}


def _global(module: str, name: str) -> bytes:
    """A protocol-0 pickle calling ``module.name("x")``."""
    return f"c{module}\n{name}\n(S'x'\ntR.".encode()


@pytest.mark.parametrize("module, name", [
    ("os", "system"), ("posix", "system"), ("builtins", "eval"), ("builtins", "getattr"),
    ("__builtin__", "eval"), ("subprocess", "Popen"), ("_codecs", "decode"),
    ("broker.controller.state", "copy"),             # a module imported there
    ("broker.controller.commands", "dataclass"),     # a function imported there
    ("broker.controller.state", "ClusterState.snapshot"),  # a dotted name
    ("broker.controller.raft", "MetadataConsumer"),  # not a state module
])
def test_any_other_global_is_refused(module, name):
    with pytest.raises(RefusedPickle):
        raft_codec.loads(_global(module, name))
    with pytest.raises(RefusedPickle):  # pysyncobj's own entry point is the restricted one
        pysyncobj_pickle.loads(_global(module, name))


@pytest.mark.parametrize("payload", [
    b"c__builtin__\nbytes\n(I1000000000\ntR.",         # bytes(10**9): a 10**9-byte frame
    b"c_codecs\nencode\n(Vx\nVzlib\ntR.",               # another codec
    b"c_codecs\nencode\n(I7\nVlatin1\ntR.",             # not text
    b"c__builtin__\nbytearray\n(I1000000000\ntR.",
], ids=["bytes-of-a-size", "other-codec", "encode-an-int", "bytearray"])
def test_bytes_are_built_only_the_way_protocol_2_writes_them(payload):
    with pytest.raises(RefusedPickle):
        raft_codec.loads(payload)


def test_a_refused_frame_is_one_warning_per_interval(caplog):
    raft_codec.refusal_warning._last = float("-inf")
    for _ in range(5):
        with pytest.raises(RefusedPickle):
            raft_codec.loads(_global("os", "system"))
    warnings = [r for r in caplog.records if r.name == "broker.controller.raft_codec"]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
    assert "os.system" in warnings[0].getMessage() and not warnings[0].exc_info


def _gzipped(data: bytes):
    import io

    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb") as g:
        g.write(data)
    buffer.seek(0)
    return gzip.GzipFile(fileobj=buffer)


def test_local_files_naming_a_refused_type_stop_the_start(tmp_path):
    journal, dump = str(tmp_path / "raft.journal"), str(tmp_path / "raft.dump")
    raft_codec.check_local_files(journal, dump)  # none yet: fine
    with gzip.open(dump, "wb") as g:
        g.write(_global("os", "system"))
    with pytest.raises(RaftFileRefused, match=r"raft\.dump: holds os\.system"):
        raft_codec.check_local_files(journal, dump)
    os.remove(dump)
    with open(journal + ".meta", "wb") as f:
        f.write(_global("posix", "system"))
    with pytest.raises(RaftFileRefused, match=r"raft\.journal\.meta: holds posix\.system"):
        raft_codec.check_local_files(journal, dump)
    os.remove(journal + ".meta")
    entries = FileJournal(journal)
    entries.add(bytes([_COMMAND_TYPE.REGULAR]) + pysyncobj_pickle.dumps((0, ("x", ()))), 2, 1)
    entries.add(bytes([_COMMAND_TYPE.REGULAR]) + _global("os", "system"), 3, 1)
    entries._destroy()
    with pytest.raises(RaftFileRefused, match=r"entry 3 holds os\.system"):
        raft_codec.check_local_files(journal, dump)
    assert isinstance(RaftFileRefused("x"), OSError), "raftwood start reports it as such"


def test_a_refused_entry_is_skipped_and_the_next_applies():
    ports = free_ports(2)
    applied = Applied()
    node = SyncObj(f"127.0.0.1:{ports[0]}", [f"127.0.0.1:{ports[1]}"],
                   SyncObjConf(autoTick=False), consumers=[MetadataConsumer(applied)])
    try:
        leader = next(iter(node._SyncObj__otherNodes))
        bad = (bytes([_COMMAND_TYPE.REGULAR]) + _global("os", "system"), 2, 1)
        bad_membership = (bytes([_COMMAND_TYPE.MEMBERSHIP]) + _global("os", "system"), 3, 1)
        SyncObj._SyncObj__onMessageReceived(node, leader, {
            "type": "append_entries", "term": 1, "commit_index": 4, "prevLogIdx": 1,
            "prevLogTerm": 0, "entries": [bad, bad_membership,
                                          _entry(node, "init_cluster", ("good",), 4, 1)]})
        node.doTick(0)
        assert node.raftLastApplied == 4
        assert applied.cluster_ids() == ["good"]
    finally:
        node.destroy()


# -- over TCP -----------------------------------------------------------------------------

def frame(message) -> bytes:
    return raw_frame(pickle.dumps(message, 2))


def raw_frame(payload: bytes) -> bytes:
    data = zlib.compress(payload, 3)
    return struct.pack("i", len(data)) + data


def closed_by_server(port: int, data: bytes) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as sock:
        sock.sendall(data)
        deadline = time.monotonic() + WAIT_S
        try:
            while time.monotonic() < deadline:
                if not sock.recv(65536):
                    return True
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False
    return False


@pytest.fixture
def voter(tmp_path):
    ports = free_ports(2)
    node, _ = start_raft_node(f"127.0.0.1:{ports[0]}", [f"127.0.0.1:{ports[1]}"],
                              str(tmp_path), (0.05, 0.02), on_applied=lambda *a: None)
    try:
        node.waitBinded()
        yield node, ports[0]
    finally:
        node.destroy_synchronous()


def test_the_raft_server_binds_the_voters_own_host(voter):
    node, port = voter
    server = node._SyncObj__transport._server
    assert (server._TcpServer__host, server._TcpServer__port) == ("127.0.0.1", port)


def test_observers_open_no_server(tmp_path):
    ports = free_ports(1)
    node, _ = start_raft_node(None, [f"127.0.0.1:{ports[0]}"], str(tmp_path), (0.05, 0.02),
                              on_applied=lambda *a: None)
    try:
        assert node._SyncObj__transport._server is None
    finally:
        node.destroy_synchronous()


@pytest.mark.parametrize("data", [
    frame(["add", "127.0.0.1:1"]), frame(["remove", "127.0.0.1:9"]), frame(["status"]),
    frame({"type": "request_vote"}), frame(7),
    frame("readonly") + frame(["add", "127.0.0.1:1"]),
    frame("readonly") + frame({"type": "append_entries"}),
    frame("readonly") + frame("no dict"),
    raw_frame(_global("os", "system")),
    frame("readonly") + raw_frame(_global("os", "system")),
], ids=["add", "remove", "status", "dict-first", "int-first", "utility-after-readonly",
        "malformed-append", "str-message", "refused-type-first", "refused-type-after-readonly"])
def test_strangers_connections_are_dropped_and_the_voter_set_stays(voter, data, caplog):
    node, port = voter
    before = voter_addresses(node)
    assert closed_by_server(port, data)
    assert voter_addresses(node) == before
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], \
        "a refusal is a warning, never an error or traceback"

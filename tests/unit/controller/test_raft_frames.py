"""How big a Raft frame may be and what it may hold (``broker/controller/raft_frames.py``),
over real TCP connections to a real pysyncobj voter as in ``test_raft_codec``:

* a zlib bomb (a small frame expanding beyond ``MAX_FRAME_BYTES``) is refused having
  produced at most the cap, its connection dropped with one WARNING;
* a frame announcing more than ``MAX_WIRE_FRAME_BYTES`` (or a negative length) is
  dropped from its first four bytes, before any body arrives;
* a frame holding a pysyncobj node is refused; unpickling a TCPNode resolves no name;
* ordinary frames of the largest legitimate size still decompress.
"""
from __future__ import annotations

import functools
import logging
import pickle
import struct
import zlib

import pysyncobj.pickle as pysyncobj_pickle
import pytest
from pysyncobj.dns_resolver import globalDnsResolver
from pysyncobj.node import TCPNode

from broker.controller import raft_codec, raft_frames  # noqa: F401  (installs the patches)
from broker.controller.raft import voter_addresses
from broker.controller.raft_codec import RefusedPickle
from broker.controller.raft_frames import (
    MAX_FRAME_BYTES,
    MAX_WIRE_FRAME_BYTES,
    FrameRefused,
    decompress,
    frame_loads,
)
from tests.unit.controller.test_raft_codec import (
    closed_by_server,
    frame,
    voter,  # noqa: F401  (a fixture)
)


@functools.lru_cache(maxsize=2)
def bomb(size: int) -> bytes:
    """zlib of ``size`` zero bytes: about a thousandth of ``size``."""
    compressor = zlib.compressobj(9)
    chunk = bytes(1024 * 1024)
    parts = [compressor.compress(chunk) for _ in range(size // len(chunk))]
    return b"".join(parts) + compressor.flush()


def test_a_bomb_is_refused_at_the_cap():
    data = bomb(MAX_FRAME_BYTES + 1024 * 1024)
    assert len(data) < MAX_FRAME_BYTES // 500
    with pytest.raises(FrameRefused, match="expands beyond"):
        decompress(data)


def test_frames_up_to_the_cap_decompress_whole():
    payload = bytes(MAX_FRAME_BYTES)
    assert decompress(zlib.compress(payload, 3)) == payload
    message = {"type": "append_entries", "entries": [(b"\x01" * 70000, 5, 2)]}
    assert frame_loads(decompress(zlib.compress(pickle.dumps(message, 2), 3))) == message


@pytest.mark.parametrize("data", [b"not zlib", zlib.compress(b"x" * 1000)[:-6]],
                         ids=["garbage", "truncated"])
def test_what_is_not_one_whole_zlib_stream_is_refused(data):
    with pytest.raises(FrameRefused):
        decompress(data)


def test_a_frame_holding_a_node_is_refused_and_resolves_nothing():
    name = "raftwood-frame-test.invalid"
    cache = globalDnsResolver()._DnsCachingResolver__cache
    cache.pop(name, None)
    data = pickle.dumps({"type": "append_entries", "node": TCPNode(f"{name}:9093")}, 2)
    with pytest.raises(RefusedPickle):
        frame_loads(data)
    built = raft_codec.loads(data)  # a membership entry may hold nodes: built, not resolved
    assert built["node"].address == f"{name}:9093" and built["node"].port == 9093
    assert name not in cache, "unpickling a TCPNode looked its name up"


def test_pysyncobj_frames_go_through_the_bounded_codec():
    import pysyncobj.tcp_connection as tcp_connection

    assert tcp_connection.zlib.decompress is decompress
    assert tcp_connection.pickle.loads is frame_loads
    assert tcp_connection.pickle.dumps is pysyncobj_pickle.dumps


def _dropped_with_one_warning(voter, data, caplog, wanted: str):
    node, port = voter
    before = voter_addresses(node)
    caplog.set_level(logging.WARNING, logger="broker.controller.raft_frames")
    raft_frames.refusal_warning._last = float("-inf")
    assert closed_by_server(port, data)
    assert voter_addresses(node) == before
    warnings = [r for r in caplog.records if r.name == "broker.controller.raft_frames"]
    assert len(warnings) == 1 and wanted in warnings[0].getMessage()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_bomb_over_tcp_drops_its_connection(voter, caplog):
    data = bomb(MAX_FRAME_BYTES + 1024 * 1024)
    _dropped_with_one_warning(voter, struct.pack("i", len(data)) + data, caplog,
                              "expanding beyond")


def test_a_bomb_after_readonly_drops_its_connection(voter, caplog):
    data = bomb(MAX_FRAME_BYTES + 1024 * 1024)
    _dropped_with_one_warning(voter, frame("readonly") + struct.pack("i", len(data)) + data,
                              caplog, "expanding beyond")


@pytest.mark.parametrize("length", [MAX_WIRE_FRAME_BYTES + 1, 2 ** 31 - 1, -5])
def test_an_oversized_announced_length_drops_the_connection_at_once(voter, caplog, length):
    _dropped_with_one_warning(voter, struct.pack("i", length) + b"x" * 100, caplog,
                              f"announcing {length} bytes")


def test_a_node_in_a_frame_over_tcp_drops_its_connection(voter, caplog):
    message = {"type": "append_entries", "node": TCPNode("127.0.0.1:1")}
    _dropped_with_one_warning(voter, frame("readonly") + frame(message), caplog,
                              "pysyncobj.node.TCPNode")

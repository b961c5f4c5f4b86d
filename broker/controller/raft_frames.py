"""How big a Raft frame may be, on the wire and once decompressed, and what it may hold.

pysyncobj's frame (``pysyncobj.tcp_connection``) is a 4-byte native-endian length, then
``zlib(pickle(message))``, encrypted first when ``controller.quorum.password`` is set.
Unpatched, it reads a frame of any announced length into memory and decompresses it
without a bound: without the secret a frame of a few kilobytes could expand to
gigabytes, and a length of 2 GiB would be buffered whole before anything looked at it.
``install`` (once, at import of ``broker.controller.raft``) gives ``tcp_connection`` a
``zlib`` whose ``decompress`` stops at ``MAX_FRAME_BYTES`` and a ``pickle`` whose
``loads`` builds no node, and bounds what a connection buffers.

Invariants:

* a frame announcing more than ``MAX_WIRE_FRAME_BYTES`` (or a negative length) drops its
  connection as soon as its length is read, before its body is buffered;
* a connection never buffers much more than ``MAX_WIRE_FRAME_BYTES`` unparsed: the read
  loop yields to the parser beyond it;
* a frame decompressing beyond ``MAX_FRAME_BYTES`` (or not a whole zlib stream) is
  refused having produced at most ``MAX_FRAME_BYTES``: its connection is dropped;
* a frame naming ``pysyncobj.node.Node`` / ``TCPNode`` is refused: pysyncobj's own
  frames never hold a node (membership entries travel as pickled bytes inside log
  entries and are unpickled, nodes allowed, when applied; dumps and snapshots are
  files).  Unpickling a TCPNode resolves nothing anyway (pysyncobj 0.3's ``__init__``
  only splits ``host:port``, and it has no ``__setstate__``; ``TCPNode.ip`` resolves
  when the transport connects to a voter), so a stranger's frame cannot make the Raft
  thread wait on DNS through one;
* every refusal logs one WARNING per ``raft_codec.WARNING_INTERVAL_S`` at most, never a
  traceback.

The sizes: log entries and snapshots travel in chunks of
``appendEntriesBatchSizeBytes`` and ``logCompactionBatchSize`` (64 KiB each by
default), so a replication frame holds a few hundred KiB at most.  The one frame that
is not chunked is a command an observer or follower forwards to the leader whole
(``apply_command``); a topic of 10,000 partitions (the per-request cap) with 3 replicas
each pickles to about 170 KiB.  64 MiB leaves more than two orders of magnitude.
"""
from __future__ import annotations

import io
import logging
import struct
import types
import zlib

import pysyncobj.pickle as pysyncobj_pickle
import pysyncobj.tcp_connection as tcp_connection
from pysyncobj.tcp_connection import TcpConnection

from .raft_codec import RateLimitedWarning, RefusedPickle, RestrictedUnpickler

log = logging.getLogger(__name__)

MAX_FRAME_BYTES = 64 * 1024 * 1024
# A Fernet token is base64 of the compressed frame plus 57 bytes; zlib adds a little
# to incompressible data: a legitimate frame on the wire stays well below this.
MAX_WIRE_FRAME_BYTES = MAX_FRAME_BYTES * 3 // 2
NODE_GLOBALS = frozenset({("pysyncobj.node", "Node"), ("pysyncobj.node", "TCPNode")})

refusal_warning = RateLimitedWarning(log)


class FrameRefused(ValueError):
    """A Raft frame too large, not a whole zlib stream, or holding a node."""


def decompress(data: bytes) -> bytes:
    """``zlib.decompress`` producing at most ``MAX_FRAME_BYTES``; FrameRefused beyond,
    or when ``data`` is not one whole zlib stream."""
    decompressor = zlib.decompressobj()
    try:
        out = decompressor.decompress(data, MAX_FRAME_BYTES)
    except zlib.error as exc:
        raise FrameRefused(f"not a zlib stream: {exc}") from None
    if not decompressor.eof:
        if len(out) >= MAX_FRAME_BYTES:
            refusal_warning("metadata quorum: refused a Raft frame of %d compressed bytes "
                            "expanding beyond %d bytes; connection dropped",
                            len(data), MAX_FRAME_BYTES)
            raise FrameRefused(f"expands beyond {MAX_FRAME_BYTES} bytes")
        raise FrameRefused("a truncated zlib stream")
    return out


class FrameUnpickler(RestrictedUnpickler):
    """The restricted unpickler of ``raft_codec``, without pysyncobj's node classes."""

    def find_class(self, module, name):
        if (module, name) in NODE_GLOBALS:
            raise RefusedPickle(f"{module}.{name} in a frame")
        return super().find_class(module, name)


def frame_loads(data):
    """A decompressed frame's message (RefusedPickle logged, rate-limited)."""
    try:
        return FrameUnpickler(io.BytesIO(pysyncobj_pickle.to_bytes(data))).load()
    except RefusedPickle as exc:
        refusal_warning("metadata quorum: refused a Raft frame naming %s (a stranger, or "
                        "a peer not running Raftwood); connection dropped", exc.name)
        raise


def _announced_length(conn) -> int | None:
    buffer = conn._TcpConnection__readBuffer
    if len(buffer) < 4:
        return None
    return struct.unpack("i", buffer[:4])[0]


def _bounded_parse(original):
    def process_parse_message(self):
        length = _announced_length(self)
        if length is not None and not 0 <= length <= MAX_WIRE_FRAME_BYTES:
            refusal_warning("metadata quorum: refused a Raft frame announcing %d bytes "
                            "(at most %d); connection dropped", length, MAX_WIRE_FRAME_BYTES)
            self.disconnect()
            return None
        return original(self)

    process_parse_message.raftwood_fixed = True
    process_parse_message.unpatched = original
    return process_parse_message


def _bounded_read(original):
    def process_read(self):
        read = original(self)
        if read and len(self._TcpConnection__readBuffer) > MAX_WIRE_FRAME_BYTES:
            return False  # let the parser look at the frame's length first
        return read

    process_read.raftwood_fixed = True
    process_read.unpatched = original
    return process_read


def install() -> None:
    """Bound and restrict what ``pysyncobj.tcp_connection`` reads (idempotent)."""
    tcp_connection.zlib = types.SimpleNamespace(compress=zlib.compress, decompress=decompress)
    tcp_connection.pickle = types.SimpleNamespace(dumps=pysyncobj_pickle.dumps,
                                                  loads=frame_loads)
    parse = TcpConnection._TcpConnection__processParseMessage
    if not getattr(parse, "raftwood_fixed", False):
        TcpConnection._TcpConnection__processParseMessage = _bounded_parse(parse)
    read = TcpConnection._TcpConnection__processRead
    if not getattr(read, "raftwood_fixed", False):
        TcpConnection._TcpConnection__processRead = _bounded_read(read)

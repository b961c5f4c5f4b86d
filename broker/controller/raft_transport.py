"""Who may talk to a broker's Raft port, and what a connection may send.

pysyncobj reads the first message of an incoming connection as either the sender's
address (a voter), ``"readonly"`` (an observer) or a *utility message*: a list such as
``["add", "host:port"]`` or ``["remove", ...]`` from ``syncobj_admin``, which it honours
from anyone.  Raftwood changes its voter set through its own log (AddRaftVoter /
RemoveRaftVoter call ``SyncObj.addNodeToCluster`` in the broker), never through a
utility message, so:

* a utility message is refused whatever the connection (with
  ``controller.quorum.password`` the sender did hold the secret, but it did not
  identify itself as a voter): the connection is dropped;
* a first message that is not a string (no address, no ``"readonly"``) drops the
  connection;
* once identified, a message that is not a dict with a string ``type``, or that lacks
  a field pysyncobj reads (KeyError / TypeError) or names a refused type, drops the
  connection instead of raising on the Raft thread.

Each refusal logs one WARNING per ``raft_codec.WARNING_INTERVAL_S`` at most, never a
traceback.  Raft thread only.
"""
from __future__ import annotations

import logging

from pysyncobj import SyncObj
from pysyncobj.transport import TCPTransport

from .raft_append import answer_held, fix_append
from .raft_codec import RateLimitedWarning, RefusedPickle

log = logging.getLogger(__name__)

refusal_warning = RateLimitedWarning(log)


def _peer(conn) -> str:
    try:
        host, port = conn._TcpConnection__socket.getpeername()[:2]
        return f"{host}:{port}"
    except (AttributeError, OSError):
        return "a closed connection"


def install_incoming_guard() -> None:
    """Patch ``TCPTransport._onIncomingMessageReceived`` (idempotent)."""
    original = TCPTransport._onIncomingMessageReceived
    if getattr(original, "raftwood_fixed", False):
        return

    def on_incoming_message_received(self, conn, message):
        if self._syncObj.encryptor and not conn.sendRandKey:
            return original(self, conn, message)  # the key exchange, authenticated
        if isinstance(message, str):
            return original(self, conn, message)  # a voter's address or "readonly"
        what = (f"pysyncobj utility message {message[0]!r}" if isinstance(message, list)
                and message and isinstance(message[0], str) else
                f"a {type(message).__name__} as its first message")
        refusal_warning("metadata quorum: refused %s from %s (voter changes go through "
                        "AddRaftVoter / RemoveRaftVoter); connection dropped",
                        what, _peer(conn))
        self._unknownConnections.discard(conn)
        conn.disconnect()

    on_incoming_message_received.raftwood_fixed = True
    on_incoming_message_received.unpatched = original
    TCPTransport._onIncomingMessageReceived = on_incoming_message_received


def install_message_guard() -> None:
    """Wrap ``SyncObj.__onMessageReceived`` (idempotent; ``unpatched`` is always
    pysyncobj's own): shape check outermost, then the follower's append fix
    (``raft_append``), then the fixes installed before (``raft.py``)."""
    inner = SyncObj._SyncObj__onMessageReceived
    if getattr(inner, "raftwood_guarded", False):
        return

    def on_message_received(self, node, message):
        if not isinstance(message, dict) or not isinstance(message.get("type"), str):
            _drop(self, node, f"a {type(message).__name__} message")
            return None
        try:
            seen, held_next = fix_append(self, message)
            result = inner(self, node, seen)
            if held_next is not None:
                answer_held(self, node, seen, held_next,
                            min(message["commit_index"], held_next - 1))
            return result
        except RefusedPickle as exc:
            _drop(self, node, f"a {message['type']} message holding {exc.name}")
        except (KeyError, TypeError) as exc:
            _drop(self, node, f"a malformed {message['type']!r} message ({exc!r})")
        return None

    on_message_received.raftwood_fixed = True
    on_message_received.raftwood_guarded = True
    on_message_received.unpatched = getattr(inner, "unpatched", inner)
    on_message_received.inner = inner
    SyncObj._SyncObj__onMessageReceived = on_message_received


def _drop(syncobj: SyncObj, node, what: str) -> None:
    transport = syncobj._SyncObj__transport
    conn = getattr(transport, "_connections", {}).get(node)
    refusal_warning("metadata quorum: refused %s from %s; connection dropped", what,
                    _peer(conn) if conn is not None else node)
    if conn is not None:
        conn.disconnect()

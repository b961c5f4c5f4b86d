"""The pysyncobj Raft node holding the ClusterState (the only pysyncobj import).

One replicated entry point, ``command(method, args, controller_term)``, applies
``ClusterState.apply_<method>(*args)`` on every node in log order; a refusal is a
result (``("error", code, message)``), not an exception, so every node takes the same
path.  Its arguments are the wire form of a typed command (``commands.py``): the store
sends ``command.to_wire()``, the apply decodes it back (``commands.decode``).  The
signature, the method's name and its being the consumer's only @replicated method
(pysyncobj numbers them) are the journal's format: entries and dumps written by any
Raftwood since must keep applying.

The state lives in a SyncObjConsumer built before the Raft node starts its tick thread
(which replays the journal at once): attributes set before the consumer's ``__init__``
(the callback) stay out of pysyncobj's dumps, ``state`` (set after) is what gets
dumped and restored.

What the metadata quorum relies on (pysyncobj 0.3.17, with the fix below):

* **Only committed entries are applied.**  pysyncobj applies entries up to its commit
  index.  Unpatched, a follower raises its commit index to
  ``min(leader's commit index, own last index)`` on *every* ``append_entries``
  message, including the ones that carry a snapshot chunk or no entries at all, for
  which it never checked that its own log matches the leader's.  A former leader that
  appended entries while cut off, and is brought back through a snapshot (the
  majority compacted its journal), so applies its own never-committed entries.
  ``_install_commit_index_fix`` makes such messages unable to raise the commit index:
  only an append whose previous entry matched the leader's (Raft's consistency
  check) moves it.  ``tests/unit/controller/test_raft_safety.py`` shows the unpatched method
  applying an uncommitted entry and the patched one refusing.
* **A healed link reconnects within a connection timeout.**  pysyncobj checks a
  connection's timeout only when its socket has an event, and a connection attempt
  made while the link was cut has none: its SYN was dropped, and the kernel retries it
  with exponential backoff for about two minutes.  Unpatched, a node cut off for a
  minute could stay without a Raft leader for another minute after the heal (seen:
  63 s, the broker fenced all that time).  ``_install_connect_timeout_fix`` abandons an
  attempt older than ``connectionTimeout`` at the transport's next tick, so a fresh
  one follows.
* **An isolated leader steps down within an election timeout**
  (``leaderFallbackTimeout`` = ``raftMaxTimeout``), so it stops acting as controller
  about when the majority elects a new one.
* **A command lives no longer than its submit.**  ``commandsWaitLeader`` is off: a
  command submitted while no leader is known fails at once (the store retries until
  its deadline) instead of waiting in pysyncobj's queue to be forwarded to some later
  leader long after its caller gave up.
* **Controller decisions are fenced by the Raft term.**  A decision taken by the
  controller carries the term it was leader in; the apply refuses it (NOT_CONTROLLER)
  unless the entry was committed in that same term, that is, appended by that very
  leader.  A decision queued by a leader that lost its leadership meanwhile can never
  be committed through the next leader.
* **Only voters holding the secret are heard** when ``controller.quorum.password`` is
  set: pysyncobj encrypts and authenticates every message with it (``raft_conf``);
  a message that fails authentication drops its connection before it is unpickled,
  and both patches above act on decrypted messages
  (``tests/unit/controller/test_raft_encryption.py``).  Without it, anyone who reaches
  a Raft port (loopback included) can act as a voter, so ``broker/config.py`` refuses
  to start a quorum without the secret unless ``controller.quorum.allow.unauthenticated``
  says so, and ``start_raft_node`` then warns at start.
* **A Raft port runs no stranger's code.**  It binds the voter's own address, never a
  wildcard (``raft_conf``); whatever arrives is unpickled by ``raft_codec``'s
  restricted unpickler (the metadata log's own types only), and pysyncobj's utility
  messages (membership changes from ``syncobj_admin``) and malformed messages drop
  their connection (``raft_transport``).  A frame is bounded before it is unpickled
  (``raft_frames``: its announced length, its decompressed size, no node in it).
* **A follower never truncates entries it holds with the leader's term**
  (``raft_append``): pysyncobj 0.3.17 deleted and re-added identical, applied entries
  whenever the leader resent them, logging CRITICAL "truncating already-applied log
  entries"; that line now means a real conflict removed an applied entry.
* **The voter set lives in the log** (``dynamicMembershipChange``): AddRaftVoter and
  RemoveRaftVoter append pysyncobj's one-server membership entries, which take effect
  when appended (Raft's single-server change; one at a time, refused until the
  previous one committed) and are kept in the journal and in dumps, so after the
  first start ``controller.quorum.voters`` only says where to find the quorum.  A
  broker outside the voter set is an **observer**: pysyncobj's read-only node, which
  connects to the voters, receives the log from the leader and forwards its
  commands to it, but never votes or counts towards a majority.  A dump written by
  an observer lists the cluster with ``None`` for itself; ``_install_dump_fix``
  drops that entry when a broker promoted to voter loads it.
* **Every applied state knows its log position** (term, index of the entry), so a
  broker orders images by Raft log position and never takes an older image over a
  newer one; an installed snapshot is published like an applied command.
* **An entry goes whole, not in chunks** (``appendEntriesBatchSizeBytes``, 16 MiB).
  pysyncobj sends an entry of at least that size as a ``transmission`` of chunks and
  labels a chunk ``finish`` when it reaches the length of the entry's *command*, not
  of the pickled entry (a few dozen bytes longer): when a chunk boundary falls in
  between, the follower unpickles a truncated entry, refuses the real last chunk, and
  drops the connection — again at every resend.  With the 64 KiB default, a broker's
  heartbeat (the log end offset of every replica it hosts) crossed it after a
  CreatePartitions of a few thousand partitions, and the quorum stopped committing.
* **An applied change is published as an image plus a delta** (``image.publish``): unchanged topics
  and partitions are shared with the previous image, not copied, and the delta names the changed
  ones, so neither this thread nor a broker's replica manager walks every partition for a
  one-partition change.  An installed snapshot is a whole image without a delta.
"""
from __future__ import annotations

import _socket
import logging
import os
import socket

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, SyncObjConsumer, replicated
from pysyncobj.monotonic import monotonic
from pysyncobj.tcp_connection import CONNECTION_STATE
from pysyncobj.transport import TCPTransport

from . import raft_codec, raft_frames
from .commands import decode
from .image import publish, touched
from .raft_transport import install_incoming_guard, install_message_guard
from .state import ApplyError, ClusterState

log = logging.getLogger(__name__)

# pysyncobj's tcp_connection imports its win_inet_pton, which replaces socket.inet_ntop
# with a Windows-only version on every OS (on Linux it raises TypeError): put the C
# function back for everything else in the process.
socket.inet_ntop = _socket.inet_ntop

# Entries up to this size go whole in one message (see the module doc: a bigger one is
# sent in chunks, which pysyncobj 0.3.17 can label wrongly); under raft_frames' bound.
APPEND_ENTRIES_BATCH_BYTES = 16 * 1024 * 1024
RAFT_MIN_TIMEOUT_S = 0.4
RAFT_MAX_TIMEOUT_S = 1.2
# Failures after which nothing was appended anywhere: safe to submit again.
RETRIABLE_FAILURES = frozenset({FAIL_REASON.MISSING_LEADER, FAIL_REASON.NOT_LEADER,
                                FAIL_REASON.QUEUE_FULL})


def _install_commit_index_fix() -> None:
    """Patch ``SyncObj.__onMessageReceived`` (idempotent; see the module doc).

    An ``append_entries`` message without ``prevLogIdx`` (a snapshot chunk, or the
    empty message a leader sends while it prepares a snapshot) says nothing about
    whether the receiver's log matches the leader's, so its ``commit_index`` is
    clamped to the receiver's own before pysyncobj sees it.  Installing the last chunk
    replaces the receiver's log with the snapshot, and the next regular append (with
    the consistency check) then raises the commit index as Raft allows.
    """
    original = SyncObj._SyncObj__onMessageReceived
    if getattr(original, "raftwood_fixed", False):
        return

    def on_message_received(self, node, message):
        if isinstance(message, dict) and message.get("type") == "append_entries" \
                and "prevLogIdx" not in message:
            message = dict(message)
            message["commit_index"] = min(message.get("commit_index", 0),
                                          self._SyncObj__raftCommitIndex)
        return original(self, node, message)

    on_message_received.raftwood_fixed = True
    on_message_received.unpatched = original
    SyncObj._SyncObj__onMessageReceived = on_message_received


def _install_connect_timeout_fix() -> None:
    """Patch ``TCPTransport._connectIfNecessarySingle`` (idempotent; see the module doc).

    It runs for every partner at every tick.  A connection still CONNECTING
    ``connectionTimeout`` after its attempt began is disconnected first; the original
    then starts a new attempt (the retry interval has long passed)."""
    original = TCPTransport._connectIfNecessarySingle
    if getattr(original, "raftwood_fixed", False):
        return

    def connect_if_necessary_single(self, node):
        conn = self._connections.get(node)
        started = self._lastConnectAttempt.get(node)
        if conn is not None and started is not None \
                and conn.state == CONNECTION_STATE.CONNECTING \
                and monotonic() - started > self._syncObj.conf.connectionTimeout:
            conn.disconnect()  # its disconnect callback may already reconnect
        return original(self, node)

    connect_if_necessary_single.raftwood_fixed = True
    connect_if_necessary_single.unpatched = original
    TCPTransport._connectIfNecessarySingle = connect_if_necessary_single


def _install_dump_fix() -> None:
    """Patch ``SyncObj.__updateClusterConfiguration`` (idempotent; see the module doc):
    the ``None`` an observer's dump holds for itself is not a node."""
    original = SyncObj._SyncObj__updateClusterConfiguration
    if getattr(original, "raftwood_fixed", False):
        return

    def update_cluster_configuration(self, new_nodes):
        return original(self, [node for node in new_nodes if node is not None])

    update_cluster_configuration.raftwood_fixed = True
    update_cluster_configuration.unpatched = original
    SyncObj._SyncObj__updateClusterConfiguration = update_cluster_configuration


_install_commit_index_fix()
_install_connect_timeout_fix()
_install_dump_fix()
raft_codec.install()
raft_frames.install()
install_incoming_guard()
install_message_guard()  # outermost: wraps the commit index fix


class MetadataConsumer(SyncObjConsumer):
    """Raft thread only: pysyncobj's tick thread calls ``command`` when applying and
    ``_deserialize`` when it installs a snapshot."""

    def __init__(self, on_applied):
        self._on_applied = on_applied
        # The image last handed to the loop: the next one shares what did not change
        # (``image.publish``).  Set before the consumer's ``__init__``, so it
        # stays out of pysyncobj's dumps.
        self._published = None
        super().__init__()
        self.state = ClusterState()

    @replicated
    def command(self, method: str, args: tuple, controller_term: int | None = None):
        """Apply one journal entry (the wire form of a command).  Raft thread only.

        A controller decision (``controller_term`` set) committed in another term is
        refused before decoding; an entry that does not decode, or whose apply fails
        unexpectedly, is refused deterministically (every node gives the same outcome,
        none diverges)."""
        state = self.state
        before = state.version
        changed = None  # what the command may have changed (image.touched); None: anything
        term, index = self._entry_position()
        state.applied_term, state.applied_index = term, index
        if controller_term is not None and controller_term != term:
            outcome = ("error", "NOT_CONTROLLER",
                       f"{method} was decided by the controller of term {controller_term} "
                       f"but committed in term {term}")
        else:
            try:
                command = decode(method, args)
                outcome = ("ok", command.apply(state))
                changed = touched(command)
            except ApplyError as exc:
                outcome = ("error", exc.code, str(exc))
            except Exception as exc:  # a bug: refuse deterministically, never diverge
                log.exception("metadata command %s%r failed", method, args)
                outcome = ("error", "UNKNOWN_SERVER_ERROR", repr(exc))
        image = None
        if state.version != before:
            image = self._published = publish(state, self._published, changed)
        self._on_applied(method, args, image)
        return outcome

    def _entry_position(self) -> tuple[int, int]:
        """(term, index) of the entry being applied: the one after the last applied."""
        syncobj = self._syncObj
        if syncobj is None:
            return 0, 0
        index = syncobj.raftLastApplied + 1
        entries = syncobj._SyncObj__getEntries(index, 1)
        return (entries[0][2], index) if entries else (0, index)

    def _deserialize(self, data):
        """A snapshot (ours at start-up, or the leader's) replaced the state."""
        super()._deserialize(data)
        self._published = self.state.snapshot()  # a whole new image: no delta
        self._on_applied("snapshot", (), self._published)


def raft_conf(directory: str, periods: tuple[float, float],
              password: str | None = None, bind_address: str | None = None) -> SyncObjConf:
    """``password`` (``controller.quorum.password``) turns on pysyncobj's encryption:
    every message between voters is a Fernet token (AES-128-CBC + HMAC-SHA256, key by
    PBKDF2 from the password), so a node without the same secret can neither read the
    quorum's traffic nor be heard by it: its messages fail authentication and the
    connection is dropped before anything is unpickled.  The messages the patches above
    look at are the decrypted ones.

    Replication is sent when there is something to send, not batched to the next
    heartbeat (``appendEntriesUseBatch=False``): the leader sends a command's entry as
    soon as it is submitted (a pipe wakes the Raft thread) and the new commit index as
    soon as the entry is applied, so a metadata change reaches every broker in a few
    network round trips.  The heartbeat (``periods[0]``) and the tick (``periods[1]``)
    then only keep the leader's lease and drive timeouts, so they can be slow: the Raft
    thread's wake-ups are most of an idle broker's CPU.

    ``bind_address`` (a voter's own ``host:port``) is where its Raft server listens:
    pysyncobj binds ``0.0.0.0`` (or ``::``) with that port when it is not given.  An
    observer (None) opens no server."""
    append_entries_period_s, tick_period_s = periods
    return SyncObjConf(
        password=password or None, bindAddress=bind_address,
        journalFile=os.path.join(directory, "raft.journal"),
        fullDumpFile=os.path.join(directory, "raft.dump"),
        appendEntriesPeriod=append_entries_period_s,
        autoTickPeriod=tick_period_s,
        raftMinTimeout=RAFT_MIN_TIMEOUT_S, raftMaxTimeout=RAFT_MAX_TIMEOUT_S,
        leaderFallbackTimeout=RAFT_MAX_TIMEOUT_S,
        connectionRetryTime=0.5, connectionTimeout=2.0,
        commandsWaitLeader=False, dynamicMembershipChange=True,
        appendEntriesUseBatch=False, appendEntriesBatchSizeBytes=APPEND_ENTRIES_BATCH_BYTES,
        logCompactionMinEntries=2000, logCompactionMinTime=60)


def start_raft_node(self_address: str | None, partners: list[str], directory: str,
                    periods: tuple[float, float], on_applied,
                    password: str | None = None,
                    bind_address: str | None = None) -> tuple[SyncObj, MetadataConsumer]:
    """A voter at ``self_address`` with these partners, or (``self_address`` None) an
    observer connecting to the voters ``partners``.  A voter's Raft server binds the
    host of ``self_address``, nothing wider, or ``bind_address`` when given
    (``controller.quorum.bind.address``: the voter entry is a proxy in front of it).
    RaftFileRefused when the journal or dump file names a type the metadata log never
    holds."""
    bind = (bind_address or self_address) if self_address else None
    conf = raft_conf(directory, periods, password, bind_address=bind)
    raft_codec.check_local_files(conf.journalFile, conf.fullDumpFile)
    _log_exposure(self_address, partners, password)
    consumer = MetadataConsumer(on_applied)
    node = SyncObj(self_address, partners, conf, consumers=[consumer])
    return node, consumer


def _log_exposure(self_address: str | None, partners: list[str], password: str | None) -> None:
    """Say at start who can reach this quorum: with a secret, its holders only;
    without (``controller.quorum.allow.unauthenticated``), whoever reaches a Raft port,
    loopback included."""
    if password:
        log.info("metadata quorum: Raft traffic encrypted and authenticated with "
                 "controller.quorum.password")
        return
    addresses = ([self_address] if self_address else []) + list(partners)
    log.warning("metadata quorum: NO controller.quorum.password "
                "(controller.quorum.allow.unauthenticated=true): anyone who reaches the Raft "
                "addresses %s, from this host or beyond, can act as a voter, read the metadata "
                "(SCRAM keys included) and rewrite it. Set controller.quorum.password.file on "
                "every broker", ", ".join(addresses))


def voter_addresses(node: SyncObj) -> set[str]:
    """The voter set this node knows (its own address included when it is one)."""
    addresses = {other.address for other in node.otherNodes}
    if node.selfNode is not None:
        addresses.add(node.selfNode.address)
    return addresses

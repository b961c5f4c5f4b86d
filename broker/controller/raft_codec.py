"""What pysyncobj may unpickle: the types the metadata log carries, and nothing else.

pysyncobj pickles everything it sends and stores: Raft frames (``tcp_connection``),
the command data of log entries (unpickled when they are applied, and membership
entries as they arrive), snapshots received from the leader, the dump file and the
journal's meta file.  Unpickling runs whatever callable a pickle names, so a frame from
anyone who reaches a Raft port without ``controller.quorum.password`` could run code in
the broker.  ``install`` (once, at import of ``broker.controller.raft``) replaces every
unpickling pysyncobj does (``pysyncobj.pickle.loads`` / ``load`` and the
``journal.loads`` it imported by name) by a restricted unpickler.

Invariants:

* a pickle may name only ``ALLOWED_GLOBALS`` (sets, a few ``collections`` containers,
  pysyncobj's node classes), bytes the way protocol 2 writes them (``BYTES_GLOBALS``,
  which build nothing else: no ``bytes(10**10)``) and classes *defined* in
  ``STATE_MODULES`` (Raftwood's replicated state and commands): no function, no module,
  no dotted name.  Anything else raises ``RefusedPickle`` before it is looked up;
* a refused frame drops its connection (pysyncobj disconnects on any decoding error)
  and logs one WARNING per ``WARNING_INTERVAL_S`` at most, never a traceback;
* a refused log entry is skipped deterministically (every node refuses the same
  bytes), answered ``("error", "INVALID_REQUEST", ...)``;
* a journal meta file or dump file naming a refused type stops the start
  (``check_local_files`` raises ``RaftFileRefused`` naming the file and the type).

The allowlist was read off the controller's unit tests and the quorum membership,
encryption and exploit integration tests, logging every global a pickle named:
``_codecs.encode`` and ``builtins.bytes`` (bytes), ``builtins.set``,
``pysyncobj.node.TCPNode`` (membership entries, dumps) and ``ClusterState`` (dumps,
snapshots), which holds the other state classes (``BrokerInfo``, ``TopicInfo``,
``PartitionInfo``, ``Election``, the ``ReplicaState`` enum).  Commands and frames carry
builtins only; ``OrderedDict``, ``defaultdict``, ``deque`` and ``frozenset`` are
allowed as well (containers a state may hold; building them runs nothing).
"""
from __future__ import annotations

import _compat_pickle
import gzip
import io
import logging
import os
import pickle
import threading
import time

import pysyncobj.journal as pysyncobj_journal
import pysyncobj.pickle as pysyncobj_pickle
from pysyncobj import SyncObj
from pysyncobj.journal import FileJournal
from pysyncobj.syncobj import _COMMAND_TYPE

log = logging.getLogger(__name__)

ALLOWED_GLOBALS = frozenset({
    ("builtins", "set"), ("builtins", "frozenset"),
    ("collections", "OrderedDict"), ("collections", "defaultdict"), ("collections", "deque"),
    ("pysyncobj.node", "Node"), ("pysyncobj.node", "TCPNode"),
})
STATE_MODULES = frozenset({"broker.controller.state", "broker.controller.commands",
                           "broker.controller.replica_state"})
WARNING_INTERVAL_S = 10.0


class RefusedPickle(pickle.UnpicklingError):
    """A pickle named a global outside the allowlist (``.name`` is ``module.name``)."""

    def __init__(self, name: str):
        super().__init__(f"refused to unpickle {name}: the metadata log never holds it")
        self.name = name


class RaftFileRefused(OSError):
    """A local Raft file (journal meta, journal entry, dump) names a refused type (an
    OSError: ``raftwood start`` reports it as a file it cannot start on)."""


class RateLimitedWarning:
    """One WARNING per ``interval_s`` at most, saying how many were held back.  Any
    thread."""

    def __init__(self, logger: logging.Logger, interval_s: float = WARNING_INTERVAL_S):
        self._log = logger
        self._interval_s = interval_s
        self._lock = threading.Lock()
        self._last = float("-inf")
        self._held_back = 0

    def __call__(self, text: str, *args) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._last < self._interval_s:
                self._held_back += 1
                return
            held_back, self._held_back, self._last = self._held_back, 0, now
        suffix = f" ({held_back} more since the last such warning)" if held_back else ""
        self._log.warning(text + "%s", *args, suffix)


refusal_warning = RateLimitedWarning(log)


def _empty_bytes(*args) -> bytes:
    """``bytes()``, protocol 2's ``b""``; a size or anything else is refused."""
    if args:
        raise RefusedPickle("builtins.bytes with arguments")
    return b""


def _latin1_bytes(text, encoding="latin1") -> bytes:
    """``_codecs.encode(text, "latin1")``, protocol 2's non-empty bytes; any other
    codec is refused."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise RefusedPickle(f"_codecs.encode to {encoding!r}")
    return text.encode("latin1")


BYTES_GLOBALS = {("builtins", "bytes"): _empty_bytes, ("_codecs", "encode"): _latin1_bytes}


def allowed(module: str, name: str) -> bool:
    if (module, name) in ALLOWED_GLOBALS:
        return True
    if module not in STATE_MODULES or not name.isidentifier():
        return False
    import importlib

    found = getattr(importlib.import_module(module), name, None)
    return isinstance(found, type) and found.__module__ == module and \
        found.__qualname__ == name


class RestrictedUnpickler(pickle.Unpickler):
    """Looks up allowed globals only, after protocol 2's Python 2 names
    (``__builtin__.bytes``) are mapped to Python 3's as ``pickle`` does."""

    def find_class(self, module, name):
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
        if (module, name) in BYTES_GLOBALS:
            return BYTES_GLOBALS[(module, name)]
        if allowed(module, name):
            return super().find_class(module, name)
        raise RefusedPickle(f"{module}.{name}")


def loads(data):
    """``pysyncobj.pickle.loads``, restricted (RefusedPickle, logged at most every
    WARNING_INTERVAL_S)."""
    try:
        return RestrictedUnpickler(io.BytesIO(pysyncobj_pickle.to_bytes(data))).load()
    except RefusedPickle as exc:
        refusal_warning("metadata quorum: refused to unpickle %s (a Raft frame from a "
                        "stranger, or a peer not running Raftwood): its connection is "
                        "dropped, a log entry holding it is skipped", exc.name)
        raise


def load(file):
    """``pysyncobj.pickle.load`` (the dump file, and snapshots received), restricted."""
    return RestrictedUnpickler(file).load()


def _apply_refusing(original):
    def do_apply_command(self, command):
        try:
            return original(self, command)
        except RefusedPickle as exc:
            return ("error", "INVALID_REQUEST", str(exc))

    do_apply_command.raftwood_fixed = True
    do_apply_command.unpatched = original
    return do_apply_command


def _membership_refusing(original):
    def parse_change_cluster_request(self, command):
        try:
            return original(self, command)
        except RefusedPickle:
            return None  # not a membership change any node can read

    parse_change_cluster_request.raftwood_fixed = True
    parse_change_cluster_request.unpatched = original
    return parse_change_cluster_request


def install() -> None:
    """Route every unpickling pysyncobj does through the restricted unpickler
    (idempotent)."""
    pysyncobj_pickle.loads = loads
    pysyncobj_pickle.load = load
    pysyncobj_journal.loads = loads
    if not getattr(SyncObj._SyncObj__doApplyCommand, "raftwood_fixed", False):
        SyncObj._SyncObj__doApplyCommand = _apply_refusing(SyncObj._SyncObj__doApplyCommand)
    parse = SyncObj._SyncObj__parseChangeClusterRequest
    if not getattr(parse, "raftwood_fixed", False):
        SyncObj._SyncObj__parseChangeClusterRequest = _membership_refusing(parse)


def check_local_files(journal_path: str, dump_path: str) -> None:
    """Before a Raft node starts on them: every pickle in the journal's meta file, its
    entries and the dump file names allowed types only; RaftFileRefused otherwise."""
    _check_file(journal_path + ".meta", lambda f: loads(f.read()))
    _check_file(dump_path, lambda f: load(gzip.GzipFile(fileobj=f)))
    if os.path.exists(journal_path):
        journal = FileJournal(journal_path)
        try:
            for command, index, _term in list(journal[:]):
                _check_entry(journal_path, command, index)
        finally:
            journal._destroy()


def _check_file(path: str, read) -> None:
    if not os.path.exists(path):
        return
    with open(path, "rb") as f:
        try:
            read(f)
        except RefusedPickle as exc:
            raise RaftFileRefused(f"{path}: holds {exc.name}, which the metadata log never "
                                  f"holds; refusing to start on it") from None


def _check_entry(path: str, command: bytes, index: int) -> None:
    if command[:1] and ord(command[:1]) != _COMMAND_TYPE.NO_OP:
        try:
            loads(command[1:])
        except RefusedPickle as exc:
            raise RaftFileRefused(f"{path}: entry {index} holds {exc.name}, which the "
                                  f"metadata log never holds; refusing to start on it") \
                from None

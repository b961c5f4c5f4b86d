"""The pysyncobj Raft node holding the ClusterState (the only pysyncobj import).

One replicated entry point, ``command(method, args)``, applies
``ClusterState.apply_<method>(*args)`` on every node in log order; a refusal is a
result (``("error", code, message)``), not an exception, so every node takes the same
path.  The state lives in a SyncObjConsumer built before the Raft node starts its tick
thread (which replays the journal at once): attributes set before the consumer's
``__init__`` (the callback) stay out of pysyncobj's dumps, ``state`` (set after) is
what gets dumped and restored.
"""
from __future__ import annotations

import logging
import os

from pysyncobj import SyncObj, SyncObjConf, SyncObjConsumer, replicated

from .state import ApplyError, ClusterState

log = logging.getLogger(__name__)


class MetadataConsumer(SyncObjConsumer):
    """Raft thread only: pysyncobj's tick thread calls ``command`` when applying."""

    def __init__(self, on_applied):
        self._on_applied = on_applied
        super().__init__()
        self.state = ClusterState()

    @replicated
    def command(self, method: str, args: tuple):
        state = self.state
        before = state.version
        try:
            outcome = ("ok", getattr(state, "apply_" + method)(*args))
        except ApplyError as exc:
            outcome = ("error", exc.code, str(exc))
        except Exception as exc:  # a bug: refuse deterministically, never diverge
            log.exception("metadata command %s%r failed", method, args)
            outcome = ("error", "UNKNOWN_SERVER_ERROR", repr(exc))
        self._on_applied(method, args, state.snapshot() if state.version != before else None)
        return outcome


def start_raft_node(self_address: str, partners: list[str], directory: str,
                    periods: tuple[float, float], on_applied) -> tuple[SyncObj, MetadataConsumer]:
    append_entries_period_s, tick_period_s = periods
    conf = SyncObjConf(
        journalFile=os.path.join(directory, "raft.journal"),
        fullDumpFile=os.path.join(directory, "raft.dump"),
        appendEntriesPeriod=append_entries_period_s,
        autoTickPeriod=tick_period_s,
        raftMinTimeout=0.4, raftMaxTimeout=1.2,
        connectionRetryTime=0.5, connectionTimeout=2.0,
        commandsWaitLeader=True, dynamicMembershipChange=False,
        logCompactionMinEntries=2000, logCompactionMinTime=60)
    consumer = MetadataConsumer(on_applied)
    node = SyncObj(self_address, partners, conf, consumers=[consumer])
    return node, consumer

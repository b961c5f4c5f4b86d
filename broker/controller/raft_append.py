"""A follower's AppendEntries as Raft writes it (rule 3): truncate only from the first
entry whose term conflicts with the leader's, never an entry it already holds.

pysyncobj 0.3.17 deletes every entry after ``prevLogIdx`` as soon as the follower holds
more than one, and adds the message's entries again.  The leader resends entries the
follower holds whenever a reply moves its next index back (with
``appendEntriesUseBatch`` off, the reply to a one-entry append overtakes the appends
sent after it), so during a burst of metadata commands followers deleted and re-added
identical, already-applied entries, logging pysyncobj's CRITICAL "truncating
already-applied log entries" line: the line the partition test reads as a safety
violation.

``fix_append`` rewrites such a message before pysyncobj sees it:

* the entries the follower holds with the same index and term are dropped from the
  message, and ``prevLogIdx`` / ``prevLogTerm`` moved to the last of them, so pysyncobj
  truncates (CRITICAL when it removes an applied entry, as before) only from the first
  entry whose term differs, and appends only what is new;
* the commit index a message carries is clamped to the last index it vouches for
  (``prevLogIdx`` + its entries): entries the follower holds past it may be another
  term's in the leader's log and must not be committed on this message's word;
* when the follower holds every entry of the message *and more*, pysyncobj would still
  truncate the rest: the message then goes on as a bare heartbeat (term, leader,
  election deadline) and the reply and commit index are done here;
* a big entry sent in chunks (``transmission``) is put together here at ``finish``, so
  it goes through the same rule.

Raft thread only (called from ``SyncObj.__onMessageReceived``).
"""
from __future__ import annotations

from pysyncobj import SyncObj

from .raft_codec import loads


def _entry_term(syncobj: SyncObj, index: int) -> int | None:
    """The term of the follower's own entry at ``index``; None when it holds none."""
    entries = syncobj._SyncObj__getEntries(index, 1)
    return entries[0][2] if entries else None


def _whole_transmission(syncobj: SyncObj, message: dict) -> dict | None:
    """``message`` with a finished transmission's entry in ``entries``; None while the
    transmission goes on (pysyncobj keeps collecting its chunks)."""
    transmission = message.get("transmission")
    if transmission != "finish":
        return None
    data = syncobj._SyncObj__recvTransmission + message["data"]
    syncobj._SyncObj__recvTransmission = ""
    whole = {k: v for k, v in message.items() if k not in ("transmission", "data")}
    whole["entries"] = [loads(data)]
    return whole


def fix_append(syncobj: SyncObj, message: dict) -> tuple[dict, int | None]:
    """The message pysyncobj should see, and (when every entry was held and the
    follower holds more) the next index to answer once it has seen it."""
    if message.get("type") != "append_entries" or "prevLogIdx" not in message:
        return message, None
    if "transmission" in message:
        whole = _whole_transmission(syncobj, message)
        if whole is None:
            return message, None
        message = whole
    prev_index, prev_term = message["prevLogIdx"], message["prevLogTerm"]
    entries = list(message.get("entries") or [])
    last_vouched = entries[-1][1] if entries else prev_index
    message = dict(message, commit_index=min(message["commit_index"], last_vouched))
    if _entry_term(syncobj, prev_index) != prev_term:
        return message, None  # pysyncobj answers the mismatch
    held = 0
    for entry in entries:
        if _entry_term(syncobj, entry[1]) != entry[2]:
            break
        held += 1
        prev_index, prev_term = entry[1], entry[2]
    if held == 0:
        return message, None
    message.update(prevLogIdx=prev_index, prevLogTerm=prev_term, entries=entries[held:])
    if held < len(entries) or _entry_term(syncobj, prev_index + 1) is None:
        return message, None
    heartbeat = {"type": "append_entries", "term": message["term"],
                 "commit_index": message["commit_index"]}
    return heartbeat, last_vouched + 1


def answer_held(syncobj: SyncObj, node, message: dict, next_index: int,
                leader_commit_index: int) -> None:
    """After pysyncobj took ``message`` as a heartbeat: if it accepted the sender as
    leader, answer success up to ``next_index`` and commit up to what it vouched for."""
    if syncobj._SyncObj__raftLeader != node or \
            syncobj._SyncObj__raftCurrentTerm != message["term"]:
        return
    syncobj._SyncObj__sendNextNodeIdx(node, nextNodeIdx=next_index, success=True)
    commit_index = min(leader_commit_index, next_index - 1)
    if commit_index > syncobj._SyncObj__raftCommitIndex:
        syncobj._SyncObj__raftCommitIndex = commit_index
        syncobj._SyncObj__raftLog.setRaftCommitIndex(commit_index)

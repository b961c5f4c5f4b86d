"""A follower truncates its Raft log only from the first entry whose term conflicts with
the leader's (Raft's AppendEntries rule 3), and says so at CRITICAL only when that
removes an entry it already applied.

The leader resends entries the follower already holds whenever a reply moves its
``next_node_idx`` back (replies to single-entry appends overtake the later appends).
Unpatched pysyncobj 0.3.17 deletes every entry after ``prevLogIdx`` as soon as the
follower holds more than one, identical or not, and logs the CRITICAL line the
partition test treats as a safety violation; Raftwood's fix keeps the entries that
match and appends only what is new.

One pysyncobj node without its tick thread is fed the leader's messages by hand; what
it sends back is recorded from its transport.
"""
from __future__ import annotations

import logging
import pickle

import pytest
from pysyncobj import SyncObj, SyncObjConf

from broker.controller.raft import MetadataConsumer
from broker.testing import free_ports
from tests.unit.controller.test_raft_safety import Applied, _entry

CRITICAL_LINE = "truncating already-applied log entries"


@pytest.fixture
def follower(monkeypatch):
    ports = free_ports(2)
    applied = Applied()
    node = SyncObj(f"127.0.0.1:{ports[0]}", [f"127.0.0.1:{ports[1]}"],
                   SyncObjConf(autoTick=False), consumers=[MetadataConsumer(applied)])
    leader = next(iter(node._SyncObj__otherNodes))
    replies = []
    transport = node._SyncObj__transport
    monkeypatch.setattr(transport, "send", lambda _node, message: replies.append(message) or True)
    try:
        yield Follower(node, leader, applied, replies)
    finally:
        node.destroy()


class Follower:
    def __init__(self, node, leader, applied, replies):
        self.node, self.leader, self.applied, self.replies = node, leader, applied, replies

    def append(self, term: int, prev: tuple[int, int], entries: list[tuple[str, int, int]],
               commit_index: int, patched: bool = True) -> None:
        """``entries``: (cluster id, index, term); ``prev``: (prevLogIdx, prevLogTerm)."""
        receive = SyncObj._SyncObj__onMessageReceived
        while not patched and getattr(receive, "unpatched", None):
            receive = receive.unpatched
        receive(self.node, self.leader, {
            "type": "append_entries", "term": term, "commit_index": commit_index,
            "prevLogIdx": prev[0], "prevLogTerm": prev[1],
            "entries": [_entry(self.node, "init_cluster", (name,), index, entry_term)
                        for name, index, entry_term in entries]})
        self.node.doTick(0)

    def log(self) -> list[tuple[int, int]]:
        """(index, term) of every entry the follower holds."""
        return [(entry[1], entry[2]) for entry in self.node._SyncObj__raftLog]

    def last_reply(self) -> dict:
        return [r for r in self.replies if r.get("type") == "next_node_idx"][-1]


def criticals(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno >= logging.CRITICAL and CRITICAL_LINE in r.getMessage()]


@pytest.mark.parametrize("patched", [True, False], ids=["raftwood", "unpatched-pysyncobj"])
def test_a_resent_entry_already_applied_is_kept_without_a_critical_line(follower, caplog,
                                                                       patched):
    follower.append(1, (1, 0), [("a", 2, 1), ("b", 3, 1)], commit_index=3)
    assert follower.applied.cluster_ids() == ["a", "b"]
    caplog.clear()
    # The reply to an earlier single-entry append moved the leader back to index 3.
    follower.append(1, (2, 1), [("b", 3, 1)], commit_index=3, patched=patched)
    if patched:
        assert criticals(caplog) == []
        assert follower.log()[-2:] == [(2, 1), (3, 1)]
        assert follower.last_reply() == {"type": "next_node_idx", "next_node_idx": 4,
                                         "reset": False, "success": True}
    else:  # the defect: identical entries deleted and re-added, at CRITICAL
        assert len(criticals(caplog)) == 1
    assert follower.applied.cluster_ids() == ["a", "b"], "an entry was applied twice"


def test_a_resent_prefix_keeps_the_entries_after_it_and_commits_no_further(follower, caplog):
    follower.append(1, (1, 0), [("a", 2, 1), ("b", 3, 1), ("c", 4, 1)], commit_index=1)
    follower.append(1, (1, 0), [("a", 2, 1)], commit_index=4)
    assert criticals(caplog) == []
    assert follower.log()[-3:] == [(2, 1), (3, 1), (4, 1)]
    # Raft: commit up to the leader's commit index, but not past the last entry this
    # message vouched for (3 and 4 may still be another term's in the leader's log).
    assert follower.node.raftCommitIndex == 2
    assert follower.applied.cluster_ids() == ["a"]
    assert follower.last_reply()["next_node_idx"] == 3
    assert follower.last_reply()["success"] is True


def test_a_conflict_truncates_from_the_first_conflicting_entry(follower, caplog):
    follower.append(1, (1, 0), [("a", 2, 1), ("stale-b", 3, 1), ("stale-c", 4, 1)],
                    commit_index=1)
    follower.append(2, (1, 0), [("a", 2, 1), ("b", 3, 2)], commit_index=3)
    assert criticals(caplog) == []  # nothing applied was removed
    assert follower.log()[-2:] == [(2, 1), (3, 2)]
    assert follower.applied.cluster_ids() == ["a", "b"]
    assert follower.last_reply()["next_node_idx"] == 4


def test_truncating_an_applied_entry_still_logs_critical(follower, caplog):
    follower.append(1, (1, 0), [("a", 2, 1), ("b", 3, 1)], commit_index=3)
    assert follower.applied.cluster_ids() == ["a", "b"]
    follower.append(2, (1, 0), [("a", 2, 1), ("other-b", 3, 2)], commit_index=3)
    assert len(criticals(caplog)) == 1
    assert follower.log()[-2:] == [(2, 1), (3, 2)]


def test_a_resent_entry_sent_in_chunks_is_kept(follower, caplog):
    """An entry of ``appendEntriesBatchSizeBytes`` or more travels as a transmission:
    start, process..., finish; the same rule holds once it is put together."""
    big = "x" * 300
    follower.append(1, (1, 0), [(big, 2, 1)], commit_index=2)
    assert follower.applied.cluster_ids() == [big]
    data = pickle.dumps(_entry(follower.node, "init_cluster", (big,), 2, 1))
    receive = SyncObj._SyncObj__onMessageReceived
    base = {"type": "append_entries", "term": 1, "commit_index": 2, "prevLogIdx": 1,
            "prevLogTerm": 0}
    receive(follower.node, follower.leader, {**base, "transmission": "start",
                                             "data": data[:100]})
    receive(follower.node, follower.leader, {**base, "transmission": "finish",
                                             "data": data[100:]})
    follower.node.doTick(0)
    assert criticals(caplog) == []
    assert follower.log()[-1:] == [(2, 1)]
    assert follower.last_reply()["next_node_idx"] == 3
    assert follower.applied.cluster_ids() == [big]

"""The records of ``__share_group_state``: one share partition's persisted state (pure).

Key: ``"group:topicId:partition"`` (Kafka's share-partition key, its text form), UTF-8.
Value: Raftwood's own JSON (Kafka writes ShareSnapshot/ShareUpdate records; Raftwood
writes a whole snapshot each time, at most the in-flight window, run-length encoded):

    {"leader_epoch": int, "seq": int, "start_offset": int,
     "batches": [[first_offset, last_offset, state, delivery_count], ...]}

A null value (tombstone) deletes the share partition's state.  ``(leader_epoch, seq)``
orders the snapshots of one key: a snapshot never replaces a newer one, so a late write
of a deposed leader (older leader epoch) or an overtaken write is ignored.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from .partition import RecordState, StateBatch


class ShareStateError(ValueError):
    """A ``__share_group_state`` record that does not hold what it claims to."""


@dataclass(frozen=True)
class ShareSnapshot:
    leader_epoch: int
    seq: int
    start_offset: int
    batches: tuple[StateBatch, ...]

    def supersedes(self, other: ShareSnapshot | None) -> bool:
        return other is None or (self.leader_epoch, self.seq) > (other.leader_epoch, other.seq)

    def delivery_complete_count(self) -> int:
        """Kafka's DeliveryCompleteCount (KIP-1226): the records at or past the start
        offset whose delivery is finished (ACKNOWLEDGED or ARCHIVED), which the start
        offset has not passed yet because an earlier one is still in flight."""
        return sum(b.last_offset - max(b.first_offset, self.start_offset) + 1
                   for b in self.batches
                   if b.state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
                   and b.last_offset >= self.start_offset)


@dataclass(frozen=True)
class ShareSummary:
    """What ReadShareGroupStateSummary answers of a share partition's state."""

    start_offset: int
    leader_epoch: int
    delivery_complete_count: int

    @classmethod
    def of(cls, snapshot: ShareSnapshot) -> ShareSummary:
        return cls(snapshot.start_offset, snapshot.leader_epoch,
                   snapshot.delivery_complete_count())


def share_key(group_id: str, topic_id: str, partition: int) -> str:
    return f"{group_id}:{topic_id}:{partition}"


def encode_value(snapshot: ShareSnapshot) -> bytes:
    return json.dumps({
        "leader_epoch": snapshot.leader_epoch, "seq": snapshot.seq,
        "start_offset": snapshot.start_offset,
        "batches": [[b.first_offset, b.last_offset, int(b.state), b.delivery_count]
                    for b in snapshot.batches]}, separators=(",", ":")).encode()


def decode_value(value: bytes) -> ShareSnapshot:
    """The snapshot in ``value``; ShareStateError if it is not one."""
    try:
        data = json.loads(value)
        batches = tuple(StateBatch(int(f), int(last), RecordState(int(s)), int(c))
                        for f, last, s, c in data["batches"])
        return ShareSnapshot(int(data["leader_epoch"]), int(data["seq"]),
                             int(data["start_offset"]), batches)
    except (ValueError, KeyError, TypeError) as exc:
        raise ShareStateError(f"not a share snapshot: {exc}") from exc

"""A KIP-932 share group: members, epochs and the target assignment (pure).

Two epochs, as in Kafka's ``ShareGroup`` / ``ShareGroupMember``:

* the *group epoch* moves whenever what the assignment depends on changes: a member
  joins, leaves or is fenced, a subscription changes, or a subscribed topic's partition
  count changes; the target assignment is computed again in the same step, so the
  *assignment epoch* always equals the group epoch here;
* each member's *member epoch* is the assignment epoch it was last answered at.  Share
  groups need no revocation (a partition may have several consumers, records are locked
  one by one), so a member moves to its target in one step, on its next heartbeat.

States (ListGroups, ShareGroupDescribe): Empty without members, else Stable; Dead once
deleted.  A share group is never removed for being empty: it lives until DeleteGroups.

``ShareGroupSettings`` are the settings one group runs with (the broker's
``group.share.*`` settings with the group's own configs over them), for both halves of
share groups: the group coordinator (heartbeat interval, session timeout) and the
partition leaders (record locks, delivery limit, offset reset, isolation).

Topic ids are the metadata image's strings.  Event-loop only, no I/O, no timers (the
coordinator keeps those on the members, opaque here).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .share_assignor import ShareAssignment

STATE_EMPTY = "Empty"
STATE_STABLE = "Stable"


@dataclass(frozen=True)
class ShareGroupSettings:
    """One share group's effective settings; defaults are Kafka 4.2's."""

    heartbeat_interval_ms: int = 5_000
    session_timeout_ms: int = 45_000
    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    partition_max_record_locks: int = 2_000
    auto_offset_reset: str = "latest"
    isolation_level: str = "read_uncommitted"


@dataclass
class ShareMember:
    """One member: what it subscribes to, its epochs and its assignment (``assigned``,
    topic id -> partitions, what it was last answered with)."""

    member_id: str
    client_id: str = ""
    client_host: str = ""
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: dict[str, set[int]] = field(default_factory=dict)
    session_timer: Any = None


@dataclass
class ShareGroupState:
    """The share side of a group: members, epochs, target assignment.

    Invariants: ``target`` has an entry for every member and no other;
    ``assignment_epoch == group_epoch`` once a target was computed."""

    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: ShareAssignment = field(default_factory=dict)
    # Subscribed topic name -> (topic id, partition count) the target was computed with.
    subscribed_metadata: dict[str, tuple[str, int]] = field(default_factory=dict)

    def state_name(self) -> str:
        return STATE_STABLE if self.members else STATE_EMPTY

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}

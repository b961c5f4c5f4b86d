"""A KIP-848 consumer group (``group.protocol=consumer``): members, epochs, the target
assignment and each member's reconciliation (pure).

Three epochs, as in Kafka's ``ConsumerGroup`` / ``ConsumerGroupMember``:

* the *group epoch* moves whenever what the assignment depends on changes: a member
  joins, leaves or is fenced, a subscription or the chosen assignor changes, or a
  subscribed topic's partition count changes;
* the *assignment epoch* is the group epoch the target assignment was computed at (here
  always the group epoch: the target is computed in the same step that bumps it);
* each member's *member epoch* reaches the assignment epoch once the member has
  converged to its target, one heartbeat at a time (``reconcile``, Kafka's
  ``CurrentAssignmentBuilder``):

    STABLE                  at some epoch, owning exactly what it was given.  A newer
                            target: partitions it must give up go *pending revocation*
                            (UNREVOKED_PARTITIONS, the epoch stays), otherwise it moves to
                            the target epoch with what it can have now.
    UNREVOKED_PARTITIONS    waits until a heartbeat reports it no longer owns the pending
                            partitions (``owned`` ⊆ assigned), then computes again.
    UNRELEASED_PARTITIONS   at the target epoch, but some target partitions are still
                            owned (assigned or pending revocation) by another member;
                            they are handed over once released.

  Hence the invariant: a partition is never assigned to a member while another member
  may still own it.

States of the group (what ListGroups and ConsumerGroupDescribe show): Empty (no
members), Assigning (group epoch ahead of the assignment epoch: never seen here),
Reconciling (a member not at the assignment epoch or not STABLE), Stable.

Topic ids are the metadata image's strings.  Event-loop only, no I/O, no timers (the
coordinator keeps those on the members, opaque here).
"""
from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

TopicAssignment = dict[str, set[int]]  # topic id -> partitions


class MemberState(enum.IntEnum):
    """Kafka's MemberState, with its byte values (current member assignment record)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


def copy_assignment(assignment: TopicAssignment) -> TopicAssignment:
    return {t: set(p) for t, p in assignment.items() if p}


def same_assignment(a: TopicAssignment, b: TopicAssignment) -> bool:
    return copy_assignment(a) == copy_assignment(b)


def contains(outer: TopicAssignment, inner: TopicAssignment) -> bool:
    return all(p <= outer.get(t, set()) for t, p in inner.items())


@dataclass
class ConsumerMember:
    """One member: what it subscribes to, its epochs and its current assignment.

    ``assigned`` is what the member may use now (sent in heartbeat answers);
    ``pending_revocation`` what it still owns but must give up."""

    member_id: str
    client_id: str = ""
    client_host: str = ""
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] = ()
    server_assignor: str | None = None
    subscribed_topic_regex: str | None = None  # KIP-848 regex subscription, RE2 syntax
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: TopicAssignment = field(default_factory=dict)
    pending_revocation: TopicAssignment = field(default_factory=dict)
    session_timer: Any = None
    rebalance_timer: Any = None
    # What the member's principal may Describe (regex_subscriptions.TopicAccess), from
    # its last heartbeat on this coordinator; None: not known (yet) or no authorizer.
    topic_access: Any = field(default=None, compare=False, repr=False)

    def owns(self, topic_id: str, partition: int) -> bool:
        return partition in self.assigned.get(topic_id, ()) or \
            partition in self.pending_revocation.get(topic_id, ())


@dataclass
class ConsumerGroupState:
    """The consumer-protocol side of a group (``GroupMetadata.consumer``)."""

    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, TopicAssignment] = field(default_factory=dict)
    # The subscribed topics the target was computed with: name -> (topic id, partitions).
    subscribed_metadata: dict[str, tuple[str, int]] = field(default_factory=dict)
    # The topics each regex member was subscribed to by the target (in memory, None
    # for a group loaded here: then only subscribed_metadata is compared).
    regex_topics: dict[str, frozenset[str]] | None = field(default=None, compare=False,
                                                           repr=False)

    def state_name(self) -> str:
        if not self.members:
            return "Empty"
        if self.group_epoch != self.assignment_epoch:
            return "Assigning"
        if any(m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
               for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}

    def chosen_assignor(self, default: str) -> str:
        """The assignor most members name (ties by name), else ``default`` (Kafka's
        rule: a member's ``server_assignor`` is a vote)."""
        votes: dict[str, int] = {}
        for member in self.members.values():
            if member.server_assignor:
                votes[member.server_assignor] = votes.get(member.server_assignor, 0) + 1
        if not votes:
            return default
        return min(votes, key=lambda name: (-votes[name], name))

    def static_member(self, instance_id: str | None) -> ConsumerMember | None:
        """The member of ``instance_id`` (KIP-345 under KIP-848), if any."""
        if instance_id is None:
            return None
        return next((m for m in self.members.values() if m.instance_id == instance_id), None)

    def owner_of(self, topic_id: str, partition: int, other_than: str) -> str | None:
        """Another member that may still own the partition (assigned or pending)."""
        for member in self.members.values():
            if member.member_id != other_than and member.owns(topic_id, partition):
                return member.member_id
        return None


def reconcile(member: ConsumerMember, assignment_epoch: int, target: TopicAssignment,
              owned: TopicAssignment | None,
              owned_elsewhere: Callable[[str, int], bool]) -> None:
    """Move ``member`` one step towards ``target`` (Kafka's CurrentAssignmentBuilder).

    ``owned``: what the member's heartbeat reported it owns (None: not reported, taken
    as unchanged); ``owned_elsewhere(topic id, partition)``: another member may still own
    it.  Updates the member in place."""
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if owned is None or not _owns_any(owned, member.pending_revocation):
            _compute_next(member, member.member_epoch, assignment_epoch, target, owned,
                          owned_elsewhere)
        return
    if member.state is MemberState.UNRELEASED_PARTITIONS or \
            member.member_epoch != assignment_epoch:
        _compute_next(member, member.member_epoch, assignment_epoch, target, owned,
                      owned_elsewhere)


def _owns_any(owned: TopicAssignment, partitions: TopicAssignment) -> bool:
    return any(owned.get(t, set()) & p for t, p in partitions.items())


def _compute_next(member: ConsumerMember, member_epoch: int, assignment_epoch: int,
                  target: TopicAssignment, owned: TopicAssignment | None,
                  owned_elsewhere: Callable[[str, int], bool]) -> None:
    kept: TopicAssignment = {}
    revoke: TopicAssignment = {}
    assignable: TopicAssignment = {}
    unreleased = False
    for topic_id in set(target) | set(member.assigned):
        wanted = target.get(topic_id, set())
        current = member.assigned.get(topic_id, set())
        if current & wanted:
            kept[topic_id] = current & wanted
        if current - wanted:
            revoke[topic_id] = current - wanted
        for partition in wanted - current:
            if owned_elsewhere(topic_id, partition):
                unreleased = True
            else:
                assignable.setdefault(topic_id, set()).add(partition)
    # The member may have given some up already (its heartbeat says what it owns).
    if revoke and (owned is None or _owns_any(owned, revoke)):
        member.state = MemberState.UNREVOKED_PARTITIONS
        _set_epoch(member, member_epoch)
        member.assigned, member.pending_revocation = kept, revoke
        return
    new_assigned = copy_assignment(kept)
    for topic_id, partitions in assignable.items():
        new_assigned.setdefault(topic_id, set()).update(partitions)
    member.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    _set_epoch(member, assignment_epoch)
    member.assigned, member.pending_revocation = new_assigned, {}


def _set_epoch(member: ConsumerMember, epoch: int) -> None:
    if epoch != member.member_epoch:
        member.previous_member_epoch = member.member_epoch
        member.member_epoch = epoch

"""A classic consumer group's state and the rules of its state machine (pure).

Kafka's classic group protocol, as in ``GroupMetadata.scala`` / ``ClassicGroup.java``:

    Empty               -> PreparingRebalance   a member joins
    PreparingRebalance  -> CompletingRebalance  every member rejoined, or the rebalance timeout
    PreparingRebalance  -> Empty                ... and no member is left
    CompletingRebalance -> Stable               the leader's assignment is stored
    CompletingRebalance -> PreparingRebalance   a member joins, leaves or expires
    Stable              -> PreparingRebalance   a member joins, leaves, expires, or the leader
                                                or a member with new metadata rejoins
    any state           -> Dead                 deleted, expired, or its partition unloaded

Every allowed edge is in ``VALID_PREVIOUS_STATES`` (the table Kafka keeps per state);
``GroupMetadata.transition_to`` refuses the others with ``IllegalGroupTransition``.

A KIP-848 consumer group (``group.protocol=consumer``) is a ``GroupMetadata`` whose
``consumer`` holds its members and epochs (consumer_group.py); its classic side stays
Empty with no classic members, so the classic APIs find no member of it.  A group is one
or the other, never both.

This module does no I/O and keeps no timers: callers pass ``now_ms``; the join and sync
"callbacks" of waiting members are opaque objects the coordinator owns (futures there).
Event-loop only, like everything that holds a ``GroupMetadata``.
"""
from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .consumer_group import ConsumerGroupState
from .consumer_protocol import subscribed_topics
from .share_group import ShareGroupState


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# state -> the states it may be entered from (Kafka's validPreviousStates).
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset({
        GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalGroupTransition(Exception):
    """A transition the table does not allow: a bug in the coordinator, never the peer's."""


def can_transition(current: GroupState, new: GroupState) -> bool:
    return current in VALID_PREVIOUS_STATES[new]


@dataclass
class CommittedOffset:
    """One committed offset as stored in ``__consumer_offsets``.

    ``record_offset`` is the log offset of the record that carried it: a commit only
    replaces one written before it (acks can complete out of order).
    ``expire_timestamp_ms`` is -1 unless the commit asked for its own retention.
    """

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = -1
    expire_timestamp_ms: int = -1
    record_offset: int = -1


@dataclass
class MemberMetadata:
    """One member of a group.

    ``awaiting_join`` / ``awaiting_sync`` hold the coordinator's callback for a JoinGroup
    or SyncGroup still unanswered (None otherwise).  ``is_new`` marks a member added in
    the rebalance under way.  A member with a ``group_instance_id`` is static (KIP-345):
    its instance id outlives its member id, which a restart replaces
    (``GroupMetadata.replace_static_member``).
    """

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join: Any = None
    awaiting_sync: Any = None
    is_new: bool = False
    heartbeat_timer: Any = None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols with the same metadata, in the same order (Kafka's ``matches``)."""
        return [(n, bytes(m)) for n, m in protocols] == \
            [(n, bytes(m)) for n, m in self.protocols]


@dataclass
class GroupMetadata:
    """A group: members, generation, chosen protocol, leader, committed offsets.

    Invariants: ``leader_id`` is a member or None; ``protocol_type`` is set while the
    group has members (or kept from a simple consumer's commit: None); ``static_members``
    maps the instance id of every static member, and only those, to its member id (kept
    by ``add``, ``remove`` and ``replace_static_member``); members join the
    generation ``generation_id`` only through ``init_next_generation``; ``state`` changes
    only through ``transition_to``.  ``partition`` is the ``__consumer_offsets`` partition
    that stores it.
    """

    group_id: str
    partition: int
    state: GroupState = GroupState.EMPTY
    state_timestamp_ms: int = -1
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    # group.instance.id -> member id of the static members (Kafka's staticMembers).
    static_members: dict[str, str] = field(default_factory=dict)
    # Member ids handed out with MEMBER_ID_REQUIRED, not joined yet -> their expiry timer.
    pending_members: dict[str, Any] = field(default_factory=dict)
    # Members of the current generation that have not sent SyncGroup yet.
    pending_sync_members: set[str] = field(default_factory=set)
    offsets: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)
    # Topics the members subscribe to (consumer protocol only; None when unknown).
    subscribed_topics: set[str] | None = None
    new_member_added: bool = False
    # Partitions with offset commits appended but not acknowledged yet -> how many (Kafka's
    # pendingOffsetCommits): they do not expire meanwhile, and require_stable sees them.
    pending_offset_commits: Counter = field(default_factory=Counter)
    # Transactional commits (TxnOffsetCommit) appended to the log and not yet completed
    # by a COMMIT or ABORT marker: producer id -> partition -> offset (Kafka's
    # pendingTransactionalOffsetCommits).  Invisible to OffsetFetch until committed.
    pending_txn_offsets: dict[int, dict[tuple[str, int], CommittedOffset]] = \
        field(default_factory=dict)
    # The KIP-848 side of a consumer-protocol group; None for a classic group.
    consumer: ConsumerGroupState | None = None
    # The KIP-932 side of a share group; None for the other types.
    share: ShareGroupState | None = None
    join_timer: Any = None
    # True while ``join_timer`` is the initial delay (only its expiry completes the join).
    join_timer_initial: bool = False
    sync_timer: Any = None

    # -- state machine ---------------------------------------------------------------------

    def is_state(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, new: GroupState, now_ms: int) -> None:
        if not can_transition(self.state, new):
            raise IllegalGroupTransition(
                f"group {self.group_id}: {self.state.value} -> {new.value} is not allowed")
        self.state = new
        self.state_timestamp_ms = now_ms

    def can_rebalance(self) -> bool:
        return can_transition(self.state, GroupState.PREPARING_REBALANCE)

    def is_empty(self) -> bool:
        """No member of either protocol and no handed-out member id: deletable, and
        removed once its offsets are gone."""
        return self.state is GroupState.EMPTY and not self.pending_members and \
            not (self.consumer is not None and self.consumer.members) and \
            not (self.share is not None and self.share.members)

    @property
    def group_type(self) -> str:
        if self.share is not None:
            return "share"
        return "classic" if self.consumer is None else "consumer"

    def state_name(self) -> str:
        if self.share is not None and not self.is_state(GroupState.DEAD):
            return self.share.state_name()
        return self.state.value if self.consumer is None or self.is_state(GroupState.DEAD) \
            else self.consumer.state_name()

    # -- members ---------------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_pending(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def add(self, member: MemberMetadata) -> None:
        """A member joins; the first member fixes the protocol type and leads."""
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is not None and member.group_instance_id is not None \
                and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        self.pending_sync_members.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    # -- static members (KIP-345) ----------------------------------------------------------

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        """The member id the instance id maps to now (None: unknown or not static)."""
        if group_instance_id is None:
            return None
        return self.static_members.get(group_instance_id)

    def is_static_member_fenced(self, group_instance_id: str | None, member_id: str) -> bool:
        """The instance id is mapped, to another member id: ``member_id`` is an older
        incarnation of that instance (Kafka's isStaticMemberFenced)."""
        current = self.static_member_id(group_instance_id)
        return current is not None and current != member_id

    def replace_static_member(self, group_instance_id: str, old_member_id: str,
                              new_member_id: str) -> MemberMetadata:
        """The instance rejoined with a new member id: the same member (assignment,
        protocols, place in the generation) goes on under ``new_member_id``; it keeps the
        lead if it had it and its place among the members awaiting SyncGroup.  The caller
        answers the old incarnation's waiting requests (FENCED_INSTANCE_ID) first."""
        member = self.members.pop(old_member_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        self.static_members[group_instance_id] = new_member_id
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        return member

    def maybe_elect_new_joined_leader(self) -> bool:
        """End of a join phase: if the leader did not rejoin (a static member kept though
        absent), the first member that did leads.  False when nobody rejoined (Kafka's
        maybeElectNewJoinedLeader); True with a leader that rejoined, or no leader."""
        leader = self.members.get(self.leader_id) if self.leader_id is not None else None
        if leader is None or leader.awaiting_join is not None:
            return True
        joined = next((m for m in self.members.values() if m.awaiting_join is not None), None)
        if joined is None:
            return False
        self.leader_id = joined.member_id
        return True

    def all_members_joined(self) -> bool:
        """Every member has an unanswered JoinGroup and no handed-out id is pending."""
        return not self.pending_members and all(
            m.awaiting_join is not None for m in self.members.values())

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def rebalance_timeout_ms(self) -> int:
        """The longest rebalance timeout of any member (Kafka's rule); 0 with no members."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols -------------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        counts = Counter(name for m in self.members.values() for name in set(m.protocol_names))
        return {name for name, count in counts.items() if count == len(self.members)}

    def supports_protocols(self, protocol_type: str, protocols: list[str]) -> bool:
        """Could a member with this protocol type and these protocols join?"""
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(protocols)
        if not self.members:  # everybody left during a rebalance
            return protocol_type == self.protocol_type and bool(protocols)
        return protocol_type == self.protocol_type and \
            bool(self.candidate_protocols() & set(protocols))

    def select_protocol(self) -> str:
        """Each member votes for its most preferred candidate; the most votes wins.

        Ties go to the protocol the leader prefers (any deterministic rule is Kafka-legal;
        Kafka itself takes the first of a hash map's maxima)."""
        candidates = self.candidate_protocols()
        leader = self.members.get(self.leader_id) if self.leader_id else None
        if not candidates:  # JoinGroup refuses such members; never fail a rebalance here
            return (leader or next(iter(self.members.values()))).protocol_names[0]
        votes = Counter(next(name for name in m.protocol_names if name in candidates)
                        for m in self.members.values())
        best = max(votes.values())
        order = leader.protocol_names if leader else sorted(candidates)
        return next(name for name in order if votes.get(name) == best)

    def init_next_generation(self, now_ms: int) -> None:
        """End of the join phase: next generation, protocol chosen, CompletingRebalance
        (or Empty when nobody is left)."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self._compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = set() if self.protocol_type == "consumer" else None
            self.transition_to(GroupState.EMPTY, now_ms)

    def _compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != "consumer":
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = subscribed_topics(member.metadata_for(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return topics

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        """(member id, instance id, metadata for the chosen protocol): the leader's view."""
        return [(m.member_id, m.group_instance_id, m.metadata_for(self.protocol_name))
                for m in self.members.values()]

    # -- offsets ---------------------------------------------------------------------------

    def has_offsets(self) -> bool:
        """Committed, in flight or pending in a transaction: an Empty group with none of
        these may be removed (Kafka's hasOffsets)."""
        return bool(self.offsets or self.pending_offset_commits or self.pending_txn_offsets)

    def has_pending_offsets(self, key: tuple[str, int]) -> bool:
        """A commit of ``key`` not settled yet: OffsetFetch with require_stable answers
        UNSTABLE_OFFSET_COMMIT for it (KIP-447)."""
        return key in self.pending_offset_commits or any(
            key in pending for pending in self.pending_txn_offsets.values())

    def prepare_txn_offsets(self, producer_id: int,
                            offsets: dict[tuple[str, int], CommittedOffset]) -> None:
        """``producer_id``'s transaction wrote these commits (``record_offset`` set): they
        wait for its marker.  A later commit of the same partition in the same
        transaction replaces the earlier one, as the marker would apply the later."""
        self.pending_txn_offsets.setdefault(producer_id, {}).update(offsets)

    def fail_pending_txn_offset(self, producer_id: int, key: tuple[str, int],
                                committed: CommittedOffset) -> None:
        """The write of ``committed`` failed: forget it, unless a marker or a later commit
        of the same transaction has taken its place already."""
        pending = self.pending_txn_offsets.get(producer_id)
        if pending is None or pending.get(key) is not committed:
            return
        del pending[key]
        if not pending:
            del self.pending_txn_offsets[producer_id]

    def complete_pending_txn_offsets(self, producer_id: int, commit: bool) -> int:
        """``producer_id``'s transaction ended: on commit its offsets become committed where
        no record written after theirs is in place (``maybe_put_offset``), on abort they
        are dropped.  Returns how many offsets were pending."""
        pending = self.pending_txn_offsets.pop(producer_id, {})
        if commit:
            for key, committed in pending.items():
                self.maybe_put_offset(key, committed)
        return len(pending)

    def remove_offsets(self, keys) -> None:
        """Tombstones were written for ``keys``: their committed offsets go, and so do the
        transactions' pending ones (a marker after a tombstone must not bring them back;
        the loader applies the same rule)."""
        for key in keys:
            self.offsets.pop(key, None)
            for producer_id in [p for p, pending in self.pending_txn_offsets.items()
                                if pending.pop(key, None) is not None and not pending]:
                del self.pending_txn_offsets[producer_id]

    def maybe_put_offset(self, key: tuple[str, int], committed: CommittedOffset) -> bool:
        """Keep ``committed`` unless a record written after it is already in place."""
        current = self.offsets.get(key)
        if current is not None and current.record_offset > committed.record_offset >= 0:
            return False
        self.offsets[key] = committed
        return True

    def expired_offsets(self, now_ms: int, retention_ms: int) -> list[tuple[str, int]]:
        """Offsets past retention (KIP-211), by Kafka's ``removeExpiredOffsets`` rules:

        * a group with a protocol type that is Empty: retention counts from when it
          became empty (or from each commit when that is unknown);
        * a consumer group that is Stable, or a KIP-848 group with members: offsets of
          topics nobody subscribes to expire from their commit time;
        * a simple group (commits only, no protocol type): from each commit time;
        * otherwise none.  A commit with its own expire timestamp expires then.

        A partition with a commit in flight does not expire: the commit is in the log
        before any tombstone written now, so dropping it here would let its
        acknowledgement bring back an offset the log says is gone.
        """
        if self.consumer is not None and self.consumer.members:
            def base(c: CommittedOffset) -> int:
                return c.commit_timestamp_ms
            keep_topics = self.consumer.subscribed_topics()
        elif self.protocol_type is not None and self.state is GroupState.EMPTY:
            def base(c: CommittedOffset) -> int:
                return self.state_timestamp_ms if self.state_timestamp_ms >= 0 \
                    else c.commit_timestamp_ms
            keep_topics: set[str] = set()
        elif self.protocol_type == "consumer" and self.subscribed_topics is not None \
                and self.state is GroupState.STABLE:
            def base(c: CommittedOffset) -> int:
                return c.commit_timestamp_ms
            keep_topics = self.subscribed_topics
        elif self.protocol_type is None:
            def base(c: CommittedOffset) -> int:
                return c.commit_timestamp_ms
            keep_topics = set()
        else:
            return []
        expired = []
        for key, committed in self.offsets.items():
            if key[0] in keep_topics or key in self.pending_offset_commits:
                continue
            if committed.expire_timestamp_ms >= 0:
                if now_ms >= committed.expire_timestamp_ms:
                    expired.append(key)
            elif now_ms - base(committed) >= retention_ms:
                expired.append(key)
        return expired

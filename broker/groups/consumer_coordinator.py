"""ConsumerGroupHeartbeat and ConsumerGroupDescribe on the group coordinator: KIP-848's
consumer group protocol (``group.protocol=consumer``), as Kafka 4.0's
``GroupMetadataManager.consumerGroupHeartbeat`` serves it.

A heartbeat is the member's whole conversation with the coordinator:

* member epoch 0 joins (with its subscription; the member id is the client's, KIP-1082,
  or one made here for a v0 request that sends none); a known member id joining again
  starts over owning nothing;
* a positive epoch must be the member's current epoch, or its previous one when the
  heartbeat shows the answer that moved it was lost (it owns no more than it was given);
  else FENCED_MEMBER_EPOCH, and the client joins again with epoch 0;
* epoch -1 leaves; -2 is a static member's temporary leave (below).

Each heartbeat first updates the member (subscription, assignor, rebalance timeout);
when the group's inputs changed — a member joined, left or was fenced, a subscription
or assignor changed, or a subscribed topic's partition count changed — the group epoch
moves and the target assignment is computed again (assignors.py).  Then the member is
reconciled one step towards its target (consumer_group.py) and answered with its epoch,
``group.consumer.heartbeat.interval.ms`` and, when it changed or differs from what the
member reported owning, its assignment.  Every change is written to
``__consumer_offsets`` with Kafka's records (manager.write_now) before the answer.

Timers, kept on the member: the session (``group.consumer.session.timeout.ms``, from
each heartbeat) and, while the member has partitions pending revocation, its rebalance
timeout; either expiring fences the member: it is removed, its partitions released,
and the group epoch moves.

Static members (``group.instance.id``, KIP-345 as KIP-848 keeps it): leaving with
epoch -2 keeps the member, its epoch set to -2 and its partitions unreleased, and moves
no epoch; joining again under the same instance id (a restarted process, a new member
id) takes that member over — assignment, target, place — without a new group epoch,
while joining as an instance whose member has not left gets UNRELEASED_INSTANCE_ID,
and a heartbeat naming the instance with an older member id FENCED_INSTANCE_ID.  Its
session timeout, from the leave, removes it for good.

Regex subscriptions (``SubscribedTopicRegex``, RE2 syntax, regex_subscriptions.py): a
member subscribes to its topic names and to every topic of this broker's image whose
whole name its pattern matches, resolved again on each heartbeat against the current
image (cached per image), so a topic created or deleted moves the group epoch at the
next heartbeat of any member, as a changed partition count does.  With an authorizer
the pattern subscribes the member only to the matching topics its principal may
Describe (the ``topic_access`` of its last heartbeat), so an ACL change counts at the
next heartbeat too; a member loaded by this coordinator subscribes through its pattern
to nothing until its own first heartbeat here tells its principal.  A pattern that does
not compile, or that RE2 would refuse, is answered INVALID_REGULAR_EXPRESSION; an empty
one clears the member's regex.  The pattern is kept in the member's metadata record;
Kafka's resolved-regex record (ConsumerGroupRegularExpression) is not written: a loading
coordinator resolves again from its image.  Client-side assignors do not exist in Kafka
4.0's protocol either.

Classic and consumer groups (Kafka 4.0's conversion, reduced to empty groups): a
heartbeat with epoch 0 turns an *empty* classic group into a consumer group, a classic
JoinGroup turns an empty consumer group into a classic one; a group with members of
one protocol refuses the other (GROUP_ID_NOT_FOUND "not a consumer group" to a
heartbeat, INCONSISTENT_GROUP_PROTOCOL to a JoinGroup).  Event-loop only.
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from protocol.errors import ErrorCode

from ..tasks import TaskSupervisor
from . import records
from .assignors import ASSIGNORS, assign
from .consumer_group import (
    ConsumerGroupState,
    ConsumerMember,
    MemberState,
    TopicAssignment,
    contains,
    copy_assignment,
    reconcile,
    same_assignment,
)
from .group_configs import GroupSettings, group_settings
from .manager import GroupMetadataManager
from .regex_subscriptions import (
    UNFILTERED,
    InvalidRegex,
    RegexResolver,
    TopicAccess,
    compile_subscription,
)
from .state import GroupMetadata, GroupState
from .waiters import call_later

log = logging.getLogger(__name__)

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


@dataclass
class HeartbeatAnswer:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    # None: not sent (unchanged); else the member's assignment, topic id -> partitions.
    assignment: TopicAssignment | None = None


@dataclass
class DescribedConsumerMember:
    member: ConsumerMember
    assignment: list[tuple[str, str, list[int]]]         # (topic id, name, partitions)
    target_assignment: list[tuple[str, str, list[int]]]


@dataclass
class DescribedConsumerGroup:
    error: ErrorCode
    group_id: str
    message: str | None = None
    state: str = ""
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor: str = ""
    members: list[DescribedConsumerMember] = field(default_factory=list)


def assignor_names(setting: str) -> list[str]:
    """``group.consumer.assignors``: short names, or Kafka's class names
    (``...UniformAssignor`` → ``uniform``); ValueError for one not served."""
    names = []
    for item in (part.strip() for part in setting.split(",") if part.strip()):
        name = item.rsplit(".", 1)[-1]
        name = name[:-len("Assignor")].lower() if name.endswith("Assignor") else name
        if name not in ASSIGNORS:
            raise ValueError(f"group.consumer.assignors: {item!r} is not served "
                             f"(served: {', '.join(ASSIGNORS)})")
        names.append(name)
    if not names:
        raise ValueError("group.consumer.assignors is empty")
    return names


class ConsumerGroups:
    """KIP-848 consumer groups in ``manager``'s cache (event-loop only); built by the group
    coordinator, which hands it loaded and unloaded consumer groups (``group_loaded``,
    ``group_unloaded``) and empty ones a classic member joins (``convert_to_classic``).
    ValueError at construction for ``group.consumer.*`` settings it cannot serve."""

    def __init__(self, config, manager: GroupMetadataManager, tasks: TaskSupervisor,
                 image: Callable[[], object], prefix: str):
        self.manager = manager
        self.tasks = tasks
        self._image = image
        self._prefix = prefix
        self._config = config
        self.consumer_heartbeat_interval_ms = config["group.consumer.heartbeat.interval.ms"]
        self.consumer_session_timeout_ms = config["group.consumer.session.timeout.ms"]
        low = config["group.consumer.min.session.timeout.ms"]
        high = config["group.consumer.max.session.timeout.ms"]
        if not low <= self.consumer_session_timeout_ms <= high:
            raise ValueError(f"group.consumer.session.timeout.ms "
                             f"{self.consumer_session_timeout_ms} is outside [{low}, {high}]")
        self.consumer_assignors = assignor_names(config["group.consumer.assignors"])
        self.consumer_max_size = config["group.consumer.max.size"]
        self._regexes = RegexResolver()
        self._authorizing = bool(str(config["authorizer.class.name"]).strip())

    # -- ConsumerGroupHeartbeat -------------------------------------------------------------

    async def heartbeat(
            self, group_id: str, member_id: str, member_epoch: int, instance_id: str | None,
            rack_id: str | None, rebalance_timeout_ms: int,
            subscribed_topic_names: list[str] | None, subscribed_topic_regex: str | None,
            server_assignor: str | None, owned: TopicAssignment | None,
            client_id: str = "", client_host: str = "",
            client_makes_member_id: bool = True,
            topic_access: TopicAccess | None = None) -> HeartbeatAnswer:
        """One ConsumerGroupHeartbeat; ``owned`` is the request's topic partitions (None
        when not sent).  ``client_makes_member_id``: v1+, where the member id is the
        client's (KIP-1082); a v0 join may leave it empty for the coordinator to make.
        ``topic_access``: what the request's principal may Describe (None: everything,
        no authorizer or a super user)."""
        error = self.manager.validate_group(group_id)
        if error != ErrorCode.NONE:
            return HeartbeatAnswer(error)
        refusal = self._refuse_heartbeat(member_id, member_epoch, rebalance_timeout_ms,
                                         subscribed_topic_names, subscribed_topic_regex,
                                         server_assignor, client_makes_member_id)
        if refusal is not None:
            return refusal
        group = self.manager.get_group(group_id)
        entries: list[tuple[bytes, bytes | None]] = []
        if group is None:
            if member_epoch != 0:
                return HeartbeatAnswer(ErrorCode.GROUP_ID_NOT_FOUND,
                                       f"Group {group_id} not found.")
            group = self.manager.add_group(GroupMetadata(
                group_id, self.manager.partition_for(group_id),
                state_timestamp_ms=self.manager.clock_ms(), protocol_type="consumer",
                consumer=ConsumerGroupState()))
        elif group.consumer is None:
            if member_epoch != 0 or not group.is_empty() or group.is_state(GroupState.DEAD) \
                    or group.share is not None:
                return HeartbeatAnswer(ErrorCode.GROUP_ID_NOT_FOUND,
                                       f"Group {group_id} is not a consumer group.")
            log.info("%s empty classic group %s becomes a consumer group", self._prefix,
                     group_id)
            group.consumer, group.protocol_type = ConsumerGroupState(), "consumer"
            entries.append((records.group_key(group_id), None))
        if member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return await self._leave(group, member_id, member_epoch, instance_id, entries)
        if member_epoch == 0:
            found = self._joining_member(group, member_id or str(uuid.uuid4()), instance_id,
                                         client_id, client_host, entries)
        else:
            found = self._known_member(group, member_id, member_epoch, instance_id, owned)
        if isinstance(found, HeartbeatAnswer):
            return found
        member, bump = found
        member.topic_access = topic_access or UNFILTERED
        consumer = group.consumer
        before = (member.subscribed_topic_names, member.subscribed_topic_regex,
                  member.server_assignor, member.rebalance_timeout_ms, member.rack_id)
        if subscribed_topic_names is not None:
            member.subscribed_topic_names = tuple(sorted(set(subscribed_topic_names)))
        if subscribed_topic_regex is not None:  # "" clears it, as Kafka reads it
            member.subscribed_topic_regex = subscribed_topic_regex or None
        if server_assignor is not None:
            member.server_assignor = server_assignor
        if rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = rebalance_timeout_ms
        if rack_id is not None:
            member.rack_id = rack_id
        after = (member.subscribed_topic_names, member.subscribed_topic_regex,
                 member.server_assignor, member.rebalance_timeout_ms, member.rack_id)
        if after != before or member_epoch == 0:
            entries.append(_member_metadata_record(group_id, member))
        bump = bump or after[:3] != before[:3] \
            or self._subscribed_metadata(consumer) != consumer.subscribed_metadata \
            or self._regex_topics_changed(consumer)
        if bump:
            entries += self._bump_group_epoch(group)
        previous = copy_assignment(member.assigned)
        entries += self._reconcile(group, member, owned)
        self._schedule_consumer_session(group, member)
        error = await self.manager.write_now(group, entries) if entries else ErrorCode.NONE
        if error != ErrorCode.NONE:
            return HeartbeatAnswer(error)
        send = member_epoch == 0 or not same_assignment(previous, member.assigned) \
            or (owned is not None and not same_assignment(owned, member.assigned))
        return HeartbeatAnswer(ErrorCode.NONE, None, member.member_id, member.member_epoch,
                               self._settings(group_id).consumer_heartbeat_interval_ms,
                               copy_assignment(member.assigned) if send else None)

    async def _leave(self, group: GroupMetadata, member_id: str, member_epoch: int,
                     instance_id: str | None, entries) -> HeartbeatAnswer:
        """Epoch -1: the member leaves, its partitions are released.  Epoch -2: a static
        member leaves for a while (KIP-345's restart): it keeps its partitions, unreleased,
        and the group epoch stays, until it rejoins under its instance id or its session
        times out."""
        member = group.consumer.members.get(member_id)
        if member is None:
            return HeartbeatAnswer(ErrorCode.UNKNOWN_MEMBER_ID,
                                   f"Member {member_id} is not in group {group.group_id}.")
        if member_epoch == STATIC_LEAVE_EPOCH:
            if instance_id is None or member.instance_id != instance_id:
                return HeartbeatAnswer(ErrorCode.INVALID_REQUEST,
                                       "MemberEpoch -2 is for static members, with their "
                                       "InstanceId.")
            _set_static_leave(member)
            entries.append(_current_assignment_record(group.group_id, member))
            self._schedule_consumer_session(group, member)
            log.info("%s static member %s (%s) of group %s left for now", self._prefix,
                     member_id, instance_id, group.group_id)
        else:
            entries += self._remove_consumer_member(group, member, "the member left")
        error = await self.manager.write_now(group, entries)
        return HeartbeatAnswer(error, None, member_id, member_epoch)

    def _joining_member(self, group: GroupMetadata, member_id: str, instance_id: str | None,
                        client_id: str, client_host: str, entries
                        ) -> tuple[ConsumerMember, bool] | HeartbeatAnswer:
        """Epoch 0: (the member, whether the group epoch must move), or the refusal."""
        consumer = group.consumer
        static = consumer.static_member(instance_id)
        if static is not None:
            if static.member_epoch != STATIC_LEAVE_EPOCH and static.member_id != member_id:
                return HeartbeatAnswer(ErrorCode.UNRELEASED_INSTANCE_ID,
                                       f"Static member {static.member_id} with instance id "
                                       f"{instance_id} is not released yet.")
            entries += self._take_over_static_member(group, static, member_id)
            static.client_id, static.client_host = client_id, client_host
            return static, False
        member = consumer.members.get(member_id)
        if member is not None:  # it starts over: whatever it had, it owns nothing now
            member.member_epoch, member.state = 0, MemberState.STABLE
            member.assigned, member.pending_revocation = {}, {}
            return member, False
        if len(consumer.members) >= self.consumer_max_size:
            return HeartbeatAnswer(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                   f"Group {group.group_id} has {len(consumer.members)} "
                                   f"members, the most group.consumer.max.size allows.")
        member = consumer.members[member_id] = ConsumerMember(member_id, client_id,
                                                              client_host, instance_id)
        return member, True

    def _known_member(self, group: GroupMetadata, member_id: str, member_epoch: int,
                      instance_id: str | None, owned: TopicAssignment | None
                      ) -> tuple[ConsumerMember, bool] | HeartbeatAnswer:
        """A positive epoch: the member at a valid epoch, or the refusal."""
        consumer = group.consumer
        static = consumer.static_member(instance_id)
        if static is not None and static.member_id != member_id:
            return HeartbeatAnswer(ErrorCode.FENCED_INSTANCE_ID,
                                   f"Instance id {instance_id} is member {static.member_id} "
                                   f"now, not {member_id}.")
        member = consumer.members.get(member_id)
        if member is None:
            return HeartbeatAnswer(ErrorCode.UNKNOWN_MEMBER_ID,
                                   f"Member {member_id} is not in group {group.group_id}.")
        if not self._epoch_is_valid(member, member_epoch, owned):
            return HeartbeatAnswer(ErrorCode.FENCED_MEMBER_EPOCH,
                                   f"Member epoch {member_epoch} is not the current epoch "
                                   f"{member.member_epoch}.")
        return member, False

    def _take_over_static_member(self, group: GroupMetadata, member: ConsumerMember,
                                 new_member_id: str) -> list[tuple[bytes, bytes | None]]:
        """A static member rejoins (under a new member id, or the same): it takes over
        its assignment, target and place, with no new group epoch.  The old id's records
        are deleted; the caller writes the new id's metadata and current assignment."""
        consumer = group.consumer
        old_member_id = member.member_id
        _cancel_consumer_timers(member)
        target = consumer.target.pop(old_member_id, {})
        del consumer.members[old_member_id]
        member.member_id = new_member_id
        consumer.members[new_member_id] = member
        consumer.target[new_member_id] = target
        if consumer.regex_topics and old_member_id in consumer.regex_topics:
            consumer.regex_topics[new_member_id] = consumer.regex_topics.pop(old_member_id)
        log.info("%s static member %s of group %s rejoined as %s (was %s)", self._prefix,
                 member.instance_id, group.group_id, new_member_id, old_member_id)
        entries = []
        if old_member_id != new_member_id:
            entries += [(records.consumer_group_key(t, group.group_id, old_member_id), None)
                        for t in (records.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
                                  records.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
                                  records.CONSUMER_GROUP_MEMBER_METADATA)]
        entries.append((records.consumer_group_key(
            records.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, group.group_id, new_member_id),
            records.target_member_value(target)))
        return entries

    def _refuse_heartbeat(self, member_id, member_epoch, rebalance_timeout_ms,
                          subscribed_topic_names, subscribed_topic_regex, server_assignor,
                          client_makes_member_id) -> HeartbeatAnswer | None:
        """Kafka's request validation, and what is not served here."""
        def invalid(message: str) -> HeartbeatAnswer:
            return HeartbeatAnswer(ErrorCode.INVALID_REQUEST, message)
        if member_epoch < STATIC_LEAVE_EPOCH:
            return invalid(f"MemberEpoch {member_epoch} is invalid.")
        if not member_id and (member_epoch != 0 or client_makes_member_id):
            return invalid("MemberId can't be empty.")
        if subscribed_topic_regex:  # librdkafka sends "" for none, as Kafka reads it
            try:
                compile_subscription(subscribed_topic_regex)
            except InvalidRegex as exc:
                return HeartbeatAnswer(ErrorCode.INVALID_REGULAR_EXPRESSION, str(exc))
        if member_epoch == 0:
            if rebalance_timeout_ms < 0:
                return invalid("RebalanceTimeoutMs must be provided in first request.")
            if subscribed_topic_names is None and not subscribed_topic_regex:
                return invalid("SubscribedTopicNames or SubscribedTopicRegex must be set "
                               "in first request.")
        if server_assignor is not None and server_assignor not in self.consumer_assignors:
            return HeartbeatAnswer(ErrorCode.UNSUPPORTED_ASSIGNOR,
                                   f"ServerAssignor {server_assignor} is not supported. "
                                   f"Supported assignors: "
                                   f"{', '.join(self.consumer_assignors)}.")
        return None

    @staticmethod
    def _epoch_is_valid(member: ConsumerMember, epoch: int,
                        owned: TopicAssignment | None) -> bool:
        """Kafka's throwIfMemberEpochIsInvalid: the current epoch, or the previous one
        when the answer that moved the member was lost (it owns no more than it has)."""
        if epoch == member.member_epoch:
            return True
        return epoch < member.member_epoch and epoch == member.previous_member_epoch \
            and owned is not None and contains(member.assigned, owned)

    def _member_topics(self, member: ConsumerMember, topics) -> set[str]:
        """The topics ``member`` subscribes to: its names, and what its regex matches
        among ``topics`` (the image's)."""
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            access = member.topic_access
            if self._authorizing and access is None:
                return names  # its principal is not known here yet: fail closed
            names |= self._regexes.resolve(member.subscribed_topic_regex, topics, access)
        return names

    def _regex_topics_changed(self, consumer: ConsumerGroupState) -> bool:
        """A regex member's topics differ from the target's though the group's union did
        not (another member's principal may Describe the topic its own may not)."""
        if consumer.regex_topics is None:
            return False
        topics = self._image().topics
        return consumer.regex_topics != {m.member_id: frozenset(self._member_topics(m, topics))
                                         for m in consumer.members.values()
                                         if m.subscribed_topic_regex}

    def _subscribed_metadata(self, consumer: ConsumerGroupState) -> dict[str, tuple[str, int]]:
        topics = self._image().topics
        subscribed = set().union(*(self._member_topics(m, topics)
                                   for m in consumer.members.values()))
        return {name: (topics[name].topic_id, len(topics[name].partitions))
                for name in sorted(subscribed) if name in topics}

    def _bump_group_epoch(self, group: GroupMetadata) -> list[tuple[bytes, bytes | None]]:
        """The group's inputs changed: next group epoch, a new target assignment at it."""
        consumer = group.consumer
        consumer.group_epoch += 1
        consumer.subscribed_metadata = self._subscribed_metadata(consumer)
        assignor = consumer.chosen_assignor(self.consumer_assignors[0])
        topics = self._image().topics
        members_topics = {m.member_id: self._member_topics(m, topics)
                          for m in consumer.members.values()}
        consumer.regex_topics = {m.member_id: frozenset(members_topics[m.member_id])
                                 for m in consumer.members.values() if m.subscribed_topic_regex}
        target = assign(assignor, members_topics, consumer.subscribed_metadata,
                        consumer.target)
        group_id = group.group_id
        entries = [(records.consumer_group_key(records.CONSUMER_GROUP_METADATA, group_id),
                    records.epoch_value(consumer.group_epoch))]
        for member_id, assignment in sorted(target.items()):
            if not same_assignment(assignment, consumer.target.get(member_id, {})) \
                    or member_id not in consumer.target:
                entries.append((records.consumer_group_key(
                    records.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, group_id, member_id),
                    records.target_member_value(assignment)))
        consumer.target = {m: copy_assignment(a) for m, a in target.items()}
        consumer.assignment_epoch = consumer.group_epoch
        entries.append((records.consumer_group_key(
            records.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, group_id),
            records.epoch_value(consumer.assignment_epoch)))
        log.info("%s group %s epoch %d: target assignment by %s for %d members",
                 self._prefix, group_id, consumer.group_epoch, assignor, len(target))
        return entries

    def _reconcile(self, group: GroupMetadata, member: ConsumerMember,
                   owned: TopicAssignment | None) -> list[tuple[bytes, bytes | None]]:
        """One reconciliation step of ``member``; its record when it changed.  While it
        has partitions pending revocation its rebalance timeout runs."""
        consumer = group.consumer
        before = (member.member_epoch, member.state, copy_assignment(member.assigned),
                  copy_assignment(member.pending_revocation))
        reconcile(member, consumer.assignment_epoch, consumer.target.get(member.member_id, {}),
                  owned, lambda t, p: consumer.owner_of(t, p, member.member_id) is not None)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if member.rebalance_timer is None:
                member.rebalance_timer = call_later(
                    max(member.rebalance_timeout_ms, 0), self._on_consumer_timeout, group,
                    member, "it did not revoke its partitions within its rebalance timeout")
        elif member.rebalance_timer is not None:
            member.rebalance_timer.cancel()
            member.rebalance_timer = None
        after = (member.member_epoch, member.state, member.assigned, member.pending_revocation)
        if after == before:
            return []
        return [_current_assignment_record(group.group_id, member)]

    def _remove_consumer_member(self, group: GroupMetadata, member: ConsumerMember,
                                reason: str) -> list[tuple[bytes, bytes | None]]:
        """Remove (fence) ``member``: tombstones for its records, next group epoch."""
        _cancel_consumer_timers(member)
        consumer = group.consumer
        del consumer.members[member.member_id]
        consumer.target.pop(member.member_id, None)
        if not consumer.members:
            group.state_timestamp_ms = self.manager.clock_ms()  # offsets expire from here
        log.info("%s member %s left consumer group %s: %s", self._prefix, member.member_id,
                 group.group_id, reason)
        entries = [(records.consumer_group_key(t, group.group_id, member.member_id), None)
                   for t in (records.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
                             records.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
                             records.CONSUMER_GROUP_MEMBER_METADATA)]
        return entries + self._bump_group_epoch(group)

    # -- timers ---------------------------------------------------------------------------------

    def _schedule_consumer_session(self, group: GroupMetadata, member: ConsumerMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        member.session_timer = call_later(
            self._settings(group.group_id).consumer_session_timeout_ms,
            self._on_consumer_timeout, group, member,
            "its session timed out")

    def _settings(self, group_id: str) -> GroupSettings:
        """The group's settings: its GROUP configs over the broker's (group_configs.py)."""
        return group_settings(self._config, self._image(), group_id)

    def _on_consumer_timeout(self, group: GroupMetadata, member: ConsumerMember,
                             reason: str) -> None:
        if not self.manager.is_current(group) or group.consumer is None \
                or group.consumer.members.get(member.member_id) is not member:
            return
        entries = self._remove_consumer_member(group, member, reason)
        self.tasks.spawn(f"fence-member {group.group_id}",
                         self.manager.write_now(group, entries))

    def group_loaded(self, group: GroupMetadata) -> None:
        """A loaded group: the subscribed topics as this broker's image has them, and every
        member's timers (as Kafka's coordinator arms them on load)."""
        consumer = group.consumer
        consumer.subscribed_metadata = self._subscribed_metadata(consumer)
        for member in consumer.members.values():
            self._schedule_consumer_session(group, member)
            if member.state is MemberState.UNREVOKED_PARTITIONS:
                member.rebalance_timer = call_later(
                    max(member.rebalance_timeout_ms, 0), self._on_consumer_timeout, group,
                    member, "it did not revoke its partitions within its rebalance timeout")

    def group_unloaded(self, group: GroupMetadata) -> None:
        for member in group.consumer.members.values():
            _cancel_consumer_timers(member)

    def convert_to_classic(self, group: GroupMetadata) -> None:
        """An empty consumer group is joined by a classic member: it becomes classic; its
        consumer records are deleted (the classic group record follows with the join)."""
        log.info("%s empty consumer group %s becomes a classic group", self._prefix,
                 group.group_id)
        group.consumer, group.protocol_type = None, None
        entries = [(records.consumer_group_key(t, group.group_id), None)
                   for t in (records.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
                             records.CONSUMER_GROUP_METADATA)]
        self.tasks.spawn(f"convert-group {group.group_id}",
                         self.manager.write_now(group, entries))

    # -- ConsumerGroupDescribe ----------------------------------------------------------------

    def describe(self, group_id: str) -> DescribedConsumerGroup:
        error, message, group = self.manager.typed_group(group_id, "consumer", "consumer")
        if group is None or group.consumer is None:
            return DescribedConsumerGroup(error, group_id, message)
        consumer = group.consumer
        members = [DescribedConsumerMember(m, self._named(m.assigned),
                                           self._named(consumer.target.get(m.member_id, {})))
                   for m in consumer.members.values()]
        return DescribedConsumerGroup(
            ErrorCode.NONE, group_id, None, consumer.state_name(), consumer.group_epoch,
            consumer.assignment_epoch, consumer.chosen_assignor(self.consumer_assignors[0]),
            members)

    def _named(self, assignment: TopicAssignment) -> list[tuple[str, str, list[int]]]:
        result = []
        for topic_id, partitions in sorted(assignment.items()):
            topic = self._image().topic_by_id(topic_id)
            result.append((topic_id, topic.name if topic is not None else "",
                           sorted(partitions)))
        return result


def check_consumer_commit(group: GroupMetadata, member_id: str, member_epoch: int,
                           stale: ErrorCode) -> ErrorCode:
    """Kafka's ConsumerGroup.validateOffsetCommit: anyone with a negative epoch while
    the group has no members (admin tools), else a member at its current epoch
    (``stale`` otherwise: STALE_MEMBER_EPOCH, ILLEGAL_GENERATION for transactions)."""
    consumer = group.consumer
    if member_epoch < 0 and not consumer.members:
        return ErrorCode.NONE
    member = consumer.members.get(member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    return ErrorCode.NONE if member_epoch == member.member_epoch else stale


def _set_static_leave(member: ConsumerMember) -> None:
    member.previous_member_epoch = member.member_epoch
    member.member_epoch = STATIC_LEAVE_EPOCH


def _cancel_consumer_timers(member: ConsumerMember) -> None:
    for timer in (member.session_timer, member.rebalance_timer):
        if timer is not None:
            timer.cancel()
    member.session_timer = member.rebalance_timer = None


def _member_metadata_record(group_id: str, member: ConsumerMember) -> tuple[bytes, bytes]:
    return (records.consumer_group_key(records.CONSUMER_GROUP_MEMBER_METADATA, group_id,
                                       member.member_id),
            records.consumer_member_value(records.ConsumerMemberValue(
                member.instance_id, member.rack_id, member.client_id, member.client_host,
                member.subscribed_topic_names, member.rebalance_timeout_ms,
                member.server_assignor, member.subscribed_topic_regex)))


def _current_assignment_record(group_id: str, member: ConsumerMember) -> tuple[bytes, bytes]:
    return (records.consumer_group_key(records.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
                                       group_id, member.member_id),
            records.current_assignment_value(records.CurrentAssignmentValue(
                member.member_epoch, member.previous_member_epoch, int(member.state),
                member.assigned, member.pending_revocation)))

"""ShareGroupHeartbeat and ShareGroupDescribe on the group coordinator: KIP-932's share
groups, as Kafka 4.2's ``GroupMetadataManager.shareGroupHeartbeat`` serves them.

Share groups live in the group-id namespace of classic and consumer groups, on the same
``__consumer_offsets`` partition; a group is of one type only.  A heartbeat is the
member's whole conversation with the coordinator:

* member epoch 0 joins with its subscription (the member id is the client's); a known
  member id joining again starts over;
* a positive epoch must be the member's current epoch, or its previous one (the answer
  that moved it was lost); else FENCED_MEMBER_EPOCH, and the client joins again;
* epoch -1 leaves.

When the group's inputs changed (a member joined, left or was fenced, a subscription
changed, a subscribed topic's partition count changed) the group epoch moves and the
target assignment is computed again by the simple assignor (share_assignor.py).  Share
groups revoke nothing, so the member takes its target and the assignment epoch on the
same heartbeat; the answer carries the assignment when the member joined or its
assignment changed.  Every change is written to ``__consumer_offsets`` with Kafka's
share records (share_records.py) before the answer, through ``manager.write_now``.

Timers: the session (``group.share.session.timeout.ms``, or the group's
``share.session.timeout.ms``), re-armed by each heartbeat; expiring fences the member.
A loaded group re-arms every member's session, so members of a coordinator that failed
over keep their place if they heartbeat in time (KIP-848's rejoin otherwise).

Refusals across types: a share heartbeat for a classic or consumer group gets
GROUP_ID_NOT_FOUND ("not a share group"), as Kafka answers; the classic and consumer
paths refuse share groups (coordinator.py, consumer_coordinator.py).  Event-loop only.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from protocol.errors import ErrorCode

from ..tasks import TaskSupervisor
from . import records
from . import share_records as srec
from .group_configs import overrides
from .manager import GroupMetadataManager
from .share_assignor import SIMPLE, assign_simple
from .share_group import ShareGroupSettings, ShareGroupState, ShareMember
from .state import GroupMetadata, GroupState
from .waiters import call_later

log = logging.getLogger(__name__)

LEAVE_EPOCH = -1
Entries = list[tuple[bytes, bytes | None]]

# A share group's own configs (GROUP resource, KIP-932) -> ShareGroupSettings field.
GROUP_CONFIG_FIELDS = {
    "share.heartbeat.interval.ms": ("heartbeat_interval_ms", int),
    "share.session.timeout.ms": ("session_timeout_ms", int),
    "share.record.lock.duration.ms": ("record_lock_duration_ms", int),
    "share.delivery.count.limit": ("delivery_count_limit", int),
    "share.auto.offset.reset": ("auto_offset_reset", str),
    "share.isolation.level": ("isolation_level", str),
}
# Broker setting -> ShareGroupSettings field, when the broker has the setting.
BROKER_CONFIG_FIELDS = {
    "group.share.heartbeat.interval.ms": "heartbeat_interval_ms",
    "group.share.session.timeout.ms": "session_timeout_ms",
    "group.share.record.lock.duration.ms": "record_lock_duration_ms",
    "group.share.delivery.count.limit": "delivery_count_limit",
    "group.share.partition.max.record.locks": "partition_max_record_locks",
}


@dataclass
class ShareHeartbeatAnswer:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    # None: not sent (unchanged); else the member's assignment, topic id -> partitions.
    assignment: dict[str, set[int]] | None = None


@dataclass
class DescribedShareGroup:
    error: ErrorCode
    group_id: str
    message: str | None = None
    state: str = ""
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor: str = SIMPLE
    # (member, [(topic id, topic name, partitions)])
    members: list[tuple[ShareMember, list[tuple[str, str, list[int]]]]] = \
        field(default_factory=list)


def broker_settings(config) -> ShareGroupSettings:
    """The broker's ``group.share.*`` settings over Kafka's defaults (a setting the broker
    does not define keeps Kafka's default)."""
    values = {}
    for name, attribute in BROKER_CONFIG_FIELDS.items():
        try:
            values[attribute] = int(config[name])
        except (KeyError, TypeError, ValueError):
            continue
    return ShareGroupSettings(**values)


class ShareGroups:
    """KIP-932 share groups in ``manager``'s cache (event-loop only); built by the group
    coordinator, which hands it loaded and unloaded share groups.  ``group_configs``
    (group id -> {config name: text}) gives a group's own configs: by default the GROUP
    resource's in this broker's metadata image (group_configs.py).  ValueError at
    construction for ``group.share.*`` settings it cannot serve."""

    def __init__(self, config, manager: GroupMetadataManager, tasks: TaskSupervisor,
                 image: Callable[[], object], prefix: str,
                 group_configs: Callable[[str], dict[str, str]] | None = None):
        self.manager = manager
        self.tasks = tasks
        self._image = image
        self._prefix = prefix
        self._group_configs = group_configs or (lambda g: overrides(self._image(), g))
        self.defaults = broker_settings(config)
        low = config["group.share.min.session.timeout.ms"]
        high = config["group.share.max.session.timeout.ms"]
        if not low <= self.defaults.session_timeout_ms <= high:
            raise ValueError(f"group.share.session.timeout.ms "
                             f"{self.defaults.session_timeout_ms} is outside [{low}, {high}]")
        assignors = [a.strip().rsplit(".", 1)[-1].lower().removesuffix("assignor")
                     for a in config["group.share.assignors"].split(",") if a.strip()]
        if assignors != [SIMPLE]:
            raise ValueError(f"group.share.assignors: only Kafka's simple assignor is "
                             f"served, not {config['group.share.assignors']!r}")
        self.max_size = config["group.share.max.size"]

    def settings(self, group_id: str) -> ShareGroupSettings:
        """The settings ``group_id`` runs with: the broker's, with the group's own configs
        (GROUP resource) over them.  Any broker may call it; no coordinator needed."""
        values = {}
        for name, value in (self._group_configs(group_id) or {}).items():
            if name in GROUP_CONFIG_FIELDS and value is not None:
                attribute, kind = GROUP_CONFIG_FIELDS[name]
                try:
                    values[attribute] = kind(value)
                except ValueError:
                    log.warning("%s group %s: config %s=%r is not a %s, ignored",
                                self._prefix, group_id, name, value, kind.__name__)
        if not values:
            return self.defaults
        return ShareGroupSettings(**{**self.defaults.__dict__, **values})

    # -- ShareGroupHeartbeat ----------------------------------------------------------------

    async def heartbeat(self, group_id: str, member_id: str, member_epoch: int,
                        rack_id: str | None, subscribed_topic_names: list[str] | None,
                        client_id: str = "", client_host: str = "") -> ShareHeartbeatAnswer:
        """One ShareGroupHeartbeat (v1: the member id is always the client's)."""
        refusal = _refuse_heartbeat(group_id, member_id, member_epoch, subscribed_topic_names)
        if refusal is not None:
            return refusal
        error = self.manager.validate_group(group_id)
        if error != ErrorCode.NONE:
            return ShareHeartbeatAnswer(error)
        found = self._group(group_id, member_epoch == 0)
        if isinstance(found, ShareHeartbeatAnswer):
            return found
        group, entries = found
        share = group.share
        if member_epoch == LEAVE_EPOCH:
            return await self._leave(group, member_id, entries)
        joined = self._member(group, member_id, member_epoch, client_id, client_host)
        if isinstance(joined, ShareHeartbeatAnswer):
            return joined
        member, bump = joined
        before = (member.subscribed_topic_names, member.rack_id)
        if subscribed_topic_names is not None:
            member.subscribed_topic_names = tuple(sorted(set(subscribed_topic_names)))
        if rack_id is not None:
            member.rack_id = rack_id
        if member_epoch == 0 or (member.subscribed_topic_names, member.rack_id) != before:
            entries.append(_member_record(group_id, member))
        bump = bump or member.subscribed_topic_names != before[0] \
            or self._subscribed_metadata(share) != share.subscribed_metadata
        if bump:
            entries += self._bump_group_epoch(group)
        previous = _copy(member.assigned)
        entries += _move_to_target(group_id, share, member, member_epoch == 0)
        self._schedule_session(group, member)
        error = await self.manager.write_now(group, entries) if entries else ErrorCode.NONE
        if error != ErrorCode.NONE:
            return ShareHeartbeatAnswer(error)
        send = member_epoch == 0 or previous != member.assigned
        return ShareHeartbeatAnswer(ErrorCode.NONE, None, member.member_id,
                                    member.member_epoch,
                                    self.settings(group_id).heartbeat_interval_ms,
                                    _copy(member.assigned) if send else None)

    def _member(self, group: GroupMetadata, member_id: str, member_epoch: int,
                client_id: str, client_host: str
                ) -> tuple[ShareMember, bool] | ShareHeartbeatAnswer:
        """(the member, whether it is new: the group epoch must move), or the refusal.
        Epoch 0 joins (a known id starts over); a positive epoch must be the member's
        current one, or its previous one when the answer that moved it was lost."""
        share = group.share
        member = share.members.get(member_id)
        if member_epoch == 0:
            new = member is None
            if new:
                if len(share.members) >= self.max_size:
                    return ShareHeartbeatAnswer(
                        ErrorCode.GROUP_MAX_SIZE_REACHED,
                        f"The share group has reached its maximum capacity of "
                        f"{self.max_size} members.")
                member = share.members[member_id] = ShareMember(member_id)
            member.client_id, member.client_host = client_id, client_host
            return member, new
        if member is None:
            return ShareHeartbeatAnswer(ErrorCode.UNKNOWN_MEMBER_ID,
                                        f"Member {member_id} is not in group "
                                        f"{group.group_id}.")
        if not (member_epoch == member.member_epoch or (
                member_epoch < member.member_epoch
                and member_epoch == member.previous_member_epoch)):
            return ShareHeartbeatAnswer(ErrorCode.FENCED_MEMBER_EPOCH,
                                        f"Member epoch {member_epoch} is not the current "
                                        f"epoch {member.member_epoch}.")
        return member, False

    def _group(self, group_id: str, create: bool
               ) -> tuple[GroupMetadata, Entries] | ShareHeartbeatAnswer:
        """The share group (created for a joining member), or the refusal."""
        group = self.manager.get_group(group_id)
        entries: Entries = []
        if group is None or group.is_state(GroupState.DEAD):
            if not create:
                return ShareHeartbeatAnswer(ErrorCode.GROUP_ID_NOT_FOUND,
                                            f"Share group {group_id} not found.")
            if group is not None:
                self.manager.remove_group(group)
            group = self.manager.add_group(GroupMetadata(
                group_id, self.manager.partition_for(group_id),
                state_timestamp_ms=self.manager.clock_ms(), protocol_type="share",
                share=ShareGroupState()))
            entries.append((srec.key(srec.SHARE_GROUP_METADATA, group_id),
                            srec.group_value(0)))
            log.info("%s share group %s created", self._prefix, group_id)
        elif group.share is None:
            return ShareHeartbeatAnswer(ErrorCode.GROUP_ID_NOT_FOUND,
                                        f"Group {group_id} is not a share group.")
        return group, entries

    async def _leave(self, group: GroupMetadata, member_id: str,
                     entries: Entries) -> ShareHeartbeatAnswer:
        member = group.share.members.get(member_id)
        if member is None:
            return ShareHeartbeatAnswer(ErrorCode.UNKNOWN_MEMBER_ID,
                                        f"Member {member_id} is not in group "
                                        f"{group.group_id}.")
        entries += self._remove_member(group, member, "the member left")
        error = await self.manager.write_now(group, entries)
        return ShareHeartbeatAnswer(error, None, member_id, LEAVE_EPOCH)

    def _subscribed_metadata(self, share: ShareGroupState) -> dict[str, tuple[str, int]]:
        topics = self._image().topics
        return {name: (topics[name].topic_id, len(topics[name].partitions))
                for name in sorted(share.subscribed_topics()) if name in topics}

    def _bump_group_epoch(self, group: GroupMetadata) -> Entries:
        """The group's inputs changed: next group epoch, a new target assignment at it."""
        share, group_id = group.share, group.group_id
        share.group_epoch += 1
        share.subscribed_metadata = self._subscribed_metadata(share)
        target = assign_simple({m.member_id: set(m.subscribed_topic_names)
                                for m in share.members.values()},
                               share.subscribed_metadata, share.target)
        entries: Entries = [(srec.key(srec.SHARE_GROUP_METADATA, group_id),
                             srec.group_value(share.group_epoch))]
        for member_id, assignment in sorted(target.items()):
            if member_id not in share.target or _copy(assignment) != _copy(
                    share.target[member_id]):
                entries.append((srec.key(srec.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, group_id,
                                         member_id), records.target_member_value(assignment)))
        share.target = {m: _copy(a) for m, a in target.items()}
        share.assignment_epoch = share.group_epoch
        entries.append((srec.key(srec.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, group_id),
                        records.epoch_value(share.assignment_epoch)))
        log.info("%s share group %s epoch %d: target assignment by %s for %d members",
                 self._prefix, group_id, share.group_epoch, SIMPLE, len(target))
        return entries

    def _remove_member(self, group: GroupMetadata, member: ShareMember, reason: str) -> Entries:
        """Remove (fence) ``member``: tombstones for its records, next group epoch."""
        _cancel_timer(member)
        share = group.share
        del share.members[member.member_id]
        share.target.pop(member.member_id, None)
        log.info("%s member %s left share group %s: %s", self._prefix, member.member_id,
                 group.group_id, reason)
        entries: Entries = [(srec.key(t, group.group_id, member.member_id), None)
                            for t in srec.MEMBER_RECORD_TYPES]
        return entries + self._bump_group_epoch(group)

    # -- timers ---------------------------------------------------------------------------

    def _schedule_session(self, group: GroupMetadata, member: ShareMember) -> None:
        _cancel_timer(member)
        member.session_timer = call_later(
            self.settings(group.group_id).session_timeout_ms, self._on_session_timeout,
            group, member)

    def _on_session_timeout(self, group: GroupMetadata, member: ShareMember) -> None:
        if not self.manager.is_current(group) or group.share is None \
                or group.share.members.get(member.member_id) is not member:
            return
        entries = self._remove_member(group, member, "its session timed out")
        self.tasks.spawn(f"fence-share-member {group.group_id}",
                         self.manager.write_now(group, entries))

    def group_loaded(self, group: GroupMetadata) -> None:
        """A loaded share group: subscribed topics from this broker's image, and every
        member's session timer (as Kafka's coordinator arms them on load)."""
        share = group.share
        share.subscribed_metadata = self._subscribed_metadata(share)
        for member in share.members.values():
            self._schedule_session(group, member)

    def group_unloaded(self, group: GroupMetadata) -> None:
        for member in group.share.members.values():
            _cancel_timer(member)

    # -- ShareGroupDescribe ---------------------------------------------------------------

    def describe(self, group_id: str) -> DescribedShareGroup:
        if not group_id:
            return DescribedShareGroup(ErrorCode.INVALID_GROUP_ID, group_id)
        error, message, group = self.manager.typed_group(group_id, "share", "share")
        if group is None or group.share is None:
            return DescribedShareGroup(error, group_id, message)
        share = group.share
        return DescribedShareGroup(
            ErrorCode.NONE, group_id, None, share.state_name(), share.group_epoch,
            share.assignment_epoch, SIMPLE,
            [(m, self.named(m.assigned)) for m in share.members.values()])

    def named(self, assignment: dict[str, set[int]]) -> list[tuple[str, str, list[int]]]:
        result = []
        for topic_id, partitions in sorted(assignment.items()):
            topic = self._image().topic_by_id(topic_id)
            result.append((topic_id, topic.name if topic is not None else "",
                           sorted(partitions)))
        return result


def _refuse_heartbeat(group_id: str, member_id: str, member_epoch: int,
                      subscribed_topic_names: list[str] | None) -> ShareHeartbeatAnswer | None:
    """Kafka's request validation (throwIfShareGroupHeartbeatRequestIsInvalid)."""
    def invalid(message: str) -> ShareHeartbeatAnswer:
        return ShareHeartbeatAnswer(ErrorCode.INVALID_REQUEST, message)
    if not group_id:
        return invalid("GroupId can't be empty.")
    if not member_id:
        return invalid("MemberId can't be empty.")
    if member_epoch < LEAVE_EPOCH:
        return invalid(f"MemberEpoch is {member_epoch}, but must be greater than or equal "
                       f"to -1.")
    if member_epoch == 0 and not subscribed_topic_names:
        return invalid("SubscribedTopicNames must be set in first request.")
    return None


def _move_to_target(group_id: str, share: ShareGroupState, member: ShareMember,
                    joining: bool) -> Entries:
    """The member takes its target at the assignment epoch (share groups revoke nothing);
    its current-assignment record when that changed anything."""
    target = _copy(share.target.get(member.member_id, {}))
    if not joining and member.member_epoch == share.assignment_epoch \
            and member.assigned == target:
        return []
    if member.member_epoch != share.assignment_epoch:
        member.previous_member_epoch = member.member_epoch
    member.member_epoch = share.assignment_epoch
    member.assigned = target
    return [(srec.key(srec.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, group_id, member.member_id),
             srec.current_value(srec.ShareCurrentValue(
                 member.member_epoch, member.previous_member_epoch, member.assigned)))]


def _member_record(group_id: str, member: ShareMember) -> tuple[bytes, bytes]:
    return (srec.key(srec.SHARE_GROUP_MEMBER_METADATA, group_id, member.member_id),
            srec.member_value(srec.ShareMemberValue(
                member.rack_id, member.client_id, member.client_host,
                member.subscribed_topic_names)))


def _copy(assignment: dict[str, set[int]]) -> dict[str, set[int]]:
    return {t: set(p) for t, p in assignment.items() if p}


def _cancel_timer(member: ShareMember) -> None:
    if member.session_timer is not None:
        member.session_timer.cancel()
        member.session_timer = None

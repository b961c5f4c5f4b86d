"""Static membership (KIP-345) on the group coordinator: Kafka's
``updateStaticMemberAndRebalance`` and ``validateCurrentMember``.

A member that sets ``group.instance.id`` is static: the group maps its instance id to
its current member id (``GroupMetadata.static_members``, stored in the group's
``__consumer_offsets`` record, so a new coordinator loads it).  When the instance
restarts it joins with an empty member id; the coordinator then hands the same member —
assignment, place in the generation, lead — a new member id, and the old member id is
fenced: JoinGroup, SyncGroup, Heartbeat, OffsetCommit and LeaveGroup that name the
instance id with any other member id get FENCED_INSTANCE_ID.  A static member that does
not rejoin a rebalance is kept (and assigned to) until its session expires.
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

from protocol.errors import ErrorCode

from ..tasks import TaskSupervisor
from .manager import GroupMetadataManager
from .results import JoinResult, SyncResult
from .state import GroupMetadata, GroupState, MemberMetadata
from .waiters import invoke_join, invoke_sync

log = logging.getLogger(__name__)


class StaticMembers:
    """Static members of the classic groups in ``manager``'s cache (event-loop only).

    Given by the classic coordinator, its rebalance steps: ``add_member(group,
    member_id, *new_member)`` (a new member joins and the group rebalances),
    ``prepare_rebalance(group, reason)`` and ``schedule_heartbeat(group, member)``."""

    def __init__(self, manager: GroupMetadataManager, tasks: TaskSupervisor, prefix: str, *,
                 add_member: Callable[..., None],
                 prepare_rebalance: Callable[[GroupMetadata, str], None],
                 schedule_heartbeat: Callable[[GroupMetadata, MemberMetadata], None]):
        self.manager = manager
        self.tasks = tasks
        self._prefix = prefix
        self._add_member = add_member
        self._prepare_rebalance = prepare_rebalance
        self._schedule_heartbeat = schedule_heartbeat

    def join_new_static_member(self, group: GroupMetadata, new_member,
                                supports_skip_assignment: bool) -> str:
        """A static member joins with an empty member id (Kafka's
        doStaticNewMemberJoinGroup): it gets a member id at once — never
        MEMBER_ID_REQUIRED, its instance id names it — and takes over the member of its
        instance if the group has one.  ``new_member`` is ``add_member``'s arguments
        after the member id; returns the new member id."""
        (group_instance_id, _, _, rebalance_timeout_ms, session_timeout_ms, _, protocols,
         future) = new_member
        member_id = f"{group_instance_id}-{uuid.uuid4()}"
        old_member_id = group.static_member_id(group_instance_id)
        if old_member_id is None:
            self._add_member(group, member_id, *new_member)
        else:
            self._replace_static_member(group, group_instance_id, old_member_id, member_id,
                                        protocols, rebalance_timeout_ms, session_timeout_ms,
                                        future, supports_skip_assignment)
        return member_id

    def _replace_static_member(self, group: GroupMetadata, group_instance_id: str,
                               old_member_id: str, new_member_id: str, protocols,
                               rebalance_timeout_ms: int, session_timeout_ms: int, future,
                               supports_skip_assignment: bool) -> None:
        """A known static member joined with an empty member id (it restarted): Kafka's
        updateStaticMemberAndRebalance.  The old incarnation's waiting requests get
        FENCED_INSTANCE_ID and the member goes on under ``new_member_id``; then by state:

          Stable, the chosen protocol stays  no rebalance: the group is stored with the new
                                             member id, then the join is answered with the
                                             current generation (``_store_static_member``)
          Stable, another protocol wins      rebalance
          CompletingRebalance                rebalance (the leader may be assigning to the
                                             old member id)
          PreparingRebalance                 it counts as rejoined; the join phase answers

        ``future`` (its JoinGroup) is answered by one of those."""
        member = group.members[old_member_id]
        invoke_join(member, JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_member_id))
        invoke_sync(member, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        current_leader = group.leader_id
        group.replace_static_member(group_instance_id, old_member_id, new_member_id)
        log.info("%s static member %s of group %s rejoined as %s (was %s) in state %s",
                 self._prefix, group_instance_id, group.group_id, new_member_id,
                 old_member_id, group.state.value)
        previous = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        member.protocols = [(name, bytes(metadata)) for name, metadata in protocols]
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.awaiting_join = future
        self._schedule_heartbeat(group, member)
        reason = f"static member {group_instance_id} rejoined as {new_member_id}"
        if group.is_state(GroupState.STABLE):
            if group.select_protocol() == group.protocol_name:
                self.tasks.spawn(f"store-static-member {group.group_id}",
                                 self._store_static_member(
                                     group, member, group_instance_id, old_member_id,
                                     previous, current_leader, future,
                                     supports_skip_assignment))
            else:
                self._prepare_rebalance(group, f"{reason} with another protocol")
        elif group.is_state(GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, reason)

    async def _store_static_member(self, group: GroupMetadata, member: MemberMetadata,
                                   group_instance_id: str, old_member_id: str, previous,
                                   current_leader: str | None, future,
                                   supports_skip_assignment: bool) -> None:
        """Write the Stable group with the static member's new id, then answer its join
        with the current generation.  Before JoinGroup v9 even a leader is told the old
        leader id, so it syncs as a follower and keeps the stored assignment; from v9 it
        gets the members and ``skip_assignment`` (KIP-814).  A failed write undoes the
        replacement, as Kafka does: the log still names the old member id."""
        new_member_id = member.member_id
        error = await self.manager.store_group(
            group, {m.member_id: m.assignment for m in group.members.values()})
        if not self.manager.is_current(group) or member.awaiting_join is not future:
            return  # unloaded, removed, fenced again or answered by a rebalance meanwhile
        if error != ErrorCode.NONE:
            log.warning("%s storing static member %s of group %s failed (%s): it stays %s",
                        self._prefix, group_instance_id, group.group_id, error.name,
                        old_member_id)
            group.replace_static_member(group_instance_id, new_member_id, old_member_id)
            member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms = previous
            invoke_join(member, JoinResult(
                error, "", group.generation_id, group.protocol_type, group.protocol_name,
                current_leader or ""))
            self._schedule_heartbeat(group, member)
            return
        if not group.is_state(GroupState.STABLE):
            return  # a rebalance started meanwhile: its join phase answers
        is_leader = group.is_leader(new_member_id)
        if supports_skip_assignment:
            result = JoinResult(ErrorCode.NONE, new_member_id, group.generation_id,
                                group.protocol_type, group.protocol_name, group.leader_id or "",
                                group.current_member_metadata() if is_leader else [],
                                skip_assignment=is_leader)
        else:
            result = JoinResult(ErrorCode.NONE, new_member_id, group.generation_id,
                                group.protocol_type, group.protocol_name, current_leader or "")
        invoke_join(member, result)
        self._schedule_heartbeat(group, member)

    def validate_member(self, group: GroupMetadata, member_id: str,
                         group_instance_id: str | None, operation: str) -> ErrorCode:
        """Kafka's validateCurrentMember: with an instance id, it must map to ``member_id``
        (another member id is an older incarnation: FENCED_INSTANCE_ID); without, the
        member id must be in the group."""
        if group_instance_id is None:
            return ErrorCode.NONE if group.has(member_id) else ErrorCode.UNKNOWN_MEMBER_ID
        current = group.static_member_id(group_instance_id)
        if current is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if current != member_id:
            log.info("%s %s of member %s of group %s is fenced: instance %s is member %s now",
                     self._prefix, operation, member_id, group.group_id, group_instance_id,
                     current)
            return ErrorCode.FENCED_INSTANCE_ID
        return ErrorCode.NONE

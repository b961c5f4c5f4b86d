"""The group coordinator: Kafka's classic group protocol on one event loop.

Membership (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) follows Kafka's
``GroupCoordinator.scala`` case by case.  The other group APIs are served by
collaborators this coordinator builds and hands what they use: offsets (``offsets.py``),
the admin APIs (``admin.py``), KIP-848 consumer groups (``consumer_coordinator.py``),
static members (``static_members.py``); FindCoordinator by the coordinator core's lookup
(``broker/coordinator/topic.py``).  The handlers call all of them on this object.

Waiting requests are futures held by the member (``awaiting_join``/``awaiting_sync``);
the handler awaits its future and a rebalance step resolves it.  A future cancelled by a
lost connection still counts as "joined" (Kafka keeps the callback too); resolving a done
future is a no-op.  Timers are ``loop.call_later`` handles kept on the group or member and
cancelled when superseded; every timer callback first checks that its group is still the
cached one, so a late timer from an unloaded group does nothing.

Timers and what they complete:
  * join timer (a rebalance's join phase): the initial delay
    ``group.initial.rebalance.delay.ms`` for a group that was Empty, extended while new
    members keep arriving, up to the rebalance timeout (Kafka's InitialDelayedJoin); else
    the rebalance timeout, completed early once every member rejoined (DelayedJoin), and
    armed again when no member rejoined but absent static members are left;
  * sync timer: members that do not send SyncGroup within the rebalance timeout after
    the join phase are removed and the group rebalances;
  * heartbeat timer per member: the session timeout; a member awaiting a join or sync
    answer is not expired (checked again one session later); a new member waiting in
    its first join has NEW_MEMBER_JOIN_TIMEOUT_MS;
  * pending-member timer: an id handed out with MEMBER_ID_REQUIRED expires after the
    session timeout if its second JoinGroup never comes.

KIP-848 consumer groups (ConsumerGroupHeartbeat) are served by
consumer_coordinator.py; a classic JoinGroup turns an empty one
classic and is refused INCONSISTENT_GROUP_PROTOCOL by one with members.

Static membership (KIP-345, ``group.instance.id``), as Kafka's coordinator: a static
member joining with an empty member id whose instance id the group knows takes over
that member under a new member id (``StaticMembers``) — no rebalance while the
group is Stable and the chosen protocol stays, the same assignment on SyncGroup — and
every request naming the instance id with an older member id gets FENCED_INSTANCE_ID
(``validate_member``); see static_members.py.  A static member that does not rejoin a
rebalance stays in the next generation; LeaveGroup, its session timeout or a missed
SyncGroup deadline removes it.  Event-loop only.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from protocol.errors import ErrorCode

from ..coordinator import CoordinatorLookup, CreateTopic
from ..tasks import TaskSupervisor
from .admin import GroupAdmin
from .consumer_coordinator import ConsumerGroups
from .manager import GroupMetadataManager
from .offsets import GroupOffsets
from .results import JoinResult, SyncResult
from .share_coordinator import ShareGroups
from .state import GroupMetadata, GroupState, MemberMetadata
from .static_members import StaticMembers
from .waiters import (
    call_later,
    cancel_heartbeat,
    cancel_join_timer,
    cancel_sync_timer,
    invoke_join,
    invoke_sync,
)

if TYPE_CHECKING:
    from ..coordinator.context import CoordinatorContext

log = logging.getLogger(__name__)

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


class GroupCoordinator:
    """Coordinates the groups whose offsets partitions this broker leads.

    ``context``: what it uses of the broker (config, replica manager, image).
    ``create_topic`` (wired by the broker) creates ``__consumer_offsets`` on first use;
    without it the topic must exist already."""

    def __init__(self, context: CoordinatorContext, clock_ms: Callable[[], int] = _wall_clock_ms,
                 create_topic: CreateTopic | None = None):
        config = context.config
        self.node_id = config.node_id
        self.clock_ms = clock_ms
        self.min_session_timeout_ms = config["group.min.session.timeout.ms"]
        self.max_session_timeout_ms = config["group.max.session.timeout.ms"]
        self.initial_rebalance_delay_ms = config["group.initial.rebalance.delay.ms"]
        self._prefix = f"[GroupCoordinator broker={self.node_id}]"
        self.tasks = TaskSupervisor(self._prefix)

        def image():
            return context.image
        self.manager = GroupMetadataManager(config, context.replica_manager, image,
                                            self._on_group_loaded, self._on_group_unloaded,
                                            clock_ms)
        self.consumer = ConsumerGroups(config, self.manager, self.tasks, image, self._prefix)
        self.share = ShareGroups(config, self.manager, self.tasks, image, self._prefix)
        self.static = StaticMembers(self.manager, self.tasks, self._prefix,
                                    add_member=self._add_member_and_rebalance,
                                    prepare_rebalance=self._prepare_rebalance,
                                    schedule_heartbeat=self._schedule_heartbeat_expiry)
        self.offsets = GroupOffsets(config, self.manager, self.tasks, image,
                                    validate_member=self.static.validate_member,
                                    schedule_heartbeat=self._schedule_heartbeat_expiry)
        self.admin = GroupAdmin(self.manager, self._prefix)
        self.lookup = CoordinatorLookup(self.manager.topic, image, create_topic, self.tasks,
                                        self._prefix)
        # The group APIs the handlers call (broker/api/groups.py), served by collaborators.
        self.find_coordinator = self.lookup.find_coordinator
        self.commit_offsets = self.offsets.commit_offsets
        self.commit_txn_offsets = self.offsets.commit_txn_offsets
        self.complete_txn_offsets = self.offsets.complete_txn_offsets
        self.fetch_offsets = self.offsets.fetch_offsets
        self.list_groups = self.admin.list_groups
        self.describe_group = self.admin.describe_group
        self.delete_groups = self.admin.delete_groups
        self.consumer_group_heartbeat = self.consumer.heartbeat
        self.describe_consumer_group = self.consumer.describe
        self.share_group_heartbeat = self.share.heartbeat
        self.describe_share_group = self.share.describe

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """The offset-expiry loop: every ``offsets.retention.check.interval.ms`` it removes
        expired offsets, then Empty groups left without offsets, writing tombstones
        (``manager.expire_once``); a failed pass is logged and the next tick runs; it
        exits at ``shutdown``."""
        self.tasks.periodic("offset-expiry", self.manager.retention_check_interval_ms / 1000.0,
                            self.manager.expire_once)

    async def shutdown(self) -> None:
        await self.tasks.shutdown()
        self.manager.runtime.shutdown()

    # -- JoinGroup -------------------------------------------------------------------------------

    async def join_group(self, group_id: str, member_id: str, group_instance_id: str | None,
                         require_known_member_id: bool, client_id: str, client_host: str,
                         rebalance_timeout_ms: int, session_timeout_ms: int,
                         protocol_type: str, protocols: list[tuple[str, bytes]],
                         supports_skip_assignment: bool = False) -> JoinResult:
        error = self.manager.validate_group(group_id)
        if error != ErrorCode.NONE:
            return JoinResult(error, member_id)
        if not self.min_session_timeout_ms <= session_timeout_ms <= self.max_session_timeout_ms:
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id)
        group = self.manager.get_group(group_id)
        unknown = member_id == ""
        if group is None:
            if not unknown:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
            group = self.manager.add_group(GroupMetadata(
                group_id, self.manager.partition_for(group_id),
                state_timestamp_ms=self.clock_ms()))
        if group.is_state(GroupState.DEAD):
            return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id)
        if group.share is not None:  # KIP-932: a share group is never a classic one
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        if group.consumer is not None:
            if group.consumer.members:  # a consumer-protocol group with members
                return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
            self.consumer.convert_to_classic(group)
        if not group.supports_protocols(protocol_type, [name for name, _ in protocols]):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        future = asyncio.get_running_loop().create_future()
        new_member = (group_instance_id, client_id, client_host, rebalance_timeout_ms,
                      session_timeout_ms, protocol_type, protocols, future)
        if unknown and group_instance_id is not None:
            member_id = self.static.join_new_static_member(group, new_member,
                                                           supports_skip_assignment)
        elif unknown:
            member_id = f"{client_id}-{uuid.uuid4()}"
            if require_known_member_id:  # KIP-394: hand out the id, expect a second join
                self._add_pending_member(group, member_id, session_timeout_ms)
                return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id)
            self._add_member_and_rebalance(group, member_id, *new_member)
        elif group.is_pending(member_id):
            self._remove_pending_member(group, member_id)
            if group_instance_id is not None:
                # Kafka hands pending ids to dynamic members only; such a client starts
                # over with an empty member id, which the static path above serves.
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
            self._add_member_and_rebalance(group, member_id, *new_member)
        elif (error := self.static.validate_member(group, member_id, group_instance_id,
                                             "join-group")) != ErrorCode.NONE:
            return JoinResult(error, member_id)  # unknown, or an older static incarnation
        else:
            answer = self._join_known_member(group, group.members[member_id], protocols,
                                             rebalance_timeout_ms, session_timeout_ms, future)
            if answer is not None:
                return answer
        if group.is_state(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)
        return await future

    def _join_known_member(self, group: GroupMetadata, member: MemberMetadata, protocols,
                           rebalance_timeout_ms: int, session_timeout_ms: int,
                           future) -> JoinResult | None:
        """A member of the group joins again; an immediate answer, or None to wait."""
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                              session_timeout_ms, future)
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):  # its join answer got lost: send it again
                return self._current_generation(group, member,
                                                with_members=group.is_leader(member.member_id))
            self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                              session_timeout_ms, future)
        elif state is GroupState.STABLE:
            if group.is_leader(member.member_id) or not member.matches(protocols):
                # The leader rejoining, or changed metadata (e.g. a new subscription).
                self._update_member_and_rebalance(group, member, protocols,
                                                  rebalance_timeout_ms, session_timeout_ms,
                                                  future)
            else:
                return self._current_generation(group, member, with_members=False)
        else:
            return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member.member_id)
        return None

    def _current_generation(self, group: GroupMetadata, member: MemberMetadata,
                            with_members: bool) -> JoinResult:
        return JoinResult(ErrorCode.NONE, member.member_id, group.generation_id,
                          group.protocol_type, group.protocol_name, group.leader_id or "",
                          group.current_member_metadata() if with_members else [])

    def _add_pending_member(self, group: GroupMetadata, member_id: str,
                            session_timeout_ms: int) -> None:
        group.pending_members[member_id] = call_later(
            session_timeout_ms, self._on_pending_member_expired, group, member_id)

    def _remove_pending_member(self, group: GroupMetadata, member_id: str) -> None:
        timer = group.pending_members.pop(member_id, None)
        if timer is not None:
            timer.cancel()

    def _on_pending_member_expired(self, group: GroupMetadata, member_id: str) -> None:
        if not self.manager.is_current(group) or member_id not in group.pending_members:
            return
        del group.pending_members[member_id]
        log.info("%s pending member %s of group %s never joined: dropped", self._prefix,
                 member_id, group.group_id)
        if group.is_state(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)

    def _add_member_and_rebalance(self, group: GroupMetadata, member_id: str,
                                  group_instance_id, client_id, client_host,
                                  rebalance_timeout_ms, session_timeout_ms, protocol_type,
                                  protocols, future) -> None:
        member = MemberMetadata(member_id, group_instance_id, client_id, client_host,
                                rebalance_timeout_ms, session_timeout_ms, protocol_type,
                                [(name, bytes(metadata)) for name, metadata in protocols],
                                awaiting_join=future, is_new=True)
        if group.is_state(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        self._schedule_heartbeat_expiry(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id}")

    def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata,
                                     protocols, rebalance_timeout_ms: int,
                                     session_timeout_ms: int, future) -> None:
        member.protocols = [(name, bytes(metadata)) for name, metadata in protocols]
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        # A join still waiting from before is superseded by this one.
        invoke_join(member, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        member.awaiting_join = future
        self._maybe_prepare_rebalance(group, f"updating metadata of member {member.member_id}")

    # -- rebalance steps -------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_state(GroupState.COMPLETING_REBALANCE):
            self._propagate_assignment(group, ErrorCode.REBALANCE_IN_PROGRESS, reset=True)
        cancel_sync_timer(group)
        initial = group.is_state(GroupState.EMPTY)
        group.transition_to(GroupState.PREPARING_REBALANCE, self.clock_ms())
        log.info("%s preparing to rebalance group %s (generation %d): %s", self._prefix,
                 group.group_id, group.generation_id, reason)
        cancel_join_timer(group)
        if initial:
            delay_ms = self.initial_rebalance_delay_ms
            remaining_ms = max(group.rebalance_timeout_ms() - delay_ms, 0)
            group.join_timer_initial = True
            group.join_timer = call_later(delay_ms, self._on_initial_join_timer, group,
                                                remaining_ms)
        else:
            group.join_timer = call_later(group.rebalance_timeout_ms(),
                                                self._on_join_expired, group)
            self._maybe_complete_join(group)

    def _on_initial_join_timer(self, group: GroupMetadata, remaining_ms: int) -> None:
        """Initial delay over: wait once more while new members keep coming (within the
        rebalance timeout), else complete the join phase."""
        if not self.manager.is_current(group) or group.join_timer is None:
            return
        group.join_timer = None
        if group.new_member_added and remaining_ms > 0:
            group.new_member_added = False
            delay_ms = min(self.initial_rebalance_delay_ms, remaining_ms)
            group.join_timer = call_later(delay_ms, self._on_initial_join_timer, group,
                                                max(remaining_ms - delay_ms, 0))
            return
        self._complete_join(group)

    def _on_join_expired(self, group: GroupMetadata) -> None:
        if self.manager.is_current(group) and group.join_timer is not None:
            group.join_timer = None
            self._complete_join(group)

    def _maybe_complete_join(self, group: GroupMetadata) -> None:
        """Trigger: a member joined, left or expired during PreparingRebalance."""
        if group.is_state(GroupState.PREPARING_REBALANCE) and not group.join_timer_initial \
                and group.all_members_joined():
            self._complete_join(group)

    def _complete_join(self, group: GroupMetadata) -> None:
        """End of the join phase: drop members that did not rejoin, start the next
        generation and answer every JoinGroup (the leader gets the member list)."""
        cancel_join_timer(group)
        if not group.is_state(GroupState.PREPARING_REBALANCE):
            return
        for member in group.not_yet_rejoined():
            if member.is_static:
                continue  # a static member stays until its session expires (KIP-345)
            log.info("%s member %s of group %s did not rejoin in time: removed", self._prefix,
                     member.member_id, group.group_id)
            cancel_heartbeat(member)
            group.remove(member.member_id)
        if not group.maybe_elect_new_joined_leader():
            # Only absent static members: wait once more; their sessions expire meanwhile.
            log.info("%s group %s: no member rejoined; waiting another rebalance timeout",
                     self._prefix, group.group_id)
            group.join_timer = call_later(group.rebalance_timeout_ms(),
                                                self._on_join_expired, group)
            return
        group.init_next_generation(self.clock_ms())
        if group.is_state(GroupState.EMPTY):
            log.info("%s group %s with generation %d is now empty", self._prefix,
                     group.group_id, group.generation_id)
            self.tasks.spawn(f"store-group {group.group_id}", self.manager.store_group(group, {}))
            return
        log.info("%s stabilized group %s generation %d (protocol %s) with %d members",
                 self._prefix, group.group_id, group.generation_id, group.protocol_name,
                 len(group.members))
        for member in group.members.values():
            invoke_join(member, self._current_generation(
                group, member, with_members=group.is_leader(member.member_id)))
            member.is_new = False
            self._schedule_heartbeat_expiry(group, member)
        group.pending_sync_members = set(group.members)
        group.sync_timer = call_later(group.rebalance_timeout_ms(), self._on_sync_expired,
                                            group, group.generation_id)

    def _on_sync_expired(self, group: GroupMetadata, generation_id: int) -> None:
        """Members that never sent SyncGroup for this generation leave; rebalance."""
        if not self.manager.is_current(group) or group.generation_id != generation_id:
            return
        group.sync_timer = None
        if not (group.is_state(GroupState.COMPLETING_REBALANCE)
                or group.is_state(GroupState.STABLE)) or not group.pending_sync_members:
            return
        missing = sorted(group.pending_sync_members)
        for member_id in missing:
            member = group.members.get(member_id)
            if member is not None:
                cancel_heartbeat(member)
                group.remove(member_id)
        self._prepare_rebalance(group, f"members {missing} did not sync in time")

    def _propagate_assignment(self, group: GroupMetadata, error: ErrorCode,
                              reset: bool = False) -> None:
        """Answer every waiting SyncGroup (with the member's assignment, or ``error``)."""
        for member in group.members.values():
            if reset:
                member.assignment = b""
            if member.awaiting_sync is not None:
                invoke_sync(member, SyncResult(error, group.protocol_type,
                                                     group.protocol_name, member.assignment))
                self._schedule_heartbeat_expiry(group, member)

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata,
                                        reason: str) -> None:
        invoke_join(member, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member.member_id))
        invoke_sync(member, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        cancel_heartbeat(member)
        group.remove(member.member_id)
        log.info("%s member %s left group %s: %s", self._prefix, member.member_id,
                 group.group_id, reason)
        if group.is_state(GroupState.STABLE) or group.is_state(GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, f"removing member {member.member_id}: {reason}")
        elif group.is_state(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)

    # -- SyncGroup ---------------------------------------------------------------------------------

    async def sync_group(self, group_id: str, generation_id: int, member_id: str,
                         protocol_type: str | None, protocol_name: str | None,
                         assignments: dict[str, bytes],
                         group_instance_id: str | None = None) -> SyncResult:
        error = self.manager.validate_group(group_id)
        if error != ErrorCode.NONE:
            return SyncResult(error)
        group = self.manager.get_group(group_id)
        if group is None:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_state(GroupState.DEAD):
            return SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        error = self.static.validate_member(group, member_id, group_instance_id, "sync-group")
        if error != ErrorCode.NONE:
            return SyncResult(error)
        if generation_id != group.generation_id:
            return SyncResult(ErrorCode.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol_name):
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.is_state(GroupState.EMPTY):
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_state(GroupState.PREPARING_REBALANCE):
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        member = group.members[member_id]
        group.pending_sync_members.discard(member_id)
        self._schedule_heartbeat_expiry(group, member)
        if group.is_state(GroupState.STABLE):  # its sync answer got lost: send it again
            return SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name,
                              member.assignment)
        future = asyncio.get_running_loop().create_future()
        invoke_sync(member, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member.awaiting_sync = future
        if group.is_leader(member_id):
            full = {m: bytes(assignments.get(m, b"")) for m in group.members}
            # A task, not inline: the leader's connection may drop while the write waits.
            self.tasks.spawn(f"store-assignment {group.group_id}",
                             self._store_assignment(group, group.generation_id, full))
        return await future

    async def _store_assignment(self, group: GroupMetadata, generation_id: int,
                                assignment: dict[str, bytes]) -> None:
        error = await self.manager.store_group(group, assignment)
        if not self.manager.is_current(group) or group.generation_id != generation_id \
                or not group.is_state(GroupState.COMPLETING_REBALANCE):
            return
        if error != ErrorCode.NONE:
            self._propagate_assignment(group, error, reset=True)
            self._maybe_prepare_rebalance(group, f"storing the assignment failed: {error.name}")
            return
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self._propagate_assignment(group, ErrorCode.NONE)
        group.transition_to(GroupState.STABLE, self.clock_ms())
        log.info("%s group %s generation %d is stable: assignment from leader %s stored",
                 self._prefix, group.group_id, generation_id, group.leader_id)

    # -- Heartbeat and LeaveGroup ---------------------------------------------------------------

    def heartbeat(self, group_id: str, member_id: str, generation_id: int,
                  group_instance_id: str | None = None) -> ErrorCode:
        error = self.manager.validate_group(group_id)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return ErrorCode.NONE  # Kafka: answer blindly while loading
        if error != ErrorCode.NONE:
            return error
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_state(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self.static.validate_member(group, member_id, group_instance_id, "heartbeat")
        if error != ErrorCode.NONE:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_state(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._schedule_heartbeat_expiry(group, group.members[member_id])
        if group.is_state(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None]]
                    ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        """(top-level error, per member (member id, instance id, error) as the request
        named it).  A member named by its instance id alone (an admin's "remove members")
        is whichever member id the instance has now; a member id with an instance id must
        be that instance's current one (FENCED_INSTANCE_ID otherwise), as in Kafka's
        handleLeaveGroup."""
        error = self.manager.validate_group(group_id)
        if error != ErrorCode.NONE:
            return error, []
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.NONE, [(m, i, ErrorCode.UNKNOWN_MEMBER_ID) for m, i in leaving]
        if group.is_state(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        results = []
        for member_id, instance_id in leaving:
            results.append((member_id, instance_id,
                            self._leave_one(group, member_id, instance_id)))
        return ErrorCode.NONE, results

    def _leave_one(self, group: GroupMetadata, member_id: str,
                   instance_id: str | None) -> ErrorCode:
        if not member_id:
            current = group.static_member_id(instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            self._remove_member_and_update_group(group, group.members[current],
                                                 f"static member {instance_id} removed")
            return ErrorCode.NONE
        if group.is_pending(member_id):
            self._remove_pending_member(group, member_id)
            if group.is_state(GroupState.PREPARING_REBALANCE):
                self._maybe_complete_join(group)
            return ErrorCode.NONE
        error = self.static.validate_member(group, member_id, instance_id, "leave-group")
        if error == ErrorCode.NONE:
            self._remove_member_and_update_group(group, group.members[member_id],
                                                 "the consumer left the group")
        return error

    # -- session timeouts ---------------------------------------------------------------------

    def _schedule_heartbeat_expiry(self, group: GroupMetadata, member: MemberMetadata,
                                   timeout_ms: int | None = None) -> None:
        cancel_heartbeat(member)
        member.heartbeat_timer = call_later(
            member.session_timeout_ms if timeout_ms is None else timeout_ms,
            self._on_heartbeat_expired, group, member)

    def _on_heartbeat_expired(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.heartbeat_timer = None
        if not self.manager.is_current(group) or group.members.get(member.member_id) is not member:
            return
        if (member.awaiting_join is not None and not member.is_new) \
                or member.awaiting_sync is not None:
            self._schedule_heartbeat_expiry(group, member)  # waiting on us, not dead
            return
        self._remove_member_and_update_group(group, member, "session timeout expired")

    # -- loading and unloading --------------------------------------------------------------------

    def _on_group_loaded(self, group: GroupMetadata) -> None:
        for member in group.members.values():
            self._schedule_heartbeat_expiry(group, member)
        if group.consumer is not None:
            self.consumer.group_loaded(group)
        if group.share is not None:
            self.share.group_loaded(group)

    def _on_group_unloaded(self, group: GroupMetadata) -> None:
        """This broker stopped coordinating ``group``: answer its waiters NOT_COORDINATOR
        (they look up the new coordinator) and stop its timers."""
        previous = group.state
        if previous is not GroupState.DEAD:
            group.transition_to(GroupState.DEAD, self.clock_ms())
        cancel_join_timer(group)
        cancel_sync_timer(group)
        for timer in group.pending_members.values():
            timer.cancel()
        group.pending_members.clear()
        for member in group.members.values():
            cancel_heartbeat(member)
            invoke_join(member, JoinResult(ErrorCode.NOT_COORDINATOR, member.member_id))
            invoke_sync(member, SyncResult(ErrorCode.NOT_COORDINATOR))
        if group.consumer is not None:
            self.consumer.group_unloaded(group)
        if group.share is not None:
            self.share.group_unloaded(group)

"""ListGroups, DescribeGroups and DeleteGroups on the groups this broker coordinates.

``GroupAdmin`` reads and changes the group cache through the ``GroupMetadataManager`` it
is given; the group coordinator builds it and the handlers reach it through the
coordinator.  FindCoordinator is the coordinator core's (``broker/coordinator/``).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from protocol.errors import ErrorCode

from .manager import GroupMetadataManager
from .state import GroupState

log = logging.getLogger(__name__)


@dataclass
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass
class GroupSummary:
    error: ErrorCode
    group_id: str
    state: str = GroupState.DEAD.value
    protocol_type: str = ""
    protocol_data: str = ""
    members: list[MemberSummary] = field(default_factory=list)


class GroupAdmin:
    """The admin APIs over the group cache of ``manager`` (event-loop only)."""

    def __init__(self, manager: GroupMetadataManager, prefix: str):
        self.manager = manager
        self._prefix = prefix

    def list_groups(self, states: list[str] | None = None, types: list[str] | None = None
                    ) -> tuple[ErrorCode, list[tuple[str, str, str, str]]]:
        """(error, [(group id, protocol type, state, group type)]) of the groups
        coordinated here; a group type is "classic", "consumer" (KIP-848) or "share"
        (KIP-932).
        COORDINATOR_LOAD_IN_PROGRESS (with what is loaded) while a partition loads."""
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.manager.runtime.is_loading() \
            else ErrorCode.NONE
        wanted_states = {s.lower() for s in states or []}
        wanted_types = {t.lower() for t in types or []}
        groups = [(g.group_id, g.protocol_type or "", g.state_name(), g.group_type)
                  for g in self.manager.loaded_groups()
                  if not g.is_state(GroupState.DEAD)
                  and (not wanted_states or g.state_name().lower() in wanted_states)
                  and (not wanted_types or g.group_type in wanted_types)]
        return error, sorted(groups)

    def describe_group(self, group_id: str) -> GroupSummary:
        """Kafka's summary: members with metadata and assignment only when Stable; an
        unknown group, a KIP-848 consumer group or a KIP-932 share group (not classic
        groups: Kafka has ConsumerGroupDescribe and ShareGroupDescribe for them), is
        reported Dead without error (DescribeGroups up to v5)."""
        error = self.manager.validate_group(group_id, allow_empty=True)
        if error != ErrorCode.NONE:
            return GroupSummary(error, group_id)
        group = self.manager.get_group(group_id)
        if group is None or group.consumer is not None or group.share is not None:
            return GroupSummary(ErrorCode.NONE, group_id)
        stable = group.is_state(GroupState.STABLE)
        members = [MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                 m.metadata_for(group.protocol_name) if stable else b"",
                                 m.assignment if stable else b"")
                   for m in group.members.values()]
        return GroupSummary(ErrorCode.NONE, group_id, group.state.value,
                            group.protocol_type or "",
                            (group.protocol_name or "") if stable else "", members)

    async def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        """Delete Empty groups with their offsets (tombstones); NON_EMPTY_GROUP otherwise."""
        results: dict[str, ErrorCode] = {}
        deletions = []
        for group_id in group_ids:
            error = self.manager.validate_group(group_id, allow_empty=True)
            group = self.manager.get_group(group_id) if error == ErrorCode.NONE else None
            if error != ErrorCode.NONE:
                results[group_id] = error
            elif group is None or group.is_state(GroupState.DEAD):
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif not group.is_empty():
                results[group_id] = NON_EMPTY_GROUP
            else:
                group.transition_to(GroupState.DEAD, self.manager.clock_ms())
                deletions.append((group_id, self.manager.delete_group(group)))
        for group_id, deletion in deletions:
            results[group_id] = await deletion
            log.info("%s deleted group %s (%s)", self._prefix, group_id,
                     results[group_id].name)
        return results


NON_EMPTY_GROUP = ErrorCode.NON_EMPTY_GROUP

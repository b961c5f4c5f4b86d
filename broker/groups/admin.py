"""FindCoordinator, ListGroups, DescribeGroups and DeleteGroups on the group coordinator.

FindCoordinator answers with the leader of the group's ``__consumer_offsets`` partition,
creating the topic on first use (``offsets.topic.num.partitions`` partitions, replication
factor min(``offsets.topic.replication.factor``, live brokers)), one creation at a time.
Key type 1 (a transactional id) is answered by the transaction coordinator
(``broker/transactions/``); any other key type is refused with INVALID_REQUEST.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from protocol.errors import ErrorCode

from .manager import offsets_topic_configs
from .placement import OFFSETS_TOPIC, partition_for
from .state import GroupState

log = logging.getLogger(__name__)

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
TOPIC_CREATION_TIMEOUT_S = 15.0


@dataclass
class CoordinatorAnswer:
    error: ErrorCode
    message: str | None = None
    node_id: int = -1
    host: str = ""
    port: int = -1


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


class AdminMixin:
    """Part of GroupCoordinator."""

    # -- FindCoordinator --------------------------------------------------------------------

    async def find_coordinator(self, key: str, key_type: int) -> CoordinatorAnswer:
        if key_type == KEY_TYPE_TRANSACTION:
            return await self.broker.transactions.find_coordinator(key)
        if key_type != KEY_TYPE_GROUP:
            return CoordinatorAnswer(ErrorCode.INVALID_REQUEST,
                                     f"key type {key_type}: not a group or transactional id")
        if OFFSETS_TOPIC not in self.broker.image.topics:
            problem = await self._ensure_offsets_topic()
            if problem is not None:
                return CoordinatorAnswer(ErrorCode.COORDINATOR_NOT_AVAILABLE, problem)
        image = self.broker.image
        topic = image.topics.get(OFFSETS_TOPIC)
        if topic is None:
            return CoordinatorAnswer(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                     f"{OFFSETS_TOPIC} is not in the metadata yet")
        index = partition_for(key, len(topic.partitions))
        leader = topic.partitions[index].leader
        info = image.brokers.get(leader)
        if info is None or info.fenced:
            return CoordinatorAnswer(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                     f"{OFFSETS_TOPIC}-{index} has no live leader")
        return CoordinatorAnswer(ErrorCode.NONE, None, leader, info.host, info.port)

    async def _ensure_offsets_topic(self) -> str | None:
        """Create the offsets topic unless a creation is under way; None when it exists."""
        if self._creating_topic is None or self._creating_topic.done():
            self._creating_topic = self.tasks.spawn("create-offsets-topic",
                                                    self._create_offsets_topic())
        try:
            return await asyncio.wait_for(asyncio.shield(self._creating_topic),
                                          TOPIC_CREATION_TIMEOUT_S)
        except asyncio.TimeoutError:
            return f"creating {OFFSETS_TOPIC} is taking long"

    async def _create_offsets_topic(self) -> str | None:
        from ..controller.state import ApplyError
        from ..controller.store import MetadataUnavailable
        from ..api.admin import create_topic_now

        live = self.broker.image.live_brokers()
        replication = min(self.broker.config["offsets.topic.replication.factor"], len(live))
        partitions = self.manager.configured_partitions
        if replication < 1:
            return "no live broker"
        try:
            await create_topic_now(self.broker, OFFSETS_TOPIC, partitions, replication,
                                   offsets_topic_configs())
        except ApplyError as exc:
            if exc.code != "TOPIC_ALREADY_EXISTS":
                return f"creating {OFFSETS_TOPIC}: {exc}"
            return None
        except MetadataUnavailable as exc:
            return f"creating {OFFSETS_TOPIC}: {exc}"
        log.info("%s created %s with %d partitions, replication factor %d", self._prefix,
                 OFFSETS_TOPIC, partitions, replication)
        return None

    # -- ListGroups / DescribeGroups / DeleteGroups ----------------------------------------------

    def list_groups(self, states: list[str] | None = None, types: list[str] | None = None
                    ) -> tuple[ErrorCode, list[tuple[str, str, str, str]]]:
        """(error, [(group id, protocol type, state, group type)]) of the groups
        coordinated here; a group type is "classic" or "consumer" (KIP-848).
        COORDINATOR_LOAD_IN_PROGRESS (with what is loaded) while a partition loads."""
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.manager.is_loading() \
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
        unknown group, or a KIP-848 consumer group (not a classic group: Kafka 4.0 has
        ConsumerGroupDescribe for it), is reported Dead without error (DescribeGroups
        up to v5)."""
        error = self._validate(group_id, allow_empty=True)
        if error != ErrorCode.NONE:
            return GroupSummary(error, group_id)
        group = self.manager.get_group(group_id)
        if group is None or group.consumer is not None:
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
            error = self._validate(group_id, allow_empty=True)
            group = self.manager.get_group(group_id) if error == ErrorCode.NONE else None
            if error != ErrorCode.NONE:
                results[group_id] = error
            elif group is None or group.is_state(GroupState.DEAD):
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif not group.is_empty():
                results[group_id] = NON_EMPTY_GROUP
            else:
                group.transition_to(GroupState.DEAD, self.clock_ms())
                deletions.append((group_id, self.manager.delete_group(group)))
        for group_id, deletion in deletions:
            results[group_id] = await deletion
            log.info("%s deleted group %s (%s)", self._prefix, group_id,
                     results[group_id].name)
        return results


NON_EMPTY_GROUP = ErrorCode.NON_EMPTY_GROUP

"""OffsetCommit and OffsetFetch on the group coordinator (Kafka's handleCommitOffsets and
handleFetchOffsets).

A commit is accepted from (a) a member of the group's current generation while the group
is Stable or PreparingRebalance, or (b) anyone with generation -1 while the group is
Empty or unknown (``assign()`` consumers and admin tools: a "simple" group).  It is
written to the group's ``__consumer_offsets`` partition with acks=all before it is
acknowledged or visible to OffsetFetch.  Partitions of unknown topics are refused with
UNKNOWN_TOPIC_OR_PARTITION, metadata longer than ``offset.metadata.max.bytes`` with
OFFSET_METADATA_TOO_LARGE, each on its own.
"""
from __future__ import annotations

from protocol.errors import ErrorCode

from .records import OffsetValue
from .state import CommittedOffset, GroupMetadata, GroupState

TopicPartition = tuple[str, int]


class OffsetsMixin:
    """Part of GroupCoordinator (uses its manager, clock and member timers)."""

    async def commit_offsets(self, group_id: str, member_id: str, generation_id: int,
                             offsets: dict[TopicPartition, tuple[int, int, str | None]],
                             retention_time_ms: int = -1,
                             group_instance_id: str | None = None
                             ) -> dict[TopicPartition, ErrorCode]:
        """``offsets``: (topic, partition) → (offset, leader epoch, metadata).
        ``group_instance_id``: the committing static member's (OffsetCommit v7+).
        Returns an error code per partition."""
        error = self._validate(group_id, allow_empty=True)
        if error != ErrorCode.NONE:
            return {tp: error for tp in offsets}
        results: dict[TopicPartition, ErrorCode] = {}
        valid: dict[TopicPartition, OffsetValue] = {}
        now_ms = self.clock_ms()
        expire_ms = now_ms + retention_time_ms if retention_time_ms > 0 else -1
        for tp, (offset, leader_epoch, metadata) in offsets.items():
            code = self._check_partition(tp, metadata)
            if code != ErrorCode.NONE:
                results[tp] = code
            else:
                valid[tp] = OffsetValue(offset, leader_epoch, metadata or "", now_ms, expire_ms)
        if not valid:
            return results
        group = self.manager.get_group(group_id)
        if group is None:
            if generation_id >= 0:
                return {**results, **{tp: ErrorCode.ILLEGAL_GENERATION for tp in valid}}
            group = self.manager.add_group(GroupMetadata(
                group_id, self.manager.partition_for(group_id), state_timestamp_ms=now_ms))
        error = self._check_commit(group, member_id, generation_id, group_instance_id)
        if error == ErrorCode.NONE:
            error = await self.manager.store_offsets(group, valid)
        results.update({tp: error for tp in valid})
        return results

    def _check_partition(self, tp: TopicPartition, metadata: str | None) -> ErrorCode:
        topic = self.broker.image.topics.get(tp[0])
        if topic is None or tp[1] not in topic.partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if metadata is not None and len(metadata.encode("utf-8")) > self.offset_metadata_max_bytes:
            return ErrorCode.OFFSET_METADATA_TOO_LARGE
        return ErrorCode.NONE

    def _check_commit(self, group: GroupMetadata, member_id: str, generation_id: int,
                      group_instance_id: str | None = None) -> ErrorCode:
        """Kafka's doCommitOffsets and validateOffsetCommit checks, in their order (a
        static member's older incarnation gets FENCED_INSTANCE_ID)."""
        if group.is_state(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_state(GroupState.EMPTY):
            return ErrorCode.NONE  # a simple consumer or an admin tool
        if group.is_state(GroupState.COMPLETING_REBALANCE):
            # A member of the new generation that has not synced yet: let it retry later.
            return ErrorCode.REBALANCE_IN_PROGRESS
        error = self._validate_member(group, member_id, group_instance_id, "offset-commit")
        if error != ErrorCode.NONE:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        self._schedule_heartbeat_expiry(group, group.members[member_id])
        return ErrorCode.NONE

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None
                      ) -> tuple[ErrorCode, dict[TopicPartition, CommittedOffset | None]]:
        """(group error, (topic, partition) → committed offset or None).  ``partitions``
        None means every partition the group has an offset for."""
        error = self._validate(group_id, allow_empty=True)
        if error != ErrorCode.NONE:
            return error, {}
        group = self.manager.get_group(group_id)
        offsets = {} if group is None or group.is_state(GroupState.DEAD) else group.offsets
        if partitions is None:
            return ErrorCode.NONE, dict(offsets)
        return ErrorCode.NONE, {tp: offsets.get(tp) for tp in partitions}

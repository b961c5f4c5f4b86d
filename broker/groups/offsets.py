"""OffsetCommit, TxnOffsetCommit and OffsetFetch on the group coordinator (Kafka's
handleCommitOffsets, handleTxnCommitOffsets and handleFetchOffsets).

A commit is accepted from (a) a member of the group's current generation while the group
is Stable or PreparingRebalance, or (b) anyone with generation -1 while the group is
Empty or unknown (``assign()`` consumers and admin tools: a "simple" group).  In a
KIP-848 consumer group the generation is the member epoch: a member commits at its
current epoch (STALE_MEMBER_EPOCH otherwise), anyone with -1 while it has no members.  It is
written to the group's ``__consumer_offsets`` partition with acks=all before it is
acknowledged or visible to OffsetFetch.  Partitions of unknown topics are refused with
UNKNOWN_TOPIC_OR_PARTITION, metadata longer than ``offset.metadata.max.bytes`` with
OFFSET_METADATA_TOO_LARGE, each on its own.

A transactional commit (TxnOffsetCommit, KIP-98) comes from a transactional producer on
behalf of a group; a group it names that does not exist is created Empty.  It is
checked against the group only when it says who commits (KIP-447: a generation >= 0, a
member id or an instance id; older producers send none): FENCED_INSTANCE_ID,
UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION as for OffsetCommit, in any group state.  Its
offsets stay pending until the producer's transaction ends (``complete_txn_offsets``,
called once the marker is acknowledged); meanwhile OffsetFetch shows the offsets
committed before, and with ``require_stable`` (KIP-447, v7+) answers
UNSTABLE_OFFSET_COMMIT for the partition, as it does while a plain commit of it is
being written, so a read_committed consumer never starts from an offset a transaction
is about to replace.

Both commits run to their end when the committer's connection is lost meanwhile
(``TaskSupervisor.outlive``): a commit written to the log is also applied in memory, and
one that failed is forgotten; only the answer is dropped.
"""
from __future__ import annotations

from collections.abc import Callable

from protocol.errors import ErrorCode

from ..tasks import TaskSupervisor
from .consumer_coordinator import check_consumer_commit
from .manager import GroupMetadataManager
from .records import OffsetValue
from .state import CommittedOffset, GroupMetadata, GroupState, MemberMetadata

INT64_MAX = (1 << 63) - 1

TopicPartition = tuple[str, int]


class GroupOffsets:
    """The offsets of the groups in ``manager``'s cache (event-loop only).

    Given by the group coordinator: ``validate_member`` (a member's id against its
    instance id, static_members.py) and ``schedule_heartbeat`` (a classic commit counts
    as the member's heartbeat)."""

    def __init__(self, config, manager: GroupMetadataManager, tasks: TaskSupervisor,
                 image: Callable[[], object],
                 validate_member: Callable[[GroupMetadata, str, str | None, str], ErrorCode],
                 schedule_heartbeat: Callable[[GroupMetadata, MemberMetadata], None]):
        self.manager = manager
        self.tasks = tasks
        self._image = image
        self._validate_member = validate_member
        self._schedule_heartbeat = schedule_heartbeat
        self.offset_metadata_max_bytes = config["offset.metadata.max.bytes"]

    async def commit_offsets(self, group_id: str, member_id: str, generation_id: int,
                             offsets: dict[TopicPartition, tuple[int, int, str | None]],
                             retention_time_ms: int = -1,
                             group_instance_id: str | None = None
                             ) -> dict[TopicPartition, ErrorCode]:
        """``offsets``: (topic, partition) → (offset, leader epoch, metadata).
        ``group_instance_id``: the committing static member's (OffsetCommit v7+).
        Returns an error code per partition.  Runs to its end even when the caller is
        cancelled."""
        return await self.tasks.outlive(f"commit-offsets {group_id}", self._commit_offsets(
            group_id, member_id, generation_id, offsets, retention_time_ms, group_instance_id))

    async def _commit_offsets(self, group_id: str, member_id: str, generation_id: int,
                              offsets: dict[TopicPartition, tuple[int, int, str | None]],
                              retention_time_ms: int, group_instance_id: str | None
                              ) -> dict[TopicPartition, ErrorCode]:
        error = self.manager.validate_group(group_id, allow_empty=True)
        if error != ErrorCode.NONE:
            return dict.fromkeys(offsets, error)
        results: dict[TopicPartition, ErrorCode] = {}
        valid: dict[TopicPartition, OffsetValue] = {}
        now_ms = self.manager.clock_ms()
        # An expiry past int64 (a retention of ~2^63 ms) is as good as none, and must
        # still fit the offset record.
        expire_ms = min(now_ms + retention_time_ms, INT64_MAX) if retention_time_ms > 0 else -1
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
                return {**results, **dict.fromkeys(valid, ErrorCode.ILLEGAL_GENERATION)}
            group = self.manager.add_group(GroupMetadata(
                group_id, self.manager.partition_for(group_id), state_timestamp_ms=now_ms))
        error = self._check_commit(group, member_id, generation_id, group_instance_id)
        if error == ErrorCode.NONE:
            error = await self.manager.store_offsets(group, valid)
        results.update(dict.fromkeys(valid, error))
        return results

    def _check_partition(self, tp: TopicPartition, metadata: str | None) -> ErrorCode:
        topic = self._image().topics.get(tp[0])
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
        if group.consumer is not None:  # KIP-848: the generation is the member epoch
            return check_consumer_commit(group, member_id, generation_id,
                                               ErrorCode.STALE_MEMBER_EPOCH)
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
        self._schedule_heartbeat(group, group.members[member_id])
        return ErrorCode.NONE

    async def commit_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                 member_id: str, generation_id: int,
                                 group_instance_id: str | None,
                                 offsets: dict[TopicPartition, tuple[int, int, str | None]]
                                 ) -> dict[TopicPartition, ErrorCode]:
        """``offsets`` as for ``commit_offsets``, written for ``producer_id``'s transaction;
        returns an error code per partition.  Runs to its end even when the caller is
        cancelled."""
        return await self.tasks.outlive(f"commit-txn-offsets {group_id}", self._commit_txn_offsets(
            group_id, producer_id, producer_epoch, member_id, generation_id, group_instance_id,
            offsets))

    async def _commit_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                  member_id: str, generation_id: int,
                                  group_instance_id: str | None,
                                  offsets: dict[TopicPartition, tuple[int, int, str | None]]
                                  ) -> dict[TopicPartition, ErrorCode]:
        error = self.manager.validate_group(group_id)
        if error != ErrorCode.NONE:
            return dict.fromkeys(offsets, error)
        results: dict[TopicPartition, ErrorCode] = {}
        valid: dict[TopicPartition, OffsetValue] = {}
        now_ms = self.manager.clock_ms()
        for tp, (offset, leader_epoch, metadata) in offsets.items():
            code = self._check_partition(tp, metadata)
            if code != ErrorCode.NONE:
                results[tp] = code
            else:
                valid[tp] = OffsetValue(offset, leader_epoch, metadata or "", now_ms)
        if not valid:
            return results
        group = self.manager.get_group(group_id) or self.manager.add_group(GroupMetadata(
            group_id, self.manager.partition_for(group_id), state_timestamp_ms=now_ms))
        error = self._check_txn_commit(group, member_id, generation_id, group_instance_id)
        if error == ErrorCode.NONE:
            error = await self.manager.store_txn_offsets(group, producer_id, producer_epoch,
                                                         valid)
        results.update(dict.fromkeys(valid, error))
        return results

    def _check_txn_commit(self, group: GroupMetadata, member_id: str, generation_id: int,
                          group_instance_id: str | None) -> ErrorCode:
        """Kafka's validateOffsetCommit for a transactional commit: the member is checked
        only when the request names one (KIP-447), and no heartbeat is implied."""
        if group.is_state(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and not member_id and group_instance_id is None:
            return ErrorCode.NONE
        if group.consumer is not None:
            return check_consumer_commit(group, member_id, generation_id,
                                               ErrorCode.ILLEGAL_GENERATION)
        error = self._validate_member(group, member_id, group_instance_id,
                                      "txn-offset-commit")
        if error != ErrorCode.NONE:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def complete_txn_offsets(self, producer_id: int, offsets_partitions: set[int],
                             commit: bool) -> None:
        """``producer_id``'s COMMIT or ABORT marker is appended and acknowledged on these
        ``__consumer_offsets`` partitions of this broker (the WriteTxnMarkers handler
        calls this): its pending offsets there become committed, or are dropped."""
        self.manager.complete_txn_offsets(producer_id, offsets_partitions, commit)

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None,
                      require_stable: bool = False) -> tuple[
                          ErrorCode, dict[TopicPartition, CommittedOffset | ErrorCode | None]]:
        """(group error, (topic, partition) → committed offset or None).  ``partitions``
        None means every partition the group has an offset for.  With
        ``require_stable`` a partition whose commit is not settled yet maps to
        UNSTABLE_OFFSET_COMMIT instead (the client asks again later)."""
        error = self.manager.validate_group(group_id, allow_empty=True)
        if error != ErrorCode.NONE:
            return error, {}
        group = self.manager.get_group(group_id)
        if group is None or group.is_state(GroupState.DEAD):
            return ErrorCode.NONE, dict.fromkeys(partitions or [])
        wanted = list(group.offsets) if partitions is None else partitions
        return ErrorCode.NONE, {
            tp: ErrorCode.UNSTABLE_OFFSET_COMMIT
            if require_stable and group.has_pending_offsets(tp) else group.offsets.get(tp)
            for tp in wanted}

"""ListOffsets (earliest, latest, max timestamp, by timestamp) and OffsetForLeaderEpoch.

Authorization (Kafka's): ListOffsets needs Describe on each topic; OffsetForLeaderEpoch
ClusterAction on the cluster (followers) or else Describe on each topic (consumers
checking for truncation, KIP-320).  Refused topics: TOPIC_AUTHORIZATION_FAILED.

A lookup by timestamp or max timestamp decodes one stored batch; when that batch does
not decode (``UndecodableBatch``) the partition answers CORRUPT_MESSAGE and the rest of
the request, the partition and its directory go on.  Kafka's own answer depends on which
exception its record iterator throws (UNKNOWN_SERVER_ERROR for a codec failure,
INVALID_RECORD for a malformed record, CORRUPT_MESSAGE for a failed CRC); we give the
one code that names the cause, stored data that is corrupt, for all of them.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from kafka.protocol.consumer import ListOffsetsResponse, OffsetForLeaderEpochResponse

from protocol.errors import ErrorCode
from storage.errors import StorageError, UndecodableBatch

from ..replication.partition import PartitionError
from ..replication.replica_manager import storage_error_code
from ..security.acls import AclOperation

if TYPE_CHECKING:
    from protocol.messages import Request

    from .context import ApiContext

ListTopic = ListOffsetsResponse.ListOffsetsTopicResponse
ListPartition = ListTopic.ListOffsetsPartitionResponse
EpochTopic = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
EpochPartition = EpochTopic.EpochEndOffset


async def handle_list_offsets(ctx: ApiContext, request: Request) -> ListOffsetsResponse:
    rm = ctx.replica_manager
    denied = ctx.authorizer.refused(request, AclOperation.DESCRIBE,
                                    (t.name for t in request.body.topics))
    # v2+ carries the isolation level: read_committed's "latest" is the last stable offset.
    isolation = request.body.isolation_level if request.api_version >= 2 else 0
    topics = []
    for topic in request.body.topics:
        answers = []
        for p in topic.partitions:
            partition = rm.get_partition(topic.name, p.partition_index)
            try:
                if topic.name in denied:
                    raise PartitionError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                if partition is None:
                    raise PartitionError(rm.missing_partition_error(topic.name, p.partition_index))
                partition.check_leader_epoch(p.current_leader_epoch)
                timestamp, offset = partition.offset_for_timestamp(p.timestamp, isolation)
                epoch = partition.epoch_for_offset(offset) if offset >= 0 else -1
                answers.append(ListPartition(partition_index=p.partition_index,
                                             error_code=ErrorCode.NONE, timestamp=timestamp,
                                             offset=offset, leader_epoch=epoch))
            except (PartitionError, StorageError) as exc:
                code = _error_code(exc)
                answers.append(ListPartition(partition_index=p.partition_index,
                                             error_code=code, timestamp=-1, offset=-1,
                                             leader_epoch=-1))
        topics.append(ListTopic(name=topic.name, partitions=answers))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


def _error_code(exc: PartitionError | StorageError) -> ErrorCode:
    if isinstance(exc, PartitionError):
        return exc.code
    if isinstance(exc, UndecodableBatch):
        return ErrorCode.CORRUPT_MESSAGE
    return storage_error_code(exc)


async def handle_offset_for_leader_epoch(
        ctx: ApiContext, request: Request) -> OffsetForLeaderEpochResponse:
    rm = ctx.replica_manager
    denied = set() if ctx.authorizer.allows_cluster(
        request, AclOperation.CLUSTER_ACTION, log_denial=False) else ctx.authorizer.refused(
        request, AclOperation.DESCRIBE, (t.topic for t in request.body.topics))
    topics = []
    for topic in request.body.topics:
        answers = []
        for p in topic.partitions:
            partition = rm.get_partition(topic.topic, p.partition)
            try:
                if topic.topic in denied:
                    raise PartitionError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                if partition is None:
                    raise PartitionError(rm.missing_partition_error(topic.topic, p.partition))
                partition.check_online()
                if not partition.is_leader:
                    raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                partition.check_leader_epoch(p.current_leader_epoch)
                epoch, end_offset = partition.end_offset_for_epoch(p.leader_epoch)
                answers.append(EpochPartition(error_code=ErrorCode.NONE, partition=p.partition,
                                              leader_epoch=epoch, end_offset=end_offset))
            except PartitionError as exc:
                answers.append(EpochPartition(error_code=exc.code, partition=p.partition,
                                              leader_epoch=-1, end_offset=-1))
        topics.append(EpochTopic(topic=topic.topic, partitions=answers))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)

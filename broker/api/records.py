"""DeleteRecords (v0-2): move partitions' log start offsets (broker/replication/
delete_records.py does the work and the waiting).

Kafka's checks, per partition: Delete on the topic (TOPIC_AUTHORIZATION_FAILED), an
internal topic (INVALID_TOPIC_EXCEPTION: only its coordinator deletes there), a topic
or partition this cluster does not have (UNKNOWN_TOPIC_OR_PARTITION), this broker not
its leader (NOT_LEADER_OR_FOLLOWER), then the leader's: POLICY_VIOLATION on a topic
without ``delete`` in cleanup.policy, OFFSET_OUT_OF_RANGE for an offset above the high
watermark (or below -1; -1 means the high watermark).  The answer carries each
partition's low watermark once every live replica has deleted, REQUEST_TIMED_OUT when
``timeout_ms`` ran out first (the leader's start has moved all the same).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from kafka.protocol.admin import DeleteRecordsResponse

from protocol.errors import ErrorCode

from ..replication.delete_records import DeleteRecordsStatus, delete_records
from ..security.acls import AclOperation, ResourceType
from ..topics import is_internal

if TYPE_CHECKING:
    from protocol.messages import Request

    from .context import ApiContext

TopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
PartitionResult = TopicResult.DeleteRecordsPartitionResult


async def handle_delete_records(ctx: ApiContext, request: Request) -> DeleteRecordsResponse:
    body = request.body
    image = ctx.image
    refused: dict[tuple[str, int], ErrorCode] = {}
    offsets: dict[tuple[str, int], int] = {}
    for topic in body.topics:
        allowed = ctx.authorizer.allows(request, AclOperation.DELETE, ResourceType.TOPIC,
                                        topic.name)
        info = image.topics.get(topic.name)
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            if not allowed:
                refused[key] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif info is None or p.partition_index not in info.partitions:
                refused[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif is_internal(topic.name):
                refused[key] = ErrorCode.INVALID_TOPIC_EXCEPTION
            else:
                offsets[key] = p.offset
    done = await delete_records(ctx.replica_manager, offsets, body.timeout_ms) if offsets else {}
    results = []
    for topic in body.topics:
        partitions = []
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            status = done.get(key) or DeleteRecordsStatus(error=refused[key])
            partitions.append(PartitionResult(
                partition_index=p.partition_index, error_code=status.error,
                low_watermark=status.low_watermark if status.error == ErrorCode.NONE else -1))
        results.append(TopicResult(name=topic.name, partitions=partitions))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=results)

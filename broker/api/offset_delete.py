"""OffsetDelete (API 47, KIP-496): delete a group's committed offsets of some partitions.

Kafka's KafkaApis rules in front of the coordinator (broker/groups/offset_delete.py has
the group's): Delete on the group, else the request's error GROUP_AUTHORIZATION_FAILED;
then Read on each topic, else its partitions TOPIC_AUTHORIZATION_FAILED; a topic that
does not exist UNKNOWN_TOPIC_OR_PARTITION.  The coordinator sees only the rest.  A group
error (not coordinated here, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP) is the request's error
with no partitions listed, as Kafka answers it.

The deletion runs to its end when the connection is lost meanwhile (the tombstones are
appended before the first ``await``; only the answer is dropped).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from kafka.protocol.consumer import OffsetDeleteResponse

from protocol.errors import ErrorCode

from ..groups.offset_delete import delete_offsets
from ..security.acls import AclOperation, ResourceType

if TYPE_CHECKING:
    from protocol.messages import Request

    from .context import ApiContext

Topic = OffsetDeleteResponse.OffsetDeleteResponseTopic
Partition = Topic.OffsetDeleteResponsePartition


async def handle_offset_delete(ctx: ApiContext, request: Request) -> OffsetDeleteResponse:
    body = request.body
    group_id = body.group_id
    if not ctx.authorizer.allows(request, AclOperation.DELETE, ResourceType.GROUP, group_id):
        return OffsetDeleteResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                    throttle_time_ms=0, topics=[])
    refused: dict[tuple[str, int], ErrorCode] = {}
    wanted: list[tuple[str, int]] = []
    topics = ctx.image.topics
    for topic in body.topics:
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if not ctx.authorizer.allows(request, AclOperation.READ, ResourceType.TOPIC,
                                         topic.name):
                refused[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif topic.name not in topics:
                refused[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                wanted.append(tp)
    error, results = await ctx.groups.tasks.outlive(
        f"offset-delete {group_id}", delete_offsets(ctx.groups.manager, group_id, wanted))
    if error != ErrorCode.NONE:
        return OffsetDeleteResponse(error_code=error, throttle_time_ms=0, topics=[])
    results.update(refused)
    by_topic: dict[str, list[Partition]] = {}
    for (name, index), code in results.items():
        by_topic.setdefault(name, []).append(Partition(partition_index=index, error_code=code))
    return OffsetDeleteResponse(error_code=ErrorCode.NONE, throttle_time_ms=0, topics=[
        Topic(name=name, partitions=parts) for name, parts in by_topic.items()])

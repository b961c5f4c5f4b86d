"""AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92): KIP-932's admin writes of
a share group's share-partition state, on the group coordinator.

Both need the group to exist as a share group (else GROUP_ID_NOT_FOUND) and to have no
members (else NON_EMPTY_GROUP): a member's share partitions are in use.  Authorization as
Kafka's KafkaApis: Alter needs Read on the group, Delete needs Delete on it (else
GROUP_AUTHORIZATION_FAILED for the whole request); both need Read on each topic (else
its TOPIC_AUTHORIZATION_FAILED).

The state is the share coordinator's (broker/share/), reached through the partition
side's persister (this broker's share coordinator, or another's over the network as
Kafka's Read/WriteShareGroupState): Alter writes each partition a new snapshot on
``__share_group_state`` that starts at the given offset with nothing in flight (newer
than the one it replaces: same leader epoch, next sequence), Delete writes tombstones for
every partition of each topic; both then drop the share partitions this broker leads, so
their next ShareFetch loads what was written.  A partition whose state cannot be written
answers the persister's error.
"""
from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

from protocol.errors import ErrorCode
from protocol.share_group_messages import (
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponse,
)

from ..security.acls import AclOperation, ResourceType
from ..share.records import ShareSnapshot, share_key

if TYPE_CHECKING:
    from protocol.messages import Request

    from .context import ApiContext

log = logging.getLogger(__name__)

NO_TOPIC_ID = uuid.UUID(int=0)
AlterTopic = AlterShareGroupOffsetsResponse.AlterShareGroupOffsetsResponseTopic
AlterPartition = AlterTopic.AlterShareGroupOffsetsResponsePartition
DeleteTopic = DeleteShareGroupOffsetsResponse.DeleteShareGroupOffsetsResponseTopic


def _group_refusal(ctx: ApiContext, request: Request, group_id: str,
                   operation: AclOperation) -> tuple[ErrorCode, str | None] | None:
    """The whole request's error, or None: authorized, an empty share group here."""
    if not ctx.authorizer.allows(request, operation, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, None
    described = ctx.groups.describe_share_group(group_id)
    if described.error != ErrorCode.NONE:
        return described.error, described.message
    if described.members:
        return ErrorCode.NON_EMPTY_GROUP, (f"The group {group_id} has active members; "
                                           f"its share-group offsets can not be changed.")
    return None


def _topic_refusal(ctx: ApiContext, request: Request, name: str) -> ErrorCode | None:
    if name not in ctx.image.topics:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if not ctx.authorizer.allows(request, AclOperation.READ, ResourceType.TOPIC, name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return None


# -- AlterShareGroupOffsets ---------------------------------------------------------------

async def handle_alter_share_group_offsets(
        ctx: ApiContext, request: Request) -> AlterShareGroupOffsetsResponse:
    body = request.body
    refusal = _group_refusal(ctx, request, body.group_id, AclOperation.READ)
    if refusal is not None:
        return AlterShareGroupOffsetsResponse(throttle_time_ms=0, error_code=refusal[0],
                                              error_message=refusal[1], responses=[])
    responses = []
    for wanted in body.topics:
        responses.append(await _alter_topic(ctx, request, body.group_id, wanted))
    return AlterShareGroupOffsetsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                          error_message=None, responses=responses)


async def _alter_topic(ctx: ApiContext, request: Request, group_id: str,
                       wanted: Any) -> Any:
    name = wanted.topic_name
    refusal = _topic_refusal(ctx, request, name)
    if refusal is not None:
        return AlterTopic(topic_name=name, topic_id=NO_TOPIC_ID, partitions=[
            AlterPartition(partition_index=p.partition_index, error_code=refusal,
                           error_message=refusal.name) for p in wanted.partitions])
    topic = ctx.image.topics[name]
    partitions = []
    for p in wanted.partitions:
        if p.partition_index not in topic.partitions:
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif p.start_offset < 0:
            error = ErrorCode.INVALID_REQUEST
        else:
            error = await _write_start(ctx, group_id, name, topic.topic_id, p.partition_index,
                                       p.start_offset)
        partitions.append(AlterPartition(
            partition_index=p.partition_index, error_code=error,
            error_message=None if error == ErrorCode.NONE else error.name))
    return AlterTopic(topic_name=name, topic_id=uuid.UUID(topic.topic_id),
                      partitions=partitions)


async def _write_start(ctx: ApiContext, group_id: str, topic: str, topic_id: str,
                       partition: int, start_offset: int) -> ErrorCode:
    """A snapshot starting at ``start_offset``, nothing in flight, superseding the last."""
    share = ctx.share
    persister = share.partitions.persister if share is not None else None
    if share is None or persister is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    key = share_key(group_id, topic_id, partition)
    error, current = await persister.read(key)
    if error != ErrorCode.NONE:
        return error
    if current is not None:
        epoch, seq = current.leader_epoch, current.seq + 1
    else:
        info = ctx.image.topics[topic].partitions[partition]
        epoch, seq = getattr(info, "leader_epoch", -1), 0
    error = await persister.write(key, ShareSnapshot(epoch, seq, start_offset, ()))
    if error == ErrorCode.NONE:
        share.partitions.delete_state(group_id, [topic])  # reloaded from the snapshot
        log.info("[Share group %s] %s-%d start offset set to %d", group_id, topic, partition,
                 start_offset)
    return error


# -- DeleteShareGroupOffsets --------------------------------------------------------------

async def handle_delete_share_group_offsets(
        ctx: ApiContext, request: Request) -> DeleteShareGroupOffsetsResponse:
    body = request.body
    refusal = _group_refusal(ctx, request, body.group_id, AclOperation.DELETE)
    if refusal is not None:
        return DeleteShareGroupOffsetsResponse(throttle_time_ms=0, error_code=refusal[0],
                                               error_message=refusal[1], responses=[])
    responses = []
    for wanted in body.topics:
        name = wanted.topic_name
        error = _topic_refusal(ctx, request, name)
        topic_id = NO_TOPIC_ID
        if error is None:
            topic = ctx.image.topics[name]
            topic_id = uuid.UUID(topic.topic_id)
            error = await _delete_topic_state(ctx, body.group_id, name, topic.topic_id,
                                              sorted(topic.partitions))
        responses.append(DeleteTopic(
            topic_name=name, topic_id=topic_id, error_code=error,
            error_message=None if error == ErrorCode.NONE else error.name))
    return DeleteShareGroupOffsetsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                           error_message=None, responses=responses)


async def _delete_topic_state(ctx: ApiContext, group_id: str, topic: str, topic_id: str,
                              partitions: list[int]) -> ErrorCode:
    """Tombstones for every partition's snapshot of ``topic``; the first error, if any."""
    share = ctx.share
    persister = share.partitions.persister if share is not None else None
    if share is None or persister is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    result = ErrorCode.NONE
    for partition in partitions:
        key = share_key(group_id, topic_id, partition)
        error, current = await persister.read(key)
        if error == ErrorCode.NONE and current is not None:
            error = await persister.write(key, None)
        if error != ErrorCode.NONE and result == ErrorCode.NONE:
            result = error
    share.partitions.delete_state(group_id, [topic])
    return result

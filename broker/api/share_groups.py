"""KIP-932's share-group APIs on the group coordinator: ShareGroupHeartbeat (76),
ShareGroupDescribe (77) and DescribeShareGroupOffsets (90), with their authorization gate.

Translation only: each handler turns the request into a call on ``ctx.groups`` (the
GroupCoordinator; the share side is broker/groups/share_coordinator.py) and its result
into the response.  Topic ids are UUIDs on the wire, the image's strings in the
coordinator.

Authorization, as Kafka's KafkaApis: ShareGroupHeartbeat needs Read on the group, else
GROUP_AUTHORIZATION_FAILED; ShareGroupDescribe needs Describe on each group (a refused
group answers GROUP_AUTHORIZATION_FAILED, the others are served) and, when asked,
reports the group's authorized operations (Read, Describe, Delete);
DescribeShareGroupOffsets needs Describe on the group (else the group's
GROUP_AUTHORIZATION_FAILED) and on each topic (else its partitions'
TOPIC_AUTHORIZATION_FAILED).

DescribeShareGroupOffsets answers each partition's share-partition start offset (SPSO)
from the share-group state (broker/share/): the snapshot on ``__share_group_state`` when
this broker's share coordinator serves its key, else the share coordinator's answer to
ReadShareGroupStateSummary over the inter-broker listener (as Kafka's group coordinator
asks), else the live share partition when this broker leads the partition; -1 when the
group has no state for it.  A partition whose coordinator cannot be reached (and that is
not led here) answers COORDINATOR_NOT_AVAILABLE.  With no topics named, every partition
with a start offset is listed, of the members' subscribed topics and of the topics the
group has state of here.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING, Any

from protocol.errors import ErrorCode
from protocol.share_group_messages import (
    DescribeShareGroupOffsetsResponse,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatResponse,
)

from ..security.acls import AclOperation, ResourceType
from ..share.records import share_key

if TYPE_CHECKING:
    from protocol.messages import Request

    from .context import ApiContext

log = logging.getLogger(__name__)

GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
NO_TOPIC_ID = uuid.UUID(int=0)
GROUP_OPERATIONS = (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE)
OPERATIONS_OMITTED = -(1 << 31)

Assignment = ShareGroupHeartbeatResponse.Assignment
DescribedGroup = ShareGroupDescribeResponse.DescribedGroup
Member = DescribedGroup.Member
MemberAssignment = Member.Assignment
OffsetsGroup = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseGroup
OffsetsTopic = OffsetsGroup.DescribeShareGroupOffsetsResponseTopic
OffsetsPartition = OffsetsTopic.DescribeShareGroupOffsetsResponsePartition


def _may(ctx: ApiContext, request: Request, operation: AclOperation, group_id: str,
         log_denial: bool = True) -> bool:
    return ctx.authorizer.allows(request, operation, ResourceType.GROUP, group_id or "",
                                 log_denial)


async def handle_share_group_heartbeat(
        ctx: ApiContext, request: Request) -> ShareGroupHeartbeatResponse:
    body = request.body
    log.debug("ShareGroupHeartbeat v%d from %s: group %s member %s epoch %d",
              request.api_version, request.client_id, body.group_id, body.member_id,
              body.member_epoch)
    if not _may(ctx, request, AclOperation.READ, body.group_id):
        return ShareGroupHeartbeatResponse(
            throttle_time_ms=0, error_code=GROUP_DENIED, error_message=GROUP_DENIED.name,
            member_id=None, member_epoch=-1, heartbeat_interval_ms=0, assignment=None)
    answer = await ctx.groups.share_group_heartbeat(
        body.group_id, body.member_id, body.member_epoch, body.rack_id,
        body.subscribed_topic_names, client_id=request.client_id or "",
        client_host=request.client_host)
    assignment = None
    if answer.assignment is not None:
        assignment = Assignment(topic_partitions=[
            Assignment.TopicPartitions(topic_id=uuid.UUID(topic_id), partitions=sorted(parts))
            for topic_id, parts in sorted(answer.assignment.items())])
    return ShareGroupHeartbeatResponse(
        throttle_time_ms=0, error_code=answer.error, error_message=answer.message,
        member_id=answer.member_id, member_epoch=answer.member_epoch,
        heartbeat_interval_ms=answer.heartbeat_interval_ms, assignment=assignment)


async def handle_share_group_describe(
        ctx: ApiContext, request: Request) -> ShareGroupDescribeResponse:
    body = request.body
    groups = []
    for group_id in body.group_ids:
        if not _may(ctx, request, AclOperation.DESCRIBE, group_id):
            groups.append(_error_group(group_id, GROUP_DENIED, GROUP_DENIED.name))
            continue
        described = ctx.groups.describe_share_group(group_id)
        if described.error != ErrorCode.NONE:
            groups.append(_error_group(group_id, described.error, described.message))
            continue
        operations = OPERATIONS_OMITTED
        if body.include_authorized_operations:
            operations = sum(1 << int(op) for op in GROUP_OPERATIONS
                             if _may(ctx, request, op, group_id, log_denial=False))
        groups.append(DescribedGroup(
            error_code=ErrorCode.NONE, error_message=None, group_id=group_id,
            group_state=described.state, group_epoch=described.group_epoch,
            assignment_epoch=described.assignment_epoch, assignor_name=described.assignor,
            members=[Member(
                member_id=member.member_id, rack_id=member.rack_id,
                member_epoch=member.member_epoch, client_id=member.client_id,
                client_host=member.client_host,
                subscribed_topic_names=list(member.subscribed_topic_names),
                assignment=MemberAssignment(topic_partitions=[
                    MemberAssignment.TopicPartitions(
                        topic_id=uuid.UUID(topic_id), topic_name=name, partitions=parts)
                    for topic_id, name, parts in named]))
                for member, named in described.members],
            authorized_operations=operations))
    return ShareGroupDescribeResponse(throttle_time_ms=0, groups=groups)


def _error_group(group_id: str, error: ErrorCode, message: str | None) -> DescribedGroup:
    return DescribedGroup(error_code=error, error_message=message, group_id=group_id,
                          group_state="", group_epoch=-1, assignment_epoch=-1,
                          assignor_name="", members=[],
                          authorized_operations=OPERATIONS_OMITTED)


# -- DescribeShareGroupOffsets ---------------------------------------------------------------

async def handle_describe_share_group_offsets(
        ctx: ApiContext, request: Request) -> DescribeShareGroupOffsetsResponse:
    return DescribeShareGroupOffsetsResponse(throttle_time_ms=0, groups=[
        await _describe_offsets(ctx, request, wanted) for wanted in request.body.groups])


async def _describe_offsets(ctx: ApiContext, request: Request, wanted: Any) -> OffsetsGroup:
    group_id = wanted.group_id
    if not _may(ctx, request, AclOperation.DESCRIBE, group_id):
        return OffsetsGroup(group_id=group_id, topics=[], error_code=GROUP_DENIED,
                            error_message=GROUP_DENIED.name)
    described = ctx.groups.describe_share_group(group_id)
    if described.error != ErrorCode.NONE:
        return OffsetsGroup(group_id=group_id, topics=[], error_code=described.error,
                            error_message=described.message)
    topics = ctx.image.topics
    if wanted.topics is None:
        names = {t for member, _ in described.members for t in member.subscribed_topic_names}
        names |= _topics_with_state(ctx, group_id)
        requested = {name: sorted(topics[name].partitions)
                     for name in sorted(names) if name in topics}
    else:
        requested = {t.topic_name: list(t.partitions) for t in wanted.topics}
    answered = []
    for name, partitions in requested.items():
        topic = topics.get(name)
        if topic is None or not ctx.authorizer.allows(request, AclOperation.DESCRIBE,
                                                      ResourceType.TOPIC, name):
            code = TOPIC_DENIED if topic is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            answered.append(OffsetsTopic(topic_name=name, topic_id=NO_TOPIC_ID, partitions=[
                OffsetsPartition(partition_index=p, start_offset=-1, leader_epoch=-1,
                                 error_code=code, error_message=code.name)
                for p in partitions]))
            continue
        rows = []
        starts = await asyncio.gather(*(_start_offset(ctx, group_id, name, topic.topic_id, p)
                                        for p in partitions))
        for p, (start, epoch, code) in zip(partitions, starts):
            if wanted.topics is None and start < 0 and code == ErrorCode.NONE:
                continue  # listing everything: only partitions with state
            rows.append(OffsetsPartition(partition_index=p, start_offset=start,
                                         leader_epoch=epoch, error_code=code,
                                         error_message=None if code == ErrorCode.NONE
                                         else code.name))
        if rows or wanted.topics is not None:
            answered.append(OffsetsTopic(topic_name=name, topic_id=uuid.UUID(topic.topic_id),
                                         partitions=rows))
    return OffsetsGroup(group_id=group_id, topics=answered, error_code=ErrorCode.NONE,
                        error_message=None)


def _topics_with_state(ctx: ApiContext, group_id: str) -> set[str]:
    """Names of the topics ``group_id`` has share-partition state of on this broker (its
    share coordinator's snapshots, the share partitions it leads)."""
    share = ctx.share
    if share is None:
        return set()
    names = {topic for topic, _ in share.partitions.start_offsets(group_id)}
    if share.coordinator is not None:
        prefix = f"{group_id}:"
        for key in list(share.coordinator.snapshots):
            if key.startswith(prefix):
                topic = ctx.image.topic_by_id(key[len(prefix):].rsplit(":", 1)[0])
                if topic is not None:
                    names.add(topic.name)
    return names


async def _start_offset(ctx: ApiContext, group_id: str, topic: str, topic_id: str,
                        partition: int) -> tuple[int, int, ErrorCode]:
    """(start offset, leader epoch, error) of one share partition; see the module doc."""
    share = ctx.share
    if share is None:
        return -1, -1, ErrorCode.NONE
    reachable = share.coordinator is None
    if share.coordinator is not None:
        key = share_key(group_id, topic_id, partition)
        error, snapshot = share.coordinator.read(key)
        if error == ErrorCode.NONE and snapshot is not None:
            return snapshot.start_offset, snapshot.leader_epoch, ErrorCode.NONE
        persister = share.partitions.persister
        if error == ErrorCode.NOT_COORDINATOR and persister is not None:
            error, summary = await persister.read_summary(key)  # another broker's
            if error == ErrorCode.NONE and summary is not None:
                return summary.start_offset, summary.leader_epoch, ErrorCode.NONE
        reachable = error == ErrorCode.NONE or not share.coordinator.topic_exists()
    live = share.partitions.get((group_id, topic, partition))
    if live is not None:
        return live.start_offset, -1, ErrorCode.NONE
    return -1, -1, ErrorCode.NONE if reachable else ErrorCode.COORDINATOR_NOT_AVAILABLE


# -- DeleteGroups of a share group --------------------------------------------------------

async def delete_share_state(ctx: ApiContext, group_id: str) -> None:
    """A share group was deleted: forget its share partitions led here and delete its
    snapshots on ``__share_group_state`` served here (tombstones), so a group created
    again under the same id starts afresh (Kafka's share-group deletion).  A failed
    tombstone is logged; the group itself is gone either way."""
    share = ctx.share
    if share is None:
        return
    share.partitions.delete_state(group_id)
    if share.coordinator is None:
        return
    prefix = f"{group_id}:"
    for key in [k for k in share.coordinator.snapshots if k.startswith(prefix)]:
        error = await share.coordinator.write(key, None)
        if error != ErrorCode.NONE:
            log.warning("[Share group %s] deleting the state of %s failed: %s", group_id,
                        key, error.name)

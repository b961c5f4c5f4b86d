"""KIP-932's share-group APIs on the group coordinator: ShareGroupHeartbeat (76) and
ShareGroupDescribe (77), with their authorization gate.

Translation only: each handler turns the request into a call on ``ctx.groups`` (the
GroupCoordinator; the share side is broker/groups/share_coordinator.py) and its result
into the response.  Topic ids are UUIDs on the wire, the image's strings in the
coordinator.

Authorization, as Kafka's KafkaApis: ShareGroupHeartbeat needs Read on the group, else
GROUP_AUTHORIZATION_FAILED; ShareGroupDescribe needs Describe on each group (a refused
group answers GROUP_AUTHORIZATION_FAILED, the others are served) and, when asked,
reports the group's authorized operations (Read, Describe, Delete).
"""
from __future__ import annotations

import logging
import uuid

from protocol.errors import ErrorCode
from protocol.share_group_messages import (
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatResponse,
)

from ..security.acls import AclOperation, ResourceType

log = logging.getLogger(__name__)

GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
GROUP_OPERATIONS = (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE)
OPERATIONS_OMITTED = -(1 << 31)

Assignment = ShareGroupHeartbeatResponse.Assignment
DescribedGroup = ShareGroupDescribeResponse.DescribedGroup
Member = DescribedGroup.Member
MemberAssignment = Member.Assignment


def _may(ctx, request, operation: AclOperation, group_id: str, log_denial: bool = True) -> bool:
    return ctx.authorizer.allows(request, operation, ResourceType.GROUP, group_id or "",
                                 log_denial)


async def handle_share_group_heartbeat(ctx, request):
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


async def handle_share_group_describe(ctx, request):
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


def _error_group(group_id: str, error: ErrorCode, message: str | None):
    return DescribedGroup(error_code=error, error_message=message, group_id=group_id,
                          group_state="", group_epoch=-1, assignment_epoch=-1,
                          assignor_name="", members=[],
                          authorized_operations=OPERATIONS_OMITTED)

"""Authorization of the group APIs: a gate in front of each handler of ``groups.py``.

Kafka's rules (KafkaApis), with the authorizer of ``ctx.authorizer``:

* FindCoordinator: Describe on the group (key type 0) or on the transactional id (key
  type 1), else GROUP_AUTHORIZATION_FAILED / TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
* JoinGroup, SyncGroup, Heartbeat, LeaveGroup: Read on the group, else
  GROUP_AUTHORIZATION_FAILED;
* OffsetCommit: Read on the group (else every partition GROUP_AUTHORIZATION_FAILED),
  then Read on each topic (else its partitions TOPIC_AUTHORIZATION_FAILED, and only the
  others are committed);
* TxnOffsetCommit: Write on the transactional id (else every partition
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then Read on the group (else every partition
  GROUP_AUTHORIZATION_FAILED), then Read on each topic as for OffsetCommit;
* OffsetFetch: Describe on the group (else GROUP_AUTHORIZATION_FAILED where the version
  puts a group error), Describe on each topic: a topic asked for gets
  TOPIC_AUTHORIZATION_FAILED, a listing of all of the group's offsets leaves it out;
* DescribeGroups: Describe, DeleteGroups: Delete on each group (refused ones answer
  GROUP_AUTHORIZATION_FAILED, the others are served);
* ConsumerGroupHeartbeat (KIP-848): UNSUPPORTED_VERSION while ``group.version`` is
  finalized below 1 (checked first, as Kafka does), then Read on the group, else
  GROUP_AUTHORIZATION_FAILED;
  ConsumerGroupDescribe: Describe on each group, as DescribeGroups;
* ListGroups: every group with Describe on the cluster, else the groups the principal
  may Describe.

A gate answers a refusal itself, or passes the request on (narrowed to what is allowed)
and completes the handler's answer; the coordinator never sees a refused group or topic.
With the authorizer off every gate passes the request through unchanged.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka.protocol.admin import DeleteGroupsResponse, DescribeGroupsResponse
from kafka.protocol.consumer import (
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    OffsetCommitResponse,
    OffsetFetchResponse,
    SyncGroupResponse,
)
from kafka.protocol.metadata import FindCoordinatorResponse
from kafka.protocol.producer import TxnOffsetCommitResponse

from protocol.consumer_group_messages import (
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatResponse,
)
from protocol.consumer_group_messages import DescribedGroup as DescribedConsumerGroup
from protocol.errors import ErrorCode

from ..security.acls import AclOperation, ResourceType
from . import features, groups

if TYPE_CHECKING:
    from kafka.protocol.admin import ListGroupsResponse

    from protocol.messages import Request

    from .context import ApiContext

READ, WRITE = AclOperation.READ, AclOperation.WRITE
DESCRIBE, DELETE = AclOperation.DESCRIBE, AclOperation.DELETE
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
KEY_TYPE_TRANSACTION = 1


def _may(ctx: ApiContext, request: Request, operation: AclOperation, group_id: str | None,
         log_denial: bool = True) -> bool:
    return ctx.authorizer.allows(request, operation, ResourceType.GROUP, group_id or "",
                                 log_denial)


# -- FindCoordinator ---------------------------------------------------------------------------

def _key_refusal(ctx: ApiContext, request: Request, key: str, key_type: int) -> ErrorCode | None:
    if key_type == KEY_TYPE_TRANSACTION:
        allowed = ctx.authorizer.allows(request, DESCRIBE, ResourceType.TRANSACTIONAL_ID, key)
        return None if allowed else ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    return None if _may(ctx, request, DESCRIBE, key) else GROUP_DENIED


async def handle_find_coordinator(ctx: ApiContext, request: Request) -> FindCoordinatorResponse:
    body = request.body
    if not ctx.authorizer.enabled:
        return await groups.handle_find_coordinator(ctx, request)
    if request.api_version < 4:
        code = _key_refusal(ctx, request, body.key,
                            body.key_type if request.api_version >= 1 else 0)
        if code is None:
            return await groups.handle_find_coordinator(ctx, request)
        return FindCoordinatorResponse(throttle_time_ms=0, error_code=code,
                                       error_message=code.name, node_id=-1, host="", port=-1)
    keys = list(body.coordinator_keys)
    refused = {k: c for k in keys if (c := _key_refusal(ctx, request, k, body.key_type))}
    body.coordinator_keys = [k for k in keys if k not in refused]
    answered = {}
    if body.coordinator_keys:
        response = await groups.handle_find_coordinator(ctx, request)
        answered = {c.key: c for c in response.coordinators}
    return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
        answered[k] if k in answered else FindCoordinatorResponse.Coordinator(
            key=k, node_id=-1, host="", port=-1, error_code=refused[k],
            error_message=refused[k].name) for k in keys])


# -- membership -------------------------------------------------------------------------------

async def handle_join_group(ctx: ApiContext, request: Request) -> JoinGroupResponse:
    if _may(ctx, request, READ, request.body.group_id):
        return await groups.handle_join_group(ctx, request)
    return JoinGroupResponse(
        throttle_time_ms=0, error_code=GROUP_DENIED, generation_id=-1,
        protocol_type=None, protocol_name=None if request.api_version >= 7 else "",
        leader="", skip_assignment=False, member_id=request.body.member_id or "", members=[])


async def handle_sync_group(ctx: ApiContext, request: Request) -> SyncGroupResponse:
    if _may(ctx, request, READ, request.body.group_id):
        return await groups.handle_sync_group(ctx, request)
    return SyncGroupResponse(throttle_time_ms=0, error_code=GROUP_DENIED, protocol_type=None,
                             protocol_name=None, assignment=b"")


async def handle_heartbeat(ctx: ApiContext, request: Request) -> HeartbeatResponse:
    if _may(ctx, request, READ, request.body.group_id):
        return await groups.handle_heartbeat(ctx, request)
    return HeartbeatResponse(throttle_time_ms=0, error_code=GROUP_DENIED)


async def handle_leave_group(ctx: ApiContext, request: Request) -> LeaveGroupResponse:
    if _may(ctx, request, READ, request.body.group_id):
        return await groups.handle_leave_group(ctx, request)
    return LeaveGroupResponse(throttle_time_ms=0, error_code=GROUP_DENIED, members=[])


# -- offsets ----------------------------------------------------------------------------------

async def handle_offset_commit(ctx: ApiContext, request: Request) -> OffsetCommitResponse:
    body = request.body
    if not ctx.authorizer.enabled:
        return await groups.handle_offset_commit(ctx, request)
    topics = list(body.topics)
    if not _may(ctx, request, READ, body.group_id):
        return _commit_refused(topics, GROUP_DENIED)
    denied = ctx.authorizer.refused(request, READ, (t.name for t in topics))
    body.topics = [t for t in topics if t.name not in denied]
    answered = []
    if body.topics:
        answered = list((await groups.handle_offset_commit(ctx, request)).topics)
    refused = _commit_refused([t for t in topics if t.name in denied], TOPIC_DENIED).topics
    return OffsetCommitResponse(throttle_time_ms=0, topics=answered + list(refused))


def _commit_refused(topics: list, code: ErrorCode) -> OffsetCommitResponse:
    return OffsetCommitResponse(throttle_time_ms=0, topics=[
        groups.CommitTopic(name=t.name, partitions=[
            groups.CommitPartition(partition_index=p.partition_index, error_code=code)
            for p in t.partitions]) for t in topics])


async def handle_txn_offset_commit(ctx: ApiContext,
                                   request: Request) -> TxnOffsetCommitResponse:
    body = request.body
    if not ctx.authorizer.enabled:
        return await groups.handle_txn_offset_commit(ctx, request)
    topics = list(body.topics)
    if not ctx.authorizer.allows(request, WRITE, ResourceType.TRANSACTIONAL_ID,
                                 body.transactional_id or ""):
        return _txn_commit_refused(topics, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not _may(ctx, request, READ, body.group_id):
        return _txn_commit_refused(topics, GROUP_DENIED)
    denied = ctx.authorizer.refused(request, READ, (t.name for t in topics))
    body.topics = [t for t in topics if t.name not in denied]
    answered = []
    if body.topics:
        answered = list((await groups.handle_txn_offset_commit(ctx, request)).topics)
    refused = _txn_commit_refused([t for t in topics if t.name in denied], TOPIC_DENIED).topics
    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=answered + list(refused))


def _txn_commit_refused(topics: list, code: ErrorCode) -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
        groups.TxnCommitTopic(name=t.name, partitions=[
            groups.TxnCommitPartition(partition_index=p.partition_index, error_code=code)
            for p in t.partitions]) for t in topics])


async def handle_offset_fetch(ctx: ApiContext, request: Request) -> OffsetFetchResponse:
    body = request.body
    if not ctx.authorizer.enabled:
        return await groups.handle_offset_fetch(ctx, request)
    if request.api_version >= 8:
        return await _offset_fetch_groups(ctx, request)
    if not _may(ctx, request, DESCRIBE, body.group_id):
        if request.api_version >= 2:
            return OffsetFetchResponse(throttle_time_ms=0, topics=[], error_code=GROUP_DENIED)
        return OffsetFetchResponse(throttle_time_ms=0, error_code=GROUP_DENIED, topics=[
            groups.FetchTopic(name=t.name, partitions=[_fetch_refused(groups.FetchPartition, p,
                                                                      GROUP_DENIED)
                                                       for p in t.partition_indexes])
            for t in body.topics or []])
    response = await groups.handle_offset_fetch(ctx, request)
    response.topics = _only_described(ctx, request, response.topics, body.topics is not None)
    return response


async def _offset_fetch_groups(ctx: ApiContext, request: Request) -> OffsetFetchResponse:
    wanted = list(request.body.groups)
    allowed = [g for g in wanted if _may(ctx, request, DESCRIBE, g.group_id)]
    answered = {}
    if allowed:
        request.body.groups = allowed
        response = await groups.handle_offset_fetch(ctx, request)
        for group, asked in zip(response.groups, allowed):
            group.topics = _only_described(ctx, request, group.topics, asked.topics is not None)
            answered[group.group_id] = group
    return OffsetFetchResponse(throttle_time_ms=0, groups=[
        answered.get(g.group_id) or groups.FetchGroup(group_id=g.group_id,
                                                      error_code=GROUP_DENIED, topics=[])
        for g in wanted])


def _only_described(ctx: ApiContext, request: Request, topics: list,
                    asked_by_name: bool) -> list:
    """Topics the principal may not Describe: refused per partition when asked for by
    name, left out of a listing of all the group's offsets."""
    denied = ctx.authorizer.refused(request, DESCRIBE, (t.name for t in topics))
    if not asked_by_name:
        return [t for t in topics if t.name not in denied]
    for topic in topics:
        if topic.name in denied:
            for p in topic.partitions:
                p.committed_offset, p.committed_leader_epoch, p.metadata = -1, -1, ""
                p.error_code = TOPIC_DENIED
    return list(topics)


def _fetch_refused(partition_class: type, index: int, code: ErrorCode) -> Any:
    return partition_class(partition_index=index, committed_offset=-1,
                           committed_leader_epoch=-1, metadata="", error_code=code)


# -- admin ------------------------------------------------------------------------------------

async def handle_list_groups(ctx: ApiContext, request: Request) -> ListGroupsResponse:
    response = await groups.handle_list_groups(ctx, request)
    if ctx.authorizer.allows_cluster(request, DESCRIBE, log_denial=False):
        return response
    response.groups = [g for g in response.groups
                       if _may(ctx, request, DESCRIBE, g.group_id, log_denial=False)]
    return response


async def handle_describe_groups(ctx: ApiContext, request: Request) -> DescribeGroupsResponse:
    wanted = list(request.body.groups)
    allowed = [g for g in wanted if _may(ctx, request, DESCRIBE, g)]
    if len(allowed) == len(wanted):
        return await groups.handle_describe_groups(ctx, request)
    answered = {}
    if allowed:
        request.body.groups = allowed
        answered = {g.group_id: g for g in
                    (await groups.handle_describe_groups(ctx, request)).groups}
    return DescribeGroupsResponse(throttle_time_ms=0, groups=[
        answered.get(g) or groups.DescribedGroup(
            error_code=GROUP_DENIED, error_message=None, group_id=g, group_state="",
            protocol_type="", protocol_data="", members=[],
            authorized_operations=groups.AUTHORIZED_OPERATIONS_OMITTED)
        for g in wanted])


async def handle_delete_groups(ctx: ApiContext, request: Request) -> DeleteGroupsResponse:
    wanted = list(request.body.groups_names)
    allowed = [g for g in wanted if _may(ctx, request, DELETE, g)]
    if len(allowed) == len(wanted):
        return await groups.handle_delete_groups(ctx, request)
    answered = {}
    if allowed:
        request.body.groups_names = allowed
        answered = {r.group_id: r for r in
                    (await groups.handle_delete_groups(ctx, request)).results}
    return DeleteGroupsResponse(throttle_time_ms=0, results=[
        answered.get(g) or DeleteGroupsResponse.DeletableGroupResult(group_id=g,
                                                                     error_code=GROUP_DENIED)
        for g in wanted])


# -- KIP-848 consumer groups --------------------------------------------------------------------

async def handle_consumer_group_heartbeat(
        ctx: ApiContext, request: Request) -> ConsumerGroupHeartbeatResponse:
    if features.finalized_levels(ctx.image)[features.GROUP_VERSION] < 1:
        return ConsumerGroupHeartbeatResponse(
            error_code=ErrorCode.UNSUPPORTED_VERSION,
            error_message="The consumer group protocol is off: group.version is 0")
    if _may(ctx, request, READ, request.body.group_id):
        return await groups.handle_consumer_group_heartbeat(ctx, request)
    return ConsumerGroupHeartbeatResponse(error_code=GROUP_DENIED,
                                          error_message=GROUP_DENIED.name)


async def handle_consumer_group_describe(
        ctx: ApiContext, request: Request) -> ConsumerGroupDescribeResponse:
    wanted = list(request.body.group_ids)
    allowed = [g for g in wanted if _may(ctx, request, DESCRIBE, g)]
    if len(allowed) == len(wanted):
        return await groups.handle_consumer_group_describe(ctx, request)
    answered = {}
    if allowed:
        request.body.group_ids = allowed
        answered = {g.group_id: g for g in
                    (await groups.handle_consumer_group_describe(ctx, request)).groups}
    return ConsumerGroupDescribeResponse(groups=[answered.get(g) or DescribedConsumerGroup(
        error_code=GROUP_DENIED, error_message=GROUP_DENIED.name, group_id=g)
        for g in wanted])

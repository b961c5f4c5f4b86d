"""Group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
TxnOffsetCommit, OffsetFetch, ListGroups, DescribeGroups, DeleteGroups, and KIP-848's
ConsumerGroupHeartbeat and ConsumerGroupDescribe (topic ids are UUIDs on the wire,
the image's strings in the coordinator; ConsumerGroupHeartbeat v1 has the regex field
and a client-made member id, v0 may leave the member id to the coordinator).

Translation only: each handler turns the request into a call on ``ctx.groups`` (the
GroupCoordinator, broker/groups/) and its result into the response of the request's
version.  Version differences handled here: JoinGroup v0 has no rebalance timeout (the
session timeout stands in, as in Kafka) and v4+ gets MEMBER_ID_REQUIRED for an empty
member id (dynamic members only); the static member's ``group_instance_id`` comes with
JoinGroup v5+, SyncGroup/Heartbeat/LeaveGroup v3+ and OffsetCommit v7+, and JoinGroup
v9+ may answer ``skip_assignment``; LeaveGroup v0-v2 names one member and reports its
error at the top; OffsetFetch v1 reports a group error per partition, v2-v7 at the top,
v8+ per group, and from v7 it may ask ``require_stable`` (an unsettled partition then
answers UNSTABLE_OFFSET_COMMIT on its own, in every version); TxnOffsetCommit v2+ carries
leader epochs, v3+ the committing member (KIP-447), v5+ adds the group's offsets
partition to the transaction first (KIP-890 part 2, ``transactions.add_offsets_partition``;
v4 is v3 with TRANSACTION_ABORTABLE known to the client), and v0-v1 get
COORDINATOR_NOT_AVAILABLE for COORDINATOR_LOAD_IN_PROGRESS (Kafka's rule: producers
older than that treat the loading error as fatal); FindCoordinator v4+ batches keys.
"""
from __future__ import annotations

import uuid
from dataclasses import replace
from types import SimpleNamespace
from typing import TYPE_CHECKING

from kafka.protocol.admin import DeleteGroupsResponse, DescribeGroupsResponse, ListGroupsResponse
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
    DescribedTopicPartitions,
    TopicPartitions,
)
from protocol.consumer_group_messages import (
    DescribedGroup as DescribedConsumerGroup,
)
from protocol.consumer_group_messages import (
    DescribedMember as DescribedConsumerMember,
)
from protocol.errors import ErrorCode

from ..coordinator import CoordinatorAnswer
from ..groups.regex_subscriptions import TopicAccess
from ..security.acls import AclOperation, ResourceType
from . import transactions
from .share_groups import delete_share_state

if TYPE_CHECKING:
    from protocol.messages import Request

    from .context import ApiContext

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
AUTHORIZED_OPERATIONS_OMITTED = None  # kafka-python encodes None as INT32_MIN ("not requested")

CommitTopic = OffsetCommitResponse.OffsetCommitResponseTopic
CommitPartition = CommitTopic.OffsetCommitResponsePartition
FetchTopic = OffsetFetchResponse.OffsetFetchResponseTopic
FetchPartition = FetchTopic.OffsetFetchResponsePartition
FetchGroup = OffsetFetchResponse.OffsetFetchResponseGroup
FetchGroupTopic = FetchGroup.OffsetFetchResponseTopics
FetchGroupPartition = FetchGroupTopic.OffsetFetchResponsePartitions
TxnCommitTopic = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
TxnCommitPartition = TxnCommitTopic.TxnOffsetCommitResponsePartition
DescribedGroup = DescribeGroupsResponse.DescribedGroup
DescribedMember = DescribedGroup.DescribedGroupMember


# -- FindCoordinator --------------------------------------------------------------------------

async def handle_find_coordinator(ctx: ApiContext, request: Request) -> FindCoordinatorResponse:
    body = request.body
    if request.api_version >= 4:
        coordinators = []
        for key in body.coordinator_keys:
            answer = _on_listener(ctx, request, await _find_coordinator(ctx, key, body.key_type))
            coordinators.append(FindCoordinatorResponse.Coordinator(
                key=key, node_id=answer.node_id, host=answer.host, port=answer.port,
                error_code=answer.error, error_message=answer.message))
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)
    key_type = body.key_type if request.api_version >= 1 else 0
    answer = _on_listener(ctx, request, await _find_coordinator(ctx, body.key, key_type))
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=answer.error,
                                   error_message=answer.message, node_id=answer.node_id,
                                   host=answer.host, port=answer.port)


async def _find_coordinator(ctx: ApiContext, key: str, key_type: int) -> CoordinatorAnswer:
    """The coordinator of the key type answers (each on its internal topic, creating it
    on first use); a key type not served is INVALID_REQUEST."""
    if key_type == KEY_TYPE_GROUP:
        return await ctx.groups.find_coordinator(key)
    if key_type == KEY_TYPE_TRANSACTION:
        return await ctx.transactions.find_coordinator(key)
    return CoordinatorAnswer(ErrorCode.INVALID_REQUEST,
                             f"key type {key_type}: not a group or transactional id")


def _on_listener(ctx: ApiContext, request: Request,
                 answer: CoordinatorAnswer) -> CoordinatorAnswer:
    """The coordinator's endpoint on the listener the request came in on (Kafka answers
    with the same listener name); COORDINATOR_NOT_AVAILABLE if it has no such listener."""
    if answer.node_id < 0 or request.session is None:
        return answer
    info = ctx.image.brokers.get(answer.node_id)
    address = info.endpoint(request.session.listener.name) if info is not None else None
    if address is None:
        return CoordinatorAnswer(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                 f"broker {answer.node_id} has no listener "
                                 f"{request.session.listener.name}")
    return replace(answer, host=address[0], port=address[1])


# -- membership -------------------------------------------------------------------------------

async def handle_join_group(ctx: ApiContext, request: Request) -> JoinGroupResponse:
    body = request.body
    version = request.api_version
    rebalance_timeout_ms = body.rebalance_timeout_ms if version >= 1 else -1
    if rebalance_timeout_ms is None or rebalance_timeout_ms < 0:
        rebalance_timeout_ms = body.session_timeout_ms
    result = await ctx.groups.join_group(
        body.group_id, body.member_id or "",
        body.group_instance_id if version >= 5 else None,
        require_known_member_id=version >= 4, client_id=request.client_id or "",
        client_host=request.client_host, rebalance_timeout_ms=rebalance_timeout_ms,
        session_timeout_ms=body.session_timeout_ms, protocol_type=body.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in body.protocols],
        supports_skip_assignment=version >= 9)
    protocol_name = result.protocol_name if version >= 7 else (result.protocol_name or "")
    return JoinGroupResponse(
        throttle_time_ms=0, error_code=result.error, generation_id=result.generation_id,
        protocol_type=result.protocol_type, protocol_name=protocol_name,
        leader=result.leader_id, skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[JoinGroupResponse.JoinGroupResponseMember(
            member_id=member_id, group_instance_id=instance_id, metadata=metadata)
            for member_id, instance_id, metadata in result.members])


async def handle_sync_group(ctx: ApiContext, request: Request) -> SyncGroupResponse:
    body = request.body
    version = request.api_version
    result = await ctx.groups.sync_group(
        body.group_id, body.generation_id, body.member_id,
        body.protocol_type if version >= 5 else None,
        body.protocol_name if version >= 5 else None,
        {a.member_id: bytes(a.assignment) for a in body.assignments or []},
        group_instance_id=body.group_instance_id if version >= 3 else None)
    return SyncGroupResponse(throttle_time_ms=0, error_code=result.error,
                             protocol_type=result.protocol_type,
                             protocol_name=result.protocol_name, assignment=result.assignment)


async def handle_heartbeat(ctx: ApiContext, request: Request) -> HeartbeatResponse:
    body = request.body
    error = ctx.groups.heartbeat(
        body.group_id, body.member_id, body.generation_id,
        group_instance_id=body.group_instance_id if request.api_version >= 3 else None)
    return HeartbeatResponse(throttle_time_ms=0, error_code=error)


async def handle_leave_group(ctx: ApiContext, request: Request) -> LeaveGroupResponse:
    body = request.body
    if request.api_version >= 3:
        leaving = [(m.member_id, m.group_instance_id) for m in body.members]
    else:
        leaving = [(body.member_id, None)]
    error, results = ctx.groups.leave_group(body.group_id, leaving)
    if request.api_version < 3 and error == ErrorCode.NONE and results:
        error = results[0][2]
    return LeaveGroupResponse(
        throttle_time_ms=0, error_code=error,
        members=[LeaveGroupResponse.MemberResponse(member_id=m, group_instance_id=i,
                                                   error_code=e) for m, i, e in results])


# -- offsets ----------------------------------------------------------------------------------

async def handle_offset_commit(ctx: ApiContext, request: Request) -> OffsetCommitResponse:
    body = request.body
    version = request.api_version
    offsets = {}
    for topic in body.topics:
        for p in topic.partitions:
            epoch = p.committed_leader_epoch if version >= 6 else -1
            offsets[(topic.name, p.partition_index)] = (p.committed_offset, epoch,
                                                        p.committed_metadata)
    retention_ms = body.retention_time_ms if version <= 4 else -1
    results = await ctx.groups.commit_offsets(
        body.group_id, body.member_id, body.generation_id_or_member_epoch, offsets,
        retention_ms if retention_ms is not None else -1,
        group_instance_id=body.group_instance_id if version >= 7 else None)
    by_topic: dict[str, list] = {}
    for (topic, partition), error in results.items():
        by_topic.setdefault(topic, []).append(
            CommitPartition(partition_index=partition, error_code=error))
    return OffsetCommitResponse(throttle_time_ms=0, topics=[
        CommitTopic(name=name, partitions=parts) for name, parts in by_topic.items()])


async def handle_txn_offset_commit(ctx: ApiContext, request: Request) -> TxnOffsetCommitResponse:
    body = request.body
    version = request.api_version
    offsets = {}
    for topic in body.topics:
        for p in topic.partitions:
            epoch = p.committed_leader_epoch if version >= 2 else -1
            offsets[(topic.name, p.partition_index)] = (p.committed_offset, epoch,
                                                        p.committed_metadata)
    if version >= 3:
        member_id, generation_id, instance_id = (body.member_id or "", body.generation_id,
                                                 body.group_instance_id)
    else:
        member_id, generation_id, instance_id = "", -1, None
    added = await transactions.add_offsets_partition(ctx, request)  # v5+: KIP-890 part 2
    if added != ErrorCode.NONE:
        return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
            TxnCommitTopic(name=t.name, partitions=[
                TxnCommitPartition(partition_index=p.partition_index, error_code=added)
                for p in t.partitions]) for t in body.topics])
    results = await ctx.groups.commit_txn_offsets(
        body.group_id, body.producer_id, body.producer_epoch, member_id, generation_id,
        instance_id, offsets)
    by_topic: dict[str, list] = {}
    for (topic, partition), error in results.items():
        if version < 2 and error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        by_topic.setdefault(topic, []).append(
            TxnCommitPartition(partition_index=partition, error_code=error))
    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
        TxnCommitTopic(name=name, partitions=parts) for name, parts in by_topic.items()])


def _requested(topics: list | None) -> list[tuple[str, int]] | None:
    if topics is None:
        return None
    return [(t.name, p) for t in topics for p in t.partition_indexes]


def _by_topic(offsets: dict, partition_class: type, group_error: ErrorCode | None = None) -> dict:
    by_topic: dict[str, list] = {}
    for (topic, partition), committed in offsets.items():
        if isinstance(committed, ErrorCode):  # UNSTABLE_OFFSET_COMMIT: no offset shown
            error, committed = committed, None
        else:
            error = group_error if group_error is not None else ErrorCode.NONE
        by_topic.setdefault(topic, []).append(partition_class(
            partition_index=partition,
            committed_offset=committed.offset if committed else -1,
            committed_leader_epoch=committed.leader_epoch if committed else -1,
            metadata=committed.metadata if committed else "",
            error_code=error))
    return by_topic


async def handle_offset_fetch(ctx: ApiContext, request: Request) -> OffsetFetchResponse:
    body = request.body
    version = request.api_version
    require_stable = bool(body.require_stable) if version >= 7 else False
    if version >= 8:
        groups = []
        for wanted in body.groups:
            error, offsets = ctx.groups.fetch_offsets(wanted.group_id, _requested(wanted.topics),
                                                      require_stable)
            groups.append(FetchGroup(group_id=wanted.group_id, error_code=error, topics=[
                FetchGroupTopic(name=name, partitions=parts)
                for name, parts in _by_topic(offsets, FetchGroupPartition).items()]))
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
    requested = _requested(body.topics)
    error, offsets = ctx.groups.fetch_offsets(body.group_id, requested, require_stable)
    partition_error = None
    if error != ErrorCode.NONE and version < 2:
        # v1 has no group error field: each requested partition carries it.
        offsets, partition_error = dict.fromkeys(requested or []), error
    topics = [FetchTopic(name=name, partitions=parts)
              for name, parts in _by_topic(offsets, FetchPartition, partition_error).items()]
    return OffsetFetchResponse(throttle_time_ms=0, topics=topics, error_code=error)


# -- admin -----------------------------------------------------------------------------------

async def handle_list_groups(ctx: ApiContext, request: Request) -> ListGroupsResponse:
    body = request.body
    version = request.api_version
    error, groups = ctx.groups.list_groups(
        body.states_filter if version >= 4 else None, body.types_filter if version >= 5 else None)
    return ListGroupsResponse(throttle_time_ms=0, error_code=error, groups=[
        ListGroupsResponse.ListedGroup(group_id=group_id, protocol_type=protocol_type,
                                       group_state=state, group_type=group_type)
        for group_id, protocol_type, state, group_type in groups])


async def handle_describe_groups(ctx: ApiContext, request: Request) -> DescribeGroupsResponse:
    described = []
    for group_id in request.body.groups:
        summary = ctx.groups.describe_group(group_id)
        described.append(DescribedGroup(
            error_code=summary.error, error_message=None, group_id=group_id,
            group_state=summary.state, protocol_type=summary.protocol_type,
            protocol_data=summary.protocol_data,
            members=[DescribedMember(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                     client_id=m.client_id, client_host=m.client_host,
                                     member_metadata=m.metadata, member_assignment=m.assignment)
                     for m in summary.members],
            authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
    return DescribeGroupsResponse(throttle_time_ms=0, groups=described)


async def handle_delete_groups(ctx: ApiContext, request: Request) -> DeleteGroupsResponse:
    names = list(request.body.groups_names)
    shares = [g for g in names if ctx.groups.describe_share_group(g).error == ErrorCode.NONE]
    results = await ctx.groups.delete_groups(names)
    for group_id in shares:  # KIP-932: a deleted share group's partition state goes too
        if results.get(group_id) == ErrorCode.NONE:
            await delete_share_state(ctx, group_id)
    return DeleteGroupsResponse(throttle_time_ms=0, results=[
        DeleteGroupsResponse.DeletableGroupResult(group_id=group_id, error_code=error)
        for group_id, error in results.items()])


# -- KIP-848 consumer groups --------------------------------------------------------------------

def topic_access(ctx: ApiContext, request: Request) -> TopicAccess | None:
    """What the request's principal may Describe, for its regex subscription (Kafka
    filters a resolved regex by DESCRIBE on each topic); None: everything (no
    authorizer, or a super user)."""
    authorizer = ctx.authorizer
    principal, host = authorizer.who(request)
    if not authorizer.enabled or principal in authorizer.super_users:
        return None
    asker = SimpleNamespace(session=SimpleNamespace(principal=principal), client_host=host)
    return TopicAccess((principal, host), lambda topic: authorizer.allows(
        asker, AclOperation.DESCRIBE, ResourceType.TOPIC, topic, log_denial=False))


async def handle_consumer_group_heartbeat(
        ctx: ApiContext, request: Request) -> ConsumerGroupHeartbeatResponse:
    body = request.body
    owned = None
    if body.topic_partitions is not None:
        owned = {str(t.topic_id): set(t.partitions) for t in body.topic_partitions
                 if t.partitions}
    answer = await ctx.groups.consumer_group_heartbeat(
        body.group_id, body.member_id, body.member_epoch, body.instance_id, body.rack_id,
        body.rebalance_timeout_ms, body.subscribed_topic_names, body.subscribed_topic_regex,
        body.server_assignor, owned, client_id=request.client_id or "",
        client_host=request.client_host, client_makes_member_id=request.api_version >= 1,
        topic_access=topic_access(ctx, request))
    assignment = None
    if answer.assignment is not None:
        assignment = [TopicPartitions(uuid.UUID(topic_id), sorted(partitions))
                      for topic_id, partitions in sorted(answer.assignment.items())]
    return ConsumerGroupHeartbeatResponse(
        throttle_time_ms=0, error_code=answer.error, error_message=answer.message,
        member_id=answer.member_id, member_epoch=answer.member_epoch,
        heartbeat_interval_ms=answer.heartbeat_interval_ms, assignment=assignment)


def _described_partitions(assignment: list) -> list[DescribedTopicPartitions]:
    return [DescribedTopicPartitions(uuid.UUID(topic_id), name, partitions)
            for topic_id, name, partitions in assignment]


async def handle_consumer_group_describe(
        ctx: ApiContext, request: Request) -> ConsumerGroupDescribeResponse:
    described = []
    for group_id in request.body.group_ids:
        group = ctx.groups.describe_consumer_group(group_id)
        described.append(DescribedConsumerGroup(
            error_code=group.error, error_message=group.message, group_id=group_id,
            group_state=group.state, group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch, assignor_name=group.assignor,
            members=[DescribedConsumerMember(
                member_id=d.member.member_id, instance_id=d.member.instance_id,
                rack_id=d.member.rack_id, member_epoch=d.member.member_epoch,
                client_id=d.member.client_id, client_host=d.member.client_host,
                subscribed_topic_names=list(d.member.subscribed_topic_names),
                subscribed_topic_regex=d.member.subscribed_topic_regex,
                assignment=_described_partitions(d.assignment),
                target_assignment=_described_partitions(d.target_assignment))
                for d in group.members]))
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=described)

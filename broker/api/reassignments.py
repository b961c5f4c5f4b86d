"""AlterPartitionReassignments and ListPartitionReassignments (KIP-455), on the controller.

What ``kafka-reassign-partitions.sh``, the AdminClients' alterPartitionReassignments and
``raftwood reassign`` send.  A reassignment is a controller decision: only the controller
(Metadata's ``controller_id``) takes it, others answer NOT_CONTROLLER (the admin clients
send it there), and the one Raft command carries the controller's term.  The answer comes
once the reassignment has *started* (Kafka's rule); ListPartitionReassignments shows it
until every new replica is in sync (broker/controller/reassignment.py has the steps).

Per partition, Kafka's codes: UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (an
empty or repeating target, an unregistered broker), NO_REASSIGNMENT_IN_PROGRESS (cancel
with nothing to cancel), and in v1 INVALID_REPLICATION_FACTOR when
``allow_replication_factor_change`` is false and the target changes the replica count
(KIP-860).  Authorization: Alter on the cluster (List: Describe), else
CLUSTER_AUTHORIZATION_FAILED for the whole request.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from kafka.protocol.admin import (
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsResponse,
)

from protocol.errors import ErrorCode

from ..controller.metadata_client import ApplyError, MetadataUnavailable
from ..security.acls import AclOperation

if TYPE_CHECKING:
    from protocol.messages import Request

    from ..controller.metadata_client import MetadataClient
    from .context import ApiContext

AlterTopic = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
AlterPartition = AlterTopic.ReassignablePartitionResponse
ListTopic = ListPartitionReassignmentsResponse.OngoingTopicReassignment
ListPartition = ListTopic.OngoingPartitionReassignment


async def handle_alter_partition_reassignments(
        ctx: ApiContext, request: Request) -> AlterPartitionReassignmentsResponse:
    body = request.body
    requests = [[t.name, p.partition_index, None if p.replicas is None else list(p.replicas)]
                for t in body.topics for p in t.partitions]
    if not ctx.authorizer.allows_cluster(request, AclOperation.ALTER):
        return _alter_response(ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                               "Alter on the cluster is required", requests, [])
    term = ctx.metadata.controller_term
    if not ctx.metadata.is_controller:
        return _alter_response(ErrorCode.NOT_CONTROLLER,
                               f"broker {ctx.node_id} is not the controller", requests, [])
    refused = []
    if request.api_version >= 1 and not body.allow_replication_factor_change:
        refused = [[name, index, "INVALID_REPLICATION_FACTOR",
                    "the target changes the replication factor"]
                   for name, index, target in requests
                   if target is not None and _changes_factor(ctx.metadata, name, index, target)]
    skipped = {(name, index) for name, index, _, _ in refused}
    wanted = [r for r in requests if (r[0], r[1]) not in skipped]
    try:
        results = await ctx.metadata.alter_reassignments(wanted, controller_term=term) \
            if wanted else []
    except ApplyError as exc:
        return _alter_response(ErrorCode[exc.code], str(exc), requests, [])
    except MetadataUnavailable as exc:
        return _alter_response(ErrorCode.REQUEST_TIMED_OUT, str(exc), requests, [])
    return _alter_response(ErrorCode.NONE, None, requests, results + refused)


def _changes_factor(metadata: MetadataClient, name: str, index: int, target: list[int]) -> bool:
    before = metadata.replicas_before_reassignment(name, index)
    return before is not None and len(target) != len(before)


def _alter_response(top: ErrorCode, message: str | None, requests: list,
                    results: list) -> AlterPartitionReassignmentsResponse:
    """Results by (topic, partition); with a top-level error every partition carries it."""
    by_key = {(name, index): (ErrorCode[code], text) for name, index, code, text in results}
    by_topic: dict[str, list] = {}
    for name, index, _ in requests:
        code, text = by_key.get((name, index), (top, message))
        by_topic.setdefault(name, []).append(AlterPartition(
            partition_index=index, error_code=code,
            error_message=None if code == ErrorCode.NONE else text))
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0, allow_replication_factor_change=True, error_code=top,
        error_message=message, responses=[AlterTopic(name=name, partitions=partitions)
                                          for name, partitions in by_topic.items()])


async def handle_list_partition_reassignments(
        ctx: ApiContext, request: Request) -> ListPartitionReassignmentsResponse:
    if not ctx.authorizer.allows_cluster(request, AclOperation.DESCRIBE):
        return ListPartitionReassignmentsResponse(
            throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message="Describe on the cluster is required", topics=[])
    if not ctx.metadata.is_controller:
        return ListPartitionReassignmentsResponse(
            throttle_time_ms=0, error_code=ErrorCode.NOT_CONTROLLER,
            error_message=f"broker {ctx.node_id} is not the controller", topics=[])
    topics = request.body.topics
    wanted = None if topics is None else [[t.name, list(t.partition_indexes)] for t in topics]
    by_topic: dict[str, list] = {}
    for name, index, replicas, adding, removing in ctx.metadata.ongoing_reassignments(wanted):
        by_topic.setdefault(name, []).append(ListPartition(
            partition_index=index, replicas=replicas, adding_replicas=adding,
            removing_replicas=removing))
    return ListPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
        topics=[ListTopic(name=name, partitions=partitions)
                for name, partitions in by_topic.items()])

"""AddRaftVoter / RemoveRaftVoter (KIP-853, v0): change the metadata quorum's voters;
DescribeQuorum (KIP-595/KIP-836, v0-v1): show them.

Kafka's controllers serve these; here every broker does, as every broker takes part
in the quorum (a voter or an observer, see broker/controller/store.py).  The change
is pysyncobj's single-server membership change, committed before the answer:

* AddRaftVoter names the broker and its Raft endpoint (the first listener's host and
  port; the listener name is a label).  The broker must be registered (running, an
  observer); once the change commits it restarts its Raft node as a voter there.
* RemoveRaftVoter names a voter.  It is carried out by the quorum leader, as Kafka's
  brokers forward it to the active controller: a broker that does not lead sends it
  on over the inter-broker listener (the leader drops a removed voter's connection at
  once, so the removed broker could not learn the outcome itself).  A leader asked
  to remove itself hands leadership over first, then forwards.  The removed broker,
  if it handled the request, carries on as an observer at once; otherwise it steps
  down when no leader talks to it any more.

Raftwood's voters are known by node id alone: ``voter_directory_id`` must be the zero
Uuid (a real directory id is refused, INVALID_REQUEST), and a ``cluster_id`` other
than this cluster's is INCONSISTENT_CLUSTER_ID.  Alter on the cluster is required
(CLUSTER_AUTHORIZATION_FAILED).  A lone broker has no quorum (INVALID_REQUEST).

DescribeQuorum is answered by the quorum leader, as Kafka's brokers forward it to the
active controller: a broker that does not lead sends it on to the leader's
inter-broker listener and returns that answer (``forward_to_quorum_leader``, shared
with RemoveRaftVoter).  A request that was itself forwarded is never forwarded again:
a broker that no longer leads answers it NOT_LEADER_OR_FOLLOWER, as a Kafka controller
does, and the forwarding broker asks the leader it knows next (for at most 10 s, then
NOT_LEADER_OR_FOLLOWER to the client, which retries).  The leader answers partition 0
of ``__cluster_metadata``: LeaderId its broker id, LeaderEpoch the Raft term,
HighWatermark the commit index, CurrentVoters each voter with the last log index the
leader knows it holds (its match index; -1 unknown), Observers the live registered
brokers that are not voters, with LogEndOffset -1 (pysyncobj's read-only nodes are
anonymous to the leader, so their log ends are unknown).  v1's timestamps are the
current time for the leader, -1 (unknown) for the others.  v2 (KIP-853: directory ids
and the voters' endpoints) is not served; Kafka's clients use v1 (kafka-clients 3.9's
``describeMetadataQuorum`` reads ``nodes`` only when present).  Describe on the
cluster is required (CLUSTER_AUTHORIZATION_FAILED at the top level).  A request that
does not name exactly partition 0 of ``__cluster_metadata`` — and any request to a lone
broker, whose metadata is not a Raft partition — is answered per partition with
UNKNOWN_TOPIC_OR_PARTITION, Kafka's answer for a partition that is not its Raft log.
"""
from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin import DescribeQuorumRequest, DescribeQuorumResponse

from protocol.errors import ErrorCode
from protocol.raft_voter_messages import (
    AddRaftVoterResponse,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
)

from ..client.kafka_client import AsyncConnection, ConnectionFailed
from ..controller.metadata_client import ApplyError, MetadataUnavailable
from ..security.acls import AclOperation
from ..security.client import inter_broker_security

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from protocol.messages import Request

    from .context import ApiContext

ZERO_UUID = uuid.UUID(int=0)
REMOVE_TIMEOUT_S = 30.0
FORWARD_RETRY_S = 0.25
FORWARD_CLIENT_PREFIX = "raftwood-quorum-"  # client id of a request one broker forwards


def _refusal(ctx: ApiContext, request: Request, body: Any) -> tuple[ErrorCode, str] | None:
    if not ctx.authorizer.allows_cluster(request, AclOperation.ALTER):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Alter on the cluster is required"
    if body.cluster_id is not None and body.cluster_id != ctx.image.cluster_id:
        return (ErrorCode.INCONSISTENT_CLUSTER_ID,
                f"cluster {body.cluster_id!r} is not this cluster ({ctx.image.cluster_id!r})")
    if body.voter_directory_id != ZERO_UUID:
        return (ErrorCode.INVALID_REQUEST, "Raftwood's voters have no directory id: send "
                                           "the zero Uuid")
    if not ctx.metadata.has_quorum:
        return ErrorCode.INVALID_REQUEST, "a lone broker's metadata is not in a Raft quorum"
    return None


async def _answer(response_class: type, change: Awaitable[object]) -> Any:
    try:
        await change
    except ApplyError as exc:
        return response_class(error_code=ErrorCode[exc.code], error_message=str(exc))
    except MetadataUnavailable as exc:
        return response_class(error_code=ErrorCode.REQUEST_TIMED_OUT, error_message=str(exc))
    return response_class()


async def handle_add_raft_voter(ctx: ApiContext, request: Request) -> AddRaftVoterResponse:
    body = request.body
    refused = _refusal(ctx, request, body)
    if refused is None and body.voter_id not in ctx.image.brokers:
        refused = (ErrorCode.INVALID_REQUEST,
                   f"broker {body.voter_id} is not registered: start it (an observer) first")
    if refused is None and not body.listeners:
        refused = ErrorCode.INVALID_REQUEST, "no listener names the new voter's Raft endpoint"
    if refused is not None:
        return AddRaftVoterResponse(error_code=refused[0], error_message=refused[1])
    endpoint = body.listeners[0]
    timeout_s = max(1.0, body.timeout_ms / 1000)
    return await _answer(AddRaftVoterResponse, ctx.metadata.add_voter(
        body.voter_id, f"{endpoint.host}:{endpoint.port}", timeout_s))


async def handle_remove_raft_voter(ctx: ApiContext,
                                   request: Request) -> RemoveRaftVoterResponse:
    """Its own task: a client that leaves cannot stop it between handing over the
    leadership and removing the voter."""
    return await ctx.replica_manager.tasks.outlive("RemoveRaftVoter",
                                                   _remove_raft_voter(ctx, request))


async def _remove_raft_voter(ctx: ApiContext, request: Request) -> RemoveRaftVoterResponse:
    body = request.body
    refused = _refusal(ctx, request, body)
    if refused is not None:
        return RemoveRaftVoterResponse(error_code=refused[0], error_message=refused[1])
    metadata = ctx.metadata
    if metadata.is_controller and body.voter_id != ctx.node_id:
        return await _answer(RemoveRaftVoterResponse, metadata.remove_voter(body.voter_id))
    try:
        if metadata.is_controller:
            await metadata.hand_over_leadership(REMOVE_TIMEOUT_S)
        answer = await _forward(ctx, body)
    except ApplyError as exc:
        return RemoveRaftVoterResponse(error_code=ErrorCode[exc.code], error_message=str(exc))
    except MetadataUnavailable as exc:
        return RemoveRaftVoterResponse(error_code=ErrorCode.REQUEST_TIMED_OUT,
                                       error_message=str(exc))
    if answer.error_code == ErrorCode.NONE and body.voter_id == ctx.node_id:
        await metadata.step_down()
    return answer


async def _forward(ctx: ApiContext, body: Any) -> RemoveRaftVoterResponse:
    """Send the request to the quorum leader (again while there is none, or it moves)."""
    return await forward_to_quorum_leader(
        ctx, RemoveRaftVoterRequest[0](cluster_id=body.cluster_id, voter_id=body.voter_id,
                                       voter_directory_id=body.voter_directory_id),
        timeout_s=REMOVE_TIMEOUT_S, attempt_timeout_s=REMOVE_TIMEOUT_S + 5,
        led=lambda answer: answer.error_code != ErrorCode.NOT_CONTROLLER)


def forwarded(request: Request) -> bool:
    """True when another broker forwarded ``request`` here (its client id says so)."""
    return (request.client_id or "").startswith(FORWARD_CLIENT_PREFIX)


async def forward_to_quorum_leader(ctx: ApiContext, message: Any, *, timeout_s: float,
                                   attempt_timeout_s: float,
                                   led: Callable[[Any], bool]) -> Any:
    """Send ``message`` (a versioned request) to the quorum leader's inter-broker listener
    and return its answer, as Kafka's brokers forward quorum requests to the active
    controller.  Tried again every FORWARD_RETRY_S while no leader is known, the leader
    cannot be reached, or its answer shows it no longer leads (``led(answer)`` false);
    MetadataUnavailable after ``timeout_s``.  Each attempt waits at most
    ``attempt_timeout_s`` for the answer."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    reason = "no quorum leader known"
    while loop.time() < deadline:
        leader = ctx.metadata.controller_id
        info = ctx.image.brokers.get(leader) if leader != ctx.node_id else None
        address = info.endpoint(ctx.config.listener_plan.inter_broker_name) if info else None
        if address is not None:
            connection = AsyncConnection(
                address[0], address[1], client_id=f"{FORWARD_CLIENT_PREFIX}{ctx.node_id}",
                timeout_s=attempt_timeout_s, security=inter_broker_security(ctx.config))
            try:
                answer = await connection.request(message)
            except ConnectionFailed as exc:
                reason = f"leader {leader}: {exc}"
            else:
                if led(answer):
                    return answer
                reason = f"broker {leader} no longer leads the quorum"
            finally:
                await connection.close()
        await asyncio.sleep(FORWARD_RETRY_S)
    raise MetadataUnavailable(f"{message.name.removesuffix('Request')} not answered by a "
                              f"quorum leader: {reason}")


# -- DescribeQuorum (API 55, v0-v1) ----------------------------------------------------

METADATA_TOPIC = "__cluster_metadata"
DESCRIBE_FORWARD_TIMEOUT_S = 10.0
QuorumTopic = DescribeQuorumResponse.TopicData
QuorumPartition = QuorumTopic.PartitionData
ReplicaState = QuorumPartition.ReplicaState


async def handle_describe_quorum(ctx: ApiContext, request: Request) -> DescribeQuorumResponse:
    """The metadata quorum as its leader knows it (see the module doc)."""
    body = request.body
    if not ctx.authorizer.allows_cluster(request, AclOperation.DESCRIBE):
        return DescribeQuorumResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                      topics=[])
    names_the_metadata_partition = (
        len(body.topics) == 1 and body.topics[0].topic_name == METADATA_TOPIC
        and len(body.topics[0].partitions) == 1
        and body.topics[0].partitions[0].partition_index == 0)
    if not names_the_metadata_partition or not ctx.metadata.has_quorum:
        return _each_partition_refused(body, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    described = _describe_as_leader(ctx)
    if described is not None:
        return described
    if forwarded(request):  # asked by a broker that took us for the leader: Kafka's answer
        return _not_leader()
    version = request.api_version
    try:
        answer = await forward_to_quorum_leader(
            ctx, DescribeQuorumRequest[version](topics=[
                DescribeQuorumRequest.TopicData(topic_name=METADATA_TOPIC, partitions=[
                    DescribeQuorumRequest.TopicData.PartitionData(partition_index=0)])]),
            timeout_s=DESCRIBE_FORWARD_TIMEOUT_S, attempt_timeout_s=DESCRIBE_FORWARD_TIMEOUT_S,
            led=lambda answer: not _names_error(answer, ErrorCode.NOT_LEADER_OR_FOLLOWER))
    except MetadataUnavailable:
        return _not_leader()  # retriable: the client asks again
    # The leader's answer becomes ours without its response header: kafka-python sets a
    # version through the header, which a response header refuses (the same private
    # field protocol/messages.py sets on decoded requests; kafka-python 3.0.12, pinned).
    answer._header = None
    return answer


def _describe_as_leader(ctx: ApiContext) -> DescribeQuorumResponse | None:
    """The answer from this broker's Raft node, or None when it does not lead."""
    status = ctx.metadata.quorum_status()
    if not status or not status.get("running") or not status.get("leading"):
        return None
    now_ms = int(time.time() * 1000)
    voters, voter_ids = [], set()
    for voter in status["voters"]:
        if voter["id"] < 0:
            continue  # an address no record names yet: no replica id to give it
        voter_ids.add(voter["id"])
        own = voter["id"] == ctx.node_id
        match_index = voter.get("match_index")
        voters.append(ReplicaState(
            replica_id=voter["id"], log_end_offset=-1 if match_index is None else match_index,
            last_fetch_timestamp=now_ms if own else -1,
            last_caught_up_timestamp=now_ms if own else -1))
    observers = [ReplicaState(replica_id=broker_id, log_end_offset=-1, last_fetch_timestamp=-1,
                              last_caught_up_timestamp=-1)
                 for broker_id in ctx.image.live_brokers() if broker_id not in voter_ids]
    return DescribeQuorumResponse(error_code=ErrorCode.NONE, topics=[QuorumTopic(
        topic_name=METADATA_TOPIC, partitions=[QuorumPartition(
            partition_index=0, error_code=ErrorCode.NONE, leader_id=ctx.node_id,
            leader_epoch=status["term"], high_watermark=status["commit_index"],
            current_voters=voters, observers=observers)])])


def _each_partition_refused(body: Any, error: ErrorCode) -> DescribeQuorumResponse:
    """Kafka's partition-level error answer: every partition asked for, with ``error``."""
    return DescribeQuorumResponse(error_code=ErrorCode.NONE, topics=[
        QuorumTopic(topic_name=topic.topic_name, partitions=[
            _refused_partition(p.partition_index, error) for p in topic.partitions])
        for topic in body.topics])


def _refused_partition(index: int, error: ErrorCode) -> QuorumPartition:
    return QuorumPartition(partition_index=index, error_code=error, leader_id=-1,
                           leader_epoch=-1, high_watermark=-1, current_voters=[],
                           observers=[])


def _not_leader() -> DescribeQuorumResponse:
    return DescribeQuorumResponse(error_code=ErrorCode.NONE, topics=[QuorumTopic(
        topic_name=METADATA_TOPIC,
        partitions=[_refused_partition(0, ErrorCode.NOT_LEADER_OR_FOLLOWER)])])


def _names_error(answer: Any, error: ErrorCode) -> bool:
    return answer.error_code == error or any(
        p.error_code == error for t in answer.topics for p in t.partitions)

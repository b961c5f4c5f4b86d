"""AddRaftVoter / RemoveRaftVoter (KIP-853, v0): change the metadata quorum's voters.

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
"""
from __future__ import annotations

import asyncio
import uuid

from protocol.errors import ErrorCode
from protocol.raft_voter_messages import AddRaftVoterResponse, RemoveRaftVoterResponse

from protocol.raft_voter_messages import RemoveRaftVoterRequest

from ..controller.metadata_client import ApplyError, MetadataUnavailable
from ..network.kafka_client import AsyncConnection, ConnectionFailed
from ..security.acls import AclOperation
from ..security.client import inter_broker_security

ZERO_UUID = uuid.UUID(int=0)
REMOVE_TIMEOUT_S = 30.0
FORWARD_RETRY_S = 0.25


def _refusal(ctx, request, body) -> tuple[ErrorCode, str] | None:
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


async def _answer(response_class, change) -> object:
    try:
        await change
    except ApplyError as exc:
        return response_class(error_code=ErrorCode[exc.code], error_message=str(exc))
    except MetadataUnavailable as exc:
        return response_class(error_code=ErrorCode.REQUEST_TIMED_OUT, error_message=str(exc))
    return response_class()


async def handle_add_raft_voter(ctx, request):
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


async def handle_remove_raft_voter(ctx, request):
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


async def _forward(ctx, body) -> RemoveRaftVoterResponse:
    """Send the request to the quorum leader (again while there is none, or it moves)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + REMOVE_TIMEOUT_S
    reason = "no quorum leader known"
    while loop.time() < deadline:
        leader = ctx.metadata.controller_id
        info = ctx.image.brokers.get(leader) if leader != ctx.node_id else None
        address = info.endpoint(ctx.config.listener_plan.inter_broker_name) if info else None
        if address is not None:
            connection = AsyncConnection(
                address[0], address[1], client_id=f"raftwood-quorum-{ctx.node_id}",
                timeout_s=REMOVE_TIMEOUT_S + 5, security=inter_broker_security(ctx.config))
            try:
                answer = await connection.request(RemoveRaftVoterRequest[0](
                    cluster_id=body.cluster_id, voter_id=body.voter_id,
                    voter_directory_id=body.voter_directory_id))
            except ConnectionFailed as exc:
                reason = f"leader {leader}: {exc}"
            else:
                if answer.error_code != ErrorCode.NOT_CONTROLLER:
                    return answer
                reason = f"broker {leader} no longer leads the quorum"
            finally:
                await connection.close()
        await asyncio.sleep(FORWARD_RETRY_S)
    raise MetadataUnavailable(f"RemoveRaftVoter not carried out by a quorum leader: {reason}")

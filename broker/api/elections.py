"""ElectLeaders (KIP-460, v0-2): move a partition's leadership on request.

PREFERRED (0; the only kind in v0) gives leadership back to the first replica of the
assignment; UNCLEAN (1) elects a leader for a partition that has none, from outside
the ISR only when no ISR member is alive.  The rules and per-partition codes are the
metadata's (broker/controller/elections.py): the election is one ElectLeaders command
through Raft, decided against the committed state when applied, with the leader epoch
bumped as every election does.  ``topic_partitions`` null means every partition, and
then, as Kafka, the partitions that needed no election are left out of the answer.

It is a controller decision: this broker must be the controller (clients send it to
the Metadata answer's ``controller_id``), and the command carries the Raft term read
before submitting, so it is refused (NOT_CONTROLLER) if leadership moved meanwhile.

Kafka's checks, in its order: Alter on the cluster (CLUSTER_AUTHORIZATION_FAILED, at
the top level and for every partition asked), then this broker is the controller
(NOT_CONTROLLER likewise; retriable: the client refreshes metadata and sends again).
The answer waits, within ``timeout_ms``, until every live broker knows the new leaders
(Kafka's DelayedElectLeader); partitions elected but not yet known everywhere then are
answered REQUEST_TIMED_OUT (elected all the same).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kafka.protocol.admin import ElectLeadersResponse

from protocol.errors import ErrorCode

from ..controller.metadata_client import ApplyError, MetadataUnavailable
from ..security.acls import AclOperation
from .partitions import Deadline

if TYPE_CHECKING:
    from protocol.messages import Request

    from .context import ApiContext

log = logging.getLogger(__name__)

TopicResult = ElectLeadersResponse.ReplicaElectionResult
PartitionResult = TopicResult.PartitionResult
PREFERRED = 0


async def handle_elect_leaders(ctx: ApiContext, request: Request) -> ElectLeadersResponse:
    body = request.body
    election_type = body.election_type if request.api_version >= 1 else PREFERRED
    targets = _targets(body.topic_partitions)
    if not ctx.authorizer.allows_cluster(request, AclOperation.ALTER):
        return _refused_whole(targets, ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                              "Alter on the cluster is required")
    term = ctx.metadata.controller_term
    if not ctx.metadata.is_controller:
        return _refused_whole(targets, ErrorCode.NOT_CONTROLLER,
                              f"broker {ctx.node_id} is not the controller")
    if election_type not in (0, 1):
        return _refused_whole(targets, ErrorCode.INVALID_REQUEST,
                              f"unknown election type {election_type}")
    deadline = Deadline(body.timeout_ms)
    try:
        # The Raft write has the metadata client's own bound, as Kafka's controller write
        # has; timeout_ms bounds the wait for the other brokers below.
        results = await ctx.metadata.elect_leaders(election_type, targets,
                                                   controller_term=term)
    except ApplyError as exc:
        return _refused_whole(targets, ErrorCode[exc.code], str(exc))
    except MetadataUnavailable as exc:
        return _refused_whole(targets, ErrorCode.REQUEST_TIMED_OUT, str(exc))
    elected = [(name, index) for name, index, code, _ in results if code == "NONE"]
    if elected and deadline.timeout_ms > 0:
        position = ctx.image.position()
        await ctx.metadata.wait_until_brokers_know(position, ctx.node_id,
                                                   deadline.remaining_s())
        if ctx.metadata.brokers_lacking(position, ctx.node_id):
            unknown = set(elected)
            results = [[n, i, "REQUEST_TIMED_OUT", "elected, but not yet known to every "
                        "live broker"] if (n, i) in unknown else [n, i, c, m]
                       for n, i, c, m in results]
    if targets is None:
        results = [r for r in results if r[2] != "ELECTION_NOT_NEEDED"]
    return _response(ErrorCode.NONE, [(n, i, ErrorCode[c], m) for n, i, c, m in results])


def _targets(topic_partitions: list | None) -> list[list] | None:
    """[topic, partition] pairs in request order, each once (Kafka's request keys them
    as a set); None for every partition."""
    if topic_partitions is None:
        return None
    seen: dict[tuple[str, int], None] = {}
    for topic in topic_partitions:
        for index in topic.partitions:
            seen[(topic.topic, index)] = None
    return [[name, index] for name, index in seen]


def _refused_whole(targets: list[list] | None, code: ErrorCode,
                   message: str) -> ElectLeadersResponse:
    return _response(code, [(name, index, code, message) for name, index in targets or ()])


def _response(top_code: ErrorCode, results: list[tuple]) -> ElectLeadersResponse:
    by_topic: dict[str, list] = {}
    for name, index, code, message in results:
        by_topic.setdefault(name, []).append(PartitionResult(
            partition_id=index, error_code=code,
            error_message=None if code == ErrorCode.NONE else message))
    return ElectLeadersResponse(
        throttle_time_ms=0, error_code=top_code,
        replica_election_results=[TopicResult(topic=name, partition_result=partitions)
                                  for name, partitions in by_topic.items()])

"""New partitions: CreatePartitions, and answering CreateTopics/CreatePartitions only once
every live broker knows what they created.

CreatePartitions (v0-3) grows a topic to ``count`` partitions, with the replica lists
given for the new ones or computed as CreateTopics computes them (``assign_replicas``
over the live brokers, continuing the topic's round-robin, with the replication factor
of its partition 0), through one CreatePartitions metadata command per topic.
Kafka's checks and codes, in its order: Alter on the topic (TOPIC_AUTHORIZATION_FAILED),
a topic named twice (INVALID_REQUEST), an unknown topic (UNKNOWN_TOPIC_OR_PARTITION),
an internal one (INVALID_TOPIC_EXCEPTION: ``__consumer_offsets`` places groups by its
partition count, and DeleteTopics refuses internal topics likewise), a count not above
the current one (INVALID_PARTITIONS), assignments that do not give one non-empty list
per new partition of distinct registered brokers with the topic's replication factor
(INVALID_REPLICA_ASSIGNMENT), more replicas than live brokers when computing
(INVALID_REPLICATION_FACTOR).  ``validate_only`` checks and changes nothing.

Waiting (Kafka's DelayedCreatePartitions): a request that created topics or partitions
answers once every live broker has applied the metadata image that holds them
(``MetadataClient.wait_until_brokers_know``; how brokers report it is in
broker/controller/propagation.py), bounded by the request's ``timeout_ms``.  A topic
still unknown somewhere when the time runs out is answered REQUEST_TIMED_OUT; it is
created all the same, as in Kafka.  ``timeout_ms <= 0`` answers at once, without
waiting (Kafka's rule too).  The handler runs as a task of its own
(``TaskSupervisor.outlive``): a client that leaves drops only the answer, never the
changes of the request not yet submitted.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin import CreatePartitionsResponse

from protocol.errors import ErrorCode

from ..controller.metadata_client import ApplyError, MetadataUnavailable, assign_replicas
from ..quotas.mutations import EXCEEDED_MESSAGE
from ..security.acls import AclOperation, ResourceType
from ..topics import is_internal
from . import client_quotas

if TYPE_CHECKING:
    from protocol.messages import Request

    from ..controller.metadata_client import ClusterState
    from .context import ApiContext

log = logging.getLogger(__name__)

Result = CreatePartitionsResponse.CreatePartitionsTopicResult
# Kafka's MAX_PARTITIONS_PER_BATCH: more new partitions than this in one CreateTopics or
# CreatePartitions request is refused with POLICY_VIOLATION before any is assigned
# (assigning two billion replica lists would hold the event loop for good).
MAX_PARTITIONS_PER_REQUEST = 10_000
EXCESSIVE_PARTITIONS = "Excessively large number of partitions per request."


class PartitionsRefused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class Deadline:
    """A request's ``timeout_ms``, counted from its handler's start."""

    def __init__(self, timeout_ms: int) -> None:
        self.timeout_ms = timeout_ms
        self._end = asyncio.get_running_loop().time() + max(0, timeout_ms) / 1000.0

    def remaining_s(self) -> float:
        return max(0.0, self._end - asyncio.get_running_loop().time())


async def unknown_after_wait(ctx: ApiContext, positions: dict[str, tuple],
                             deadline: Deadline) -> set[str]:
    """Wait until every live broker knows the image at each of ``positions`` (topic name →
    ``image.position()`` right after its change was applied here), within ``deadline``;
    returns the names some live broker still does not know.  Nothing is waited for when
    ``timeout_ms <= 0`` or nothing was created."""
    if not positions or deadline.timeout_ms <= 0:
        return set()
    newest = max(positions.values())
    lagging = await ctx.metadata.wait_until_brokers_know(newest, ctx.node_id,
                                                         deadline.remaining_s())
    if not lagging:
        return set()
    return {name for name, position in positions.items()
            if ctx.metadata.brokers_lacking(position, ctx.node_id)}


async def handle_create_partitions(ctx: ApiContext,
                                   request: Request) -> CreatePartitionsResponse:
    return await ctx.replica_manager.tasks.outlive("CreatePartitions",
                                                   _create_partitions(ctx, request))


async def _create_partitions(ctx: ApiContext, request: Request) -> CreatePartitionsResponse:
    body = request.body
    deadline = Deadline(body.timeout_ms)
    results: list = []
    positions: dict[str, tuple] = {}
    named = [topic.name for topic in body.topics]
    budget = MAX_PARTITIONS_PER_REQUEST
    quota = client_quotas.mutation_quota(ctx, request, "CreatePartitions")  # KIP-599
    for topic in body.topics:
        try:
            if not ctx.authorizer.allows(request, AclOperation.ALTER, ResourceType.TOPIC,
                                         topic.name):
                raise PartitionsRefused(ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                        "Alter on the topic is required")
            if named.count(topic.name) > 1:
                raise PartitionsRefused(ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
            topic_id, assignment = _validate(ctx, topic, budget)
            budget -= len(assignment)
            if not body.validate_only:
                if quota.exceeded():
                    raise PartitionsRefused(ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                                            EXCEEDED_MESSAGE)
                await ctx.metadata.create_partitions(topic.name, topic_id, topic.count,
                                                     assignment)
                quota.record(len(assignment))
                positions[topic.name] = ctx.image.position()
                log.info("[CreatePartitions broker=%d] %s now has %d partitions", ctx.node_id,
                         topic.name, topic.count)
            results.append(Result(name=topic.name, error_code=ErrorCode.NONE,
                                  error_message=None))
        except PartitionsRefused as exc:
            results.append(_refused(topic.name, exc.code, str(exc)))
        except ApplyError as exc:
            results.append(_refused(topic.name, ErrorCode[exc.code], str(exc)))
        except MetadataUnavailable as exc:
            results.append(_refused(topic.name, ErrorCode.REQUEST_TIMED_OUT, str(exc)))
    unknown = await unknown_after_wait(ctx, positions, deadline)
    results = [_refused(r.name, ErrorCode.REQUEST_TIMED_OUT, "created, but not yet known to "
                        "every live broker") if r.name in unknown else r for r in results]
    return CreatePartitionsResponse(throttle_time_ms=client_quotas.throttled(request, quota),
                                    results=results)


def _refused(name: str, code: ErrorCode, message: str) -> Result:
    return Result(name=name, error_code=code, error_message=message)


def _validate(ctx: ApiContext, topic: Any, budget: int) -> tuple[str, list[list[int]]]:
    """(topic id, replica lists of the new partitions), or PartitionsRefused; at most
    ``budget`` new partitions (the request's remaining MAX_PARTITIONS_PER_REQUEST)."""
    image = ctx.image
    info = image.topics.get(topic.name)
    if info is None:
        raise PartitionsRefused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                f"topic {topic.name!r} does not exist")
    if is_internal(topic.name):
        raise PartitionsRefused(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                f"internal topic {topic.name} cannot get more partitions")
    current = len(info.partitions)
    if topic.count < current:
        raise PartitionsRefused(ErrorCode.INVALID_PARTITIONS,
                                f"The topic {topic.name} currently has {current} partition(s); "
                                f"{topic.count} would not be an increase.")
    if topic.count == current:
        raise PartitionsRefused(ErrorCode.INVALID_PARTITIONS,
                                f"Topic already has {current} partition(s).")
    added = topic.count - current
    if added > budget:
        raise PartitionsRefused(ErrorCode.POLICY_VIOLATION, EXCESSIVE_PARTITIONS)
    replication = len(info.partitions[0].replicas) if info.partitions else 1
    if topic.assignments is None:
        live = image.live_brokers()
        if replication > len(live):
            raise PartitionsRefused(ErrorCode.INVALID_REPLICATION_FACTOR,
                                    f"replication factor {replication} exceeds the "
                                    f"{len(live)} live broker(s)")
        start = sum(topic.name.encode()) % max(1, len(live))
        return info.topic_id, assign_replicas(live, topic.count, replication, start)[current:]
    if len(topic.assignments) != added:
        raise PartitionsRefused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                f"Attempted to add {added} additional partition(s), but only "
                                f"{len(topic.assignments)} assignment(s) were specified.")
    assignment = [list(a.broker_ids) for a in topic.assignments]
    for replicas in assignment:
        problem = _replica_list_problem(image, replicas, replication)
        if problem:
            raise PartitionsRefused(ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem)
    return info.topic_id, assignment


def _replica_list_problem(image: ClusterState, replicas: list[int], replication: int) -> str | None:
    if not replicas:
        return "The manual partition assignment includes an empty replica list."
    for broker_id in replicas:
        if replicas.count(broker_id) > 1:
            return (f"The manual partition assignment includes the broker {broker_id} "
                    f"more than once.")
        if broker_id not in image.brokers:
            return (f"The manual partition assignment includes broker {broker_id}, but no "
                    f"such broker is registered.")
    if len(replicas) != replication:
        return (f"The manual partition assignment includes a partition with {len(replicas)} "
                f"replica(s), but this is not consistent with previous partitions, which "
                f"have {replication} replica(s).")
    return None

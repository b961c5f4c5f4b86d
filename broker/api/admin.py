"""CreateTopics and DeleteTopics, through the cluster metadata.

Assignment spreads replicas over the live brokers with leaders balanced
(``assign_replicas``); a replication factor above the live brokers answers
INVALID_REPLICATION_FACTOR, as Kafka does.  Changes go through the broker's
MetadataClient (``ctx.metadata``); handlers run on the event loop.

Authorization (Kafka's): CreateTopics needs Create on the cluster or on the topic,
DeleteTopics Delete on the topic; a refused topic gets TOPIC_AUTHORIZATION_FAILED (by
id: UNKNOWN_TOPIC_ID unless Describe is allowed, so existence is not revealed).

A request's changes go on when its client leaves: each handler runs its work as a task
of its own (``TaskSupervisor.outlive`` on the replica manager's supervisor, the
broker-wide one handlers reach), so a lost connection drops only the answer, never the
topics of the request not yet submitted.
"""
from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin import CreateTopicsResponse, DeleteTopicsResponse

from protocol.errors import ErrorCode

from ..controller.metadata_client import ApplyError, MetadataUnavailable
from ..quotas.mutations import EXCEEDED_MESSAGE
from ..security.acls import AclOperation, ResourceType
from ..topics import is_internal, topic_name_problem
from . import client_quotas
from .partitions import (
    EXCESSIVE_PARTITIONS,
    MAX_PARTITIONS_PER_REQUEST,
    Deadline,
    unknown_after_wait,
)

if TYPE_CHECKING:
    from protocol.messages import Request

    from .context import ApiContext

log = logging.getLogger(__name__)

Created = CreateTopicsResponse.CreatableTopicResult
CreatedConfig = Created.CreatableTopicConfigs
Deleted = DeleteTopicsResponse.DeletableTopicResult
CONFIG_SOURCE_TOPIC = 1
CONFIG_SOURCE_DEFAULT = 5


class TopicRefused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


async def create_topic_now(ctx: ApiContext, name: str, partitions: int, replication: int,
                           configs: dict[str, str],
                           assignment: list[list[int]] | None = None) -> str:
    """Commit a new topic to the metadata; returns its id (ApplyError if refused).

    ``ctx`` is anything with ``metadata`` (a MetadataClient), e.g. an ApiContext; without
    an ``assignment`` the replicas are spread over the live brokers."""
    if assignment is None:
        return await ctx.metadata.create_topic_on_live_brokers(name, partitions, replication,
                                                               configs)
    return await ctx.metadata.create_topic(name, assignment, configs)


async def handle_create_topics(ctx: ApiContext, request: Request) -> CreateTopicsResponse:
    return await ctx.replica_manager.tasks.outlive("CreateTopics", _create_topics(ctx, request))


async def _create_topics(ctx: ApiContext, request: Request) -> CreateTopicsResponse:
    body = request.body
    deadline = Deadline(body.timeout_ms)
    results = []
    positions: dict[str, tuple] = {}  # created topic -> the image position that holds it
    seen: set[str] = set()
    authorizer = ctx.authorizer
    may_create_any = authorizer.allows_cluster(request, AclOperation.CREATE, log_denial=False)
    quota = client_quotas.mutation_quota(ctx, request, "CreateTopics")  # KIP-599
    if _requested_partitions(ctx, body.topics) > MAX_PARTITIONS_PER_REQUEST:
        return CreateTopicsResponse(throttle_time_ms=0, topics=[
            _refused(t.name, ErrorCode.POLICY_VIOLATION, EXCESSIVE_PARTITIONS)
            for t in body.topics])
    for topic in body.topics:
        try:
            if topic.name in seen:
                raise TopicRefused(ErrorCode.INVALID_REQUEST, "topic named twice in one request")
            seen.add(topic.name)
            if not may_create_any and not authorizer.allows(
                    request, AclOperation.CREATE, ResourceType.TOPIC, topic.name):
                raise TopicRefused(ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                   "Create on the cluster or on the topic is required")
            partitions, replication, configs, assignment = _validate(ctx, topic)
            topic_id = None
            if not body.validate_only:
                if quota.exceeded():
                    raise TopicRefused(ErrorCode.THROTTLING_QUOTA_EXCEEDED, EXCEEDED_MESSAGE)
                topic_id = await create_topic_now(ctx, topic.name, partitions, replication,
                                                  configs, assignment)
                quota.record(partitions)
                positions[topic.name] = ctx.image.position()
            results.append(_created(ctx, topic.name, topic_id, partitions, replication,
                                    configs))
        except TopicRefused as exc:
            results.append(_refused(topic.name, exc.code, str(exc)))
        except ApplyError as exc:
            results.append(_refused(topic.name, ErrorCode[exc.code], str(exc)))
        except MetadataUnavailable as exc:
            results.append(_refused(topic.name, ErrorCode.REQUEST_TIMED_OUT, str(exc)))
    unknown = await unknown_after_wait(ctx, positions, deadline)  # partitions.py
    results = [_refused(r.name, ErrorCode.REQUEST_TIMED_OUT, "created, but not yet known to "
                        "every live broker") if r.name in unknown else r for r in results]
    return CreateTopicsResponse(throttle_time_ms=client_quotas.throttled(request, quota),
                                topics=results)


def _requested_partitions(ctx: ApiContext, topics: list) -> int:
    """Kafka's count for its per-request limit: assignments when given, else the
    partitions asked for (-1: the default)."""
    default = ctx.config["num.partitions"]
    return sum(len(t.assignments) if t.assignments
               else default if t.num_partitions == -1 else max(0, t.num_partitions)
               for t in topics)


def _refused(name: str, code: ErrorCode, message: str | None) -> Created:
    return Created(name=name, topic_id=None, error_code=code, error_message=message,
                   num_partitions=-1, replication_factor=-1, configs=None)


def _validate(ctx: ApiContext,
              topic: Any) -> tuple[int, int, dict[str, str], list[list[int]] | None]:
    problem = topic_name_problem(topic.name)
    if problem:
        raise TopicRefused(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
    image = ctx.image
    if topic.name in image.topics:
        raise TopicRefused(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {topic.name!r} already exists")
    live = image.live_brokers()
    assignment = None
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            raise TopicRefused(ErrorCode.INVALID_REQUEST,
                               "give either assignments or partitions and replication factor")
        by_index = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
        if sorted(by_index) != list(range(len(by_index))):
            raise TopicRefused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                               "assignments must cover partitions 0..n-1")
        assignment = [by_index[i] for i in range(len(by_index))]
        for replicas in assignment:
            if not replicas or len(set(replicas)) != len(replicas) \
                    or any(r not in image.brokers for r in replicas):
                raise TopicRefused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                   f"bad replica list {replicas}")
        partitions, replication = len(assignment), len(assignment[0])
    else:
        partitions = topic.num_partitions
        if partitions == -1:
            partitions = ctx.config["num.partitions"]
        replication = topic.replication_factor
        if replication == -1:
            replication = ctx.config["default.replication.factor"]
    if partitions < 1:
        raise TopicRefused(ErrorCode.INVALID_PARTITIONS, "number of partitions must be at least 1")
    if replication < 1:
        raise TopicRefused(ErrorCode.INVALID_REPLICATION_FACTOR,
                           "replication factor must be at least 1")
    if assignment is None and replication > len(live):
        raise TopicRefused(ErrorCode.INVALID_REPLICATION_FACTOR,
                           f"replication factor {replication} exceeds the {len(live)} "
                           f"live broker(s)")
    configs = {c.name: c.value for c in topic.configs if c.value is not None}
    try:
        ctx.replica_manager.validate_topic_configs(configs)
    except (ValueError, KeyError) as exc:
        raise TopicRefused(ErrorCode.INVALID_CONFIG, str(exc)) from exc
    return partitions, replication, configs, assignment


def _created(ctx: ApiContext, name: str, topic_id: str | None, partitions: int, replication: int,
             configs: dict[str, str]) -> Created:
    effective = ctx.config.topic_defaults()
    effective.update(configs)
    return Created(
        name=name, topic_id=uuid.UUID(topic_id) if topic_id else None,
        error_code=ErrorCode.NONE, error_message=None, num_partitions=partitions,
        replication_factor=replication,
        configs=[CreatedConfig(name=k, value=v, read_only=False,
                               config_source=CONFIG_SOURCE_TOPIC if k in configs
                               else CONFIG_SOURCE_DEFAULT, is_sensitive=False)
                 for k, v in sorted(effective.items())])


def _delete_refusal(ctx: ApiContext, request: Request, name: str | None,
                    record: Any) -> ErrorCode | None:
    """Kafka's order: a name without Delete is refused before its existence is looked
    at; an id that is unknown, or whose topic may be neither deleted nor described, is
    UNKNOWN_TOPIC_ID."""
    authorizer = ctx.authorizer
    if name is not None and not authorizer.allows(request, AclOperation.DELETE,
                                                  ResourceType.TOPIC, name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if record is None:
        return ErrorCode.UNKNOWN_TOPIC_ID if name is None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if name is None and not authorizer.allows(request, AclOperation.DELETE, ResourceType.TOPIC,
                                              record.name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED if authorizer.allows(
            request, AclOperation.DESCRIBE, ResourceType.TOPIC, record.name,
            log_denial=False) else ErrorCode.UNKNOWN_TOPIC_ID
    return None


async def handle_delete_topics(ctx: ApiContext, request: Request) -> DeleteTopicsResponse:
    return await ctx.replica_manager.tasks.outlive("DeleteTopics", _delete_topics(ctx, request))


async def _delete_topics(ctx: ApiContext, request: Request) -> DeleteTopicsResponse:
    body = request.body
    if request.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in body.topics]
    else:
        wanted = [(name, None) for name in body.topic_names]
    results = []
    quota = client_quotas.mutation_quota(ctx, request, "DeleteTopics")  # KIP-599
    for name, topic_id in wanted:
        image = ctx.image
        record = image.topics.get(name) if name else None
        if record is None and topic_id is not None:
            record = image.topic_by_id(str(topic_id))
        code = _delete_refusal(ctx, request, name, record)
        if code is not None:
            results.append(Deleted(name=name, topic_id=topic_id, error_code=code,
                                   error_message=code.name))
            continue
        if is_internal(record.name):
            results.append(Deleted(name=record.name, topic_id=uuid.UUID(record.topic_id),
                                   error_code=ErrorCode.INVALID_TOPIC_EXCEPTION,
                                   error_message=f"internal topic {record.name} cannot be "
                                                 f"deleted"))
            continue
        if quota.exceeded():
            results.append(Deleted(name=record.name, topic_id=uuid.UUID(record.topic_id),
                                   error_code=ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                                   error_message=EXCEEDED_MESSAGE))
            continue
        try:
            await ctx.metadata.delete_topic(record.name)
            quota.record(len(record.partitions))
            code, message = ErrorCode.NONE, None
        except ApplyError as exc:
            code, message = ErrorCode[exc.code], str(exc)
        except MetadataUnavailable as exc:
            code, message = ErrorCode.REQUEST_TIMED_OUT, str(exc)
        results.append(Deleted(name=record.name, topic_id=uuid.UUID(record.topic_id),
                               error_code=code, error_message=message))
    return DeleteTopicsResponse(throttle_time_ms=client_quotas.throttled(request, quota),
                                responses=results)

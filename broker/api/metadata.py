"""ApiVersions and Metadata (with auto.create.topics.enable).

With an authorizer (Kafka's rules): a listing of all topics leaves out those the
principal may not Describe; a topic asked for by name without Describe is answered
TOPIC_AUTHORIZATION_FAILED whether it exists or not (by id: UNKNOWN_TOPIC_ID, so
existence is not revealed); auto-creation also needs Create on the cluster or on the
topic, else TOPIC_AUTHORIZATION_FAILED.
"""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from kafka.protocol.metadata import ApiVersionsResponse, MetadataResponse

from protocol.errors import ErrorCode
from protocol.messages import api_versions_body

from ..controller.metadata_client import NO_LEADER, ApplyError, MetadataUnavailable
from ..security.acls import AclOperation, ResourceType
from ..topics import is_internal, topic_name_problem
from . import features
from .admin import create_topic_now

if TYPE_CHECKING:
    from protocol.messages import Request

    from ..controller.metadata_client import ClusterState
    from .context import ApiContext

# Metadata v8+ asks whether to include authorized operations; we have no ACLs.
AUTHORIZED_OPERATIONS_OMITTED = None  # kafka-python encodes None as INT32_MIN ("not requested")

Topic = MetadataResponse.MetadataResponseTopic
PartitionMeta = Topic.MetadataResponsePartition


async def handle_api_versions(ctx: ApiContext, request: Request) -> ApiVersionsResponse:
    if request.api_version >= 3 and request.session is not None:  # KIP-714's selectors
        request.session.client_software = (request.body.client_software_name or "",
                                           request.body.client_software_version or "")
    body = api_versions_body(version=request.api_version)
    return features.add_features(body, ctx.image, request.api_version)


async def handle_metadata(ctx: ApiContext, request: Request) -> MetadataResponse:
    body = request.body
    requested = body.topics
    if requested is None or (request.api_version == 0 and not requested):
        image = ctx.image
        topics = [_describe_topic(image, name) for name in sorted(image.topics)
                  if ctx.authorizer.allows(request, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                           name, log_denial=False)]
    else:
        allow_create = body.allow_auto_topic_creation if request.api_version >= 4 else True
        topics = [await _requested_topic(ctx, request, t, allow_create) for t in requested]
    image = ctx.image
    # Kafka answers with each broker's endpoint of the listener the request came in on,
    # and leaves out brokers without that listener.
    listener_name = request.session.listener.name if request.session is not None else None
    brokers = []
    for b in sorted(image.brokers.values(), key=lambda b: b.broker_id):
        address = b.endpoint(listener_name) if listener_name else (b.host, b.port)
        if not b.fenced and address is not None:
            brokers.append(MetadataResponse.MetadataResponseBroker(
                node_id=b.broker_id, host=address[0], port=address[1], rack=b.rack))
    return MetadataResponse(
        throttle_time_ms=0, brokers=brokers, cluster_id=image.cluster_id or None,
        controller_id=ctx.metadata.controller_id, topics=topics, error_code=ErrorCode.NONE,
        authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


async def _requested_topic(ctx: ApiContext, request: Request, requested: Any,
                           allow_create: bool) -> Topic:
    name = requested.name
    authorizer = ctx.authorizer
    # By id (KIP-516): the Java client sends the name empty rather than null.
    if not name and requested.topic_id is not None and requested.topic_id.int != 0:
        record = ctx.image.topic_by_id(str(requested.topic_id))
        if record is None or not authorizer.allows(request, AclOperation.DESCRIBE,
                                                   ResourceType.TOPIC, record.name):
            return Topic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None,
                         topic_id=requested.topic_id, is_internal=False, partitions=[],
                         authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
        name = record.name
    elif not authorizer.allows(request, AclOperation.DESCRIBE, ResourceType.TOPIC, name or ""):
        return _error_topic(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if name not in ctx.image.topics:
        if topic_name_problem(name) is not None:
            return _error_topic(name, ErrorCode.INVALID_TOPIC_EXCEPTION)
        if not (allow_create and ctx.config["auto.create.topics.enable"]) \
                or name.startswith("__"):
            # Internal topics (__consumer_offsets) are created by their coordinator with
            # their own partition count and configs, never by a client's Metadata.
            return _error_topic(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if not (authorizer.allows_cluster(request, AclOperation.CREATE, log_denial=False)
                or authorizer.allows(
                request, AclOperation.CREATE, ResourceType.TOPIC, name)):
            return _error_topic(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        try:
            await create_topic_now(ctx, name, ctx.config["num.partitions"],
                                   ctx.config["default.replication.factor"], {})
        except ApplyError as exc:
            if exc.code != "TOPIC_ALREADY_EXISTS":
                return _error_topic(name, ErrorCode[exc.code])
        except MetadataUnavailable:
            return _error_topic(name, ErrorCode.LEADER_NOT_AVAILABLE)
        if name not in ctx.image.topics:
            return _error_topic(name, ErrorCode.LEADER_NOT_AVAILABLE)
    return _describe_topic(ctx.image, name)


def _error_topic(name: str | None, code: ErrorCode) -> Topic:
    return Topic(error_code=code, name=name, topic_id=None, is_internal=False,
                 partitions=[], authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


def _describe_topic(image: ClusterState, name: str) -> Topic:
    record = image.topics[name]
    partitions = []
    for index, p in sorted(record.partitions.items()):
        offline = [r for r in p.replicas if not image.is_live(r)]
        partitions.append(PartitionMeta(
            error_code=ErrorCode.LEADER_NOT_AVAILABLE if p.leader == NO_LEADER else ErrorCode.NONE,
            partition_index=index, leader_id=p.leader, leader_epoch=p.leader_epoch,
            replica_nodes=list(p.replicas), isr_nodes=list(p.isr), offline_replicas=offline))
    return Topic(error_code=ErrorCode.NONE, name=name, topic_id=uuid.UUID(record.topic_id),
                 is_internal=is_internal(name), partitions=partitions,
                 authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)

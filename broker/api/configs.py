"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.

Topic configs are overrides kept in the cluster metadata (``alter_topic_configs``
through the broker's MetadataClient); every broker follows them (the replica manager
re-reads them from each new image).  IncrementalAlterConfigs' APPEND and SUBTRACT work
on Kafka's list-type topic configs (``LIST_CONFIGS``), as in Kafka.
BROKER, BROKER_LOGGER and GROUP resources are resource_configs.py's (dynamic broker
configs, logger levels, KIP-848 group configs): routed there before anything else.

Authorization (Kafka's): DescribeConfigs on the topic or the cluster (for a broker
resource) to describe, AlterConfigs to alter; refused: TOPIC_AUTHORIZATION_FAILED or
CLUSTER_AUTHORIZATION_FAILED for that resource, before its existence is looked at.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka.protocol.admin import (
    AlterConfigsResponse,
    DescribeConfigsResponse,
    IncrementalAlterConfigsResponse,
)

from protocol.errors import ErrorCode

from ..controller.metadata_client import ApplyError, MetadataUnavailable
from ..security.acls import AclOperation, ResourceType
from ..topics import SPECS, THROTTLED_REPLICAS_CONFIGS
from . import resource_configs
from .topic_config_view import topic_entries

if TYPE_CHECKING:
    from protocol.messages import Request

    from .context import ApiContext

TOPIC = 2
BROKER = 4
SOURCE_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

# Kafka's LIST-type topic configs: IncrementalAlterConfigs may APPEND to and SUBTRACT from them.
LIST_CONFIGS = frozenset({"cleanup.policy", *THROTTLED_REPLICAS_CONFIGS})

Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = Result.DescribeConfigsResourceResult
AlterResult = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
PlainAlterResult = AlterConfigsResponse.AlterConfigsResourceResponse


class ConfigRefused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def topic_defaults(ctx: ApiContext) -> dict[str, str]:
    """Every topic config's value for a topic without overrides."""
    return {**{name: spec.default for name, spec in SPECS.items()},
            **ctx.config.topic_defaults()}


async def handle_describe_configs(ctx: ApiContext, request: Request) -> DescribeConfigsResponse:
    results = []
    for resource in request.body.resources:
        keys = resource.configuration_keys
        if resource.resource_type in resource_configs.SERVED:
            code, message, configs = resource_configs.describe(ctx, request, resource)
            results.append(Result(error_code=code, error_message=message, configs=configs,
                                  resource_type=resource.resource_type,
                                  resource_name=resource.resource_name))
            continue
        try:
            _authorize(ctx, request, AclOperation.DESCRIBE_CONFIGS, resource)
            if resource.resource_type != TOPIC:
                raise ConfigRefused(ErrorCode.INVALID_REQUEST,
                                    f"resource type {resource.resource_type} not served")
            configs = _describe_topic(ctx, request, resource.resource_name, keys)
            results.append(Result(error_code=ErrorCode.NONE, error_message=None,
                                  resource_type=resource.resource_type,
                                  resource_name=resource.resource_name, configs=configs))
        except ConfigRefused as exc:
            results.append(Result(error_code=exc.code, error_message=str(exc),
                                  resource_type=resource.resource_type,
                                  resource_name=resource.resource_name, configs=[]))
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


def _describe_topic(ctx: ApiContext, request: Request, name: str,
                    keys: list[str] | None) -> list:
    """Every topic config with its value and source (topic_config_view.py)."""
    topic = ctx.image.topics.get(name)
    if topic is None:
        raise ConfigRefused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
    body = request.body
    return topic_entries(ctx.config, ctx.image, ctx.node_id, topic.configs, keys,
                         bool(getattr(body, "include_synonyms", False)),
                         bool(getattr(body, "include_documentation", False)))


def _authorize(ctx: ApiContext, request: Request, operation: AclOperation,
               resource: Any) -> None:
    """ConfigRefused unless the request may ``operation`` the topic or (broker) cluster."""
    if resource.resource_type == TOPIC:
        if not ctx.authorizer.allows(request, operation, ResourceType.TOPIC,
                                     resource.resource_name):
            raise ConfigRefused(ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                f"{operation.name} on topic {resource.resource_name!r} is required")
    elif not ctx.authorizer.allows_cluster(request, operation):
        raise ConfigRefused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                            f"{operation.name} on the cluster is required")


async def handle_incremental_alter_configs(
        ctx: ApiContext, request: Request) -> IncrementalAlterConfigsResponse:
    """Every resource of the request is altered even if the client leaves meanwhile
    (its own task: a lost connection drops the answer, never the rest of the loop)."""
    return await ctx.replica_manager.tasks.outlive(
        "IncrementalAlterConfigs", _incremental_alter_configs(ctx, request))


async def _incremental_alter_configs(ctx: ApiContext,
                                     request: Request) -> IncrementalAlterConfigsResponse:
    body = request.body
    responses = []
    for resource in body.resources:
        if resource.resource_type in resource_configs.SERVED:
            code, message = await resource_configs.alter(
                ctx, request, resource, [(c.name, c.config_operation, c.value)
                                         for c in resource.configs],
                body.validate_only, replace=False)
            responses.append(AlterResult(error_code=code, error_message=message,
                                         resource_type=resource.resource_type,
                                         resource_name=resource.resource_name))
            continue
        try:
            _authorize(ctx, request, AclOperation.ALTER_CONFIGS, resource)
            changes = {}
            for c in resource.configs:
                if c.config_operation == SET:
                    changes[c.name] = c.value
                elif c.config_operation == DELETE:
                    changes[c.name] = None
                elif c.config_operation in (APPEND, SUBTRACT) and c.name in LIST_CONFIGS:
                    changes[c.name] = _list_change(ctx, resource, changes, c)
                else:
                    raise ConfigRefused(ErrorCode.INVALID_REQUEST,
                                        f"{c.name}: APPEND/SUBTRACT apply to list configs "
                                        f"only ({', '.join(sorted(LIST_CONFIGS))})")
            await _alter_topic(ctx, resource.resource_type, resource.resource_name, changes,
                               body.validate_only, replace=False)
            code, message = ErrorCode.NONE, None
        except ConfigRefused as exc:
            code, message = exc.code, str(exc)
        responses.append(AlterResult(error_code=code, error_message=message,
                                     resource_type=resource.resource_type,
                                     resource_name=resource.resource_name))
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)


def _list_change(ctx: ApiContext, resource: Any, changes: dict, change: Any) -> str:
    """Kafka's APPEND (items not there yet, in order) or SUBTRACT (items removed) on a
    list config, over its value so far in this request, else the topic's, else the
    default."""
    name = change.name
    if name in changes:
        current = changes[name]
    else:
        topic = ctx.image.topics.get(resource.resource_name) \
            if resource.resource_type == TOPIC else None
        current = topic.configs.get(name) if topic is not None else None
        if current is None:
            current = topic_defaults(ctx).get(name, "")
    items = [i.strip() for i in (current or "").split(",") if i.strip()]
    given = [i.strip() for i in (change.value or "").split(",") if i.strip()]
    if change.config_operation == APPEND:
        items += [i for i in dict.fromkeys(given) if i not in items]
    else:
        items = [i for i in items if i not in given]
    return ",".join(items)


async def handle_alter_configs(ctx: ApiContext, request: Request) -> AlterConfigsResponse:
    """The legacy AlterConfigs: the given set replaces every topic override (its own
    task, as IncrementalAlterConfigs)."""
    return await ctx.replica_manager.tasks.outlive("AlterConfigs", _alter_configs(ctx, request))


async def _alter_configs(ctx: ApiContext, request: Request) -> AlterConfigsResponse:
    body = request.body
    responses = []
    for resource in body.resources:
        if resource.resource_type in resource_configs.SERVED:
            code, message = await resource_configs.alter(
                ctx, request, resource, [(c.name, SET, c.value) for c in resource.configs],
                body.validate_only, replace=True)
            responses.append(PlainAlterResult(error_code=code, error_message=message,
                                              resource_type=resource.resource_type,
                                              resource_name=resource.resource_name))
            continue
        try:
            _authorize(ctx, request, AclOperation.ALTER_CONFIGS, resource)
            changes = {c.name: c.value for c in resource.configs}
            await _alter_topic(ctx, resource.resource_type, resource.resource_name, changes,
                               body.validate_only, replace=True)
            code, message = ErrorCode.NONE, None
        except ConfigRefused as exc:
            code, message = exc.code, str(exc)
        responses.append(PlainAlterResult(error_code=code, error_message=message,
                                          resource_type=resource.resource_type,
                                          resource_name=resource.resource_name))
    return AlterConfigsResponse(throttle_time_ms=0, responses=responses)


async def _alter_topic(ctx: ApiContext, resource_type: int, name: str, changes: dict,
                       validate_only: bool, replace: bool) -> None:
    if resource_type != TOPIC:
        raise ConfigRefused(ErrorCode.INVALID_REQUEST, f"resource type {resource_type} not served")
    topic = ctx.image.topics.get(name)
    if topic is None:
        raise ConfigRefused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
    if replace:
        changes = {**dict.fromkeys(topic.configs), **changes}
    merged = {k: v for k, v in {**topic.configs, **changes}.items() if v is not None}
    try:
        ctx.replica_manager.validate_topic_configs(merged)
    except (ValueError, KeyError) as exc:
        raise ConfigRefused(ErrorCode.INVALID_CONFIG, str(exc)) from exc
    if validate_only:
        return
    try:
        await ctx.metadata.alter_topic_configs(name, changes)
    except ApplyError as exc:
        raise ConfigRefused(ErrorCode[exc.code], str(exc)) from exc
    except MetadataUnavailable as exc:
        raise ConfigRefused(ErrorCode.REQUEST_TIMED_OUT, str(exc)) from exc

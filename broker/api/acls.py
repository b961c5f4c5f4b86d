"""DescribeAcls, CreateAcls and DeleteAcls (KIP-140, patterns of KIP-290).

ACL bindings live in the cluster metadata (``ctx.metadata.create_acls`` /
``delete_acls``, one command per request); the authorizer reads them from each new
image (broker/security/authorizer.py, the model in broker/security/acls.py).  Kafka's
answers: without an authorizer SECURITY_DISABLED; DescribeAcls needs Describe on the
cluster, CreateAcls and DeleteAcls need Alter on it (else CLUSTER_AUTHORIZATION_FAILED);
a binding or filter Kafka would refuse gets INVALID_REQUEST (per creation, per filter).
DeleteAcls matches its filters against this broker's image and deletes exactly the
bindings matched, each reported under the first filter that matched it.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin import CreateAclsResponse, DeleteAclsResponse, DescribeAclsResponse

from protocol.errors import ErrorCode

from ..controller.metadata_client import ApplyError, MetadataUnavailable
from ..security.acls import (
    AclBinding,
    AclError,
    AclFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from protocol.messages import Request

    from .context import ApiContext

log = logging.getLogger(__name__)

Created = CreateAclsResponse.AclCreationResult
Resource = DescribeAclsResponse.DescribeAclsResource
Description = Resource.AclDescription
FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
Matching = FilterResult.DeleteAclsMatchingAcl


def _refusal(ctx: ApiContext, request: Request,
             operation: AclOperation) -> tuple[ErrorCode, str] | None:
    """The error every part of the request gets, or None when it may proceed."""
    if not ctx.authorizer.enabled:
        return ErrorCode.SECURITY_DISABLED, "no authorizer is configured on the broker"
    if not ctx.authorizer.allows_cluster(request, operation):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, \
            f"{operation.name} on the cluster is required"
    return None


def _bindings(ctx: ApiContext) -> list[AclBinding]:
    return [AclBinding.from_wire(b) for b in ctx.image.acls]


def _filter(item: Any) -> AclFilter:
    return AclFilter.of(item.resource_type_filter, item.resource_name_filter,
                        item.pattern_type_filter, item.principal_filter, item.host_filter,
                        item.operation, item.permission_type)


async def handle_describe_acls(ctx: ApiContext, request: Request) -> DescribeAclsResponse:
    body = request.body
    refused = _refusal(ctx, request, AclOperation.DESCRIBE)
    if refused is None:
        try:
            wanted = _filter(body)
        except AclError as exc:
            refused = ErrorCode.INVALID_REQUEST, str(exc)
    if refused is not None:
        return DescribeAclsResponse(throttle_time_ms=0, error_code=refused[0],
                                    error_message=refused[1], resources=[])
    by_resource: dict[tuple, list] = {}
    for binding in _bindings(ctx):
        if wanted.matches(binding):
            key = (binding.resource_type, binding.resource_name, binding.pattern_type)
            by_resource.setdefault(key, []).append(Description(
                principal=binding.principal, host=binding.host,
                operation=int(binding.operation), permission_type=int(binding.permission)))
    return DescribeAclsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                error_message=None, resources=[
        Resource(resource_type=int(rtype), resource_name=name, pattern_type=int(pattern),
                 acls=acls) for (rtype, name, pattern), acls in by_resource.items()])


async def handle_create_acls(ctx: ApiContext, request: Request) -> CreateAclsResponse:
    creations = request.body.creations
    refused = _refusal(ctx, request, AclOperation.ALTER)
    if refused is not None:
        return CreateAclsResponse(throttle_time_ms=0, results=[
            Created(error_code=refused[0], error_message=refused[1]) for _ in creations])
    outcomes: list[tuple[ErrorCode, str | None]] = []
    valid: list[list] = []
    for item in creations:
        try:
            binding = AclBinding(
                ResourceType(item.resource_type), item.resource_name,
                PatternType(item.resource_pattern_type), item.principal, item.host,
                AclOperation(item.operation), AclPermissionType(item.permission_type)).validate()
        except (AclError, ValueError) as exc:
            outcomes.append((ErrorCode.INVALID_REQUEST, str(exc)))
            continue
        valid.append(binding.to_wire())
        outcomes.append((ErrorCode.NONE, None))
    if valid:
        failure = await _submit(ctx.metadata.create_acls, valid)
        if failure is not None:
            outcomes = [failure if code == ErrorCode.NONE else (code, message)
                        for code, message in outcomes]
        else:
            log.info("ACLs created by %s from %s: %s", *ctx.authorizer.who(request),
                     [AclBinding.from_wire(b).describe() for b in valid])
    return CreateAclsResponse(throttle_time_ms=0, results=[
        Created(error_code=code, error_message=message) for code, message in outcomes])


async def handle_delete_acls(ctx: ApiContext, request: Request) -> DeleteAclsResponse:
    filters = request.body.filters
    refused = _refusal(ctx, request, AclOperation.ALTER)
    if refused is not None:
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
            FilterResult(error_code=refused[0], error_message=refused[1], matching_acls=[])
            for _ in filters])
    remaining = _bindings(ctx)
    matched: list[list[AclBinding] | tuple[ErrorCode, str]] = []
    for item in filters:
        try:
            wanted = _filter(item)
        except AclError as exc:
            matched.append((ErrorCode.INVALID_REQUEST, str(exc)))
            continue
        mine = [b for b in remaining if wanted.matches(b)]
        remaining = [b for b in remaining if b not in mine]
        matched.append(mine)
    doomed = [b.to_wire() for m in matched if isinstance(m, list) for b in m]
    failure = await _submit(ctx.metadata.delete_acls, doomed) if doomed else None
    if doomed and failure is None:
        log.info("ACLs deleted by %s from %s: %s", *ctx.authorizer.who(request),
                 [AclBinding.from_wire(b).describe() for b in doomed])
    results = []
    for m in matched:
        if isinstance(m, tuple):
            results.append(FilterResult(error_code=m[0], error_message=m[1], matching_acls=[]))
        elif failure is not None and m:
            results.append(FilterResult(error_code=failure[0], error_message=failure[1],
                                        matching_acls=[]))
        else:
            results.append(FilterResult(error_code=ErrorCode.NONE, error_message=None,
                                        matching_acls=[_matching(b) for b in m]))
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=results)


def _matching(binding: AclBinding) -> Matching:
    return Matching(error_code=ErrorCode.NONE, error_message=None,
                    resource_type=int(binding.resource_type),
                    resource_name=binding.resource_name, pattern_type=int(binding.pattern_type),
                    principal=binding.principal, host=binding.host,
                    operation=int(binding.operation), permission_type=int(binding.permission))


async def _submit(call: Callable[[list[list]], Awaitable[object]],
                  bindings: list[list]) -> tuple[ErrorCode, str] | None:
    """Run one metadata write; None when applied, else the error every part gets."""
    try:
        await call(bindings)
        return None
    except ApplyError as exc:
        return ErrorCode[exc.code], str(exc)
    except MetadataUnavailable as exc:
        return ErrorCode.REQUEST_TIMED_OUT, str(exc)

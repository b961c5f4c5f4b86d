"""DescribeClientQuotas (48) and AlterClientQuotas (49), KIP-546.

Quotas live in the Raft metadata (``ClusterState.client_quotas``), written by one
AlterClientQuotas command per request; broker/quotas/entities.py has Kafka's
validation and filter matching, broker/quotas/rates.py the enforcement of the byte
rates, broker/quotas/mutations.py of ``controller_mutation_rate`` (``mutation_quota``
here, for the topic handlers).

Authorization (Kafka's): DescribeConfigs on the cluster to describe (else the
request's error CLUSTER_AUTHORIZATION_FAILED), AlterConfigs on the cluster to alter
(else every entry's).  An entry with a refused entity or value answers its error and
is not applied; the others are, together (``validate_only``: none is).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin import AlterClientQuotasResponse, DescribeClientQuotasResponse

from protocol.errors import ErrorCode
from protocol.messages import Framed

from ..controller.metadata_client import ApplyError, MetadataUnavailable
from ..quotas.entities import QuotaError, check_value, describe, entity_of
from ..quotas.mutations import MutationQuota
from ..quotas.request_time import RequestTime, exempt
from ..security.acls import AclOperation
from ..security.tls import ANONYMOUS

if TYPE_CHECKING:
    from protocol.messages import Request

    from .context import ApiContext

log = logging.getLogger(__name__)

Entry = DescribeClientQuotasResponse.EntryData
EntityData = Entry.EntityData
ValueData = Entry.ValueData
Altered = AlterClientQuotasResponse.EntryData
AlteredEntity = Altered.EntityData


def _user(request: Request) -> str:
    principal = request.session.principal if request.session is not None else ANONYMOUS
    return principal.partition(":")[2] or principal


def mutation_quota(ctx: ApiContext, request: Request, api: str) -> MutationQuota:
    """The request's controller mutation quota (CreateTopics, CreatePartitions,
    DeleteTopics); ``throttled`` gives the answer's throttle time."""
    return MutationQuota(ctx.quotas, ctx.image.client_quotas, _user(request),
                         request.client_id or "", api, request.api_version)


def throttled(request: Request, quota: MutationQuota) -> int:
    """``quota``'s throttle time, also set on ``request`` (the connection stops reading
    for it after answering, KIP-219)."""
    request.throttle_ms = max(request.throttle_ms, quota.throttle_ms)
    return quota.throttle_ms


def throttle(ctx: ApiContext, request: Request, key: str, size_bytes: int) -> int:
    """Record ``size_bytes`` against the client's ``key`` quota (producer_byte_rate,
    consumer_byte_rate); the throttle time in ms, also set on ``request`` so the
    connection stops reading for it after answering (KIP-219).  0 without quotas."""
    quotas = ctx.image.client_quotas
    if not quotas:
        return 0
    throttle_ms = ctx.quotas.record(quotas, key, _user(request), request.client_id or "",
                                    size_bytes)
    if throttle_ms > request.throttle_ms:
        request.throttle_ms = throttle_ms
    return throttle_ms


def request_time(ctx: ApiContext, request: Request, started_ns: int) -> RequestTime | None:
    """The stopwatch charging ``request``'s event-loop time to its client's
    ``request_percentage`` (KIP-124), running since ``started_ns``; None when no such
    quota applies to the client or the request is exempt
    (broker/quotas/request_time.py)."""
    user, client_id = _user(request), request.client_id or ""
    quota = ctx.quotas.request_quota(ctx.image.client_quotas, user, client_id)
    if quota is None:
        return None
    rule = exempt(request.api_key, request.body)
    if rule or (rule is None and ctx.authorizer.allows_cluster(
            request, AclOperation.CLUSTER_ACTION, log_denial=False)):
        return None
    return RequestTime(ctx.quotas, quota, user, client_id, started_ns)


def charge_request_time(request: Request) -> int:
    """Before a hand-encoded answer (Produce, Fetch) is encoded: the request quota's
    throttle time, also set on ``request``.  0 without a stopwatch."""
    timer = request.request_time
    if timer is None:
        return 0
    throttle_ms = timer.charge()
    if throttle_ms > request.throttle_ms:
        request.throttle_ms = throttle_ms
    return throttle_ms


def charge_answer(request: Request, body: Any) -> None:
    """Before ``body`` (the answer to a request with a stopwatch) is encoded: the
    request quota's throttle on ``request`` (the mute) and in the body's
    throttle_time_ms, where it is larger than any other quota's (a hand-encoded
    answer, Framed, was charged before its encoding)."""
    throttle_ms = charge_request_time(request)
    if throttle_ms > 0 and not isinstance(body, Framed) and \
            getattr(body, "throttle_time_ms", throttle_ms) < throttle_ms:
        body.throttle_time_ms = throttle_ms


async def handle_describe_client_quotas(ctx: ApiContext,
                                        request: Request) -> DescribeClientQuotasResponse:
    body = request.body
    if not ctx.authorizer.allows_cluster(request, AclOperation.DESCRIBE_CONFIGS):
        return _described(ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                          "DescribeConfigs on the cluster is required")
    components = [(c.entity_type, c.match_type, c.match) for c in body.components]
    try:
        found = describe(ctx.image.client_quotas, components, body.strict)
    except QuotaError as exc:
        return _described(ErrorCode[exc.code], str(exc))
    return DescribeClientQuotasResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, entries=[
            Entry(entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity],
                  values=[ValueData(key=k, value=v) for k, v in sorted(values.items())])
            for entity, values in found])


def _described(code: ErrorCode, message: str) -> DescribeClientQuotasResponse:
    return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=code,
                                        error_message=message, entries=None)


async def handle_alter_client_quotas(ctx: ApiContext,
                                     request: Request) -> AlterClientQuotasResponse:
    body = request.body
    allowed = ctx.authorizer.allows_cluster(request, AclOperation.ALTER_CONFIGS)
    results: list[tuple[list, ErrorCode, str | None]] = []
    changes: list[list] = []
    for entry in body.entries:
        pairs = [(e.entity_type, e.entity_name) for e in entry.entity]
        if not allowed:
            results.append((pairs, ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                            "AlterConfigs on the cluster is required"))
            continue
        try:
            entity = entity_of(pairs)
            for op in entry.ops:
                if not op.remove:
                    check_value(entity, op.key, op.value)
        except QuotaError as exc:
            results.append((pairs, ErrorCode[exc.code], str(exc)))
            continue
        changes.append([[list(p) for p in entity],
                        {op.key: None if op.remove else float(op.value) for op in entry.ops}])
        results.append((pairs, ErrorCode.NONE, None))
    if changes and not body.validate_only:
        try:
            await ctx.metadata.alter_client_quotas(changes)
            log.info("client quotas altered by %s: %s",
                     request.session.principal if request.session else "?", changes)
        except (ApplyError, MetadataUnavailable) as exc:
            code = ErrorCode[exc.code] if isinstance(exc, ApplyError) else \
                ErrorCode.REQUEST_TIMED_OUT
            results = [(p, code if c == ErrorCode.NONE else c,
                        str(exc) if c == ErrorCode.NONE else m) for p, c, m in results]
    return AlterClientQuotasResponse(throttle_time_ms=0, entries=[
        Altered(error_code=code, error_message=message,
                entity=[AlteredEntity(entity_type=t, entity_name=n) for t, n in pairs])
        for pairs, code, message in results])

"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554).

The client sends a salt and the salted password (never the password); the broker keeps
the stored and server keys derived from them, in the cluster metadata, through one
AlterScramCredentials command per request.  Per user, Kafka's answers: an unknown
mechanism UNSUPPORTED_SASL_MECHANISM; iterations outside 4096..16384, an empty name,
salt or salted password UNACCEPTABLE_CREDENTIAL; deleting a credential that does not
exist RESOURCE_NOT_FOUND; a user named twice for one mechanism DUPLICATE_RESOURCE.  A
user with any refused operation has none of them applied.

Authorization (Kafka's): Describe on the cluster to describe (else the request's error
CLUSTER_AUTHORIZATION_FAILED), Alter on the cluster to alter (else every user's).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin import (
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsResponse,
)

from protocol.errors import ErrorCode

from ..controller.metadata_client import ApplyError, MetadataUnavailable
from ..security import scram
from ..security.acls import AclOperation

if TYPE_CHECKING:
    from protocol.messages import Request

    from .context import ApiContext

log = logging.getLogger(__name__)

Described = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
CredentialInfo = Described.CredentialInfo
Altered = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult


async def handle_describe_user_scram_credentials(
        ctx: ApiContext, request: Request) -> DescribeUserScramCredentialsResponse:
    if not ctx.authorizer.allows_cluster(request, AclOperation.DESCRIBE):
        return DescribeUserScramCredentialsResponse(
            throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message="Describe on the cluster is required", results=[])
    stored = ctx.image.scram_credentials
    requested = [u.name for u in request.body.users] if request.body.users else None
    names = sorted(stored) if requested is None else requested
    results = []
    for name in dict.fromkeys(names):
        if requested is not None and requested.count(name) > 1:
            results.append(Described(user=name, error_code=ErrorCode.DUPLICATE_RESOURCE,
                                     error_message=f"Cannot describe SCRAM credentials for the "
                                                   f"same user twice in a single request: {name}",
                                     credential_infos=[]))
        elif name not in stored:
            results.append(Described(user=name, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                                     error_message=f"Attempt to describe a user credential that "
                                                   f"does not exist: {name}",
                                     credential_infos=[]))
        else:
            results.append(Described(user=name, error_code=ErrorCode.NONE, error_message=None,
                                     credential_infos=[
                CredentialInfo(mechanism=scram.TYPE_OF[m], iterations=int(c["iterations"]))
                for m, c in sorted(stored[name].items())]))
    return DescribeUserScramCredentialsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                                error_message=None, results=results)


async def handle_alter_user_scram_credentials(
        ctx: ApiContext, request: Request) -> AlterUserScramCredentialsResponse:
    body = request.body
    if not ctx.authorizer.allows_cluster(request, AclOperation.ALTER):
        return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
            Altered(user=name, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    error_message="Alter on the cluster is required")
            for name in dict.fromkeys(op.name for op in list(body.deletions)
                                      + list(body.upsertions))])
    stored = ctx.image.scram_credentials
    errors: dict[str, tuple[ErrorCode, str]] = {}
    seen: dict[tuple[str, int], int] = {}
    users: list[str] = []
    for op in list(body.deletions) + list(body.upsertions):
        users.append(op.name)
        seen[(op.name, op.mechanism)] = seen.get((op.name, op.mechanism), 0) + 1
    for op in body.deletions:
        problem = _mechanism_problem(op) or (
            (ErrorCode.RESOURCE_NOT_FOUND, f"Attempt to delete a user credential that does "
                                           f"not exist: {op.name}")
            if scram.MECHANISM_TYPES[op.mechanism] not in stored.get(op.name, {}) else None)
        if problem:
            errors.setdefault(op.name, problem)
    for op in body.upsertions:
        problem = _mechanism_problem(op) or _upsertion_problem(op)
        if problem:
            errors.setdefault(op.name, problem)
    for (name, _), count in seen.items():
        if count > 1:
            errors.setdefault(name, (ErrorCode.DUPLICATE_RESOURCE, f"A user credential cannot "
                                     f"be altered twice in the same request: {name}"))
    upsertions = [[op.name, scram.MECHANISM_TYPES[op.mechanism], scram.credential_from_salted(
                       scram.MECHANISM_TYPES[op.mechanism], bytes(op.salt), op.iterations,
                       bytes(op.salted_password)).to_plain()]
                  for op in body.upsertions if op.name not in errors]
    deletions = [[op.name, scram.MECHANISM_TYPES[op.mechanism]]
                 for op in body.deletions if op.name not in errors]
    if upsertions or deletions:
        try:
            await ctx.metadata.alter_scram_credentials(upsertions, deletions)
            log.info("SCRAM credentials altered by %s from %s: set %s, deleted %s",
                     request.session.principal if request.session else "?", request.client_host,
                     [u[:2] for u in upsertions], deletions)
        except (ApplyError, MetadataUnavailable) as exc:
            code = ErrorCode[exc.code] if isinstance(exc, ApplyError) else \
                ErrorCode.REQUEST_TIMED_OUT
            for name in {u[0] for u in upsertions} | {d[0] for d in deletions}:
                errors.setdefault(name, (code, str(exc)))
    results = [Altered(user=name, error_code=errors.get(name, (ErrorCode.NONE, None))[0],
                       error_message=errors.get(name, (ErrorCode.NONE, None))[1])
               for name in dict.fromkeys(users)]
    return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=results)


def _mechanism_problem(op: Any) -> tuple[ErrorCode, str] | None:
    if op.mechanism not in scram.MECHANISM_TYPES:
        return (ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                f"Unknown SCRAM mechanism {op.mechanism} for user {op.name}")
    if not op.name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    return None


def _upsertion_problem(op: Any) -> tuple[ErrorCode, str] | None:
    if op.iterations < scram.MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if op.iterations > scram.MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    if not op.salt:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt must not be empty"
    if not op.salted_password:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salted password must not be empty"
    return None

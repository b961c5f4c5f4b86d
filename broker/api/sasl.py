"""SaslHandshake and SaslAuthenticate (KIP-43, KIP-152): authentication in Kafka frames.

A connection on a SASL listener sends SaslHandshake (v1: the tokens then travel in
SaslAuthenticate requests) naming a mechanism, then SaslAuthenticate requests carrying
the mechanism's messages until it succeeds.  After a v0 handshake (KIP-43) the tokens
travel as bare size-prefixed frames instead (``legacy_token``, called by the
connection for each), and a failure closes the connection without an answer.  Only ApiVersions and
these two are handled before that (broker/security/session.py).  Failures are answered with Kafka's
code and then the connection closes: UNSUPPORTED_SASL_MECHANISM for a mechanism not
enabled on the listener, SASL_AUTHENTICATION_FAILED for wrong credentials (logged at
WARNING with the user name and the peer address), ILLEGAL_SASL_STATE for a request out
of order or on a listener without SASL.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kafka.protocol.sasl import SaslAuthenticateResponse, SaslHandshakeResponse

from protocol.errors import ErrorCode

from ..security.sasl import SaslFailure

if TYPE_CHECKING:
    from protocol.messages import Request

    from ..security.session import SecuritySession
    from .context import ApiContext

log = logging.getLogger(__name__)


async def handle_sasl_handshake(ctx: ApiContext, request: Request) -> SaslHandshakeResponse:
    session = request.session
    mechanism = request.body.mechanism.upper()
    enabled = ctx.sasl.enabled(session.listener.name) if session.listener.uses_sasl else []
    if not session.listener.uses_sasl or session.authenticated or session.exchange is not None:
        session.close_requested = session.listener.uses_sasl
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=enabled)
    if mechanism not in enabled:
        log.warning("[SASL %s%s] mechanism %s is not enabled on listener %s (enabled: %s)",
                    request.client_host, _port(request), mechanism, session.listener.name,
                    ",".join(enabled))
        session.close_requested = True
        return SaslHandshakeResponse(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                     mechanisms=enabled)
    session.mechanism = mechanism
    session.exchange = ctx.sasl.new_exchange(session.listener.name, mechanism)
    session.legacy_tokens = request.api_version == 0
    return SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=enabled)


def legacy_token(session: SecuritySession, token: bytes, peer: str) -> bytes | None:
    """One bare token after a SaslHandshake v0: the mechanism's answer (sent back as a
    bare frame, empty included, as Kafka does), or None when authentication failed
    (logged; the connection then closes, v0 has no way to say why)."""
    exchange = session.exchange
    try:
        reply = exchange.receive(token)
    except SaslFailure as exc:
        log.warning("[SASL %s] authentication of User:%s with %s on listener %s failed "
                    "(SaslHandshake v0): %s", peer, exchange.username or "?",
                    session.mechanism, session.listener.name, exc)
        session.exchange = None
        session.legacy_tokens = False
        return None
    if exchange.done:
        session.authenticate(f"User:{exchange.username}")
        log.info("[SASL %s] authenticated %s with %s on listener %s (SaslHandshake v0)", peer,
                 session.principal, session.mechanism, session.listener.name)
    return reply


async def handle_sasl_authenticate(ctx: ApiContext,
                                   request: Request) -> SaslAuthenticateResponse:
    session = request.session
    if session.exchange is None:
        session.close_requested = True
        return _answer(ErrorCode.ILLEGAL_SASL_STATE,
                       "SaslAuthenticate without a SaslHandshake before it")
    exchange = session.exchange
    try:
        reply = exchange.receive(bytes(request.body.auth_bytes or b""))
    except SaslFailure as exc:
        log.warning("[SASL %s%s] authentication of User:%s with %s on listener %s failed: %s",
                    request.client_host, _port(request), exchange.username or "?",
                    session.mechanism, session.listener.name, exc)
        session.exchange = None
        session.close_requested = True
        return _answer(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc))
    if exchange.done:
        session.authenticate(f"User:{exchange.username}")
        log.info("[SASL %s%s] authenticated %s with %s on listener %s", request.client_host,
                 _port(request), session.principal, session.mechanism, session.listener.name)
    return _answer(ErrorCode.NONE, None, reply)


def _answer(code: ErrorCode, message: str | None,
            auth_bytes: bytes = b"") -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(error_code=code, error_message=message,
                                    auth_bytes=auth_bytes, session_lifetime_ms=0)


def _port(request: Request) -> str:
    return f" client {request.client_id}" if request.client_id else ""

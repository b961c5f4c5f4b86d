"""How the broker's own connections reach other brokers: the inter-broker listener.

Replica fetchers connect to a leader's endpoint of ``inter.broker.listener.name`` with
that listener's security protocol: TLS from its ``ssl.*`` settings (tls.client_context)
and, on SASL listeners, ``sasl.mechanism.inter.broker.protocol`` with the credentials of
the listener's JAAS setting (``username``/``password``, as Kafka brokers take theirs).
Built once at start; the SSLContext is shared by every connection.  Authentication
runs on each new connection before its first request (``authenticate``).
"""
from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass, field

from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from ..client.client_protocol import ConnectionFailed
from . import sasl, scram, tls

log = logging.getLogger(__name__)


class AuthenticationRefused(ConnectionFailed):
    """The peer answered the SASL exchange with an error (``error_code``, Kafka's:
    SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM, ...) or could not prove it
    knows the password (``error_code`` None)."""

    def __init__(self, reason: str, peer: str | None, error_code: int | None):
        super().__init__(reason, peer)
        self.error_code = error_code


@dataclass(frozen=True)
class ClientSecurity:
    """What an outgoing connection does after TCP connect: TLS (``ssl_context``), then
    SASL (``sasl_mechanism`` with ``username``/``password``) when set."""

    listener_name: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    username: str = ""
    password: str = field(default="", repr=False)

    async def authenticate(self, round_trip, peer: str) -> None:
        """SaslHandshake v1 then SaslAuthenticate until the mechanism is done, over
        ``round_trip(request) -> response`` of a fresh connection; ConnectionFailed if
        the peer refuses (the connection is then closed by its owner)."""
        exchange = self.sasl_exchange(peer)
        request = next(exchange)
        while True:
            try:
                request = exchange.send(await round_trip(request))
            except StopIteration:
                return

    def authenticate_blocking(self, round_trip, peer: str) -> None:
        """``authenticate`` for a blocking ``round_trip`` (the command line's connections)."""
        exchange = self.sasl_exchange(peer)
        request = next(exchange)
        while True:
            try:
                request = exchange.send(round_trip(request))
            except StopIteration:
                return

    def sasl_exchange(self, peer: str):
        """The SASL conversation without I/O: a generator that yields each request and is
        sent its response; it returns when authenticated and raises AuthenticationRefused
        when the peer refuses or cannot prove it knows the password."""
        mechanism = self.sasl_mechanism
        handshake = yield SaslHandshakeRequest[1](mechanism=mechanism)
        if handshake.error_code != 0:
            raise AuthenticationRefused(f"SASL handshake for {mechanism} refused (enabled: "
                                        f"{', '.join(handshake.mechanisms or [])})", peer,
                                        handshake.error_code)

        def check(answer) -> bytes:
            if answer.error_code != 0:
                log.warning("SASL %s as %s to %s failed: %s", mechanism, self.username, peer,
                            answer.error_message)
                raise AuthenticationRefused(f"SASL authentication as {self.username} "
                                            f"failed: {answer.error_message}", peer,
                                            answer.error_code)
            return bytes(answer.auth_bytes or b"")

        def step(token: bytes) -> SaslAuthenticateRequest:
            return SaslAuthenticateRequest[1](auth_bytes=token)

        if mechanism == "PLAIN":
            check((yield step(f"\0{self.username}\0{self.password}".encode())))
            return
        client = scram.ScramClient(mechanism, self.username, self.password)
        try:
            server_first = check((yield step(client.first())))
            server_final = check((yield step(client.final(server_first))))
            client.verify(server_final)
        except scram.ScramFailure as exc:
            raise AuthenticationRefused(f"SCRAM with {peer}: {exc}", peer, None) from exc


PLAINTEXT = ClientSecurity()


def inter_broker_security(config) -> ClientSecurity:
    """The ClientSecurity of this broker's inter-broker listener (SettingError if unusable)."""
    listener = config.listener_plan.inter_broker

    def get(key):
        return config.listener_setting(listener.name, key)

    context = tls.client_context(get, listener.name) if listener.uses_tls else None
    credentials = sasl.inter_broker_credentials(config)
    if credentials is None:
        return ClientSecurity(listener.name, context)
    mechanism, username, password = credentials
    return ClientSecurity(listener.name, context, mechanism, username, password)

"""One connection's security state: its listener, its principal, whether it may speak.

A connection on a SASL listener starts unauthenticated: until a SaslAuthenticate
succeeds it may send only ApiVersions, SaslHandshake and SaslAuthenticate (KIP-152);
any other request closes it.  On SSL listeners the principal is the client
certificate's subject (``User:CN=...``), ANONYMOUS without one; on PLAINTEXT it is
ANONYMOUS.  Event-loop only; owned by its Connection.
"""
from __future__ import annotations

from collections.abc import Callable

from kafka.protocol.api_key import ApiKey

from .listeners import Listener
from .tls import ANONYMOUS, principal_of

# What an unauthenticated SASL connection may send (Kafka's SaslServerAuthenticator).
BEFORE_AUTHENTICATION = frozenset({ApiKey.ApiVersions, ApiKey.SaslHandshake,
                                   ApiKey.SaslAuthenticate})


class SecuritySession:
    def __init__(self, listener: Listener):
        self.listener = listener
        self.principal = ANONYMOUS
        self.authenticated = not listener.uses_sasl
        # Set by SaslHandshake: the mechanism's server exchange (broker/security/sasl.py).
        self.mechanism: str | None = None
        self.exchange = None
        # Set by a SaslHandshake v0 (KIP-43): until authenticated, frames are bare SASL
        # tokens, not Kafka requests (Connection hands them to api/sasl.legacy_token).
        self.legacy_tokens = False
        # Set by a SASL handler that answered with a failure: close after that answer.
        self.close_requested = False
        # What client-metrics resources match on (KIP-714): ApiVersions v3's software
        # name and version, the peer's port.
        self.client_software = ("", "")
        self.peer_port = -1
        # What a handler left to do when this connection closes, by key (a later one of
        # the same key replaces it): a share session opened here is closed (KIP-932).
        self._on_close: dict[str, Callable[[], None]] = {}

    def on_connection_made(self, transport) -> None:
        peer = transport.get_extra_info("peername")
        self.peer_port = peer[1] if isinstance(peer, tuple) else -1
        if self.listener.uses_tls:
            self.principal = principal_of(transport.get_extra_info("peercert"))

    def when_closed(self, key: str, callback: Callable[[], None]) -> None:
        """Call ``callback`` once this connection closes (replacing ``key``'s)."""
        self._on_close[key] = callback

    def closed(self) -> None:
        """The connection closed: run what handlers left for it, each once."""
        callbacks, self._on_close = list(self._on_close.values()), {}
        for callback in callbacks:
            callback()

    def admits(self, api_key: int) -> bool:
        """May a request of ``api_key`` be handled now?  (False: close the connection.)"""
        return self.authenticated or api_key in BEFORE_AUTHENTICATION

    def authenticate(self, principal: str) -> None:
        self.principal = principal
        self.authenticated = True
        self.exchange = None
        self.legacy_tokens = False

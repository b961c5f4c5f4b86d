"""How the broker's own connections reach other brokers: the inter-broker listener.

Replica fetchers connect to a leader's endpoint of ``inter.broker.listener.name`` with
that listener's security protocol: TLS from its ``ssl.*`` settings (tls.client_context)
and, on SASL listeners, ``sasl.mechanism.inter.broker.protocol`` with the credentials of
the listener's JAAS setting (``username``/``password``, as Kafka brokers take theirs).
Built once at start; the SSLContext is shared by every connection.
"""
from __future__ import annotations

import ssl
from dataclasses import dataclass

from . import tls


@dataclass(frozen=True)
class ClientSecurity:
    """What an outgoing connection does after TCP connect: TLS (``ssl_context``), then
    SASL (``sasl_mechanism`` with ``username``/``password``) when set."""

    listener_name: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    username: str = ""
    password: str = ""


PLAINTEXT = ClientSecurity()


def inter_broker_security(config) -> ClientSecurity:
    """The ClientSecurity of this broker's inter-broker listener (SettingError if unusable)."""
    listener = config.listener_plan.inter_broker

    def get(key):
        return config.listener_setting(listener.name, key)

    context = tls.client_context(get, listener.name) if listener.uses_tls else None
    return ClientSecurity(listener.name, context)

"""Kafka's listener settings, parsed and checked once at start.

``listeners=NAME://host:port,...`` names each socket the broker listens on; the security
protocol of a name comes from ``listener.security.protocol.map`` (``NAME:PROTOCOL,...``;
by default each of Kafka's four protocol names maps to itself).  ``advertised.listeners``
is what Metadata tells clients, per listener name (default: ``listeners``; a wildcard
host is advertised as this machine's name, as Kafka does).  ``inter.broker.listener.name``
(default: the listener named by ``security.inter.broker.protocol``, itself PLAINTEXT by
default) is the one replica fetchers connect to.

Pure functions and values: any thread.
"""
from __future__ import annotations

import socket
from dataclasses import dataclass

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PROTOCOL_MAP = ",".join(f"{p}:{p}" for p in PROTOCOLS)


class ListenerError(ValueError):
    """The listener settings contradict each other or name something unknown."""


@dataclass(frozen=True)
class Listener:
    """One named endpoint. ``name`` is upper case, as Kafka normalises it."""

    name: str
    security_protocol: str
    host: str
    port: int

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def config_prefix(self) -> str:
        """Kafka's listener-prefixed settings: ``listener.name.<lower-case name>.``."""
        return f"listener.name.{self.name.lower()}."


# A PLAINTEXT listener for connections made without one (unit tests).
UNNAMED_PLAINTEXT = Listener("PLAINTEXT", "PLAINTEXT", "", 0)


def parse_protocol_map(text: str) -> dict[str, str]:
    mapping: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name:
            raise ListenerError(f"listener.security.protocol.map entry {item!r} is not "
                                f"NAME:PROTOCOL")
        if protocol not in PROTOCOLS:
            raise ListenerError(f"listener.security.protocol.map: {protocol!r} is not one of "
                                f"{', '.join(PROTOCOLS)}")
        if name in mapping:
            raise ListenerError(f"listener.security.protocol.map names {name} twice")
        mapping[name] = protocol
    return mapping


def parse_listeners(text: str, protocol_map: dict[str, str], setting: str = "listeners",
                    ) -> list[Listener]:
    """``NAME://host:port,...`` → listeners in the given order.  A listener without a
    ``NAME://`` prefix is PLAINTEXT (Raftwood's older one-listener form)."""
    result: list[Listener] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, address = item.partition("://")
        if not sep:
            name, address = "PLAINTEXT", item
        name = name.upper()
        protocol = protocol_map.get(name)
        if protocol is None:
            raise ListenerError(f"{setting}: listener {name} has no security protocol in "
                                f"listener.security.protocol.map")
        host, colon, port = address.rpartition(":")
        if not colon:
            raise ListenerError(f"{setting}: listener {item!r} has no port")
        try:
            port_number = int(port)
        except ValueError as exc:
            raise ListenerError(f"{setting}: listener {item!r} has a bad port") from exc
        result.append(Listener(name, protocol, host.strip("[]"), port_number))
    if not result:
        raise ListenerError(f"{setting} is empty")
    names = [listener.name for listener in result]
    if len(set(names)) != len(names):
        raise ListenerError(f"{setting} names a listener twice: {text}")
    return result


@dataclass(frozen=True)
class ListenerPlan:
    """Where the broker listens, what it advertises, and which listener brokers use.

    Invariants: listener names are unique; every advertised name is a bound listener;
    the inter-broker listener is advertised; bound ports are unique.
    """

    listeners: tuple[Listener, ...]
    advertised: tuple[Listener, ...]
    inter_broker_name: str

    def bound(self, name: str) -> Listener:
        return next(listener for listener in self.listeners if listener.name == name)

    @property
    def inter_broker(self) -> Listener:
        return next(a for a in self.advertised if a.name == self.inter_broker_name)

    def endpoints(self) -> dict[str, list]:
        """The advertised endpoints as registered in the metadata: name → [host, port]."""
        return {a.name: [a.host, a.port] for a in self.advertised}


def plan_listeners(listeners: str, advertised: str, protocol_map_text: str,
                   inter_broker_name: str, inter_broker_protocol: str) -> ListenerPlan:
    protocol_map = parse_protocol_map(protocol_map_text)
    bound = parse_listeners(listeners, protocol_map)
    ports = [listener.port for listener in bound if listener.port != 0]
    if len(set(ports)) != len(ports):
        raise ListenerError(f"listeners use a port twice: {listeners}")
    if advertised:
        announced = parse_listeners(advertised, protocol_map, "advertised.listeners")
        unknown = {a.name for a in announced} - {b.name for b in bound}
        if unknown:
            raise ListenerError(f"advertised.listeners names {sorted(unknown)}, which "
                                f"listeners does not")
    else:
        announced = [Listener(b.name, b.security_protocol, _advertised_host(b.host), b.port)
                     for b in bound]
    if inter_broker_name:
        name = inter_broker_name.strip().upper()
    else:
        protocol = inter_broker_protocol.strip().upper()
        if protocol not in PROTOCOLS:
            raise ListenerError(f"security.inter.broker.protocol {protocol!r} is not one of "
                                f"{', '.join(PROTOCOLS)}")
        # Kafka's default: the listener named like the protocol; Raftwood also accepts a
        # lone listener of that protocol under another name.
        same = [a for a in announced if a.security_protocol == protocol]
        name = protocol if any(a.name == protocol for a in announced) or len(same) != 1 \
            else same[0].name
    if name not in {a.name for a in announced}:
        raise ListenerError(f"inter-broker listener {name} is not among the advertised "
                            f"listeners ({', '.join(a.name for a in announced)}); set "
                            f"inter.broker.listener.name")
    return ListenerPlan(tuple(bound), tuple(announced), name)


def _advertised_host(host: str) -> str:
    if host in ("", "0.0.0.0", "::"):
        return socket.getfqdn()
    return host

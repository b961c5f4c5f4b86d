"""Client quota entities and keys, with Kafka's validation and matching (pure).

An entity is a set of (entity type, name) pairs, name None for the type's default:
``user``, ``client-id``, ``(user, client-id)`` and ``ip`` (connection creation rates,
enforced at accept: rates.py).  In the Raft metadata an entity is a sorted tuple of
pairs and its values a dict key → float (``ClusterState.client_quotas``).

Kafka's rules (ClientQuotaControlManager, ClientQuotasImage.describe):

* AlterClientQuotas: an empty entity, a type named twice, ``ip`` with another type, an
  ``ip`` name that is not an IP address literal (Kafka also takes a host name it
  resolves; connections are matched by address here) → INVALID_REQUEST; an unknown
  type → UNSUPPORTED_VERSION ("Unhandled client quota entity type"); a key the entity
  cannot have → INVALID_REQUEST ("Invalid configuration key"); a byte or mutation
  rate that is not a positive number, or a byte rate that is not whole →
  INVALID_REQUEST.
* Enforced: the byte rates and the connection creation rate by rates.py,
  ``controller_mutation_rate`` by mutations.py, ``request_percentage`` (a positive
  number, not necessarily whole: percent of one thread's time) by request_time.py.
* DescribeClientQuotas: a filter component matches one type exactly (match type 0,
  a name), its default (1) or any named entity (2); a type named twice, or ``ip``
  with another type, is INVALID_REQUEST.  Strict: the entity has exactly the filter's
  types; otherwise at least them.

Pure functions: any thread.
"""
from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

CLIENT_KEYS = {PRODUCER_BYTE_RATE: True, CONSUMER_BYTE_RATE: True, REQUEST_PERCENTAGE: False,
               CONTROLLER_MUTATION_RATE: False}  # key -> must be a whole number
IP_KEYS = {CONNECTION_CREATION_RATE: True}

MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_SPECIFIED = 2

Entity = tuple[tuple[str, "str | None"], ...]


class QuotaError(ValueError):
    """A refused entity, filter or value: ``code`` is a Kafka error code name."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def entity_of(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    """A validated entity from (type, name) pairs (QuotaError otherwise)."""
    pairs = [(str(t), None if n is None else str(n)) for t, n in pairs]
    types = [t for t, _ in pairs]
    if not pairs:
        raise QuotaError("INVALID_REQUEST", "Invalid empty client quota entity")
    for entity_type in types:
        if entity_type not in (USER, CLIENT_ID, IP):
            raise QuotaError("UNSUPPORTED_VERSION",
                             f"Unhandled client quota entity type: {entity_type}")
    if len(set(types)) != len(types):
        raise QuotaError("INVALID_REQUEST", "Duplicate entity type in the client quota entity")
    if IP in types and len(types) > 1:
        raise QuotaError("INVALID_REQUEST", "Invalid quota entity combination: ip cannot be "
                                            "combined with user or client-id")
    for entity_type, name in pairs:
        if entity_type == IP and name is not None and not _is_ip(name):
            raise QuotaError("INVALID_REQUEST", f"{name} is not a valid IP or resolvable host.")
    return tuple(sorted(pairs))


def _is_ip(name: str) -> bool:
    """An IP address literal: connections are matched by their peer's address, so a
    host name (which Kafka resolves at alter time) could never match one."""
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def check_value(entity: Entity, key: str, value: float) -> None:
    """QuotaError unless ``entity`` may have ``key`` set to ``value``."""
    allowed = IP_KEYS if entity[0][0] == IP else CLIENT_KEYS
    if key not in allowed:
        raise QuotaError("INVALID_REQUEST", f"Invalid configuration key {key}")
    if not value > 0:
        raise QuotaError("INVALID_REQUEST", f"Invalid value {value} for configuration key "
                                            f"{key}: it must be positive")
    if allowed[key] and value != int(value):
        raise QuotaError("INVALID_REQUEST", f"Configuration {key} must be a Long value")


def describe(quotas: Mapping[Entity, Mapping[str, float]],
             components: list[tuple[str, int, str | None]], strict: bool
             ) -> list[tuple[Entity, dict[str, float]]]:
    """The entities matching the filter ``components`` ([entity type, match type, match])."""
    types = [c[0] for c in components]
    if len(set(types)) != len(types):
        raise QuotaError("INVALID_REQUEST", "Duplicate entity type in the filter")
    if IP in types and len(types) > 1:
        raise QuotaError("INVALID_REQUEST", "Invalid entity filter component combination: "
                                            "ip cannot be combined with user or client-id")
    for entity_type, match_type, match in components:
        if match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise QuotaError("INVALID_REQUEST", f"Unknown match type {match_type}")
        if match_type == MATCH_EXACT and match is None:
            raise QuotaError("INVALID_REQUEST", f"Missing match for entity type {entity_type}")
    found = []
    for entity, values in sorted(quotas.items(), key=lambda item: _sort_key(item[0])):
        names = dict(entity)
        if strict and set(names) != set(types):
            continue
        if all(_matches(names, c) for c in components) and values:
            found.append((entity, dict(values)))
    return found


def _matches(names: dict[str, str | None], component: tuple[str, int, str | None]) -> bool:
    entity_type, match_type, match = component
    if entity_type not in names:
        return False
    name = names[entity_type]
    if match_type == MATCH_EXACT:
        return name == match
    if match_type == MATCH_DEFAULT:
        return name is None
    return name is not None


def _sort_key(entity: Entity) -> tuple:
    return tuple((t, n is not None, n or "") for t, n in entity)


def to_plain(quotas: Mapping[Entity, Mapping[str, float]]) -> list:
    """JSON form: [[[type, name], ...], {key: value}] per entity."""
    return [[[list(pair) for pair in entity], dict(values)] for entity, values in quotas.items()]


def from_plain(items: list) -> dict[Entity, dict[str, float]]:
    """The inverse of ``to_plain``."""
    return {tuple((str(t), None if n is None else str(n)) for t, n in entity):
            {str(k): float(v) for k, v in values.items()} for entity, values in items}

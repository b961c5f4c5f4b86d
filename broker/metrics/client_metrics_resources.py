"""KIP-714 client-metrics resources (ConfigResource type CLIENT_METRICS, 16): named
subscriptions kept as dynamic configs in the metadata image, and which of them a client
instance gets (pure, but for a cache of compiled patterns).

A resource has Kafka's three configs:

* ``metrics``: comma-separated metric-name prefixes; ``*`` is every metric; empty (or
  unset) none;
* ``interval.ms``: the push interval, 100 to 3,600,000 ms (default 300,000);
* ``match``: comma-separated ``selector=regex`` pairs, every one of which must match the
  client (whole value, Python ``re``); empty (or unset) matches every client.  The
  selectors are Kafka's: client_instance_id, client_id, client_software_name,
  client_software_version, client_source_address, client_source_port.

A client instance's plan is the union of the prefixes of every resource matching it and
the smallest of their intervals (Kafka's ClientMetricsManager); the broker setting
``raftwood.client.metrics.subscription`` counts as one more resource matching every
client, with ``raftwood.client.metrics.push.interval.ms``.  Nothing matching: no metrics,
that setting's interval.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

CLIENT_METRICS = 16
METRICS, INTERVAL_MS, MATCH = "metrics", "interval.ms", "match"
CONFIGS = (METRICS, INTERVAL_MS, MATCH)
DEFAULT_INTERVAL_MS = 300_000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
SELECTORS = ("client_instance_id", "client_id", "client_software_name",
             "client_software_version", "client_source_address", "client_source_port")
DEFAULTS = {METRICS: "", INTERVAL_MS: str(DEFAULT_INTERVAL_MS), MATCH: ""}
MAX_NAME_LENGTH = 255  # Kafka's bound on a resource name


@dataclass(frozen=True)
class Plan:
    """What GetTelemetrySubscriptions answers a client instance: Kafka's wire form of the
    prefixes (no element: nothing; one empty string: everything) and the interval."""

    requested_metrics: tuple[str, ...]
    push_interval_ms: int


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


@lru_cache(maxsize=512)
def parse_match(text: str) -> tuple[tuple[str, re.Pattern[str]], ...]:
    """``selector=regex`` pairs; ValueError naming the first bad one."""
    pairs = []
    for item in _items(text):
        selector, sep, pattern = item.partition("=")
        selector = selector.strip()
        if not sep or selector not in SELECTORS:
            raise ValueError(f"Invalid client matching criteria {item!r}: the selector must "
                             f"be one of {', '.join(SELECTORS)}, as selector=regex")
        try:
            pairs.append((selector, re.compile(pattern.strip())))
        except re.error as exc:
            raise ValueError(f"Invalid regular expression in client matching criteria "
                             f"{item!r}: {exc}") from None
    return tuple(pairs)


def check(name: str, current: Mapping[str, str], changes: Mapping[str, str | None]) -> None:
    """Kafka's ClientMetricsConfigs.validate of ``current`` updated by ``changes`` (None:
    removed); ValueError with the message for INVALID_CONFIG, or for INVALID_REQUEST
    when it starts with "name"."""
    if not name or len(name) > MAX_NAME_LENGTH:
        raise ValueError(f"name: a client metrics resource needs a name of 1 to "
                         f"{MAX_NAME_LENGTH} characters")
    unknown = sorted(set(changes) - set(CONFIGS))
    if unknown:
        raise ValueError(f"Unknown client metrics configuration: {', '.join(unknown)} "
                         f"(valid: {', '.join(CONFIGS)})")
    merged = {**current, **changes}
    interval = merged.get(INTERVAL_MS)
    if interval is not None:
        try:
            value = int(interval)
        except ValueError:
            raise ValueError(f"Invalid value {interval!r} for {INTERVAL_MS}: "
                             f"not an integer") from None
        if not MIN_INTERVAL_MS <= value <= MAX_INTERVAL_MS:
            raise ValueError(f"Invalid value {value} for {INTERVAL_MS}: must be between "
                             f"{MIN_INTERVAL_MS} and {MAX_INTERVAL_MS}")
    parse_match(merged.get(MATCH) or "")


def matches(configs: Mapping[str, str], client: Mapping[str, str]) -> bool:
    """Whether a resource's ``match`` takes ``client`` (selector → value); a resource
    whose stored pattern no longer compiles matches nobody."""
    try:
        criteria = parse_match(configs.get(MATCH) or "")
    except ValueError:
        return False
    return all(pattern.fullmatch(client.get(selector, "")) for selector, pattern in criteria)


def plan(resources: Mapping[str, Mapping[str, str]], client: Mapping[str, str],
         broker_prefixes: str, broker_interval_ms: int) -> Plan:
    """The plan of the client described by ``client`` under ``resources`` (name →
    configs, the image's CLIENT_METRICS entry) and the broker setting."""
    prefixes: set[str] = set()
    intervals = []
    everything = False
    for _, configs in sorted(resources.items()):
        if not matches(configs, client):
            continue
        names = _items(configs.get(METRICS) or "")
        everything = everything or "*" in names
        prefixes.update(n for n in names if n != "*")
        intervals.append(int(configs.get(INTERVAL_MS) or DEFAULT_INTERVAL_MS))
    broker_names = _items(broker_prefixes)
    if broker_names:
        everything = everything or "*" in broker_names
        prefixes.update(n for n in broker_names if n != "*")
        intervals.append(broker_interval_ms)
    wire = ("",) if everything else tuple(sorted(prefixes))
    return Plan(wire, min(intervals) if intervals else broker_interval_ms)

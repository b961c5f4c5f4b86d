"""Group configs (KIP-848's GROUP resource, type 32; Kafka 4.2's GroupConfig): per-group
overrides of the broker's group settings, kept in the cluster metadata
(``ClusterState.resource_configs[32][group id]``).

``group_settings(config, image, group_id)`` is a group's effective settings: its
override when set, else the broker's ``group.*`` setting of the same meaning.  The
coordinators read it at each use, so a change acts on the next heartbeat (the interval
told, the session timer started).  ``check`` validates overrides against the broker's
min/max settings as Kafka does (INVALID_CONFIG).  Pure: any thread.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

GROUP = 32
SHARE_AUTO_OFFSET_RESETS = ("latest", "earliest")
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")

# group config → (the broker setting it overrides, Kafka's default of that setting).
BROKER_SETTING = {
    "consumer.session.timeout.ms": ("group.consumer.session.timeout.ms", 45_000),
    "consumer.heartbeat.interval.ms": ("group.consumer.heartbeat.interval.ms", 5_000),
    "share.session.timeout.ms": ("group.share.session.timeout.ms", 45_000),
    "share.heartbeat.interval.ms": ("group.share.heartbeat.interval.ms", 5_000),
    "share.record.lock.duration.ms": ("group.share.record.lock.duration.ms", 30_000),
    "share.delivery.count.limit": ("group.share.delivery.count.limit", 5),
    "share.auto.offset.reset": ("", "latest"),
    "share.isolation.level": ("", "read_uncommitted"),
}
# int group config → (broker setting of its least, Kafka's default; of its greatest, ...).
BOUNDS = {
    "consumer.session.timeout.ms": (("group.consumer.min.session.timeout.ms", 45_000),
                                    ("group.consumer.max.session.timeout.ms", 60_000)),
    "consumer.heartbeat.interval.ms": (("group.consumer.min.heartbeat.interval.ms", 5_000),
                                       ("group.consumer.max.heartbeat.interval.ms", 15_000)),
    "share.session.timeout.ms": (("group.share.min.session.timeout.ms", 45_000),
                                 ("group.share.max.session.timeout.ms", 60_000)),
    "share.heartbeat.interval.ms": (("group.share.min.heartbeat.interval.ms", 5_000),
                                    ("group.share.max.heartbeat.interval.ms", 15_000)),
    "share.record.lock.duration.ms": (("group.share.min.record.lock.duration.ms", 15_000),
                                      ("group.share.max.record.lock.duration.ms", 60_000)),
    "share.delivery.count.limit": (("group.share.min.delivery.count.limit", 2),
                                   ("group.share.max.delivery.count.limit", 10)),
}


@dataclass(frozen=True)
class GroupSettings:
    """A group's effective settings (its overrides over the broker's)."""

    consumer_session_timeout_ms: int
    consumer_heartbeat_interval_ms: int
    share_session_timeout_ms: int
    share_heartbeat_interval_ms: int
    share_record_lock_duration_ms: int
    share_delivery_count_limit: int
    share_auto_offset_reset: str
    share_isolation_level: str


def broker_value(config, name: str) -> Any:
    """The broker's value behind group config ``name`` (Kafka's default when the broker
    has no such setting)."""
    setting, default = BROKER_SETTING[name]
    return _setting(config, setting, default)


def _setting(config, setting: str, default: Any) -> Any:
    if not setting:
        return default
    try:
        return config[setting]
    except KeyError:
        return default


def overrides(image, group_id: str) -> dict[str, str]:
    """The group's configs set in ``image`` (text values)."""
    by_name = getattr(image, "resource_configs", {}).get(GROUP, {})
    return dict(by_name.get(group_id, {}))


def effective(config, image, group_id: str) -> dict[str, Any]:
    """Every group config's value for ``group_id``, typed."""
    values = {name: broker_value(config, name) for name in BROKER_SETTING}
    for name, text in overrides(image, group_id).items():
        if name in values:
            try:
                values[name] = _parse(name, text)
            except ValueError:
                pass  # stored before a stricter check: the broker's value stands
    return values


def group_settings(config, image, group_id: str) -> GroupSettings:
    """The effective settings of group ``group_id`` in ``image`` on a broker with
    ``config``.  For the coordinators (consumer and share groups)."""
    values = effective(config, image, group_id)
    return GroupSettings(**{name.replace(".", "_"): value for name, value in values.items()})


def _parse(name: str, text: str) -> Any:
    if name == "share.auto.offset.reset":
        value = str(text).strip().lower()
        if value not in SHARE_AUTO_OFFSET_RESETS and not value.startswith("by_duration:"):
            raise ValueError(f"{text!r} is not one of {', '.join(SHARE_AUTO_OFFSET_RESETS)} "
                             f"or by_duration:<ISO-8601 duration>")
        return value
    if name == "share.isolation.level":
        value = str(text).strip().lower()
        if value not in ISOLATION_LEVELS:
            raise ValueError(f"{text!r} is not one of {', '.join(ISOLATION_LEVELS)}")
        return value
    return int(text)


def check(config, current: Mapping[str, str], changes: Mapping[str, str | None]) -> None:
    """ValueError naming the problem unless ``changes`` (None: remove) over the group's
    ``current`` overrides make valid group configs on this broker."""
    unknown = sorted(k for k in changes if k not in BROKER_SETTING)
    if unknown:
        raise ValueError(f"Unknown group config name: {', '.join(unknown)}")
    merged = {k: v for k, v in {**current, **changes}.items() if v is not None}
    values = {name: broker_value(config, name) for name in BROKER_SETTING}
    for name, text in merged.items():
        try:
            values[name] = _parse(name, text)
        except ValueError as exc:
            raise ValueError(f"Invalid value {text} for configuration {name}: {exc}") from exc
        if name in BOUNDS:
            (low_name, low), (high_name, high) = BOUNDS[name]
            least, greatest = _setting(config, low_name, low), _setting(config, high_name, high)
            if not least <= values[name] <= greatest:
                raise ValueError(f"Invalid value {text} for configuration {name}: must be "
                                 f"between {low_name} ({least}) and {high_name} ({greatest})")
    for kind in ("consumer", "share"):
        if values[f"{kind}.heartbeat.interval.ms"] >= values[f"{kind}.session.timeout.ms"]:
            raise ValueError(f"{kind}.heartbeat.interval.ms must be less than "
                             f"{kind}.session.timeout.ms")

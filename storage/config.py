"""Per-partition log configuration, named after Kafka's topic-level configs.

The broker maps its broker-level defaults (``log.segment.bytes``, ``log.roll.ms``,
``log.retention.ms``, ``log.flush.interval.messages``, ``log.cleanup.policy``,
``log.cleaner.*`` ...) onto these fields and then applies topic overrides with
``LogConfig.from_properties``.

``cleanup.policy`` is ``delete`` (retention deletes old segments), ``compact`` (the
log cleaner keeps the latest record per key; retention deletes nothing) or both
(``compact,delete``, in either order).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
MIB = 1024 * 1024
DAY_MS = 24 * 60 * 60 * 1000

#: field name → Kafka topic config name
PROPERTY_NAMES: dict[str, str] = {
    "segment_bytes": "segment.bytes",
    "segment_ms": "segment.ms",
    "segment_jitter_ms": "segment.jitter.ms",
    "retention_ms": "retention.ms",
    "retention_bytes": "retention.bytes",
    "flush_messages": "flush.messages",
    "flush_ms": "flush.ms",
    "index_interval_bytes": "index.interval.bytes",
    "segment_index_bytes": "segment.index.bytes",
    "cleanup_policy": "cleanup.policy",
    "delete_retention_ms": "delete.retention.ms",
    "min_cleanable_dirty_ratio": "min.cleanable.dirty.ratio",
    "min_compaction_lag_ms": "min.compaction.lag.ms",
    "max_compaction_lag_ms": "max.compaction.lag.ms",
}

# field → (inclusive minimum, inclusive maximum); Kafka's validators.
_RANGES: dict[str, tuple[int, int]] = {
    "segment_bytes": (14, INT_MAX),          # positions in the offset index are int32
    "segment_ms": (1, LONG_MAX),
    "segment_jitter_ms": (0, LONG_MAX),
    "retention_ms": (-1, LONG_MAX),          # -1 = unlimited
    "retention_bytes": (-1, LONG_MAX),       # -1 = unlimited
    "flush_messages": (1, LONG_MAX),         # LONG_MAX = never (rely on replication)
    "flush_ms": (0, LONG_MAX),               # LONG_MAX = never
    "index_interval_bytes": (0, INT_MAX),
    "segment_index_bytes": (12, INT_MAX),    # room for at least one time-index entry
    "delete_retention_ms": (0, LONG_MAX),
    "min_cleanable_dirty_ratio": (0, 1),     # a float, both bounds inclusive
    "min_compaction_lag_ms": (0, LONG_MAX),
    "max_compaction_lag_ms": (1, LONG_MAX),
}
#: Kafka's accepted spellings of cleanup.policy, each mapped to its normal form
CLEANUP_POLICIES = {"delete": "delete", "compact": "compact",
                    "compact,delete": "compact,delete", "delete,compact": "compact,delete"}


@dataclass(frozen=True)
class LogConfig:
    """Immutable settings of one partition log; replace it with ``PartitionLog.update_config``.

    Invariant: every field lies in the range Kafka's validator allows (checked on
    construction, ValueError naming the Kafka property otherwise); ``cleanup_policy``
    is in its normal form (``delete``, ``compact`` or ``compact,delete``).  Pure; any
    thread.
    """

    segment_bytes: int = 1024 * MIB
    segment_ms: int = 7 * DAY_MS
    segment_jitter_ms: int = 0
    retention_ms: int = 7 * DAY_MS
    retention_bytes: int = -1
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10 * MIB
    cleanup_policy: str = "delete"
    delete_retention_ms: int = DAY_MS
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            key = PROPERTY_NAMES[field.name]
            if field.name == "cleanup_policy":
                if value not in CLEANUP_POLICIES:
                    raise ValueError(f"{key}: {value!r} is not one of "
                                     f"{', '.join(CLEANUP_POLICIES)}")
                continue
            low, high = _RANGES[field.name]
            wanted = float if field.name == "min_cleanable_dirty_ratio" else int
            if type(value) is not wanted and not (wanted is float and type(value) is int):
                expected = "a number" if wanted is float else "an integer"
                raise ValueError(f"{key}: expected {expected}, got {value!r}")
            if not low <= value <= high:
                raise ValueError(f"{key}: {value} is outside [{low}, {high}]")
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:  # Kafka's check too
            raise ValueError(f"min.compaction.lag.ms: {self.min_compaction_lag_ms} is above "
                             f"max.compaction.lag.ms {self.max_compaction_lag_ms}")

    @property
    def compact(self) -> bool:
        """The log cleaner compacts this log."""
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """Retention (retention.ms / retention.bytes) deletes old segments of this log."""
        return "delete" in self.cleanup_policy

    @classmethod
    def from_properties(cls, properties: dict[str, str],
                        base: LogConfig | None = None) -> LogConfig:
        """Kafka topic-config names → LogConfig; unknown keys are ignored.

        Values are applied over ``base`` (the broker defaults) or over Kafka's defaults.
        A value that is not an integer, or out of range, raises ValueError naming the key.
        """
        changes: dict[str, Any] = {}
        for field, key in PROPERTY_NAMES.items():
            if key not in properties:
                continue
            raw = str(properties[key]).strip()
            if field == "cleanup_policy":
                policy = raw.lower().replace(" ", "")
                changes[field] = CLEANUP_POLICIES.get(policy, policy)
                continue
            parse = float if field == "min_cleanable_dirty_ratio" else int
            try:
                changes[field] = parse(raw)
            except ValueError:
                raise ValueError(f"{key}: expected {'a number' if parse is float else 'an integer'}"
                                 f", got {properties[key]!r}") from None
        return dataclasses.replace(base if base is not None else cls(), **changes)

    def to_properties(self) -> dict[str, str]:
        """The Kafka topic-config names with string values (DescribeConfigs-ready)."""
        return {key: str(getattr(self, field)) for field, key in PROPERTY_NAMES.items()}

    def roll_jitter_ms(self, seed: int) -> int:
        """Kafka's per-segment roll jitter: 0 without ``segment.jitter.ms``, else a value
        in [0, min(segment.jitter.ms, segment.ms)) drawn from ``seed`` (the segment's,
        so a segment keeps its jitter across restarts)."""
        if not self.segment_jitter_ms:
            return 0
        return seed % min(self.segment_jitter_ms, self.segment_ms)

    @property
    def max_index_entries_offset(self) -> int:
        """Offset-index entries a segment may hold before it must roll (8 bytes each)."""
        return self.segment_index_bytes // 8

    @property
    def max_index_entries_time(self) -> int:
        """Time-index entries a segment may hold before it must roll (12 bytes each)."""
        return self.segment_index_bytes // 12

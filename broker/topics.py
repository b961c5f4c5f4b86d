"""Topic names (Kafka's rules for what a topic may be called) and every topic-level config
Kafka 4.x has (its ``TopicConfig`` / ``LogConfig`` list): type, default, validation, the
broker setting that defaults it, and what Raftwood does with it.  Imports nothing of the
broker, so the config layer and every room may use it.

A config's ``handling`` is one of:

* ``acted``: Raftwood does what Kafka does with it;
* ``ignored``: accepted, validated and described as Kafka does, with no effect, where
  Kafka 4 has none either (``message.downconversion.enable``) or the feature behind it
  is one Raftwood does not have and the value asks for nothing (``local.retention.*``
  without tiered storage); ``reason`` says why;
* ``refused``: a value Raftwood cannot honour is refused with INVALID_CONFIG and
  ``reason`` (``remote.storage.enable=true``, as a Kafka broker without tiered storage
  answers).

Kafka 4.0 removed ``message.format.version`` and ``message.timestamp.difference.max.ms``
(KIP-724, KIP-937); like Kafka 4 they are unknown names here (INVALID_CONFIG "Unknown
topic config name").  Validation messages have the shape of Kafka's ConfigException:
``Invalid value V for configuration N: why``.  Pure tables and functions; any thread.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kafka import codec as _codec

from storage.config import CLEANUP_POLICIES

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME = 249
# Kafka's internal topics (Topic.INTERNAL_TOPICS): written only by the broker itself (the
# group, transaction and share coordinators), never by a client Produce, and never
# deleted; what the coordinators read back from them was written by a broker.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state",
                             "__share_group_state"})


def is_internal(name: str | None) -> bool:
    return name in INTERNAL_TOPICS


def topic_name_problem(name: str | None) -> str | None:
    """Why ``name`` is not a legal topic name (Kafka's rules), or None."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name {name!r} is reserved"
    if len(name) > MAX_TOPIC_NAME:
        return f"topic name is longer than {MAX_TOPIC_NAME} characters"
    if not _LEGAL_TOPIC.match(name):
        return f"topic name {name!r} has characters outside [a-zA-Z0-9._-]"
    return None


LONG_MAX = 2 ** 63 - 1
INT_MAX = 2 ** 31 - 1
LONG_MIN = -(2 ** 63)
INT_MIN = -(2 ** 31)
DAY_MS = 24 * 60 * 60 * 1000

# DescribeConfigs' ConfigType (v3+).
CONFIG_TYPES = {"BOOLEAN": 1, "STRING": 2, "INT": 3, "LONG": 5, "DOUBLE": 6, "LIST": 7}
_BOUNDS = {"INT": (INT_MIN, INT_MAX), "LONG": (LONG_MIN, LONG_MAX)}

#: compression.type's values (Kafka's BrokerCompressionType) → record batch codec id
COMPRESSION_CODECS = {"uncompressed": 0, "zstd": 4, "lz4": 3, "snappy": 2, "gzip": 1,
                      "producer": None}
_CODEC_PRESENT = {"gzip": _codec.has_gzip, "snappy": _codec.has_snappy,
                  "lz4": _codec.has_lz4, "zstd": _codec.has_zstd}
_CODEC_PACKAGES = {"snappy": "python-snappy", "lz4": "lz4", "zstd": "zstandard"}
NO_TIERED_STORAGE = ("Tiered Storage functionality is disabled in the broker. Topic cannot be "
                     "configured with remote log storage.")


@dataclass(frozen=True)
class TopicConfigSpec:
    """One topic config.  ``default`` is Kafka's, as text; ``broker`` the broker
    setting Kafka defaults it from (its synonym), or ""; ``low``/``high`` inclusive
    bounds of a number; ``valid`` the allowed strings (each item of a LIST)."""

    name: str
    kind: str
    default: str
    doc: str
    broker: str = ""
    handling: str = "acted"
    reason: str = ""
    low: float | None = None
    high: float | None = None
    valid: tuple[str, ...] = ()

    @property
    def config_type(self) -> int:
        return CONFIG_TYPES[self.kind]


def _spec(name: str, kind: str, default: object, doc: str, broker: str = "",
          **extra: Any) -> TopicConfigSpec:
    return TopicConfigSpec(name, kind, str(default), doc, broker, **extra)


SPECS: dict[str, TopicConfigSpec] = {s.name: s for s in (
    _spec("cleanup.policy", "LIST", "delete",
          "delete: retention drops old segments; compact: the log cleaner keeps the latest "
          "record per key; or both", "log.cleanup.policy", valid=("compact", "delete")),
    _spec("compression.gzip.level", "INT", -1, "gzip level when compression.type=gzip "
          "(1-9, or -1 for the codec's default)", "compression.gzip.level"),
    _spec("compression.lz4.level", "INT", 9, "lz4 level when compression.type=lz4 (1-17)",
          "compression.lz4.level", low=1, high=17),
    _spec("compression.type", "STRING", "producer",
          "Codec the broker stores batches with: producer keeps the producer's, another "
          "value makes the broker recompress each batch on append", "compression.type",
          valid=tuple(COMPRESSION_CODECS)),
    _spec("compression.zstd.level", "INT", 3, "zstd level when compression.type=zstd "
          "(-131072 to 22)", "compression.zstd.level", low=-131072, high=22),
    _spec("delete.retention.ms", "LONG", DAY_MS, "How long tombstones stay in a compacted "
          "log", "log.cleaner.delete.retention.ms", low=0),
    _spec("file.delete.delay.ms", "LONG", 60_000, "Kafka waits this long before deleting a "
          "removed segment's files", "log.segment.delete.delay.ms", handling="ignored",
          reason="Raftwood unlinks a removed segment at once; readers that hold it open "
                 "keep reading it (POSIX), which is what the delay protects in Kafka",
          low=0),
    _spec("flush.messages", "LONG", LONG_MAX, "fsync after this many messages",
          "log.flush.interval.messages", low=1),
    _spec("flush.ms", "LONG", LONG_MAX, "fsync at least this often", "log.flush.interval.ms",
          low=0),
    _spec("follower.replication.throttled.replicas", "LIST", "",
          "partition:broker,... replicas fetched at follower.replication.throttled.rate "
          "(* for all)"),
    _spec("index.interval.bytes", "INT", 4096, "Bytes of records between two offset index "
          "entries", "log.index.interval.bytes", low=0),
    _spec("leader.replication.throttled.replicas", "LIST", "",
          "partition:broker,... replicas the leader sends to at "
          "leader.replication.throttled.rate (* for all)"),
    _spec("local.retention.bytes", "LONG", -2, "Local share of retention.bytes under tiered "
          "storage (-2: retention.bytes)", "log.local.retention.bytes", handling="ignored",
          reason="only meaningful with tiered storage, which Raftwood does not have",
          low=-2),
    _spec("local.retention.ms", "LONG", -2, "Local share of retention.ms under tiered "
          "storage (-2: retention.ms)", "log.local.retention.ms", handling="ignored",
          reason="only meaningful with tiered storage, which Raftwood does not have",
          low=-2),
    _spec("max.compaction.lag.ms", "LONG", LONG_MAX, "Longest a record stays uncompacted",
          "log.cleaner.max.compaction.lag.ms", low=1),
    _spec("max.message.bytes", "INT", 1024 * 1024 + 12, "Largest record batch a produce may "
          "append (after the broker's recompression); MESSAGE_TOO_LARGE above it",
          "message.max.bytes", low=0),
    _spec("message.downconversion.enable", "BOOLEAN", "true", "No effect in Kafka 4 (no "
          "down-conversion exists)", "log.message.downconversion.enable", handling="ignored",
          reason="a no-op in Kafka 4 too: Fetch below v4 is gone, nothing is down-converted"),
    _spec("message.timestamp.after.max.ms", "LONG", 3_600_000,
          "A CreateTime record more than this ahead of the broker's clock is refused "
          "(INVALID_TIMESTAMP)", "log.message.timestamp.after.max.ms", low=0),
    _spec("message.timestamp.before.max.ms", "LONG", LONG_MAX,
          "A CreateTime record more than this behind the broker's clock is refused "
          "(INVALID_TIMESTAMP)", "log.message.timestamp.before.max.ms", low=0),
    _spec("message.timestamp.type", "STRING", "CreateTime", "CreateTime keeps the producer's "
          "timestamps; LogAppendTime stamps each batch with the broker's clock on append",
          "log.message.timestamp.type", valid=("CreateTime", "LogAppendTime")),
    _spec("min.cleanable.dirty.ratio", "DOUBLE", 0.5, "Dirty share of a log before the "
          "cleaner compacts it", "log.cleaner.min.cleanable.ratio", low=0, high=1),
    _spec("min.compaction.lag.ms", "LONG", 0, "Shortest time a record stays uncompacted",
          "log.cleaner.min.compaction.lag.ms", low=0),
    _spec("min.insync.replicas", "INT", 1, "Least ISR size for acks=all writes",
          "min.insync.replicas", low=1),
    _spec("preallocate", "BOOLEAN", "false", "Kafka preallocates a new segment's file",
          "log.preallocate", handling="ignored",
          reason="Raftwood's segments grow by appends; preallocation would need a "
                 "truncate on every roll and recovery for no gain on Linux file systems"),
    _spec("remote.log.copy.disable", "BOOLEAN", "false", "Tiered storage: stop copying "
          "segments to remote storage", handling="ignored",
          reason="only meaningful with tiered storage, which Raftwood does not have"),
    _spec("remote.log.delete.on.disable", "BOOLEAN", "false", "Tiered storage: delete remote "
          "segments when it is disabled", handling="ignored",
          reason="only meaningful with tiered storage, which Raftwood does not have"),
    _spec("remote.storage.enable", "BOOLEAN", "false", "Tiered storage for the topic; true is "
          "refused (Raftwood has no tiered storage)", handling="refused",
          reason="Raftwood has no tiered storage: true answers INVALID_CONFIG, as a Kafka "
                 "broker without remote.log.storage.system.enable does"),
    _spec("retention.bytes", "LONG", -1, "Keep at most this much per partition (-1: no cap)",
          "log.retention.bytes"),
    _spec("retention.ms", "LONG", 7 * DAY_MS, "Delete segments older than this (-1: never)",
          "log.retention.ms", low=-1),
    _spec("segment.bytes", "INT", 1024 ** 3, "Roll a segment at this size",
          "log.segment.bytes", low=14),
    _spec("segment.index.bytes", "INT", 10 * 1024 * 1024, "Size of a segment's offset and "
          "time index files", "log.index.size.max.bytes", low=4),
    _spec("segment.jitter.ms", "LONG", 0, "Each segment rolls up to this much before "
          "segment.ms, by its own share, so partitions do not all roll at once",
          "log.roll.jitter.ms", low=0),
    _spec("segment.ms", "LONG", 7 * DAY_MS, "Roll a segment at this age", "log.roll.ms",
          low=1),
    _spec("unclean.leader.election.enable", "BOOLEAN", "false", "Allow out-of-sync leaders",
          "unclean.leader.election.enable"),
)}


def _invalid(name: str, value: str, why: str) -> str:
    return f"Invalid value {value} for configuration {name}: {why}"


def _number_problem(spec: TopicConfigSpec, value: str) -> str | None:
    text = value.strip()
    try:
        number: float = float(text) if spec.kind == "DOUBLE" else int(text)
    except ValueError:
        return _invalid(spec.name, value, f"Not a number of type {spec.kind}")
    bounds = _BOUNDS.get(spec.kind)
    if bounds is not None and not bounds[0] <= number <= bounds[1]:
        return _invalid(spec.name, value, f"Not a number of type {spec.kind}")
    if spec.name == "compression.gzip.level" and not (1 <= number <= 9 or number == -1):
        return _invalid(spec.name, value, "Value must be between 1 and 9 or equal to -1")
    if spec.low is not None and number < spec.low:
        return _invalid(spec.name, value, f"Value must be at least {_num(spec.low)}")
    if spec.high is not None and number > spec.high:
        return _invalid(spec.name, value, f"Value must be no more than {_num(spec.high)}")
    return None


def _num(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)


def value_problem(name: str, value: str | None) -> str | None:
    """Why ``value`` is not acceptable for topic config ``name`` (Kafka's message), or
    None.  An unknown name answers Kafka's "Unknown topic config name"."""
    spec = SPECS.get(name)
    if spec is None:
        return f"Unknown topic config name: {name}"
    if value is None:
        return _invalid(name, "null", "Null value not allowed")
    if spec.kind in ("INT", "LONG", "DOUBLE"):
        return _number_problem(spec, value)
    if spec.kind == "BOOLEAN":
        if value.strip().lower() not in ("true", "false"):
            return _invalid(name, value, "Expected value to be either true or false")
        if name == "remote.storage.enable" and value.strip().lower() == "true":
            return NO_TIERED_STORAGE
        return None
    items = [i.strip() for i in value.split(",")] if spec.kind == "LIST" else [value.strip()]
    if spec.valid and any(i not in spec.valid for i in items if i or spec.kind != "LIST"):
        return _invalid(name, value, f"String must be one of: {', '.join(spec.valid)}")
    if name == "compression.type":
        return _codec_problem(value.strip())
    return None


def _codec_problem(compression: str) -> str | None:
    present = _CODEC_PRESENT.get(compression)
    if present is None or present():
        return None
    return (f"Invalid value {compression} for configuration compression.type: this broker "
            f"cannot compress with {compression} (the {_CODEC_PACKAGES[compression]} Python "
            f"package is not installed)")


def configs_problem(configs: dict[str, str]) -> str | None:
    """The first problem of a topic's overrides, checked name by name, or None."""
    for name in sorted(configs):
        problem = value_problem(name, configs[name])
        if problem:
            return problem
    return None


# Kafka's throttled-replica lists (topic configs): which replicas the replication rates
# apply to (replication/throttle.py parses them for the fetch path).
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
THROTTLED_REPLICAS_CONFIGS = (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS)
THROTTLED_REPLICA_ENTRY = re.compile(r"([0-9]+):([0-9]+)")


def throttled_replicas_problem(name: str, value: str) -> str | None:
    """Why ``value`` is not a throttled-replica list (Kafka's ThrottledReplicaListValidator:
    the literal ``*``, or comma-separated ``partition:broker`` entries, blanks allowed
    around them; an empty entry is allowed, so ``""`` means none), or None."""
    entries = [e.strip() for e in value.split(",")]
    if "".join(entries) == "*" \
            or all(e == "" or THROTTLED_REPLICA_ENTRY.fullmatch(e) for e in entries):
        return None
    return (f"{name} must be the literal '*' or a list of replicas in the format "
            f"[partitionId]:[brokerId],[partitionId]:[brokerId],... (got {value!r})")


# Every topic-level config name Kafka 4.x has (topic_config_specs.SPECS); CreateTopics
# and the config APIs refuse any other name with INVALID_CONFIG (a typo must not pass
# silently), and check each value as Kafka's LogConfig does.
TOPIC_CONFIG_KEYS = frozenset(SPECS)


def topic_config_problem(configs: dict[str, str]) -> str | None:
    """Why these topic config overrides are unacceptable (Kafka's messages), or None."""
    problem = configs_problem(configs)
    if problem:
        return problem
    policy = configs.get("cleanup.policy", "delete")
    if policy not in CLEANUP_POLICIES:
        return f"cleanup.policy {policy!r} is not one of {', '.join(CLEANUP_POLICIES)}"
    for name in THROTTLED_REPLICAS_CONFIGS:
        if name in configs:
            problem = throttled_replicas_problem(name, configs[name])
            if problem:
                return problem
    return None

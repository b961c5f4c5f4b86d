"""Broker configuration with Kafka's names.

Sources, later ones winning: built-in defaults, a config file (Java-style
``key=value`` properties, or TOML when the file name ends in ``.toml``), environment
variables ``RAFTWOOD_<NAME>`` (``RAFTWOOD_LOG_DIRS`` for ``log.dirs``), then
``--set key=value`` on the command line.  Unknown keys are refused, so a typo never
passes silently; every value is parsed to its type here, once.
"""
from __future__ import annotations

import difflib
import functools
import ipaddress
import os
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from storage.config import LogConfig

from .network import limits as connection_limits
from .security import authorizer, sasl, tls
from .security import listeners as listener_settings
from .topics import THROTTLED_REPLICAS_CONFIGS, configs_problem

DAY_MS = 24 * 60 * 60 * 1000


class ConfigError(ValueError):
    """A configuration key is unknown or its value does not parse."""


def _bool(text: str) -> bool:
    lowered = str(text).strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {text!r}")


def _str(text: str) -> str:
    return str(text).strip()


RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def _log_format(text: str) -> str:
    value = str(text).strip().lower()
    if value not in ("text", "json"):
        raise ValueError(f"{text!r}: log.format is text or json")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(f"{value} must be at least 1")
    return value


def _connection_overrides(text: str) -> str:
    """max.connections.per.ip.overrides, checked here and kept as written."""
    connection_limits.parse_overrides(text)
    return str(text).strip()


def _replica_selector(text: str) -> str:
    """Kafka's class names for the two selectors it ships; anything else is refused."""
    name = str(text).strip()
    if name not in ("", RACK_AWARE_SELECTOR):
        raise ValueError(f"{name!r}: Raftwood serves only {RACK_AWARE_SELECTOR} (or empty: "
                         f"consumers read from the leader)")
    return name


@dataclass(frozen=True)
class Setting:
    """One broker setting.  ``kafka`` is True when Kafka 4.x has a broker setting of the
    same name and meaning (its default may differ), False for Raftwood's own settings.
    docs/configuration.md is generated from this table (broker/config_doc.py)."""

    name: str
    parse: Callable[[str], Any]
    default: Any
    doc: str
    kafka: bool = True


SETTINGS: dict[str, Setting] = {s.name: s for s in (
    Setting("node.id", int, 1, "This broker's id"),
    Setting("listeners", _str, "PLAINTEXT://127.0.0.1:9092", "Where the broker listens"),
    Setting("advertised.listeners", _str, "", "What clients are told (default: listeners)"),
    Setting("listener.security.protocol.map", _str, listener_settings.DEFAULT_PROTOCOL_MAP,
            "Listener name → security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)"),
    Setting("inter.broker.listener.name", _str, "",
            "Listener replica fetchers use (default: security.inter.broker.protocol's)"),
    Setting("security.inter.broker.protocol", _str, "PLAINTEXT",
            "Names the inter-broker listener when inter.broker.listener.name is unset"),
    Setting("log.dirs", _str, "./data", "Directory holding partition logs and metadata"),
    Setting("metadata.log.dir", _str, "",
            "Directory of the cluster metadata (Raft journal); empty: under log.dirs"),
    Setting("controller.quorum.voters", _str, "", "id@host:port,... of the Raft voters"),
    # Raftwood's own (Kafka's KRaft secures its controller listener instead): the secret
    # that encrypts and authenticates Raft traffic (pysyncobj's password option).
    Setting("controller.quorum.bind.address", _str, "",
            "host:port this voter's Raft server binds when not its controller.quorum.voters "
            "entry (a proxy in front of it); empty: the entry", kafka=False),
    Setting("controller.quorum.password", _str, "",
            "Secret shared by the Raft voters; encrypts their traffic (empty: none)",
            kafka=False),
    Setting("controller.quorum.password.file", _str, "",
            "File whose first line is controller.quorum.password", kafka=False),
    Setting("controller.quorum.allow.unauthenticated", _bool, False,
            "Run a metadata quorum without controller.quorum.password (unsafe)",
            kafka=False),
    Setting("num.partitions", int, 1, "Partitions of auto-created topics"),
    Setting("default.replication.factor", int, 1, "Replication factor of auto-created topics"),
    Setting("min.insync.replicas", int, 1, "Least ISR size for acks=all writes"),
    Setting("replica.lag.time.max.ms", int, 30_000, "A follower behind this long leaves the ISR"),
    Setting("unclean.leader.election.enable", _bool, False, "Allow out-of-sync leaders"),
    Setting("broker.rack", _str, "", "This broker's rack (rack-aware reads, KIP-392)"),
    Setting("leader.replication.throttled.rate", _positive_int, 2**63 - 1,
            "Bytes/s a leader sends to throttled replicas: those joining by reassignment "
            "and those its topics' leader.replication.throttled.replicas list (default "
            "unlimited)"),
    Setting("follower.replication.throttled.rate", _positive_int, 2**63 - 1,
            "Bytes/s a follower fetches for the replicas its topics' "
            "follower.replication.throttled.replicas list (default unlimited)"),
    Setting("replica.selector.class", _replica_selector, "",
            "Which replica consumers read from: empty (the leader) or Kafka's "
            "RackAwareReplicaSelector (a replica in the consumer's client.rack)"),
    Setting("auto.create.topics.enable", _bool, True, "Create unknown topics on Metadata"),
    Setting("log.segment.bytes", int, 1024 ** 3, "Roll a segment at this size"),
    Setting("log.roll.ms", int, 7 * DAY_MS, "Roll a segment at this age"),
    Setting("log.retention.ms", int, 7 * DAY_MS, "Delete segments older than this (-1: never)"),
    Setting("log.retention.bytes", int, -1, "Keep at most this much per partition (-1: no cap)"),
    Setting("log.retention.check.interval.ms", int, 300_000, "How often retention runs"),
    Setting("log.cleanup.policy", _str, "delete",
            "delete, compact or compact,delete: what topics do with old data by default"),
    Setting("log.cleaner.enable", _bool, True, "Run the log cleaner (compacted topics)"),
    Setting("log.cleaner.threads", int, 1, "Log cleaner threads (Raftwood serves 1)"),
    Setting("log.cleaner.backoff.ms", int, 15_000,
            "How long the cleaner sleeps when no log needs cleaning"),
    Setting("log.cleaner.delete.retention.ms", int, DAY_MS,
            "How long tombstones stay after they were cleaned (delete.retention.ms)"),
    Setting("log.cleaner.min.cleanable.ratio", float, 0.5,
            "Dirty share of a log above which it is cleaned (min.cleanable.dirty.ratio)"),
    Setting("log.cleaner.min.compaction.lag.ms", int, 0,
            "Records younger than this are not compacted (min.compaction.lag.ms)"),
    Setting("log.cleaner.max.compaction.lag.ms", int, 2 ** 63 - 1,
            "Records older than this are compacted whatever the ratio (max.compaction.lag.ms)"),
    Setting("log.flush.interval.messages", int, 2 ** 63 - 1, "fsync after this many messages"),
    Setting("log.flush.interval.ms", int, 2 ** 63 - 1, "fsync at least this often"),
    Setting("log.flush.offset.checkpoint.interval.ms", int, 60_000,
            "How often HW, recovery point and log start offset are checkpointed"),
    Setting("log.flush.on.acks.all", _bool, False,
            "fsync the log before answering an acks=all produce (Raftwood option)",
            kafka=False),
    Setting("socket.request.max.bytes", int, 100 * 1024 * 1024, "Largest request frame"),
    Setting("message.max.bytes", int, 1024 * 1024 + 12, "Largest record batch"),
    # Defaults of topic configs (broker/topics.py SPECS), Kafka's names and defaults.
    Setting("compression.type", _str, "producer",
            "Codec topics store batches in: producer (as sent), or one the broker recompresses to"),
    Setting("compression.gzip.level", int, -1, "gzip level of compression.type=gzip"),
    Setting("compression.lz4.level", int, 9, "lz4 level of compression.type=lz4"),
    Setting("compression.zstd.level", int, 3, "zstd level of compression.type=zstd"),
    Setting("log.message.timestamp.type", _str, "CreateTime",
            "CreateTime, or LogAppendTime: the broker stamps batches on append"),
    Setting("log.message.timestamp.before.max.ms", int, 2 ** 63 - 1,
            "Refuse CreateTime records older than this (INVALID_TIMESTAMP)"),
    Setting("log.message.timestamp.after.max.ms", int, 3_600_000,
            "Refuse CreateTime records further ahead than this (INVALID_TIMESTAMP)"),
    Setting("log.roll.jitter.ms", int, 0, "Largest share of log.roll.ms a segment rolls early"),
    Setting("log.index.interval.bytes", int, 4096, "Bytes between two offset index entries"),
    Setting("log.index.size.max.bytes", int, 10 * 1024 * 1024,
            "Size of a segment's offset and time index files"),
    # Raftwood's own: Kafka has no such setting (it always sends fetched records with
    # FileChannel.transferTo, i.e. sendfile, on plaintext listeners).
    Setting("socket.sendfile.enable", _bool, True,
            "Send Fetch records from the segment files with sendfile on plaintext "
            "listeners; false: pread them and write the copy (Raftwood option)",
            kafka=False),
    Setting("queued.max.requests.per.connection", int, 100,
            "In-flight requests per connection before reading pauses (Raftwood option)",
            kafka=False),
    # Hostile clients (broker/network/limits.py): Kafka's names and defaults.
    Setting("max.connections", _positive_int, 2 ** 31 - 1,
            "Open connections on the Kafka listeners, the inter-broker listener's "
            "excepted; a connection over it is closed at accept"),
    Setting("max.connections.per.ip", int, 2 ** 31 - 1,
            "Open connections from one client address; over it a new one is closed"),
    Setting("max.connections.per.ip.overrides", _connection_overrides, "",
            "host:count,... per-address exceptions to max.connections.per.ip"),
    Setting("connections.max.idle.ms", _positive_int, 600_000,
            "Close a connection silent in both directions, owing nothing, this long"),
    Setting("sasl.server.max.receive.size", _positive_int, 524_288,
            "Largest frame a SASL listener reads before authentication"),
    Setting("max.incremental.fetch.session.cache.slots", int, 1000,
            "Incremental fetch sessions (KIP-227) the broker keeps; 0 turns them off"),
    Setting("replica.fetch.max.bytes", int, 1024 * 1024, "Follower fetch size per partition"),
    Setting("replica.fetch.wait.max.ms", int, 500, "Follower fetch long-poll wait"),
    Setting("replica.fetch.response.max.bytes", int, 10 * 1024 * 1024,
            "Follower fetch size per response"),
    Setting("replica.fetch.backoff.ms", int, 1000, "Follower pause after a fetch error"),
    Setting("broker.session.timeout.ms", int, 9_000, "Fence a broker silent this long"),
    Setting("broker.heartbeat.interval.ms", int, 2_000, "Broker heartbeat period"),
    Setting("auto.leader.rebalance.enable", _bool, True,
            "Move leadership back to preferred replicas"),
    Setting("leader.imbalance.check.interval.seconds", float, 300.0,
            "How often the controller restores preferred leaders"),
    Setting("group.initial.rebalance.delay.ms", int, 3_000,
            "Wait for members before first rebalance"),
    Setting("group.min.session.timeout.ms", int, 6_000,
            "Shortest session timeout a member may ask"),
    Setting("group.max.session.timeout.ms", int, 1_800_000,
            "Longest session timeout a member may ask"),
    # KIP-848's consumer groups (group.protocol=consumer): the broker sets the timeouts.
    Setting("group.consumer.heartbeat.interval.ms", int, 5_000,
            "Heartbeat interval told to consumer-protocol members"),
    Setting("group.consumer.session.timeout.ms", int, 45_000,
            "A consumer-protocol member silent this long is removed"),
    Setting("group.consumer.min.session.timeout.ms", int, 45_000,
            "Least allowed group.consumer.session.timeout.ms"),
    Setting("group.consumer.max.session.timeout.ms", int, 60_000,
            "Greatest allowed group.consumer.session.timeout.ms"),
    Setting("group.consumer.assignors", _str, "uniform,range",
            "Server-side assignors, the first is the default"),
    Setting("group.consumer.max.size", int, 2 ** 31 - 1,
            "Most members of one consumer-protocol group"),
    # KIP-932's share groups: the broker sets the timeouts, as for consumer groups.
    Setting("group.share.heartbeat.interval.ms", int, 5_000,
            "Heartbeat interval told to share-group members"),
    Setting("group.share.session.timeout.ms", int, 45_000,
            "A share-group member silent this long is removed"),
    Setting("group.share.min.session.timeout.ms", int, 45_000,
            "Least allowed group.share.session.timeout.ms"),
    Setting("group.share.max.session.timeout.ms", int, 60_000,
            "Greatest allowed group.share.session.timeout.ms"),
    Setting("group.share.max.size", int, 200, "Most members of one share group"),
    Setting("group.share.assignors", _str, "simple",
            "Share-group assignors (only Kafka's simple assignor is served)"),
    Setting("group.share.record.lock.duration.ms", int, 30_000,
            "How long a share consumer holds the records it fetched before they are "
            "redelivered"),
    Setting("group.share.delivery.count.limit", int, 5,
            "Deliveries of one record to a share group before it is archived"),
    Setting("group.share.partition.max.record.locks", int, 2_000,
            "Most in-flight records of one share partition"),
    # The share coordinator's state topic; Kafka defaults to 50 partitions, Raftwood to 10
    # for the reason given at offsets.topic.num.partitions.
    Setting("share.coordinator.state.topic.num.partitions", int, 10,
            "Partitions of __share_group_state"),
    Setting("share.coordinator.state.topic.replication.factor", int, 3,
            "Replication factor of __share_group_state (capped at the live brokers)"),
    # Kafka defaults to 50.  Raftwood defaults to 10: every partition is a directory with a
    # segment, two indexes and checkpoints, a follower-fetch entry on each replica and a
    # full log scan when its leadership moves -- a real cost in one Python process per
    # broker -- and 10 still spreads coordinators over clusters of up to 10 brokers.  The
    # count is fixed once the topic exists (an existing topic's count always wins).
    Setting("offsets.topic.num.partitions", int, 10, "Partitions of __consumer_offsets"),
    Setting("offsets.topic.replication.factor", int, 3,
            "Replication factor of __consumer_offsets (capped at the live brokers)"),
    Setting("offsets.retention.minutes", int, 7 * 24 * 60,
            "Committed offsets of empty groups are removed after this long"),
    Setting("offsets.retention.check.interval.ms", int, 600_000, "How often offsets expire"),
    Setting("offsets.commit.timeout.ms", int, 5_000,
            "How long a commit waits for all in-sync replicas of __consumer_offsets"),
    Setting("offset.metadata.max.bytes", int, 4096, "Longest metadata string of a commit"),
    # Transactions (broker/transactions/).  Partitions default to 10, not Kafka's 50, for
    # the reason given at offsets.topic.num.partitions.
    Setting("transaction.state.log.num.partitions", int, 10, "Partitions of __transaction_state"),
    Setting("transaction.state.log.replication.factor", int, 3,
            "Replication factor of __transaction_state (capped at the live brokers)"),
    Setting("transaction.state.log.min.isr", int, 2,
            "min.insync.replicas of __transaction_state (capped at its replication factor)"),
    Setting("transaction.state.log.segment.bytes", int, 100 * 1024 * 1024,
            "Segment size of __transaction_state"),
    Setting("transaction.max.timeout.ms", int, 900_000,
            "Longest transaction.timeout.ms a producer may ask (else INVALID_TRANSACTION_TIMEOUT)"),
    Setting("transactional.id.expiration.ms", int, 7 * DAY_MS,
            "A transactional id idle this long (no transaction) is forgotten"),
    Setting("transaction.abort.timed.out.transaction.cleanup.interval.ms", int, 10_000,
            "How often the coordinator aborts transactions past their timeout"),
    Setting("transaction.remove.expired.transaction.cleanup.interval.ms", int, 3_600_000,
            "How often the coordinator forgets expired transactional ids"),
    # Kafka takes the cluster id from `kafka-storage.sh format --cluster-id` instead.
    Setting("cluster.id", _str, "", "Cluster id (generated and stored on first start if empty)",
            kafka=False),
    Setting("log.format", _log_format, "text",
            "Broker log lines: text, or json (one object a line, state changes with fields)",
            kafka=False),
    # Raftwood's own (Kafka exports through JMX): Prometheus text on GET /metrics.
    Setting("metrics.port", int, 0, "Port serving Prometheus metrics (0: none served)",
            kafka=False),
    Setting("metrics.host", _str, "127.0.0.1", "Address the metrics port binds", kafka=False),
    # KIP-714 client telemetry.  Kafka keeps subscriptions as client-metrics resources;
    # here one subscription for every client: metric-name prefixes, comma-separated
    # (empty: none requested, "*": all).
    Setting("raftwood.client.metrics.subscription", _str, "",
            "Client metric-name prefixes requested from every client, comma-separated "
            "(empty: no subscription, *: all)", kafka=False),
    Setting("raftwood.client.metrics.push.interval.ms", _positive_int, 300_000,
            "How often subscribed clients push their metrics", kafka=False),
    Setting("telemetry.max.bytes", _positive_int, 1_048_576,
            "Largest compressed metrics payload of a PushTelemetry request"),
    Setting("quota.window.num", _positive_int, 11,
            "Samples a client quota rate is measured over (byte rates, connection "
            "creation rate; static)"),
    Setting("quota.window.size.seconds", _positive_int, 1,
            "Length of each client quota sample (static)"),
    Setting("controller.quota.window.num", _positive_int, 11,
            "Samples a controller_mutation_rate quota is measured over (static)"),
    Setting("controller.quota.window.size.seconds", _positive_int, 1,
            "Length of each controller_mutation_rate sample (static)"),
    *(Setting(name, _str, default, "TLS (PEM only); per listener as listener.name.<l>." + name)
      for name, default in tls.TLS_SETTINGS.items()),
    *(Setting(name, _str, default, "SASL; per listener as listener.name.<l>." + name)
      for name, default in sasl.SASL_LISTENER_SETTINGS.items()),
    Setting("sasl.mechanism.inter.broker.protocol", _str, "GSSAPI",
            "SASL mechanism of replica fetchers on a SASL inter-broker listener"),
    Setting("authorizer.class.name", _str, "",
            "ACLs on when Kafka's StandardAuthorizer or AclAuthorizer; empty: none"),
    Setting("super.users", _str, "", "Principals allowed everything: User:a;User:b"),
    Setting("allow.everyone.if.no.acl.found", _bool, False,
            "A resource without any ACL is open to everyone (true) or to super users only"),
)}
# Settings a listener may override with Kafka's prefix ``listener.name.<lower-case name>.``.
LISTENER_SETTINGS = frozenset(tls.TLS_SETTINGS) | frozenset(sasl.SASL_LISTENER_SETTINGS)

# Broker-level log settings and the topic-level names they default (Kafka's mapping).
TOPIC_DEFAULTS = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.cleanup.policy": "cleanup.policy",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "message.max.bytes": "max.message.bytes",
    "compression.type": "compression.type",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
    "log.roll.jitter.ms": "segment.jitter.ms",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.index.size.max.bytes": "segment.index.bytes",
}


class BrokerConfig:
    """Parsed, typed broker settings; read with ``config["log.dirs"]``.  The static
    values (defaults, file, environment, --set; ``explicit`` names those given) never
    change; the dynamic ones from the metadata (broker/dynamic_config.py) are laid over
    them by ``set_dynamic`` and win while set, so a reader sees a change at its next
    read."""

    def __init__(self, values: Mapping[str, Any], explicit: Iterable[str] = ()):
        self._values = dict(values)
        self._dynamic: dict[str, Any] = {}
        self.explicit = frozenset(explicit)

    def __getitem__(self, name: str) -> Any:
        dynamic = self._dynamic
        return dynamic[name] if name in dynamic else self._values[name]

    def as_dict(self) -> dict[str, Any]:
        """The effective values (dynamic ones included)."""
        return {**self._values, **self._dynamic}

    def static_dict(self) -> dict[str, Any]:
        """The values the broker started with."""
        return dict(self._values)

    def set_dynamic(self, values: Mapping[str, Any]) -> None:
        """Replace the dynamic layer (parsed values, by setting name)."""
        self._dynamic = dict(values)

    @property
    def node_id(self) -> int:
        return self["node.id"]

    @functools.cached_property
    def listener_plan(self) -> listener_settings.ListenerPlan:
        return listener_settings.plan_listeners(
            self["listeners"], self["advertised.listeners"],
            self["listener.security.protocol.map"], self["inter.broker.listener.name"],
            self["security.inter.broker.protocol"])

    def listener_setting(self, listener_name: str, name: str) -> Any:
        """``name`` for one listener: ``listener.name.<l>.<name>`` if set, else ``name``."""
        prefixed = f"listener.name.{listener_name.lower()}.{name}"
        for layer in (self._dynamic, self._values):
            if prefixed in layer:
                return layer[prefixed]
        return self._dynamic[name] if name in self._dynamic else self._values.get(name)

    @property
    def listener(self) -> tuple[str, int]:
        """(host, port) the first listener binds (host "0.0.0.0" when empty)."""
        first = self.listener_plan.listeners[0]
        return first.host or "0.0.0.0", first.port

    @property
    def advertised_listener(self) -> tuple[str, int]:
        """(host, port) of the inter-broker listener as advertised (the registration's)."""
        inter_broker = self.listener_plan.inter_broker
        return inter_broker.host, inter_broker.port

    def topic_defaults(self) -> dict[str, str]:
        """Topic-level config values implied by the broker's log.* settings."""
        defaults = {topic_name: _topic_text(self[broker_name])
                    for broker_name, topic_name in TOPIC_DEFAULTS.items()}
        # Topic-only configs (no broker setting behind them): Kafka's empty default.
        defaults.update(dict.fromkeys(THROTTLED_REPLICAS_CONFIGS, ""))
        return defaults


def _topic_text(value: Any) -> str:
    """A broker setting as a topic config's text (booleans lower case, as Kafka)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _listener_setting(key: str) -> Setting | None:
    """The Setting of a listener-prefixed key (``listener.name.ssl.ssl.client.auth``)."""
    if not key.startswith("listener.name."):
        return None
    _name, _, rest = key[len("listener.name."):].partition(".")
    return SETTINGS.get(rest) if rest in LISTENER_SETTINGS else None


def _check_listeners(config: BrokerConfig) -> None:
    """Refuse contradictory listener settings and unsupported TLS values at start."""
    try:
        plan = config.listener_plan
        for listener in plan.listeners:
            if listener.uses_tls:
                tls.check_settings(functools.partial(config.listener_setting, listener.name),
                                   listener.name)
        sasl.check_settings(config)
        authorizer.check_settings(lambda name: config[name])
    except ValueError as exc:  # ListenerError, tls.SettingError, SaslSettingError, authorizer
        raise ConfigError(str(exc)) from exc


def read_file(path: str) -> dict[str, str]:
    """Settings from a TOML file (``*.toml``) or a Java properties file."""
    if path.endswith(".toml"):
        with open(path, "rb") as f:
            return {k: str(v).lower() if isinstance(v, bool) else str(v)
                    for k, v in _flatten(tomllib.load(f)).items()}
    values: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line[0] in "#!":
                continue
            key, sep, value = line.partition("=")
            if not sep:
                raise ConfigError(f"{path}:{number}: expected key=value")
            values[key.strip()] = value.strip()
    return values


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(_flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def from_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """``RAFTWOOD_LOG_DIRS=/x`` → ``{"log.dirs": "/x"}`` for known settings only."""
    by_env = {"RAFTWOOD_" + name.upper().replace(".", "_"): name for name in SETTINGS}
    return {by_env[key]: value for key, value in environ.items() if key in by_env}


def parse_overrides(pairs: list[str]) -> dict[str, str]:
    values = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ConfigError(f"--set expects key=value, got {pair!r}")
        values[key.strip()] = value.strip()
    return values


def load(config_file: str | None = None, overrides: list[str] | None = None,
         environ: Mapping[str, str] | None = None) -> BrokerConfig:
    """Build the effective configuration from every source (see module doc)."""
    raw: dict[str, str] = {}
    if config_file:
        raw.update(read_file(config_file))
    raw.update(from_environment(os.environ if environ is None else environ))
    raw.update(parse_overrides(overrides or []))
    return build(raw)


def unknown_setting_message(key: str) -> str:
    """One line naming the unknown ``key``, the closest known name if one is close, and
    where the list of settings is."""
    prefix, names = "", list(SETTINGS)
    if key.startswith("listener.name.") and key.count(".") >= 3:
        listener = key[len("listener.name."):].partition(".")[0]
        prefix, names = f"listener.name.{listener}.", sorted(LISTENER_SETTINGS)
    close = difflib.get_close_matches(key[len(prefix):], names, n=1, cutoff=0.75)
    hint = f" (did you mean {prefix}{close[0]}?)" if close else ""
    return f"unknown setting {key!r}{hint}; see `raftwood start --help`"


def build(raw: Mapping[str, str]) -> BrokerConfig:
    values = {name: setting.default for name, setting in SETTINGS.items()}
    for key, text in raw.items():
        setting = SETTINGS.get(key) or _listener_setting(key)
        if setting is None:
            raise ConfigError(unknown_setting_message(key))
        try:
            values[key] = setting.parse(text)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"bad value for {key}: {text!r} ({exc})") from exc
    config = BrokerConfig(values, explicit=raw)
    _check_listeners(config)
    if values["replica.fetch.wait.max.ms"] >= values["replica.lag.time.max.ms"]:
        # As in Kafka: a follower long-polling longer than the lag time would drop out
        # of the ISR of every idle partition and rejoin, over and over.
        raise ConfigError("replica.fetch.wait.max.ms must be less than replica.lag.time.max.ms")
    _check_log_defaults(config)
    _check_quorum_password(config)
    _check_quorum_bind_address(config)
    return config


def _check_quorum_bind_address(config: BrokerConfig) -> None:
    """``controller.quorum.bind.address`` is ``host:port`` of a voter, never a wildcard,
    and loopback unless it is the host of the broker's own voter entry (so it never
    opens the Raft port wider than the voter entry does)."""
    text = config["controller.quorum.bind.address"].strip()
    if not text:
        return
    host, sep, port = text.rpartition(":")
    own = [e.partition("@")[2] for e in config["controller.quorum.voters"].split(",")
           if e.partition("@")[0].strip() == str(config.node_id)]
    if not own:
        raise ConfigError("controller.quorum.bind.address is set but node.id is not in "
                          "controller.quorum.voters")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536 or not host:
        raise ConfigError(f"controller.quorum.bind.address {text!r} is not host:port")
    if host in ("0.0.0.0", "::", "[::]", "*"):
        raise ConfigError("controller.quorum.bind.address may not be a wildcard address")
    try:
        loopback = ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback and host != own[0].rpartition(":")[0].strip():
        raise ConfigError(f"controller.quorum.bind.address {text!r}: a host other than the "
                          f"voter entry's ({own[0]}) must be a loopback address")


def quorum_password(config: BrokerConfig) -> str | None:
    """The Raft secret: ``controller.quorum.password``, else the first line of
    ``controller.quorum.password.file``; None when neither is set (no encryption)."""
    if config["controller.quorum.password"]:
        return config["controller.quorum.password"]
    path = config["controller.quorum.password.file"]
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            password = f.readline().rstrip("\r\n")
    except OSError as exc:
        raise ConfigError(f"controller.quorum.password.file: cannot read {path}: "
                          f"{exc.strerror or exc}") from exc
    if not password:
        raise ConfigError(f"controller.quorum.password.file: {path} holds no password "
                          f"on its first line")
    return password


QUORUM_SECRET_HOWTO = (
    'make one with: python -c "import secrets; print(secrets.token_urlsafe(24))" '
    '> quorum.secret && chmod 600 quorum.secret, then give every broker '
    '--set controller.quorum.password.file=quorum.secret')


def _check_quorum_password(config: BrokerConfig) -> None:
    """A secret, when given, is usable; a broker that runs a Raft node
    (``controller.quorum.voters`` set) has one, wherever its voters are, unless
    ``controller.quorum.allow.unauthenticated`` says otherwise.  Loopback is no
    exemption: every local user could otherwise act as a voter."""
    if config["controller.quorum.password"] and config["controller.quorum.password.file"]:
        raise ConfigError("give controller.quorum.password or "
                          "controller.quorum.password.file, not both")
    if quorum_password(config) is None:
        if config["controller.quorum.voters"].strip() \
                and not config["controller.quorum.allow.unauthenticated"]:
            raise ConfigError(
                f"controller.quorum.password (or controller.quorum.password.file) is required "
                f"when controller.quorum.voters is set: without it anyone who reaches a Raft "
                f"port can act as a voter; {QUORUM_SECRET_HOWTO} "
                f"(controller.quorum.allow.unauthenticated=true runs without it, unsafe)")
        return
    try:
        import cryptography  # noqa: F401  (pysyncobj's encryption needs it)
    except ImportError:
        raise ConfigError("controller.quorum.password needs the cryptography package "
                          "(pip install cryptography)") from None


def _check_log_defaults(config: BrokerConfig) -> None:
    """The log.* topic defaults must make a valid LogConfig; one cleaner thread only."""
    if config["log.cleaner.threads"] != 1:
        raise ConfigError(f"log.cleaner.threads={config['log.cleaner.threads']}: Raftwood "
                          f"runs exactly one log cleaner thread (set 1)")
    if config["log.cleaner.backoff.ms"] < 0:
        raise ConfigError("log.cleaner.backoff.ms must be >= 0")
    problem = configs_problem(config.topic_defaults())
    if problem:
        raise ConfigError(f"bad topic default: {problem}")
    try:
        LogConfig.from_properties(config.topic_defaults())
    except ValueError as exc:
        raise ConfigError(f"bad log default: {exc}") from exc

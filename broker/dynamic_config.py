"""Dynamic broker configs (Kafka's DynamicBrokerConfig): broker settings changed at run
time through AlterConfigs / IncrementalAlterConfigs on a BROKER resource, kept in the
cluster metadata (``ClusterState.resource_configs``) and applied by every broker.

A BROKER resource is named ``"<id>"`` (that broker) or ``""`` (the cluster-wide
default).  The value a broker uses, highest first, as Kafka: its own dynamic value
(DYNAMIC_BROKER_CONFIG), the dynamic default (DYNAMIC_DEFAULT_BROKER_CONFIG), the
value it started with (STATIC_BROKER_CONFIG when given, else DEFAULT_CONFIG).

Which settings are dynamic follows Kafka's lists, for the ones Raftwood has:

* the log defaults topics inherit (DynamicLogConfig: ``log.retention.ms``,
  ``log.segment.bytes``, the cleaner's topic defaults, ``min.insync.replicas`` ...) and
  ``message.max.bytes``: every hosted partition re-reads its configs;
* the cleaner's ``log.cleaner.backoff.ms`` and ``log.cleaner.threads`` (Raftwood runs
  exactly one: any other value is refused);
* the replication throttle rates (ReplicationQuotaManager);
* the connection limits (DynamicConnectionQuota);
* a listener's keystore and truststore, per broker only (Kafka's
  ``listener.name.<l>.ssl.*``): the listener's live TLS context loads them, so new
  connections get the new certificate and open ones keep theirs.  Truststore
  certificates are added to those loaded before (OpenSSL cannot drop them).

Any other known setting is refused as Kafka refuses it (INVALID_REQUEST "Cannot update
these configs dynamically"); an unknown one gets INVALID_CONFIG.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from storage.config import LogConfig

from .config import SETTINGS, TOPIC_DEFAULTS, BrokerConfig, Setting
from .network.limits import ConnectionLimits, parse_overrides
from .security import tls

if TYPE_CHECKING:
    from .replication.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

BROKER = 4
CLUSTER_DEFAULT = ""

LOG_DEFAULTS = frozenset(TOPIC_DEFAULTS) | {"message.max.bytes"}
CLEANER = frozenset({"log.cleaner.threads", "log.cleaner.backoff.ms"})
THROTTLES = frozenset({"leader.replication.throttled.rate",
                       "follower.replication.throttled.rate"})
CONNECTIONS = frozenset({"max.connections", "max.connections.per.ip",
                         "max.connections.per.ip.overrides"})
DYNAMIC = LOG_DEFAULTS | CLEANER | THROTTLES | CONNECTIONS
# Per listener (``listener.name.<l>.<key>``), per broker: Kafka's reconfigurable SSL keys.
LISTENER_DYNAMIC = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates"})


class DynamicConfigError(Exception):
    """A change refused; ``code`` is the name of Kafka's error code."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def listener_key(key: str) -> tuple[str, str] | None:
    """(listener name, setting) of a ``listener.name.<l>.<setting>`` key, else None."""
    if not key.startswith("listener.name."):
        return None
    listener, _, rest = key[len("listener.name."):].partition(".")
    return (listener, rest) if listener and rest else None


def is_dynamic(key: str) -> bool:
    split = listener_key(key)
    return key in DYNAMIC or (split is not None and split[1] in LISTENER_DYNAMIC)


def setting_of(key: str) -> Setting | None:
    split = listener_key(key)
    return SETTINGS.get(split[1] if split is not None else key)


def layers(image, node_id: int) -> tuple[dict[str, str], dict[str, str]]:
    """(the cluster default's dynamic values, this broker's) in ``image``, as text."""
    by_name = getattr(image, "resource_configs", {}).get(BROKER, {})
    return dict(by_name.get(CLUSTER_DEFAULT, {})), dict(by_name.get(str(node_id), {}))


def validate(config: BrokerConfig, image, name: str,
             changes: Mapping[str, str | None]) -> None:
    """DynamicConfigError unless ``changes`` (key → text, None: remove) may be made to
    the BROKER resource ``name`` of this broker's ``config``."""
    unknown = sorted(k for k in changes if setting_of(k) is None)
    if unknown:
        raise DynamicConfigError("INVALID_CONFIG", f"Unknown broker configs: {unknown}")
    static = sorted(k for k in changes if not is_dynamic(k))
    if static:
        raise DynamicConfigError("INVALID_REQUEST",
                                 f"Cannot update these configs dynamically: {static}")
    per_broker = sorted(k for k in changes if listener_key(k) is not None)
    if name == CLUSTER_DEFAULT and per_broker:
        raise DynamicConfigError(
            "INVALID_REQUEST", f"Cannot update these configs at default cluster level, "
                               f"broker id must be specified: {per_broker}")
    default, own = layers(image, config.node_id)
    if name == CLUSTER_DEFAULT:
        default.update(changes)
    else:
        own.update(changes)
    merged = {**default, **own}
    parsed = parse_layer({k: v for k, v in merged.items() if v is not None}, strict=True)
    _check_together(config, parsed)


def parse_layer(values: Mapping[str, str], strict: bool = False) -> dict[str, Any]:
    """Parsed values by key; a value that does not parse raises DynamicConfigError when
    ``strict``, else is left out with a warning (a value stored before this broker's
    checks were stricter must not stop it)."""
    parsed = {}
    for key, text in values.items():
        setting = setting_of(key)
        try:
            if setting is None:
                raise ValueError("unknown setting")
            parsed[key] = setting.parse(text)
        except (TypeError, ValueError) as exc:
            if strict:
                raise DynamicConfigError("INVALID_REQUEST",
                                         f"Invalid config value for {key}: {text!r} ({exc})"
                                         ) from exc
            log.warning("dynamic broker config %s=%r ignored: %s", key, text, exc)
    return parsed


def _check_together(config: BrokerConfig, parsed: dict[str, Any]) -> None:
    """The checks a broker's start makes, over the static values with ``parsed`` laid
    on top."""
    trial = BrokerConfig(config.static_dict())
    trial.set_dynamic(parsed)
    problem = None
    if trial["log.cleaner.threads"] != 1:
        problem = "log.cleaner.threads: Raftwood runs exactly one log cleaner thread"
    elif trial["log.cleaner.backoff.ms"] < 0:
        problem = "log.cleaner.backoff.ms must be >= 0"
    else:
        try:
            LogConfig.from_properties(trial.topic_defaults())
            parse_overrides(trial["max.connections.per.ip.overrides"])
            tls.server_contexts(trial)
        except ValueError as exc:  # a bad log default, override or keystore
            problem = str(exc)
    if problem:
        raise DynamicConfigError("INVALID_REQUEST", f"Invalid dynamic broker config: {problem}")


class DynamicBrokerConfig:
    """Applies the dynamic configs of each new metadata image to a running broker.
    Event-loop only.  Invariant: ``broker.config``'s dynamic layer is the parse of the
    newest image's values for this broker (its own over the cluster default), and every
    component that keeps a copy of a dynamic setting was told of its last change."""

    def __init__(self, config: BrokerConfig, replica_manager: ReplicaManager,
                 limits: ConnectionLimits, tls_contexts: Callable[[], dict] = dict):
        """What it reconfigures: ``config``'s dynamic layer, the replica manager's
        throttles, cleaner and hosted partitions, the listeners' connection ``limits``
        and their live TLS contexts (``tls_contexts()``); never the whole Broker."""
        self.config = config
        self.replica_manager = replica_manager
        self.limits = limits
        self._tls_contexts = tls_contexts
        self._applied: dict[str, str] = {}

    def apply_image(self, image) -> None:
        default, own = layers(image, self.config.node_id)
        values = {**default, **own}
        if values == self._applied:
            return
        changed = {k for k in set(values) | set(self._applied)
                   if values.get(k) != self._applied.get(k)}
        self._applied = values
        self.config.set_dynamic(parse_layer(values))
        log.info("Raftwood broker %d: dynamic configs changed: %s", self.config.node_id,
                 ", ".join(sorted(changed)))
        self._reconfigure(changed, image)

    def _reconfigure(self, changed: set[str], image) -> None:
        config, manager = self.config, self.replica_manager
        if changed & THROTTLES:
            manager.throttle.rate = config["leader.replication.throttled.rate"]
            manager.fetchers.throttle.rate = config["follower.replication.throttled.rate"]
        if changed & CONNECTIONS:
            limits = self.limits
            limits.max_connections = config["max.connections"]
            limits.max_per_host = config["max.connections.per.ip"]
            limits.overrides = parse_overrides(config["max.connections.per.ip.overrides"])
        if "log.cleaner.backoff.ms" in changed:
            manager.cleaner.backoff_s = config["log.cleaner.backoff.ms"] / 1000.0
        if changed & LOG_DEFAULTS:
            self._refollow_topic_configs(image)
        listeners = {split[0] for split in map(listener_key, changed) if split is not None}
        if listeners:
            self._reload_tls(listeners)

    def _refollow_topic_configs(self, image) -> None:
        """Every hosted partition takes its topic's configs over the new defaults."""
        manager = self.replica_manager
        for (name, _), partition in list(manager.partitions.items()):
            topic = image.topics.get(name)
            if topic is None or partition.offline:
                continue
            try:
                settings = manager.topic_configs.partition_settings(topic.configs)
                log_config = manager.topic_configs.log_config(topic.configs)
            except ValueError as exc:
                log.warning("topic %s keeps its configs: %s", name, exc)
                continue
            if settings != partition.settings:
                partition.settings = settings
            if log_config != partition.log.config:
                partition.log.update_config(log_config)

    def _reload_tls(self, listeners: set[str]) -> None:
        contexts = self._tls_contexts()
        for name, context in contexts.items():
            if name.lower() not in listeners:
                continue
            try:
                tls.reload_server_context(
                    context, lambda key, n=name: self.config.listener_setting(n, key), name)
                log.info("listener %s: keystore and truststore reloaded", name)
            except tls.SettingError as exc:
                log.warning("listener %s keeps its certificates: %s", name, exc)

"""DescribeConfigs of a TOPIC resource, as Kafka answers it (ConfigHelper): every topic
config Kafka 4.x has, each with its value and where it comes from.

A topic config's synonyms are, highest first: the topic's own override
(DYNAMIC_TOPIC_CONFIG), then the broker setting behind it (Kafka's synonym, e.g.
``log.retention.ms`` for ``retention.ms``) as this broker's dynamic value
(DYNAMIC_BROKER_CONFIG), the cluster-wide dynamic default
(DYNAMIC_DEFAULT_BROKER_CONFIG), the value the broker was started with when it was
given (STATIC_BROKER_CONFIG), and its default (DEFAULT_CONFIG).  The entry's value and
``config_source`` are the first synonym's; a config with none (a topic-only config not
overridden) is DEFAULT_CONFIG with Kafka's default.  Synonyms are listed only when asked
(v1+), documentation only when asked (v3+); ``config_type`` is Kafka's (v3+).  Topic
configs are never read-only or sensitive.  Pure over the broker's config and image.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka.protocol.admin import DescribeConfigsResponse

from ..config import SETTINGS, TOPIC_DEFAULTS
from ..topics import SPECS, TopicConfigSpec

if TYPE_CHECKING:
    from ..config import BrokerConfig
    from ..controller.metadata_client import ClusterState

TOPIC_CONFIG, DYNAMIC_BROKER, DYNAMIC_DEFAULT_BROKER, STATIC_BROKER, DEFAULT = 1, 2, 3, 4, 5
BROKER = 4
Entry = DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult
Synonym = Entry.DescribeConfigsSynonym
# Raftwood's broker settings that default a topic config (``log.roll.ms`` → ``segment.ms``).
_RAFTWOOD_SYNONYM = {topic: broker for broker, topic in TOPIC_DEFAULTS.items()}


def text(value: object) -> str:
    """A broker setting's value as Kafka writes it (booleans in lower case)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def broker_synonyms(config: BrokerConfig, image: ClusterState, node_id: int,
                    spec: TopicConfigSpec) -> list:
    """The broker-level synonyms of ``spec`` that have a value, highest first."""
    broker = _RAFTWOOD_SYNONYM.get(spec.name) or spec.broker
    setting = SETTINGS.get(broker)
    if setting is None:  # no such broker setting here: Kafka's default stands in
        return [Synonym(name=broker, value=spec.default, source=DEFAULT)] if broker else []
    by_name = getattr(image, "resource_configs", {}).get(BROKER, {})
    found = []
    for source, layer in ((DYNAMIC_BROKER, by_name.get(str(node_id), {})),
                          (DYNAMIC_DEFAULT_BROKER, by_name.get("", {}))):
        if broker in layer:
            found.append(Synonym(name=broker, value=str(layer[broker]), source=source))
    if broker in getattr(config, "explicit", ()):
        found.append(Synonym(name=broker, value=text(config.static_dict()[broker]),
                             source=STATIC_BROKER))
    found.append(Synonym(name=broker, value=text(setting.default), source=DEFAULT))
    return found


def _value_of(spec: TopicConfigSpec, synonym: Any) -> str:
    """A broker synonym's value in the topic config's spelling."""
    if spec.kind == "BOOLEAN" or spec.name == "cleanup.policy":
        return synonym.value.lower()
    return synonym.value


def topic_entries(config: BrokerConfig, image: ClusterState, node_id: int,
                  overrides: dict[str, str],
                  keys: list[str] | None, include_synonyms: bool,
                  include_documentation: bool) -> list:
    """The entries for a topic with ``overrides``: every config, or those in ``keys``."""
    entries = []
    for name, spec in sorted(SPECS.items()):
        if keys is not None and name not in keys:
            continue
        synonyms = broker_synonyms(config, image, node_id, spec)
        if name in overrides:
            synonyms.insert(0, Synonym(name=name, value=overrides[name], source=TOPIC_CONFIG))
        if synonyms:
            value, source = _value_of(spec, synonyms[0]), synonyms[0].source
        else:
            value, source = spec.default, DEFAULT
        entries.append(Entry(
            name=name, value=value, read_only=False, config_source=source,
            is_default=source == DEFAULT, is_sensitive=False,
            synonyms=synonyms if include_synonyms else [], config_type=spec.config_type,
            documentation=spec.doc if include_documentation else None))
    return entries

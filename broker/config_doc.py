"""The configuration reference, generated from the settings tables in code.

``python -m broker.config_doc > docs/configuration.md`` writes it; a unit test
(tests/unit/test_config_reference.py) regenerates it in memory and fails when the file
differs, so the reference cannot fall behind ``broker.config.SETTINGS`` (broker settings)
or ``broker.topics.TOPIC_CONFIG_KEYS`` (topic-level configs).  ``raftwood start --help``
shows the short form, :func:`help_listing`.

Pure functions of those tables: any thread.
"""
from __future__ import annotations

import sys
import textwrap
from typing import Any

from . import config as config_module
from .config import LISTENER_SETTINGS, SETTINGS, TOPIC_DEFAULTS, Setting
from .dynamic_config import LISTENER_DYNAMIC, is_dynamic
from .topics import SPECS, TOPIC_CONFIG_KEYS

REGENERATE = "python -m broker.config_doc > docs/configuration.md"
EMPTY = "(empty)"
LONG_MAX = 2 ** 63 - 1
INT_MAX = 2 ** 31 - 1

# Areas in the order the reference shows them: (title, exact names, name prefixes).
# A setting goes to the first area naming it exactly, else to the first whose prefix
# it starts with, else to "Other".
AREAS: tuple[tuple[str, frozenset[str], tuple[str, ...]], ...] = (
    ("Broker identity and listeners",
     frozenset({"node.id", "cluster.id", "broker.rack", "listeners", "advertised.listeners",
                "listener.security.protocol.map", "inter.broker.listener.name",
                "security.inter.broker.protocol"}), ()),
    ("Broker log output and metrics", frozenset({"log.format"}), ("metrics.",)),
    ("Metadata quorum (Raft) and broker liveness",
     frozenset({"broker.session.timeout.ms", "broker.heartbeat.interval.ms",
                "metadata.log.dir"}), ("controller.",)),
    ("Topic defaults and replication",
     frozenset({"num.partitions", "default.replication.factor", "min.insync.replicas",
                "unclean.leader.election.enable", "auto.create.topics.enable",
                "auto.leader.rebalance.enable", "leader.imbalance.check.interval.seconds"}),
     ("replica.", "leader.replication.", "follower.replication.")),
    ("Log storage, retention and compaction", frozenset({"log.dirs"}), ("log.",)),
    ("Connections and requests",
     frozenset({"message.max.bytes", "queued.max.requests.per.connection",
                "connections.max.idle.ms", "max.incremental.fetch.session.cache.slots"}),
     ("socket.", "max.connections")),
    ("Consumer groups and committed offsets", frozenset(),
     ("group.", "offsets.", "offset.", "share.")),
    ("Transactions", frozenset(), ("transaction.", "transactional.")),
    ("Security: TLS, SASL and ACLs",
     frozenset({"authorizer.class.name", "super.users", "allow.everyone.if.no.acl.found"}),
     ("ssl.", "sasl.", "plain.sasl.", "scram-sha-")),
)
OTHER = "Other"

# Kafka settings whose Kafka 4.x default is not Raftwood's: name → Kafka's default.
KAFKA_DEFAULTS_THAT_DIFFER = {
    "node.id": "-1 (must be set)",
    "listeners": "PLAINTEXT://:9092 (every interface)",
    "log.dirs": "/tmp/kafka-logs (log.dir)",
    "offsets.topic.num.partitions": "50",
    "share.coordinator.state.topic.num.partitions": "50",
    "transaction.state.log.num.partitions": "50",
    "ssl.keystore.type": "JKS",
    "ssl.truststore.type": "JKS",
}
_TYPES = {int: "int", float: "float", config_module._bool: "boolean",
          config_module._positive_int: "int ≥ 1"}


def area_of(setting: Setting) -> str:
    """The reference section of ``setting`` (see AREAS)."""
    for title, names, _prefixes in AREAS:
        if setting.name in names:
            return title
    for title, _names, prefixes in AREAS:
        if prefixes and setting.name.startswith(prefixes):
            return title
    return OTHER


def format_default(value: Any) -> str:
    """A default as one writes it in a properties file (Kafka's spellings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if value == "":
        return EMPTY
    return str(value)


def type_of(setting: Setting) -> str:
    return _TYPES.get(setting.parse, "string")


def by_area() -> dict[str, list[Setting]]:
    """Every setting under its area, areas in AREAS order, settings in table order."""
    grouped: dict[str, list[Setting]] = {title: [] for title, _, _ in AREAS}
    grouped[OTHER] = []
    for setting in SETTINGS.values():
        grouped[area_of(setting)].append(setting)
    return {title: settings for title, settings in grouped.items() if settings}


def topic_configs() -> list[tuple[str, str, str, str]]:
    """(topic config, default, broker setting that sets the default or "", doc) for
    every topic-level config the broker accepts, sorted by name; the doc ends with
    what Raftwood does with it when that is not what Kafka does."""
    broker_setting = {topic: broker for broker, topic in TOPIC_DEFAULTS.items()}
    rows = []
    for name in sorted(TOPIC_CONFIG_KEYS):
        spec = SPECS[name]
        source = broker_setting.get(name) or (spec.broker if spec.broker in SETTINGS else "")
        default = format_default(SETTINGS[source].default) if source \
            else format_default(spec.default)
        doc = spec.doc
        if spec.handling != "acted":
            doc += f". {spec.handling.capitalize()} by Raftwood: {spec.reason}"
        rows.append((name, default, source, doc))
    return rows


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    return f"`{text}`" if text else ""


_LIMITS = {str(LONG_MAX): " (Long.MAX_VALUE)", str(INT_MAX): " (Integer.MAX_VALUE)"}


def _default_cell(text: str) -> str:
    """A formatted default as a table cell: code, Java's name for the largest numbers."""
    if text == EMPTY:
        return EMPTY
    return _code(_cell(text)) + _LIMITS.get(text, "")


def _kafka_cell(setting: Setting) -> str:
    if not setting.kafka:
        return "no"
    differs = KAFKA_DEFAULTS_THAT_DIFFER.get(setting.name)
    return f"yes (default `{differs}`)" if differs else "yes"


INTRO = f"""\
# Configuration reference

<!-- Generated from broker/config.py's SETTINGS table and broker/topics.py's
TOPIC_CONFIG_KEYS by `{REGENERATE}`;
edit those, not this file (tests/unit/test_config_reference.py compares). -->

A broker reads its settings from, later sources winning:

1. the defaults below;
2. a config file, `raftwood start --config FILE`: Java properties (`key=value` lines,
   `#` comments) or TOML when the name ends in `.toml`;
3. environment variables `RAFTWOOD_<NAME>`: the name upper-cased with dots as
   underscores (`RAFTWOOD_LOG_DIRS=/var/lib/raftwood` sets `log.dirs`);
4. `raftwood start --set key=value`, repeatable.

A name not listed here is refused at start (`unknown setting ...`), with the closest
known name when there is one.  Column "Kafka" says whether Kafka 4.x has a broker
setting of that name and meaning ("yes"; with Kafka's default when it is not
Raftwood's) or the setting is Raftwood's own ("no").  TLS and SASL settings may also be
given per listener with Kafka's prefix, `listener.name.<listener in lower case>.<setting>`
(`listener.name.external.ssl.client.auth=required`).

Settings marked **Dynamic** change at run time, as Kafka's dynamic broker configs:
`raftwood configs --entity-type brokers --entity-name ID --alter --add-config k=v` for
one broker, `--entity-default` for every broker (any Kafka admin client's
IncrementalAlterConfigs on a BROKER resource does the same).  The value is kept in the
cluster metadata and wins over the value the broker started with.
"""


def markdown() -> str:
    """docs/configuration.md, exactly."""
    lines = [INTRO]
    lines.append("## Broker settings\n")
    lines.extend(f"- [{title}](#{_anchor(title)})" for title in by_area())
    lines.append("- [Topic-level configs](#topic-level-configs)\n")
    for title, settings in by_area().items():
        lines.append(f"### {title}\n")
        lines.append("| Setting | Default | Type | Kafka | What it does |")
        lines.append("|---|---|---|---|---|")
        for s in settings:
            listener = " Per listener too." if s.name in LISTENER_SETTINGS else ""
            lines.append(f"| `{s.name}` | {_default_cell(format_default(s.default))} | "
                         f"{type_of(s)} | {_kafka_cell(s)} | {_cell(s.doc)}.{listener}"
                         f"{_dynamic_note(s.name)} |")
        lines.append("")
    lines.append(TOPIC_INTRO)
    lines.append("| Topic config | Default | Default set by | What it does |")
    lines.append("|---|---|---|---|")
    for name, default, source, doc in topic_configs():
        lines.append(f"| `{name}` | {_default_cell(default)} | {_code(source)} | "
                     f"{_cell(doc)}. |")
    return "\n".join(lines) + "\n"


TOPIC_INTRO = """\
## Topic-level configs

Set per topic when it is created (`raftwood topics create NAME --config key=value`,
or any Kafka admin client's CreateTopics) and changed with IncrementalAlterConfigs
(`kafka-configs.sh --alter`, `AdminClient.incremental_alter_configs`).  These are every
topic config Kafka 4.x has, validated as Kafka validates them; any other name (including
`message.format.version` and `message.timestamp.difference.max.ms`, which Kafka 4.0
removed) is refused with INVALID_CONFIG.  A topic without an override takes the broker
setting named in "Default set by", else Kafka's default.  The few Raftwood accepts but
does not act on, or refuses a value of, say so and why.
"""


def _dynamic_note(name: str) -> str:
    """Whether a setting changes at run time (broker/dynamic_config.py), as Kafka's."""
    if is_dynamic(name):
        return " **Dynamic** (per broker or cluster-wide)."
    if name in LISTENER_DYNAMIC:
        return " **Dynamic** per listener and broker (`listener.name.<l>.` prefix)."
    return ""


def _anchor(title: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces as hyphens."""
    kept = "".join(c for c in title.lower() if c.isalnum() or c in " -")
    return kept.replace(" ", "-")


def help_listing(width: int = 96) -> str:
    """The settings for ``raftwood start --help``: each as ``name = default  doc`` under
    its area, wrapped at ``width`` columns (continuation lines indented deeper)."""
    lines = ["settings: --set KEY=VALUE, RAFTWOOD_<KEY> in the environment (log.dirs:",
             "RAFTWOOD_LOG_DIRS) or --config FILE; the full reference is docs/configuration.md"]
    for title, settings in by_area().items():
        lines.append(f"\n  {title}:")
        for s in settings:
            lines.append(textwrap.fill(f"{s.name} = {format_default(s.default)}  {s.doc}",
                                       width, initial_indent="    ",
                                       subsequent_indent="        ",
                                       break_on_hyphens=False))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(markdown())

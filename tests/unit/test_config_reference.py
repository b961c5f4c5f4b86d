"""docs/configuration.md is the settings tables in code, current: every broker setting with
its default and whether Kafka has it, every topic-level config; `raftwood start --help`
lists the same settings, and a misspelt one is refused in one line that names the
closest setting."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from broker import config, config_doc
from broker.topics import TOPIC_CONFIG_KEYS

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "configuration.md"
# Settings Kafka 4.x does not have (with that meaning): Raftwood's own.
RAFTWOOD_ONLY = {
    "controller.quorum.password", "controller.quorum.password.file",
    "controller.quorum.allow.unauthenticated", "controller.quorum.bind.address",
    "log.flush.on.acks.all",
    "socket.sendfile.enable", "queued.max.requests.per.connection", "cluster.id",
    "log.format", "metrics.port", "metrics.host",
    # KIP-714: one subscription for every client (Kafka keeps client-metrics resources)
    "raftwood.client.metrics.subscription", "raftwood.client.metrics.push.interval.ms",
}
CELL_SEPARATOR = re.compile(r"(?<!\\)\|")


def reference_rows(text: str) -> dict[str, list[tuple[str, ...]]]:
    """First-column name → every table row naming it (the cells after the name): five
    cells for a broker setting, four for a topic config."""
    rows: dict[str, list[tuple[str, ...]]] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in CELL_SEPARATOR.split(line)[1:-1]]
        if len(cells) >= 4 and re.fullmatch(r"`[^`]+`", cells[0]):
            rows.setdefault(cells[0].strip("`"), []).append(tuple(cells[1:]))
    return rows


def test_the_reference_is_generated_from_the_current_tables():
    expected = config_doc.markdown()
    actual = REFERENCE.read_text(encoding="utf-8") if REFERENCE.exists() else ""
    assert actual == expected, (
        f"{REFERENCE.relative_to(ROOT)} is stale: the settings tables changed. "
        f"Regenerate it with `{config_doc.REGENERATE}` and commit it.")


def test_every_broker_setting_has_one_row_with_its_default_and_kafka_column():
    rows = reference_rows(config_doc.markdown())
    for name, setting in config.SETTINGS.items():
        broker_rows = [r for r in rows.get(name, []) if len(r) == 4]
        assert len(broker_rows) == 1, f"{name}: rows {rows.get(name)}"
        default, kind, kafka, doc = broker_rows[0]
        assert config_doc.format_default(setting.default) in default.replace("\\|", "|")
        assert kafka.startswith("yes" if setting.kafka else "no"), (name, kafka)
        assert kind and doc.strip(". "), name


def test_raftwood_own_settings_are_marked_not_kafka():
    assert {s.name for s in config.SETTINGS.values() if not s.kafka} == RAFTWOOD_ONLY


def test_the_kafka_defaults_named_as_differing_are_kafka_settings_that_differ():
    for name, kafka_default in config_doc.KAFKA_DEFAULTS_THAT_DIFFER.items():
        setting = config.SETTINGS[name]
        assert setting.kafka, name
        assert config_doc.format_default(setting.default) != kafka_default.split()[0], name


def test_every_topic_config_has_a_row_with_a_default_and_what_it_does():
    rows = reference_rows(config_doc.markdown())
    for name in TOPIC_CONFIG_KEYS:
        assert [r for r in rows.get(name, []) if len(r) == 3], f"topic config {name}: no row"
    for name, default, source, doc in config_doc.topic_configs():
        assert doc, f"topic config {name}: no doc (add it to config_doc.TOPIC_ONLY_DOCS)"
        assert default, name
        if source:
            assert config.TOPIC_DEFAULTS[source] == name


def test_settings_fall_in_named_areas():
    areas = config_doc.by_area()
    assert sum(map(len, areas.values())) == len(config.SETTINGS)
    assert config_doc.area_of(config.SETTINGS["ssl.client.auth"]).startswith("Security")
    assert config_doc.area_of(config.SETTINGS["plain.sasl.jaas.config"]).startswith("Security")
    assert config_doc.area_of(config.SETTINGS["log.format"]) != \
        config_doc.area_of(config.SETTINGS["log.segment.bytes"])


def test_an_unknown_setting_names_the_closest_one_and_where_the_list_is():
    with pytest.raises(config.ConfigError) as excinfo:
        config.build({"log.retension.ms": "5"})
    message = str(excinfo.value)
    assert "unknown setting 'log.retension.ms'" in message
    assert "did you mean log.retention.ms?" in message
    assert "`raftwood start --help`" in message and "\n" not in message
    assert "did you mean" not in config.unknown_setting_message("zzz")
    assert "did you mean listener.name.ssl.ssl.client.auth?" in \
        config.unknown_setting_message("listener.name.ssl.ssl.clientauth")


def test_an_unknown_setting_in_a_file_is_refused_with_the_same_hint(tmp_path):
    props = tmp_path / "broker.properties"
    props.write_text("num.partition=3\n")
    with pytest.raises(config.ConfigError, match=r"did you mean num\.partitions\?"):
        config.load(str(props), [], environ={})


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "broker.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def test_start_help_lists_every_setting_with_its_default():
    result = run_cli("start", "--help")
    assert result.returncode == 0, result.stderr
    listing = " ".join(result.stdout.split())  # wrapped lines joined
    for name, setting in config.SETTINGS.items():
        assert f" {name} = {config_doc.format_default(setting.default)} " in listing, name
    assert "docs/configuration.md" in result.stdout
    assert max(map(len, result.stdout.splitlines())) <= 100


def test_start_with_a_misspelt_setting_exits_2_with_one_line():
    result = run_cli("start", "--set", "auto.create.topic.enable=false")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "raftwood: unknown setting 'auto.create.topic.enable' (did you mean "
        "auto.create.topics.enable?); see `raftwood start --help`"]

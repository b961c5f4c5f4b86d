"""Broker configuration: Kafka's names, typed once, with a clear precedence."""
import pytest

from broker import config


def test_defaults_follow_kafka():
    cfg = config.build({})
    assert cfg["min.insync.replicas"] == 1
    assert cfg["auto.create.topics.enable"] is True
    assert cfg["socket.request.max.bytes"] == 100 * 1024 * 1024
    assert cfg["unclean.leader.election.enable"] is False


def test_precedence_file_then_environment_then_set(tmp_path):
    props = tmp_path / "broker.properties"
    props.write_text("# comment\nnode.id=3\nnum.partitions=2\nlog.dirs=/from/file\n")
    cfg = config.load(str(props), ["num.partitions=5"],
                      environ={"RAFTWOOD_LOG_DIRS": "/from/env", "RAFTWOOD_NUM_PARTITIONS": "4"})
    assert cfg.node_id == 3
    assert cfg["log.dirs"] == "/from/env"
    assert cfg["num.partitions"] == 5


def test_toml_file_with_nested_tables(tmp_path):
    path = tmp_path / "broker.toml"
    path.write_text('"node.id" = 7\n[log]\ndirs = "/d"\n[auto.create.topics]\nenable = false\n')
    cfg = config.load(str(path), [], environ={})
    assert cfg.node_id == 7 and cfg["log.dirs"] == "/d"
    assert cfg["auto.create.topics.enable"] is False


def test_unknown_key_and_bad_value_are_refused():
    with pytest.raises(config.ConfigError, match="unknown setting"):
        config.build({"log.dir.typo": "x"})
    with pytest.raises(config.ConfigError, match="num.partitions"):
        config.build({"num.partitions": "many"})
    with pytest.raises(config.ConfigError):
        config.build({"listeners": "SSL://h:1"})


def test_listener_parsing_and_topic_defaults():
    cfg = config.build({"listeners": "PLAINTEXT://127.0.0.1:19092",
                        "advertised.listeners": "PLAINTEXT://broker1:9092",
                        "log.retention.ms": "1000"})
    assert cfg.listener == ("127.0.0.1", 19092)
    assert cfg.advertised_listener == ("broker1", 9092)
    assert cfg.topic_defaults()["retention.ms"] == "1000"


def test_fetch_wait_must_be_below_lag_time():
    with pytest.raises(config.ConfigError, match="replica.fetch.wait.max.ms"):
        config.build({"replica.lag.time.max.ms": "400", "replica.fetch.wait.max.ms": "500"})
    assert config.build({"replica.lag.time.max.ms": "600"})["replica.fetch.wait.max.ms"] == 500

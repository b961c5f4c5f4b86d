"""Compaction settings by Kafka's names: topic configs parse into LogConfig (and act: see
tests/unit/storage/test_cleaner.py), broker defaults map onto them, log.cleaner.threads
other than 1 is refused, and cleanup.policy=compact is refused when the cleaner is off."""
from __future__ import annotations

import pytest

from broker import config as broker_config
from broker.replication.replica_manager import ReplicaManager
from broker.topics import topic_config_problem
from storage import LogConfig


def test_compaction_topic_configs_parse_into_the_log_config():
    config = LogConfig.from_properties({
        "cleanup.policy": "delete,compact", "delete.retention.ms": "1000",
        "min.cleanable.dirty.ratio": "0.25", "min.compaction.lag.ms": "5",
        "max.compaction.lag.ms": "60000"})
    assert config.cleanup_policy == "compact,delete" and config.compact and config.delete
    assert (config.delete_retention_ms, config.min_cleanable_dirty_ratio,
            config.min_compaction_lag_ms, config.max_compaction_lag_ms) == (1000, 0.25, 5, 60000)
    assert not LogConfig.from_properties({"cleanup.policy": "compact"}).delete
    assert LogConfig.from_properties(config.to_properties()) == config


@pytest.mark.parametrize("key, value", [
    ("cleanup.policy", "shred"), ("min.cleanable.dirty.ratio", "1.5"),
    ("min.cleanable.dirty.ratio", "half"), ("delete.retention.ms", "-1"),
    ("max.compaction.lag.ms", "0"),
])
def test_a_bad_compaction_value_names_its_key(key, value):
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        LogConfig.from_properties({key: value})


def test_min_compaction_lag_above_max_is_refused():
    with pytest.raises(ValueError, match=r"min\.compaction\.lag\.ms"):
        LogConfig.from_properties({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})


def test_every_compaction_topic_config_is_a_known_name():
    assert topic_config_problem({"cleanup.policy": "compact", "delete.retention.ms": "1",
                                 "min.cleanable.dirty.ratio": "0.1",
                                 "min.compaction.lag.ms": "0",
                                 "max.compaction.lag.ms": "10"}) is None


def test_broker_defaults_map_onto_the_topic_configs():
    config = broker_config.build({"log.cleanup.policy": "compact",
                                  "log.cleaner.delete.retention.ms": "7",
                                  "log.cleaner.min.cleanable.ratio": "0.2",
                                  "log.cleaner.min.compaction.lag.ms": "3",
                                  "log.cleaner.max.compaction.lag.ms": "99"})
    log_config = LogConfig.from_properties(config.topic_defaults())
    assert (log_config.cleanup_policy, log_config.delete_retention_ms,
            log_config.min_cleanable_dirty_ratio, log_config.min_compaction_lag_ms,
            log_config.max_compaction_lag_ms) == ("compact", 7, 0.2, 3, 99)


@pytest.mark.parametrize("raw", [{"log.cleaner.threads": "2"}, {"log.cleaner.threads": "0"},
                                 {"log.cleanup.policy": "shred"},
                                 {"log.cleaner.min.cleanable.ratio": "2"}])
def test_unserved_cleaner_settings_stop_the_broker_at_start(raw):
    with pytest.raises(broker_config.ConfigError):
        broker_config.build(raw)


def test_compact_is_refused_when_the_cleaner_is_off(tmp_path):
    off = ReplicaManager(broker_config.build({"log.dirs": str(tmp_path),
                                              "log.cleaner.enable": "false"}))
    with pytest.raises(ValueError, match="log.cleaner.enable"):
        off.validate_topic_configs({"cleanup.policy": "compact"})
    off.validate_topic_configs({"cleanup.policy": "delete"})
    on = ReplicaManager(broker_config.build({"log.dirs": str(tmp_path)}))
    on.validate_topic_configs({"cleanup.policy": "compact,delete"})

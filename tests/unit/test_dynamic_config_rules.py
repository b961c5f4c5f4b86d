"""The rules of dynamic broker configs, group configs and logger levels that need no
broker: which keys are dynamic, what is refused with which Kafka error, how the layers
of the metadata combine (broker/dynamic_config.py, broker/groups/group_configs.py,
broker/api/broker_loggers.py)."""
from __future__ import annotations

import logging

import pytest

from broker import config as config_module
from broker.api import broker_loggers
from broker.controller.commands import AlterResourceConfigs
from broker.controller.state import ClusterState
from broker.dynamic_config import DynamicConfigError, is_dynamic, layers, validate
from broker.groups import group_configs


def _config(**settings):
    return config_module.build({k.replace("_", "."): v for k, v in settings.items()})


def _image(*commands):
    state = ClusterState()
    for command in commands:
        command.apply(state)
    return state


def test_kafkas_dynamic_keys_are_dynamic_and_others_are_not():
    for key in ("log.retention.ms", "log.segment.bytes", "leader.replication.throttled.rate",
                "max.connections", "log.cleaner.threads",
                "listener.name.ssl.ssl.keystore.location"):
        assert is_dynamic(key), key
    for key in ("node.id", "log.dirs", "listeners", "listener.name.ssl.ssl.client.auth"):
        assert not is_dynamic(key), key


@pytest.mark.parametrize("name, changes, code", [
    ("1", {"node.id": "3"}, "INVALID_REQUEST"),
    ("1", {"no.such.setting": "3"}, "INVALID_CONFIG"),
    ("1", {"log.retention.ms": "soon"}, "INVALID_REQUEST"),
    ("1", {"log.cleaner.threads": "4"}, "INVALID_REQUEST"),
    ("", {"listener.name.ssl.ssl.keystore.location": "/k.pem"}, "INVALID_REQUEST"),
])
def test_refusals_carry_kafkas_codes(name, changes, code):
    with pytest.raises(DynamicConfigError) as refused:
        validate(_config(), ClusterState(), name, changes)
    assert refused.value.code == code


def test_accepted_changes_and_the_layers():
    validate(_config(), ClusterState(), "", {"log.retention.ms": "1000", "max.connections": None})
    image = _image(AlterResourceConfigs(4, "", {"log.retention.ms": "1000"}),
                   AlterResourceConfigs(4, "1", {"log.retention.ms": "2000"}),
                   AlterResourceConfigs(4, "2", {"max.connections": "5"}))
    assert layers(image, 1) == ({"log.retention.ms": "1000"}, {"log.retention.ms": "2000"})
    assert layers(image, 3) == ({"log.retention.ms": "1000"}, {})


def test_the_dynamic_layer_wins_and_leaves_the_static_values():
    config = _config(log_retention_ms="5000")
    config.set_dynamic({"log.retention.ms": 1000})
    assert config["log.retention.ms"] == 1000
    assert config.static_dict()["log.retention.ms"] == 5000
    assert config.topic_defaults()["retention.ms"] == "1000"
    assert "log.retention.ms" in config.explicit and "log.segment.bytes" not in config.explicit


def test_group_configs_validated_against_the_brokers_bounds():
    config = _config()
    group_configs.check(config, {}, {"consumer.session.timeout.ms": "50000"})
    for changes in ({"consumer.session.timeout.ms": "1000"},  # under the min (45 s)
                    {"share.delivery.count.limit": "11"},  # over the max (10)
                    {"share.auto.offset.reset": "middle"},
                    {"share.isolation.level": "dirty"},
                    {"no.such.group.config": "1"}):
        with pytest.raises(ValueError):
            group_configs.check(config, {}, changes)
    image = _image(AlterResourceConfigs(32, "g", {"consumer.session.timeout.ms": "50000",
                                                  "share.delivery.count.limit": "3"}))
    settings = group_configs.group_settings(config, image, "g")
    assert settings.consumer_session_timeout_ms == 50000
    assert settings.share_delivery_count_limit == 3
    assert settings.consumer_heartbeat_interval_ms == 5000  # the broker's
    assert group_configs.group_settings(config, image, "other").consumer_session_timeout_ms \
        == 45000
    assert group_configs.overrides(image, "g")["share.delivery.count.limit"] == "3"


def test_logger_levels_set_and_inherit():
    name = "broker.dynamic_config"
    logging.getLogger(name)
    assert name in broker_loggers.logger_names()
    before = logging.getLogger(name).level
    try:
        broker_loggers.check([(name, broker_loggers.SET, "debug")])
        broker_loggers.apply([(name, broker_loggers.SET, "debug")])
        assert broker_loggers.levels()[name] == "DEBUG"
        broker_loggers.apply([(name, broker_loggers.DELETE, None)])
        assert logging.getLogger(name).level == logging.NOTSET
    finally:
        logging.getLogger(name).setLevel(before)
    for changes, code in (([(name, broker_loggers.SET, "LOUD")], "INVALID_CONFIG"),
                          ([("nope.nothing", broker_loggers.SET, "INFO")], "INVALID_CONFIG"),
                          ([("root", broker_loggers.DELETE, None)], "INVALID_REQUEST"),
                          ([(name, 2, "INFO")], "INVALID_REQUEST")):
        with pytest.raises(broker_loggers.LoggerRefused) as refused:
            broker_loggers.check(changes)
        assert refused.value.code == code

"""A topic's configs as a hosted partition uses them: its log's and its own settings.

A topic's effective properties are the broker's topic defaults (``log.retention.ms``
as ``retention.ms`` ...) overlaid with the topic's overrides from the metadata image.
Pure: reads the broker config and its arguments only.
"""
from __future__ import annotations

from storage.config import LogConfig

from ..config import BrokerConfig
from ..topics import SPECS, topic_config_problem
from .append_policy import AppendPolicy
from .partition import PartitionSettings


class TopicConfigs:
    """Turns a topic's overrides into a LogConfig and PartitionSettings.  Any thread."""

    def __init__(self, config: BrokerConfig):
        self.config = config

    def properties(self, topic_configs: dict[str, str]) -> dict[str, str]:
        """Every topic config's effective value: Kafka's default, the broker's setting
        behind it, the topic's override, later ones winning."""
        props = {name: spec.default for name, spec in SPECS.items()}
        props.update(self.config.topic_defaults())
        props.update(topic_configs)
        return props

    def log_config(self, topic_configs: dict[str, str]) -> LogConfig:
        return LogConfig.from_properties(self.properties(topic_configs))

    def partition_settings(self, topic_configs: dict[str, str]) -> PartitionSettings:
        props = self.properties(topic_configs)
        return PartitionSettings(
            min_insync_replicas=int(props["min.insync.replicas"]),
            unclean_leader_election=props["unclean.leader.election.enable"] == "true",
            append=AppendPolicy.from_properties(props, topic_configs))

    def validate(self, configs: dict[str, str]) -> None:
        """Raise ValueError naming the bad key if ``configs`` would not parse."""
        problem = topic_config_problem(configs)
        if problem:
            raise ValueError(problem)
        props = self.properties(configs)
        if LogConfig.from_properties(props).compact and not self.config["log.cleaner.enable"]:
            raise ValueError("cleanup.policy=compact needs the log cleaner, and this broker "
                             "runs with log.cleaner.enable=false")
        if int(props["min.insync.replicas"]) < 1:
            raise ValueError("min.insync.replicas must be at least 1")

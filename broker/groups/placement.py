"""Which ``__consumer_offsets`` partition coordinates a group (pure): Kafka's hash of the
group id, the coordinator core's (``broker/coordinator/placement.py``)."""
from __future__ import annotations

from ..coordinator.placement import java_string_hashcode, kafka_abs, partition_for

OFFSETS_TOPIC = "__consumer_offsets"

__all__ = ["OFFSETS_TOPIC", "java_string_hashcode", "kafka_abs", "partition_for"]

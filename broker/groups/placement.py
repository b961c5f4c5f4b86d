"""Which ``__consumer_offsets`` partition coordinates a group (pure).

Kafka's rule, kept bit for bit so the mapping is the one Kafka users know:
``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions``, where ``hashCode`` is
Java's ``String.hashCode`` (over UTF-16 code units, 32-bit wrap-around) and Kafka's
``Utils.abs`` is ``n & 0x7fffffff`` -- not ``Math.abs``, which leaves
``Integer.MIN_VALUE`` negative.
"""
from __future__ import annotations

import struct

OFFSETS_TOPIC = "__consumer_offsets"


def java_string_hashcode(text: str) -> int:
    """Java's ``String.hashCode()``: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units,
    as a signed 32-bit int."""
    units = text.encode("utf-16-be")
    value = 0
    for (unit,) in struct.iter_unpack(">H", units):
        value = (31 * value + unit) & 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def kafka_abs(value: int) -> int:
    """Kafka's ``Utils.abs``: the sign bit cleared (so ``Integer.MIN_VALUE`` → 0)."""
    return value & 0x7FFFFFFF


def partition_for(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition whose leader coordinates ``group_id``."""
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be at least 1, got {num_partitions}")
    return kafka_abs(java_string_hashcode(group_id)) % num_partitions

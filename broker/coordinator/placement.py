"""Which partition of a coordinator's internal topic coordinates a key (pure).

Kafka's rule for ``__consumer_offsets`` (a group id) and ``__transaction_state`` (a
transactional id), kept bit for bit so the mapping is the one Kafka users know:
``Utils.abs(key.hashCode()) % <topic>.num.partitions``, where ``hashCode`` is
Java's ``String.hashCode`` (over UTF-16 code units, 32-bit wrap-around) and Kafka's
``Utils.abs`` is ``n & 0x7fffffff`` -- not ``Math.abs``, which leaves
``Integer.MIN_VALUE`` negative.
"""
from __future__ import annotations

import struct


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


def partition_for(key: str, num_partitions: int) -> int:
    """The partition (of ``num_partitions``) whose leader coordinates ``key``."""
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be at least 1, got {num_partitions}")
    return kafka_abs(java_string_hashcode(key)) % num_partitions

"""Group → __consumer_offsets partition: Kafka's Utils.abs(groupId.hashCode) % n, exactly."""
from __future__ import annotations

import pytest

from broker.groups.placement import java_string_hashcode, kafka_abs, partition_for

INT_MIN = -(2 ** 31)


@pytest.mark.parametrize("text,expected", [
    ("", 0),
    ("a", 97),
    ("hello", 99162322),                 # Java: "hello".hashCode()
    ("Aa", 2112), ("BB", 2112),          # the classic collision
    ("polygenelubricants", INT_MIN),     # hashes to Integer.MIN_VALUE
    ("\U0001F600", 1772899),             # a surrogate pair: two UTF-16 units, as in Java
    ("é", 233),
])
def test_hashcode_is_javas_string_hashcode(text, expected):
    assert java_string_hashcode(text) == expected


def test_hashcode_wraps_to_a_signed_32_bit_int():
    for text in ("consumer-group-with-a-long-name-0123456789", "x" * 1000, "群组"):
        assert INT_MIN <= java_string_hashcode(text) < 2 ** 31


def test_kafka_abs_clears_the_sign_bit_so_int_min_maps_to_zero():
    assert kafka_abs(INT_MIN) == 0        # Math.abs would leave it negative
    assert kafka_abs(-1) == 0x7FFFFFFF
    assert kafka_abs(12345) == 12345


def test_partition_is_the_masked_hash_modulo_the_partition_count():
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("Aa", 10) == partition_for("BB", 10) == 2112 % 10
    # A negative hash: Kafka masks it, it does not negate it.
    negative = "consumer-group-with-a-long-name-0123456789"
    h = java_string_hashcode(negative)
    assert h < 0
    assert partition_for(negative, 7) == (h & 0x7FFFFFFF) % 7


def test_every_group_lands_in_range():
    for n in (1, 3, 10, 50):
        assert all(0 <= partition_for(f"g{i}", n) < n for i in range(500))


def test_a_partition_count_below_one_is_refused():
    with pytest.raises(ValueError):
        partition_for("g", 0)

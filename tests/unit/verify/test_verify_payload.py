"""Workload values say who wrote them and detect their own damage."""
from __future__ import annotations

import pytest

from broker.verify.payload import BadValue, ValueId, decode_value, encode_value


def test_a_value_decodes_to_its_producer_and_sequence():
    for sequence in (0, 1, 77, 123_456_789):
        assert decode_value(encode_value("kp-0", sequence)) == ValueId("kp-0", sequence)


def test_values_are_deterministic_unique_and_vary_in_size():
    values = [encode_value("ck-1", n) for n in range(200)]
    assert values == [encode_value("ck-1", n) for n in range(200)]
    assert len(set(values)) == 200
    assert len({len(v) for v in values}) > 10
    assert encode_value("a", 5) != encode_value("b", 5)


def test_any_changed_byte_is_detected():
    value = encode_value("kp-0", 42)
    for position in range(len(value)):
        damaged = bytearray(value)
        damaged[position] ^= 0x01
        with pytest.raises(BadValue):
            decode_value(bytes(damaged))


def test_foreign_and_truncated_values_are_refused():
    for value in (None, b"", b"hello", encode_value("kp-0", 1)[:-1], b"x" * 40):
        with pytest.raises(BadValue):
            decode_value(value)
    with pytest.raises(ValueError):
        encode_value("has space", 1)

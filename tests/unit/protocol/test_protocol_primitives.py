"""protocol/primitives.py: Kafka's fixed-width types round-trip, and bad input raises the
caller's error (never IndexError or struct.error)."""
from __future__ import annotations

import pytest

from protocol.primitives import Reader, bytes_, int16, int32, int64, string


class MyError(ValueError):
    pass


def test_every_type_round_trips():
    data = int16(-2) + int32(70_000) + int64(-(1 << 40)) + string("héllo") + string(None) \
        + bytes_(b"\x00\x01") + bytes_(None) + int32(2) + string("a") + string("b")
    reader = Reader(data)
    assert reader.int16() == -2 and reader.int32() == 70_000 and reader.int64() == -(1 << 40)
    assert reader.nullable_string() == "héllo" and reader.nullable_string() is None
    assert reader.bytes_() == b"\x00\x01" and reader.bytes_() == b""
    assert [reader.string() for _ in range(reader.count())] == ["a", "b"]
    assert reader.pos == len(data)


@pytest.mark.parametrize("data,read", [
    (b"\x00", Reader.int16),                               # truncated
    (int16(5) + b"ab", Reader.string),                     # string longer than the input
    (int16(-1), Reader.string),                            # null where null is not allowed
    (int16(2) + b"\xff\xfe", Reader.nullable_string),      # not UTF-8
    (int32(10 ** 6), Reader.count),                        # more elements than bytes left
    (int32(-3), Reader.count),
    (int32(9) + b"abc", Reader.bytes_),
])
def test_bad_input_raises_the_callers_error(data, read):
    with pytest.raises(MyError):
        read(Reader(data, MyError))

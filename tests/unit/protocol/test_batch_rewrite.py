"""protocol/batch_rewrite.py: what a leader changes in a client's batch (Kafka's
LogValidator): the CreateTime bounds, the LogAppendTime stamp and recompression.
Batches are built by kafka-python's producer code and read back by it."""
from __future__ import annotations

import pytest
from kafka.record.memory_records import MemoryRecords

from broker.testing import build_batch
from protocol.batch_rewrite import (
    LONG_MAX,
    check_create_times,
    recompress,
    stamp_log_append_time,
)
from protocol.errors import ErrorCode, RecordError
from protocol.records import crc_matches, validate_produce_records

NOW = 1_800_000_000_000
HOUR = 3_600_000


def batch_of(timestamps, compression=0):
    records = [(b"k%d" % i, b"v%d" % i * 30, t, [("h", b"x")]) for i, t in enumerate(timestamps)]
    return validate_produce_records(build_batch(records, compression=compression))


def decoded(buf):
    [batch] = list(MemoryRecords(bytes(buf)))
    assert batch.validate_crc()
    return batch, [(r.key, r.value, r.timestamp, r.timestamp_type) for r in batch]


@pytest.mark.parametrize("target", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("sent", [0, 1, 4])
def test_recompress_keeps_every_record_and_the_batch_identity(sent, target):
    buf, header = batch_of([NOW, NOW + 1, NOW - 5], compression=sent)
    _, before = decoded(buf)
    out, new = recompress(buf, header, target, level=None)
    assert new.compression == target and crc_matches(out, new)
    assert new.size == len(out)
    assert (new.base_timestamp, new.max_timestamp, new.records_count, new.last_offset_delta) \
        == (header.base_timestamp, header.max_timestamp, header.records_count,
            header.last_offset_delta)
    _, after = decoded(out)
    assert after == before


def test_recompress_to_the_same_codec_returns_the_batch_itself():
    buf, header = batch_of([NOW], compression=1)
    assert recompress(buf, header, 1, level=9) == (buf, header)


def test_compression_levels_are_applied():
    buf, header = batch_of([NOW] * 50)
    fast, _ = recompress(bytearray(buf), header, 1, level=1)
    best, _ = recompress(bytearray(buf), header, 1, level=9)
    assert len(best) <= len(fast)
    for codec, level in ((3, 17), (4, -5), (4, 22)):
        out, new = recompress(bytearray(buf), header, codec, level=level)
        assert decoded(out)[1] == decoded(buf)[1]


def test_log_append_time_sets_the_type_bit_and_max_timestamp_with_a_valid_crc():
    buf, header = batch_of([1_000, 2_000])
    new = stamp_log_append_time(buf, header, NOW)
    assert new.max_timestamp == NOW and new.attributes & 0x08 and crc_matches(buf, new)
    batch, records = decoded(buf)
    assert {(t, kind) for _, _, t, kind in records} == {(NOW, 1)}


def test_create_time_bounds():
    buf, header = batch_of([NOW - 10, NOW + HOUR])
    check_create_times(buf, header, NOW, LONG_MAX, HOUR)  # on the bounds: accepted
    with pytest.raises(RecordError) as ahead:
        check_create_times(buf, header, NOW, LONG_MAX, HOUR - 1)
    assert ahead.value.code == ErrorCode.INVALID_TIMESTAMP
    with pytest.raises(RecordError) as behind:
        check_create_times(buf, header, NOW, 9, HOUR)
    assert behind.value.code == ErrorCode.INVALID_TIMESTAMP
    assert "out of range" in str(behind.value)
    check_create_times(buf, header, NOW, 10, HOUR)
    unstamped, header = batch_of([-1, NOW])
    check_create_times(unstamped, header, NOW, 0, 0)  # -1: no timestamp, not checked

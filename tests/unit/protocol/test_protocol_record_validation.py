"""protocol/record_validation.py: a client's records are refused unless they decode, with
Kafka's code; a stored batch decodes to exactly what kafka-python reads, or raises
RecordDecodeError (never another exception); decompression never exceeds its bound.

Batches are fed whole, cut at every byte, and extended with trailing bytes, for every
codec (h11's habit for input parsers).
"""
from __future__ import annotations

import random
import struct

import crc32c
import pytest
from kafka import codec
from kafka.record.default_records import DefaultRecordBatch

from broker.harness.wire import build_batch
from protocol.errors import ErrorCode
from protocol.primitives import varint as zigzag
from protocol.record_filter import RecordFilterError, decode_records
from protocol.record_validation import RecordDecodeError, check_records, decompress, read_records
from protocol.records import HEADER_SIZE, first_offset_at_or_after, validate_produce_records

CODECS = [0, 1, 2, 3, 4]
ENCODE = {1: codec.gzip_encode, 2: codec.snappy_encode, 3: codec.lz4_encode,
          4: codec.zstd_encode}
HEADER = struct.Struct(">qiibIhiqqqhii")
TS = 1_700_000_000_000
REFUSED = (ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD)


def record(offset_delta: int, value: bytes = b"v", key: bytes | None = b"k",
           timestamp_delta: int = 0) -> bytes:
    body = b"\x00" + zigzag(timestamp_delta) + zigzag(offset_delta)
    body += zigzag(-1) if key is None else zigzag(len(key)) + key
    body += zigzag(len(value)) + value + zigzag(0)
    return zigzag(len(body)) + body


def seal(payload: bytes, count: int, *, compression: int = 0, attributes: int = 0,
         last_offset_delta: int | None = None, base_offset: int = 0) -> bytes:
    """A batch around ``payload`` (compressed with ``compression`` here), CRC right."""
    if compression:
        payload = ENCODE[compression](payload)
    delta = count - 1 if last_offset_delta is None else last_offset_delta
    data = bytearray(HEADER.pack(base_offset, HEADER.size - 12 + len(payload), -1, 2, 0,
                                 compression | attributes, delta, TS, TS + 50, -1, -1, -1,
                                 count) + payload)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


def sample_records(n: int = 7):
    return [(b"k%d" % i if i % 4 else None, b"x" * (i * 37) if i % 5 else None, TS + 3 * i,
             [(f"h{j}", b"v" * j if j else None) for j in range(i % 3)]) for i in range(n)]


def refused_code(batch) -> ErrorCode:
    with pytest.raises(RecordDecodeError) as info:
        validate_produce_records(batch)
    return info.value.code


# -- whole batches --------------------------------------------------------------------------

@pytest.mark.parametrize("compression", CODECS)
@pytest.mark.parametrize("n", [1, 7, 64, 65, 300])
def test_a_clients_batch_passes_and_reads_back_as_kafka_python_reads_it(compression, n):
    batch = build_batch(sample_records(n), compression=compression)
    buf, header = validate_produce_records(batch)
    assert (header.records_count, bytes(buf)) == (n, batch)
    theirs = [(r.offset, r.timestamp, r.key, r.value,
               [(k.encode(), v) for k, v in r.headers]) for r in DefaultRecordBatch(batch)]
    ours = [(r.offset, r.timestamp, r.key, r.value, list(r.headers))
            for r in decode_records(batch)]
    assert ours == theirs


def test_long_values_use_multi_byte_lengths():
    for size in (63, 64, 8191, 8192, 70_000):
        batch = build_batch([(b"k", b"y" * size, TS, []), (None, b"", TS, [])])
        validate_produce_records(batch)
        assert [r.value for r in decode_records(batch)] == [b"y" * size, b""]


@pytest.mark.parametrize("compression", CODECS)
def test_first_offset_at_or_after_finds_the_record(compression):
    batch = build_batch(sample_records(10), compression=compression)
    assert first_offset_at_or_after(batch, TS + 4) == (2, TS + 6)
    assert first_offset_at_or_after(batch, TS) == (0, TS)
    assert first_offset_at_or_after(batch, TS + 28) is None


def test_log_append_time_records_carry_the_batchs_max_timestamp():
    batch = seal(record(0, timestamp_delta=5) + record(1, timestamp_delta=9), 2,
                 attributes=0x08)
    assert [r.timestamp for r in decode_records(batch)] == [TS + 50, TS + 50]
    assert first_offset_at_or_after(batch, TS + 50) == (0, TS + 50)


# -- cut at every byte, and extended ------------------------------------------------------------

@pytest.mark.parametrize("compression", CODECS)
def test_records_cut_at_every_byte_are_refused(compression):
    whole = b"".join(record(i, b"val-%d" % i * (i + 1)) for i in range(4))
    for cut in range(len(whole)):
        code = refused_code(seal(whole[:cut], 4, compression=compression))
        assert code == ErrorCode.INVALID_RECORD, f"cut at {cut}: {code!r}"


@pytest.mark.parametrize("compression", [1, 2, 3, 4])
def test_a_compressed_payload_cut_at_every_byte_is_refused(compression):
    whole = seal(b"".join(record(i, b"z" * 50) for i in range(5)), 5, compression=compression)
    payload = whole[HEADER_SIZE:]
    for cut in range(len(payload)):
        batch = seal_raw(payload[:cut], 5, compression)
        with pytest.raises(RecordDecodeError) as info:
            validate_produce_records(batch)
        assert info.value.code in REFUSED, f"cut at {cut}"
        with pytest.raises(RecordDecodeError):
            decode_records(batch)


def seal_raw(compressed: bytes, count: int, compression: int) -> bytes:
    data = bytearray(HEADER.pack(0, HEADER.size - 12 + len(compressed), -1, 2, 0, compression,
                                 count - 1, TS, TS, -1, -1, -1, count) + compressed)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


@pytest.mark.parametrize("compression", CODECS)
@pytest.mark.parametrize("extra", [b"\x00", b"\x02\x00", record(3)])
def test_bytes_after_the_last_record_are_refused(compression, extra):
    records = record(0) + record(1) + record(2)
    assert refused_code(seal(records + extra, 3, compression=compression)) \
        == ErrorCode.INVALID_RECORD


@pytest.mark.parametrize("compression", [1, 2, 3, 4])
def test_garbage_after_a_compressed_stream_is_corrupt(compression):
    payload = ENCODE[compression](record(0) + record(1)) + b"trailing garbage"
    assert refused_code(seal_raw(payload, 2, compression)) == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("compression", [1, 2, 3, 4])
def test_a_payload_that_is_not_the_codec_is_corrupt(compression):
    for garbage in (b"", b"garbage-not-gzip", bytes(range(256)) * 3):
        assert refused_code(seal_raw(garbage, 1, compression)) == ErrorCode.CORRUPT_MESSAGE


# -- the rules -------------------------------------------------------------------------------------

@pytest.mark.parametrize("records, count", [
    pytest.param(record(0), 2**31 - 1, id="count-2^31-1-holding-one"),
    pytest.param(record(0) + record(1), 3, id="one-record-less"),
    pytest.param(record(1) + record(0), 2, id="deltas-swapped"),
    pytest.param(record(0) + record(2), 2, id="delta-gap"),
    pytest.param(record(0) + record(0), 2, id="delta-repeated"),
    pytest.param(zigzag(-3) + b"\x00" * 6, 1, id="negative-length"),
    pytest.param(zigzag(5) + b"\x00" * 5, 1, id="length-below-smallest-record"),
    pytest.param(b"\xff" * 6 + b"\x01", 1, id="overlong-length-varint"),
    pytest.param(zigzag(40) + record(0)[1:], 1, id="length-past-end"),
])
def test_records_breaking_the_rules_are_invalid_record(records, count):
    assert refused_code(seal(records, count)) == ErrorCode.INVALID_RECORD


def test_offset_deltas_above_63_use_multi_byte_varints():
    records = b"".join(record(i) for i in range(200))
    validate_produce_records(seal(records, 200))
    swapped = b"".join(record(i) for i in range(100)) + record(101) + record(100) \
        + b"".join(record(i) for i in range(102, 200))
    assert refused_code(seal(swapped, 200)) == ErrorCode.INVALID_RECORD


@pytest.mark.parametrize("body", [
    pytest.param(b"\x00\x00\x00" + zigzag(-2) + zigzag(1) + b"v" + zigzag(0), id="key-length--2"),
    pytest.param(b"\x00\x00\x00" + zigzag(1) + b"k" + zigzag(1) + b"v" + zigzag(-1),
                 id="header-count--1"),
    pytest.param(b"\x00\x00\x00" + zigzag(1) + b"k" + zigzag(1) + b"v" + zigzag(1)
                 + zigzag(-1) + zigzag(-1), id="null-header-key"),
    pytest.param(b"\x00\x00\x00" + zigzag(1) + b"k" + zigzag(1) + b"v" + zigzag(0) + b"\x00",
                 id="byte-left-in-record"),
    pytest.param(b"\x00\x00\x00" + zigzag(9) + b"k" + zigzag(1) + b"v" + zigzag(0),
                 id="key-past-record"),
])
def test_a_stored_record_whose_fields_do_not_parse_raises_record_decode_error(body):
    """Read whole on the cold paths (the produce path walks lengths and deltas only)."""
    batch = seal(zigzag(len(body)) + body, 1)
    with pytest.raises(RecordDecodeError) as info:
        read_records(batch, HEADER_SIZE, len(batch), 0, 1)
    assert info.value.code == ErrorCode.INVALID_RECORD
    with pytest.raises(RecordFilterError):
        decode_records(batch)
    with pytest.raises(RecordDecodeError):
        first_offset_at_or_after(batch, 0)


def test_random_damage_is_refused_or_accepted_but_never_crashes():
    rng = random.Random(7)
    whole = b"".join(record(i, b"value-%d" % i) for i in range(6))
    for _ in range(3000):
        data = bytearray(whole)
        for _ in range(rng.randrange(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        try:
            check_records(data, 0, len(data), 6)
        except RecordDecodeError as exc:
            assert exc.code == ErrorCode.INVALID_RECORD
        try:
            read_records(seal(bytes(data), 6), HEADER_SIZE, HEADER_SIZE + len(data), 0, 6)
        except RecordDecodeError as exc:
            assert exc.code == ErrorCode.INVALID_RECORD


# -- decompression bombs -----------------------------------------------------------------------

@pytest.mark.parametrize("compression", [1, 2, 3, 4])
def test_decompression_stops_at_its_bound(compression):
    bomb = ENCODE[compression](bytes(4 << 20))
    assert len(bomb) < 1 << 20
    with pytest.raises(RecordDecodeError) as info:
        decompress(compression, bomb, max_bytes=1 << 20)
    assert info.value.code == ErrorCode.MESSAGE_TOO_LARGE
    assert len(decompress(compression, bomb, max_bytes=4 << 20)) == 4 << 20


def test_a_raw_snappy_block_is_checked_against_the_bound_before_it_is_decompressed():
    raw = codec.snappy_encode(bytes(2 << 20), xerial_compatible=False)
    with pytest.raises(RecordDecodeError) as info:
        decompress(2, raw, max_bytes=1 << 20)
    assert info.value.code == ErrorCode.MESSAGE_TOO_LARGE
    assert decompress(2, raw, max_bytes=2 << 20) == bytes(2 << 20)


@pytest.mark.parametrize("compression", [1, 2, 3, 4])
def test_a_produce_bomb_is_message_too_large(compression):
    records = b"".join(record(i, bytes(1 << 16)) for i in range(40))
    batch = seal(records, 40, compression=compression)
    with pytest.raises(RecordDecodeError) as info:
        validate_produce_records(batch, max_decompressed_bytes=1 << 20)
    assert info.value.code == ErrorCode.MESSAGE_TOO_LARGE
    validate_produce_records(batch, max_decompressed_bytes=4 << 20)


def test_several_gzip_members_and_zstd_frames_are_read_as_one_stream():
    first, second = record(0), record(1)
    for compression in (1, 4):
        payload = ENCODE[compression](first) + ENCODE[compression](second)
        batch = seal_raw(payload, 2, compression)
        validate_produce_records(batch)
        assert [r.offset for r in decode_records(batch)] == [0, 1]

"""RecordBatch v2 checks and the in-place offset assignment, on batches built by
kafka-python's producer code (DefaultRecordBatchBuilder), compressed with every codec.
"""
from __future__ import annotations

import struct

import crc32c
import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from protocol.errors import ErrorCode, RecordError
from protocol.records import (
    CONTROL_FLAG,
    CRC_START,
    HEADER_SIZE,
    assign_offset_and_epoch,
    crc_matches,
    first_offset_at_or_after,
    iter_headers,
    parse_header,
    valid_prefix,
    validate_produce_records,
)

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
BASE_TIMESTAMP = 1_700_000_000_000
RECORDS = [(b"key-%d" % i, b"value-%d-" % i + b"x" * 40) for i in range(5)]
# Byte ranges of the header (inclusive start, exclusive end) that assignment may rewrite.
BASE_OFFSET_BYTES = range(8)
PARTITION_LEADER_EPOCH_BYTES = range(12, 16)


def build_batch(compression: int = 0, records=RECORDS, timestamps=None) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression,
                                        is_transactional=False, producer_id=-1, producer_epoch=-1,
                                        base_sequence=-1, batch_size=1 << 20)
    timestamps = timestamps or [BASE_TIMESTAMP + 10 * i for i in range(len(records))]
    for delta, ((key, value), timestamp) in enumerate(zip(records, timestamps)):
        builder.append(delta, timestamp=timestamp, key=key, value=value, headers=[])
    return bytes(builder.build())


def with_fixed_crc(buf: bytearray) -> bytearray:
    """Recompute the CRC-32C after a deliberate edit inside the covered range."""
    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[CRC_START:])))
    return buf


def reject_code(records) -> ErrorCode:
    with pytest.raises(RecordError) as info:
        validate_produce_records(records)
    return info.value.code


def assigned(compression: int, base_offset: int, epoch: int = 3) -> bytes:
    buf = bytearray(build_batch(compression))
    assign_offset_and_epoch(buf, 0, base_offset, epoch)
    return bytes(buf)


@pytest.fixture(params=sorted(CODECS), ids=list(CODECS.values()))
def codec(request):
    return request.param


# --------------------------------------------------------------------------- produce validation

def test_client_batches_of_every_codec_are_accepted_unchanged(codec):
    batch = build_batch(codec)
    buf, header = validate_produce_records(batch)
    assert bytes(buf) == batch
    assert header.compression == codec
    assert (header.magic, header.base_offset, header.records_count, header.last_offset_delta) \
        == (2, 0, len(RECORDS), len(RECORDS) - 1)
    assert (header.base_timestamp, header.max_timestamp) \
        == (BASE_TIMESTAMP, BASE_TIMESTAMP + 10 * (len(RECORDS) - 1))
    assert header.size == len(batch)


def test_validated_buffer_is_a_writable_copy_not_the_request_bytes():
    batch = bytearray(build_batch())
    buf, _ = validate_produce_records(batch)
    buf[0] = 0x7F
    assert batch[0] == 0


def test_kafka_python_writes_partition_leader_epoch_zero_and_it_is_accepted():
    # Java clients write -1 (NO_PARTITION_LEADER_EPOCH); kafka-python leaves 0.  The broker
    # overwrites it either way, so neither may be refused.
    batch = build_batch()
    assert parse_header(batch).partition_leader_epoch == 0
    other = bytearray(batch)
    struct.pack_into(">i", other, 12, -1)
    validate_produce_records(bytes(other))


def test_every_byte_under_the_crc_is_protected(codec):
    batch = build_batch(codec)
    for position in range(17, len(batch)):  # the CRC itself, then attributes..end
        corrupted = bytearray(batch)
        corrupted[position] ^= 0x01
        assert reject_code(bytes(corrupted)) == ErrorCode.CORRUPT_MESSAGE, position


def test_flipped_byte_in_the_records_area_is_corrupt_message(codec):
    corrupted = bytearray(build_batch(codec))
    corrupted[HEADER_SIZE + 3] ^= 0xFF
    assert reject_code(bytes(corrupted)) == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("base_offset", [1, 42, -1, 2**62])
def test_client_base_offset_other_than_zero_is_invalid_record(base_offset):
    buf = bytearray(build_batch())
    struct.pack_into(">q", buf, 0, base_offset)  # outside the CRC: the CRC still matches
    assert reject_code(bytes(buf)) == ErrorCode.INVALID_RECORD


@pytest.mark.parametrize("magic", [0, 1])
def test_old_message_formats_are_invalid_record(magic):
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    for offset in range(3):
        builder.append(offset, timestamp=BASE_TIMESTAMP, key=b"k" * 10, value=b"v" * 20)
    assert reject_code(bytes(builder.build())) == ErrorCode.INVALID_RECORD


@pytest.mark.parametrize("magic", [0, 1])
def test_old_message_format_shorter_than_a_v2_header_is_still_invalid_record(magic):
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    builder.append(0, timestamp=BASE_TIMESTAMP, key=b"k", value=b"v")
    legacy = bytes(builder.build())
    assert len(legacy) < HEADER_SIZE
    assert reject_code(legacy) == ErrorCode.INVALID_RECORD


def test_magic_byte_rewritten_to_one_in_a_v2_batch_is_invalid_record():
    buf = bytearray(build_batch())
    buf[16] = 1
    assert reject_code(bytes(buf)) == ErrorCode.INVALID_RECORD


def test_two_batches_in_one_partition_are_invalid_record():
    assert reject_code(build_batch() + build_batch(1)) == ErrorCode.INVALID_RECORD


def test_empty_or_null_records_are_invalid_record():
    assert reject_code(b"") == ErrorCode.INVALID_RECORD
    assert reject_code(None) == ErrorCode.INVALID_RECORD


def test_every_truncation_of_a_batch_is_corrupt_message(codec):
    batch = build_batch(codec)
    for cut in range(1, len(batch)):
        assert reject_code(batch[:cut]) == ErrorCode.CORRUPT_MESSAGE, cut


def test_batch_length_too_small_for_a_header_is_corrupt_message():
    buf = bytearray(build_batch())
    struct.pack_into(">i", buf, 8, 10)
    assert reject_code(bytes(buf)) == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("last_offset_delta", [0, 3, 5, 100, -1])
def test_last_offset_delta_disagreeing_with_the_count_is_invalid_record(last_offset_delta):
    buf = bytearray(build_batch())
    struct.pack_into(">i", buf, 23, last_offset_delta)
    assert reject_code(bytes(with_fixed_crc(buf))) == ErrorCode.INVALID_RECORD


def test_batch_claiming_zero_records_is_invalid_record():
    buf = bytearray(build_batch())
    struct.pack_into(">i", buf, 23, -1)
    struct.pack_into(">i", buf, 57, 0)
    assert reject_code(bytes(with_fixed_crc(buf))) == ErrorCode.INVALID_RECORD


def test_control_batch_from_a_client_is_invalid_record(codec):
    buf = bytearray(build_batch(codec))
    attributes = struct.unpack_from(">h", buf, 21)[0]
    struct.pack_into(">h", buf, 21, attributes | CONTROL_FLAG)
    assert reject_code(bytes(with_fixed_crc(buf))) == ErrorCode.INVALID_RECORD


@pytest.mark.parametrize("compression", [5, 6, 7])
def test_unknown_compression_type_is_unsupported_compression_type(compression):
    buf = bytearray(build_batch())
    struct.pack_into(">h", buf, 21, compression)
    assert reject_code(bytes(with_fixed_crc(buf))) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


def test_the_crc_check_is_not_fooled_by_a_fixed_up_crc_elsewhere():
    """Sanity of the helper: re-fixing the CRC really makes an edited batch pass CRC."""
    buf = bytearray(build_batch())
    buf[HEADER_SIZE + 3] ^= 0xFF
    assert not crc_matches(buf, parse_header(buf))
    assert crc_matches(with_fixed_crc(buf), parse_header(buf))


# --------------------------------------------------------------------------- offset assignment

def test_assignment_changes_only_base_offset_and_leader_epoch_bytes(codec):
    original = build_batch(codec)
    buf, _ = validate_produce_records(original)
    assign_offset_and_epoch(buf, 0, 0x0102030405060708, 0x0A0B0C0D)
    changed = {i for i, (a, b) in enumerate(zip(original, buf)) if a != b}
    assert changed <= set(BASE_OFFSET_BYTES) | set(PARTITION_LEADER_EPOCH_BYTES)
    assert changed & set(BASE_OFFSET_BYTES) and changed & set(PARTITION_LEADER_EPOCH_BYTES)
    assert len(buf) == len(original)
    assert crc_matches(buf, parse_header(buf))


def test_assigned_batch_reads_back_in_kafka_python_with_the_new_offsets(codec):
    buf = bytearray(build_batch(codec))
    assign_offset_and_epoch(buf, 0, 1000, 7)
    header = parse_header(buf)
    assert (header.base_offset, header.partition_leader_epoch) == (1000, 7)
    assert (header.last_offset, header.next_offset) == (1004, 1005)

    batch = DefaultRecordBatch(bytes(buf))
    assert batch.validate_crc()
    assert (batch.base_offset, batch.leader_epoch, batch.compression_type) == (1000, 7, codec)
    records = list(batch)
    assert [r.offset for r in records] == [1000, 1001, 1002, 1003, 1004]
    assert [(r.key, r.value) for r in records] == RECORDS
    assert [r.timestamp for r in records] == [BASE_TIMESTAMP + 10 * i for i in range(5)]


def test_assignment_at_a_position_touches_only_that_batch():
    first, second = build_batch(), build_batch(2)
    buf = bytearray(first + second)
    assign_offset_and_epoch(buf, len(first), 5, 2)
    assert bytes(buf[:len(first)]) == first
    headers, size = valid_prefix(buf)
    assert [(h.position, h.base_offset, h.partition_leader_epoch) for h in headers] \
        == [(0, 0, 0), (len(first), 5, 2)]
    assert size == len(buf)


# --------------------------------------------------------------------------- log scanning

def log_of(count: int = 3) -> tuple[bytes, list[int]]:
    """``count`` assigned batches back to back, of mixed codecs; returns bytes and sizes."""
    parts = [assigned(i % 5, base_offset=5 * i, epoch=1) for i in range(count)]
    return b"".join(parts), [len(p) for p in parts]


def test_valid_prefix_covers_a_whole_clean_log():
    log, sizes = log_of(4)
    headers, size = valid_prefix(log)
    assert size == len(log) == sum(sizes)
    assert [h.base_offset for h in headers] == [0, 5, 10, 15]
    assert [h.position for h in headers] == [0, sizes[0], sum(sizes[:2]), sum(sizes[:3])]


def test_valid_prefix_of_nothing_is_nothing():
    assert valid_prefix(b"") == ([], 0)


def test_valid_prefix_stops_before_a_torn_last_batch_at_any_cut():
    log, sizes = log_of(3)
    intact = sizes[0] + sizes[1]
    for cut in range(intact, len(log)):
        headers, size = valid_prefix(log[:cut])
        assert (len(headers), size) == (2, intact), cut


def test_valid_prefix_stops_at_a_batch_with_a_bad_crc_unless_told_not_to_check():
    log, sizes = log_of(3)
    buf = bytearray(log)
    buf[sizes[0] + HEADER_SIZE + 1] ^= 0xFF  # inside the second batch's records
    headers, size = valid_prefix(buf)
    assert (len(headers), size) == (1, sizes[0])
    headers, size = valid_prefix(buf, check_crc=False)
    assert (len(headers), size) == (3, len(log))


def test_valid_prefix_stops_at_a_wrong_magic():
    log, sizes = log_of(3)
    buf = bytearray(log)
    buf[sizes[0] + 16] = 1
    assert valid_prefix(buf)[1] == sizes[0]


def test_valid_prefix_stops_at_a_negative_last_offset_delta():
    log, sizes = log_of(2)
    second = with_fixed_crc(bytearray(log[sizes[0]:]))
    struct.pack_into(">i", second, 23, -5)
    second = with_fixed_crc(second)
    assert valid_prefix(log[:sizes[0]] + bytes(second))[1] == sizes[0]


@pytest.mark.parametrize("batch_length", [0, 10, HEADER_SIZE - 13, -1])
def test_valid_prefix_stops_quietly_at_a_nonsensical_length(batch_length):
    log, sizes = log_of(2)
    buf = bytearray(log)
    struct.pack_into(">i", buf, sizes[0] + 8, batch_length)
    assert valid_prefix(buf) == (valid_prefix(log[:sizes[0]])[0], sizes[0])


def test_valid_prefix_stops_at_a_zero_filled_tail():
    log, _ = log_of(2)
    headers, size = valid_prefix(log + b"\x00" * 4096)
    assert (len(headers), size) == (2, len(log))


def test_iter_headers_stops_quietly_at_a_torn_end():
    log, sizes = log_of(3)
    assert [h.size for h in iter_headers(log[:-1])] == sizes[:2]
    assert [h.size for h in iter_headers(log, sizes[0])] == sizes[1:]


# --------------------------------------------------------------------------- timestamp search

def test_first_offset_at_or_after_finds_the_first_qualifying_record(codec):
    batch = assigned(codec, base_offset=500)
    timestamps = [BASE_TIMESTAMP + 10 * i for i in range(5)]
    assert first_offset_at_or_after(batch, 0) == (500, timestamps[0])
    assert first_offset_at_or_after(batch, timestamps[0]) == (500, timestamps[0])
    assert first_offset_at_or_after(batch, timestamps[2]) == (502, timestamps[2])  # inclusive
    assert first_offset_at_or_after(batch, timestamps[2] + 1) == (503, timestamps[3])
    assert first_offset_at_or_after(batch, timestamps[4]) == (504, timestamps[4])
    assert first_offset_at_or_after(batch, timestamps[4] + 1) is None


def test_first_offset_at_or_after_goes_by_offset_order_not_smallest_timestamp():
    buf = bytearray(build_batch(1, timestamps=[BASE_TIMESTAMP + 30, BASE_TIMESTAMP + 10,
                                               BASE_TIMESTAMP + 50, BASE_TIMESTAMP + 20,
                                               BASE_TIMESTAMP + 40]))
    assign_offset_and_epoch(buf, 0, 10, 0)
    assert first_offset_at_or_after(bytes(buf), BASE_TIMESTAMP + 15) == (10, BASE_TIMESTAMP + 30)
    assert first_offset_at_or_after(bytes(buf), BASE_TIMESTAMP + 45) == (12, BASE_TIMESTAMP + 50)


def test_first_offset_at_or_after_accepts_a_memoryview_slice_of_a_log():
    log, sizes = log_of(2)
    view = memoryview(log)[sizes[0]:]
    assert first_offset_at_or_after(view, 0) == (5, BASE_TIMESTAMP)

"""What a leader may change in a client's batch before appending it, as Kafka's
LogValidator does: the timestamp checks and rewrite, and recompression.

* ``check_create_times``: Kafka's KIP-937 bounds on CreateTime timestamps
  (``message.timestamp.before.max.ms`` / ``after.max.ms``): a record more than
  ``before_ms`` behind or ``after_ms`` ahead of ``now_ms`` is refused with
  INVALID_TIMESTAMP (a record without a timestamp, -1, is not checked).  The header's
  maxTimestamp answers the "ahead" bound without reading a record when the "behind"
  bound is Kafka's default (Long.MAX_VALUE); any other walks the records (a cold path).
* ``stamp_log_append_time``: ``message.timestamp.type=LogAppendTime``; in place, as
  Kafka's ``setMaxTimestamp``: the timestamp-type bit set, maxTimestamp the append time,
  the CRC recomputed.  A consumer then reads every record's timestamp as the batch's
  maxTimestamp.
* ``recompress``: ``compression.type`` other than ``producer``: the records re-encoded
  with that codec (``0``: uncompressed) and the header's attributes, length and CRC
  rewritten; every other field (offsets, producer id, epoch, sequence, timestamps)
  stays, so idempotence and transactions are unaffected.  A batch already in that codec
  is returned as is.

Pure functions of bytes; any thread.  The caller validated the batch
(``records.validate_produce_records``) before any of these run.
"""
from __future__ import annotations

import struct
from collections.abc import Callable

import crc32c
from kafka import codec

from .errors import ErrorCode, RecordError
from .primitives import Buffer
from .record_validation import decompress, read_records
from .records import (
    BATCH_HEADER,
    COMPRESSION_MASK,
    CRC_START,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_FLAG,
    BatchHeader,
    parse_header,
)

NO_TIMESTAMP = -1
LONG_MAX = 2 ** 63 - 1
_ATTRIBUTES_AT = 21
_MAX_TIMESTAMP_AT = 35
_CRC_AT = 17
_CRC = struct.Struct(">I")
_ATTRIBUTES = struct.Struct(">h")
_TIMESTAMP = struct.Struct(">q")
GZIP_DEFAULT_LEVEL = 6  # java.util.zip.Deflater's default, Kafka's for level -1


def _out_of_range(timestamp: int, offset_delta: int, now_ms: int, before_ms: int,
                  after_ms: int) -> RecordError:
    return RecordError(ErrorCode.INVALID_TIMESTAMP,
                       f"Timestamp {timestamp} of message with offset {offset_delta} is out "
                       f"of range. The timestamp should be within [{now_ms - before_ms}, "
                       f"{now_ms + after_ms}]")


def check_create_times(batch: Buffer, header: BatchHeader, now_ms: int, before_ms: int,
                       after_ms: int) -> None:
    """RecordError(INVALID_TIMESTAMP) unless every record's timestamp lies within
    [now - before_ms, now + after_ms]; see the module docstring."""
    if header.max_timestamp > now_ms + after_ms:
        raise _out_of_range(header.max_timestamp, header.last_offset_delta, now_ms,
                            before_ms, after_ms)
    if before_ms == LONG_MAX:
        return  # Kafka's default: nothing is too old, no record walk
    records = read_records(batch, HEADER_SIZE, header.size, header.compression,
                           header.records_count)
    for offset_delta, timestamp_delta, *_ in records:
        timestamp = header.base_timestamp + timestamp_delta
        if timestamp == NO_TIMESTAMP:
            continue
        if not now_ms - before_ms <= timestamp <= now_ms + after_ms:
            raise _out_of_range(timestamp, offset_delta, now_ms, before_ms, after_ms)


def _reseal(buf: bytearray) -> None:
    _CRC.pack_into(buf, _CRC_AT, crc32c.crc32c(memoryview(buf)[CRC_START:]))


def stamp_log_append_time(buf: bytearray, header: BatchHeader, now_ms: int) -> BatchHeader:
    """Mark the batch in ``buf`` (alone in it) LogAppendTime at ``now_ms``; its new
    header."""
    _ATTRIBUTES.pack_into(buf, _ATTRIBUTES_AT, header.attributes | TIMESTAMP_TYPE_FLAG)
    _TIMESTAMP.pack_into(buf, _MAX_TIMESTAMP_AT, now_ms)
    _reseal(buf)
    return _parsed(buf)


def _parsed(buf: bytearray) -> BatchHeader:
    header = parse_header(buf)
    if header is None:  # the caller's batch was whole; a rewrite keeps it whole
        raise RecordError(ErrorCode.CORRUPT_MESSAGE, "rewritten batch is cut short")
    return header


def _gzip(level: int | None) -> Callable[[bytes], bytes]:
    chosen = GZIP_DEFAULT_LEVEL if level in (None, -1) else level
    return lambda data: codec.gzip_encode(data, compresslevel=chosen)


def _lz4(level: int | None) -> Callable[[bytes], bytes]:
    # lz4.frame's levels stop at 16 (lz4-java's at 17).
    kwargs = {} if level is None else {"compression_level": min(level, 16)}
    return lambda data: codec.lz4_encode(data, **kwargs)


def _zstd(level: int | None) -> Callable[[bytes], bytes]:
    if level is None:
        return codec.zstd_encode
    compressor = codec.zstd.ZstdCompressor(level=level)
    return compressor.compress


def _snappy(level: int | None) -> Callable[[bytes], bytes]:
    return codec.snappy_encode


ENCODERS: dict[int, Callable[[int | None], Callable[[bytes], bytes]]] = {
    1: _gzip, 2: _snappy, 3: _lz4, 4: _zstd}


def recompress(buf: bytearray, header: BatchHeader, compression: int,
               level: int | None = None) -> tuple[bytearray, BatchHeader]:
    """The batch in ``buf`` with its records in codec ``compression`` (0: none) at
    ``level`` (None: the codec's default); ``(buf, header)`` unchanged when it is
    in that codec already."""
    if header.compression == compression:
        return buf, header
    payload = memoryview(buf)[HEADER_SIZE:header.size]
    records = bytes(payload) if not header.compression \
        else decompress(header.compression, payload)
    body = ENCODERS[compression](level)(records) if compression else records
    out = bytearray(HEADER_SIZE) + body
    attributes = (header.attributes & ~COMPRESSION_MASK) | compression
    BATCH_HEADER.pack_into(
        out, 0, header.base_offset, len(out) - LOG_OVERHEAD, header.partition_leader_epoch,
        header.magic, 0, attributes, header.last_offset_delta, header.base_timestamp,
        header.max_timestamp, header.producer_id, header.producer_epoch,
        header.base_sequence, header.records_count)
    _reseal(out)
    return out, _parsed(out)

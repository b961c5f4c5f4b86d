"""A view over RecordBatch v2 headers, and the checks a broker runs on them.

Layout of a batch (all big-endian), byte offsets from the batch start::

    0  baseOffset int64            27 baseTimestamp int64
    8  batchLength int32           35 maxTimestamp int64
    12 partitionLeaderEpoch int32  43 producerId int64
    16 magic int8                  51 producerEpoch int16
    17 crc uint32                  53 baseSequence int32
    21 attributes int16            57 recordsCount int32
    23 lastOffsetDelta int32       61 records...

``batchLength`` counts the bytes after itself, so a batch occupies ``12 + batchLength``.
The CRC-32C covers ``attributes`` to the end: ``baseOffset`` and ``partitionLeaderEpoch``
are outside it, which is what lets a leader assign both in place while storing the batch
exactly as the client sent it, compressed or not.  A client's batch has its records
walked once on produce (``protocol.record_validation``: Kafka's LogValidator checks) and
is never opened on fetch; only ListOffsets-by-timestamp (a cold path) decodes a stored
batch, and a stored batch that does not decode raises ``RecordDecodeError``.
"""
from __future__ import annotations

import functools
import struct
from collections.abc import Iterator
from typing import NamedTuple

import crc32c

from .errors import ErrorCode, RecordError
from .primitives import Buffer
from .record_validation import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    RecordDecodeError,
    check_batch_records,
    read_records,
)

__all__ = ["RecordDecodeError", "RecordError"]  # re-exported: storage/ catches them here

BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = BATCH_HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength
MAGIC_OFFSET = 16
CRC_START = 21
MAGIC_V2 = 2
NO_PARTITION_LEADER_EPOCH = -1

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_FLAG = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

_BASE_OFFSET_AND_LENGTH = struct.Struct(">qi")
_unpack_header = BATCH_HEADER.unpack_from
_crc32c = crc32c.crc32c
_EPOCH = struct.Struct(">i")
_OFFSET = struct.Struct(">q")


class BatchHeader(NamedTuple):
    """The fixed 61-byte header of one batch, plus where it starts in its buffer."""

    position: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)


#: ``BatchHeader`` from a tuple of all its fields, without a Python-level ``__new__``
_new_header = functools.partial(tuple.__new__, BatchHeader)


def parse_header(buf: Buffer, position: int = 0) -> BatchHeader | None:
    """The header of the batch at ``position``, or None when the buffer ends first.

    None means "torn": fewer than 61 bytes remain, or the batch runs past the end of
    ``buf``.  A length too small to hold a header raises RecordError(CORRUPT_MESSAGE).
    The CRC is not checked here (see ``crc_matches``).
    """
    if len(buf) - position < HEADER_SIZE:
        return None
    header = BatchHeader(position, *BATCH_HEADER.unpack_from(buf, position))
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise RecordError(ErrorCode.CORRUPT_MESSAGE,
                          f"batch at byte {position} has length {header.batch_length}")
    if position + header.size > len(buf):
        return None
    return header


def with_offset_and_epoch(header: BatchHeader, base_offset: int,
                          partition_leader_epoch: int) -> BatchHeader:
    """``header`` with its baseOffset and partitionLeaderEpoch replaced (what
    ``assign_offset_and_epoch`` writes into the batch); ``_replace`` without its
    keyword machinery, once per batch a leader appends."""
    return _new_header((header[0], base_offset, header[2], partition_leader_epoch)
                       + header[4:])


def crc_matches(buf: Buffer, header: BatchHeader) -> bool:
    """True when the stored CRC-32C matches attributes..end of the batch."""
    start = header.position + CRC_START
    end = header.position + header.size
    return crc32c.crc32c(memoryview(buf)[start:end]) == header.crc


def iter_headers(buf: Buffer, position: int = 0) -> Iterator[BatchHeader]:
    """Every complete batch header from ``position`` on; stops quietly at a torn end."""
    while True:
        header = parse_header(buf, position)
        if header is None:
            return
        yield header
        position += header.size


def valid_prefix(buf: Buffer, *, check_crc: bool = True) -> tuple[list[BatchHeader], int]:
    """The longest run of well-formed batches at the start of ``buf``.

    Returns the headers and the number of bytes they cover.  Scanning stops at the
    first batch that is torn, has a nonsensical length, a magic other than 2, a negative
    ``lastOffsetDelta``, or (with ``check_crc``) a CRC mismatch.  The record count is not
    compared with ``lastOffsetDelta`` here: a stored batch may hold fewer records than its
    offset span (Kafka's compaction keeps the span).  Storage recovery cuts the log at the
    returned byte count.

    ``parse_header`` and ``crc_matches`` inlined, as every batch a follower copies passes
    here: one unpack per batch, no call per check, no parse of the end of the buffer.
    """
    headers: list[BatchHeader] = []
    position = 0
    end = len(buf)
    view = memoryview(buf) if check_crc else None
    while end - position >= HEADER_SIZE:
        header = _new_header((position, *_unpack_header(buf, position)))
        size = LOG_OVERHEAD + header.batch_length
        if size < HEADER_SIZE or position + size > end or header.magic != MAGIC_V2 \
                or header.last_offset_delta < 0:
            break
        if view is not None and _crc32c(view[position + CRC_START:position + size]) != header.crc:
            break
        headers.append(header)
        position += size
    return headers, position


def validate_produce_records(records: Buffer | None, max_decompressed_bytes: int =
                             DEFAULT_MAX_DECOMPRESSED_BYTES) -> tuple[bytearray, BatchHeader]:
    """Check a client's records for one partition; return a writable copy and its header.

    Kafka's rules for Produce v3+: exactly one batch filling the field, magic 2, a
    matching CRC (CORRUPT_MESSAGE otherwise), baseOffset 0, lastOffsetDelta + 1 equal to
    the record count, and no control batch (INVALID_RECORD for each of those); then the
    records themselves (``record_validation.check_batch_records``: decompressed, at most
    ``max_decompressed_bytes``, and walked), so nothing is stored that does not decode.
    """
    if records is None or len(records) == 0:
        raise RecordError(ErrorCode.INVALID_RECORD, "produce carries no record batch")
    buf = bytearray(records)
    # Magic sits at byte 16 in every message format, and a v0/v1 message set can be shorter
    # than a v2 header: judge the magic first so an old-format set is INVALID_RECORD (as in
    # Kafka), not CORRUPT_MESSAGE for being short.
    if len(buf) > MAGIC_OFFSET and buf[MAGIC_OFFSET] != MAGIC_V2:
        raise RecordError(ErrorCode.INVALID_RECORD,
                          f"magic {buf[MAGIC_OFFSET]}: only record batch v2 is accepted")
    if len(buf) < HEADER_SIZE:
        raise RecordError(ErrorCode.CORRUPT_MESSAGE, f"{len(buf)} bytes cannot hold a batch header")
    header = BatchHeader(0, *BATCH_HEADER.unpack_from(buf, 0))
    if header.size != len(buf):
        if header.size < HEADER_SIZE or header.size > len(buf):
            raise RecordError(ErrorCode.CORRUPT_MESSAGE,
                              f"batch length {header.batch_length} disagrees with {len(buf)} bytes")
        raise RecordError(ErrorCode.INVALID_RECORD, "produce must carry exactly one record batch")
    if not crc_matches(buf, header):
        raise RecordError(ErrorCode.CORRUPT_MESSAGE, "record batch CRC mismatch")
    if header.base_offset != 0:
        raise RecordError(ErrorCode.INVALID_RECORD,
                          f"batch baseOffset must be 0, got {header.base_offset}")
    if header.records_count < 1 or header.last_offset_delta + 1 != header.records_count:
        raise RecordError(ErrorCode.INVALID_RECORD,
                          f"lastOffsetDelta {header.last_offset_delta} disagrees with "
                          f"record count {header.records_count}")
    if header.is_control:
        raise RecordError(ErrorCode.INVALID_RECORD, "clients may not write control batches")
    if header.compression not in COMPRESSION_NAMES:
        raise RecordError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                          f"compression type {header.compression}")
    check_batch_records(buf, HEADER_SIZE, len(buf), header.compression, header.records_count,
                        max_decompressed_bytes)
    return buf, header


def assign_offset_and_epoch(buf: bytearray, position: int, base_offset: int,
                            partition_leader_epoch: int) -> None:
    """Rewrite baseOffset and partitionLeaderEpoch in place (both lie outside the CRC)."""
    _OFFSET.pack_into(buf, position, base_offset)
    _EPOCH.pack_into(buf, position + LOG_OVERHEAD, partition_leader_epoch)


def first_offset_at_or_after(batch: Buffer, target_timestamp: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record with timestamp >= target in one whole
    stored batch, or None when no record of it qualifies.

    Cold path (ListOffsets by timestamp): decodes the batch, decompressing if needed; a
    record's timestamp is the batch's maxTimestamp under LogAppendTime (Kafka's rule).
    RecordDecodeError when the batch does not decode.
    """
    header = parse_header(batch)
    if header is None:
        raise RecordDecodeError(ErrorCode.CORRUPT_MESSAGE, "stored batch is cut short")
    records = read_records(batch, HEADER_SIZE, header.size, header.compression,
                           header.records_count)
    log_append_time = header.attributes & TIMESTAMP_TYPE_FLAG
    for offset_delta, timestamp_delta, *_ in records:
        timestamp = header.max_timestamp if log_append_time \
            else header.base_timestamp + timestamp_delta
        if timestamp >= target_timestamp:
            return header.base_offset + offset_delta, timestamp
    return None

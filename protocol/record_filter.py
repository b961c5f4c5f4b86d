"""Keeping some records of a stored batch: the log cleaner's record-level rewrite.

Kafka's ``MemoryRecords.filterTo`` for RecordBatch v2, as bytes in and bytes out (no
I/O).  ``decode_records`` opens a stored batch (decompressing it, within
``record_validation``'s bound; RecordDecodeError if it does not decode); ``rebuild_batch``
writes a batch holding only the records kept, with the original batch's identity:

* baseOffset, partitionLeaderEpoch, lastOffsetDelta, producerId, producerEpoch and
  baseSequence are the original's, so no offset changes and the producer's last
  sequence survives (Kafka keeps lastOffsetDelta for exactly that reason); each record
  keeps its offset delta, so a kept record has its original offset;
* attributes (compression, timestamp type, transactional, control) are the original's;
  the records are recompressed with the original codec;
* baseTimestamp is the original's and each record keeps its own timestamp; maxTimestamp
  is the largest kept one (CreateTime) or the original (LogAppendTime);
* recordsCount is the number kept; the CRC-32C is recomputed.

``empty_batch`` is Kafka's ``writeEmptyHeader``: a batch with no record that keeps an
idempotent producer's last sequence in the log after every one of its records went.
Pure functions; any thread.
"""
from __future__ import annotations

import struct
from typing import Any, NamedTuple

import crc32c
from kafka import codec
from kafka.record.util import encode_varint

from .errors import ErrorCode
from .primitives import Buffer
from .record_validation import RecordDecodeError, read_records
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

_CRC = struct.Struct(">I")
_CRC_AT = 17

#: the name callers knew; decoding failures are ``RecordDecodeError`` everywhere
RecordFilterError = RecordDecodeError


class Record(NamedTuple):
    """One record of a stored batch, with its absolute offset; header keys as bytes."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Any, ...]


def decode_records(batch: Buffer) -> list[Record]:
    """Every record of one whole stored batch (decompressed), in offset order.

    RecordDecodeError when it does not decode (``record_validation``'s rules, offset
    deltas aside).  A record's timestamp is the batch's maxTimestamp under LogAppendTime.
    """
    header = parse_header(batch)
    if header is None:
        raise RecordDecodeError(ErrorCode.CORRUPT_MESSAGE, "stored batch is cut short")
    log_append_time = header.attributes & TIMESTAMP_TYPE_FLAG
    return [Record(header.base_offset + offset_delta,
                   header.max_timestamp if log_append_time
                   else header.base_timestamp + timestamp_delta,
                   key, value, tuple(headers))
            for offset_delta, timestamp_delta, key, value, headers
            in read_records(batch, HEADER_SIZE, header.size, header.compression,
                            header.records_count)]


def _encode_record(record: Record, base_offset: int, base_timestamp: int) -> bytes:
    body = bytearray(b"\x00")  # record attributes: unused
    encode_varint(record.timestamp - base_timestamp, body.append)
    encode_varint(record.offset - base_offset, body.append)
    for field in (record.key, record.value):
        if field is None:
            encode_varint(-1, body.append)
        else:
            encode_varint(len(field), body.append)
            body += field
    encode_varint(len(record.headers), body.append)
    for name, value in record.headers:
        name = name.encode() if isinstance(name, str) else name
        encode_varint(len(name), body.append)
        body += name
        if value is None:
            encode_varint(-1, body.append)
        else:
            encode_varint(len(value), body.append)
            body += value
    out = bytearray()
    encode_varint(len(body), out.append)
    return bytes(out + body)


_COMPRESS = {1: codec.gzip_encode, 2: codec.snappy_encode, 3: codec.lz4_encode,
             4: codec.zstd_encode}


def _seal(header: BatchHeader, body: bytes, *, attributes: int, base_timestamp: int,
          max_timestamp: int, count: int) -> bytes:
    buf = bytearray(HEADER_SIZE) + body
    BATCH_HEADER.pack_into(
        buf, 0, header.base_offset, len(buf) - LOG_OVERHEAD, header.partition_leader_epoch,
        header.magic, 0, attributes, header.last_offset_delta, base_timestamp, max_timestamp,
        header.producer_id, header.producer_epoch, header.base_sequence, count)
    _CRC.pack_into(buf, _CRC_AT, crc32c.crc32c(memoryview(buf)[CRC_START:]))
    return bytes(buf)


def rebuild_batch(header: BatchHeader, kept: list[Record]) -> bytes:
    """The batch of ``header`` holding only ``kept`` (a non-empty subset of its records,
    in offset order); see the module docstring for what is preserved."""
    if not kept:
        raise ValueError("rebuild_batch needs at least one record; use empty_batch")
    body = b"".join(_encode_record(r, header.base_offset, header.base_timestamp)
                    for r in kept)
    compression = header.attributes & COMPRESSION_MASK
    if compression:
        body = _COMPRESS[compression](body)
    if header.attributes & TIMESTAMP_TYPE_FLAG:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = max(r.timestamp for r in kept)
    return _seal(header, body, attributes=header.attributes, base_timestamp=header.base_timestamp,
                 max_timestamp=max_timestamp, count=len(kept))


def empty_batch(header: BatchHeader) -> bytes:
    """The header of ``header``'s batch with no record (Kafka's writeEmptyHeader): same
    offsets, epoch, producer and sequences; uncompressed; both timestamps its max."""
    return _seal(header, b"", attributes=header.attributes & ~COMPRESSION_MASK,
                 base_timestamp=header.max_timestamp, max_timestamp=header.max_timestamp,
                 count=0)

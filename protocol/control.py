"""Transaction markers: Kafka's control batches, built and read by hand (pure).

A transaction ends on each of its partitions with one *control batch*: a v2 record batch
with attributes TRANSACTIONAL | CONTROL (never compressed), the producer's id and epoch,
base sequence -1, and exactly one record whose

* key   = version int16 (0), type int16 (0 = ABORT, 1 = COMMIT);
* value = version int16 (0), coordinator_epoch int32 (Kafka's EndTransactionMarker).

The record itself is the v2 record layout: length varint, attributes int8 (0),
timestampDelta varlong, offsetDelta varint, key length varint + key, value length varint +
value, header count varint (0) -- varints zigzag-encoded.  The batch is only ever
written by a partition leader (WriteTxnMarkers), so ``build_marker_batch`` returns it with
base offset 0 and no leader epoch for the log to assign, as a client batch.
"""
from __future__ import annotations

import struct

import crc32c

from .primitives import Buffer, varint
from .records import (
    BATCH_HEADER,
    CONTROL_FLAG,
    CRC_START,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH,
    TRANSACTIONAL_FLAG,
    BatchHeader,
)

ABORT = 0
COMMIT = 1
NO_SEQUENCE = -1
_CONTROL_KEY = struct.Struct(">hh")      # version, type
_MARKER_VALUE = struct.Struct(">hi")     # version, coordinator_epoch


class ControlRecordError(ValueError):
    """A control batch whose record does not decode."""


def _read_varint(buf: Buffer, position: int) -> tuple[int, int]:
    """(zigzag-decoded value, next position) of the varint at ``position``."""
    shift = result = 0
    while True:
        if position >= len(buf) or shift > 63:
            raise ControlRecordError("truncated or overlong varint in a control record")
        byte = buf[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), position
        shift += 7


def build_marker_batch(producer_id: int, producer_epoch: int, coordinator_epoch: int,
                       commit: bool, timestamp_ms: int) -> bytearray:
    """One COMMIT or ABORT marker batch for ``producer_id``'s transaction."""
    key = _CONTROL_KEY.pack(0, COMMIT if commit else ABORT)
    value = _MARKER_VALUE.pack(0, coordinator_epoch)
    body = (b"\x00" + varint(0) + varint(0) + varint(len(key)) + key
            + varint(len(value)) + value + varint(0))
    record = varint(len(body)) + body
    batch = bytearray(HEADER_SIZE + len(record))
    BATCH_HEADER.pack_into(
        batch, 0, 0, len(batch) - LOG_OVERHEAD, NO_PARTITION_LEADER_EPOCH, MAGIC_V2, 0,
        TRANSACTIONAL_FLAG | CONTROL_FLAG, 0, timestamp_ms, timestamp_ms, producer_id,
        producer_epoch, NO_SEQUENCE, 1)
    batch[HEADER_SIZE:] = record
    struct.pack_into(">I", batch, 17, crc32c.crc32c(memoryview(batch)[CRC_START:]))
    return batch


def read_marker(buf: Buffer, header: BatchHeader) -> tuple[int, int]:
    """(type, coordinator epoch) of the control batch ``header`` describes in ``buf``:
    ABORT or COMMIT with the marker's coordinator epoch, or another control type Kafka
    defines with -1.  ControlRecordError if its record does not decode."""
    position = header.position + HEADER_SIZE
    end = header.position + header.size
    _, position = _read_varint(buf, position)          # record length
    position += 1                                      # attributes
    _, position = _read_varint(buf, position)          # timestamp delta
    _, position = _read_varint(buf, position)          # offset delta
    key_length, position = _read_varint(buf, position)
    if key_length < _CONTROL_KEY.size or position + key_length > end:
        raise ControlRecordError(f"control record key of {key_length} bytes")
    marker_type = _CONTROL_KEY.unpack_from(buf, position)[1]
    if marker_type not in (ABORT, COMMIT):
        return marker_type, -1
    value_length, position = _read_varint(buf, position + key_length)
    if value_length < _MARKER_VALUE.size or position + value_length > end:
        raise ControlRecordError(f"transaction marker value of {value_length} bytes")
    return marker_type, _MARKER_VALUE.unpack_from(buf, position)[1]


def marker_of(buf: Buffer, header: BatchHeader) -> tuple[int, int] | None:
    """``read_marker`` for a control batch, None for any other batch or an unreadable
    control record (the batch then changes no producer: Kafka ignores unknown types)."""
    if not header.is_control:
        return None
    try:
        return read_marker(buf, header)
    except ControlRecordError:
        return None

"""The records inside a RecordBatch v2: checking a client's, reading a stored one's.

Kafka's LogValidator and DefaultRecordBatch/DefaultRecord rules, as bytes in and errors
out (no I/O, no broker state; any thread).  After the 61-byte batch header come the
records, compressed as a whole when the attributes name a codec.  Each record is::

    length varint                   the bytes after itself
    attributes int8                 unused
    timestampDelta varlong          from the batch's baseTimestamp
    offsetDelta varint              from the batch's baseOffset
    keyLength varint, key           -1: null key
    valueLength varint, value       -1: null value
    headersCount varint, then per header: keyLength varint (>= 0), key,
                                          valueLength varint (-1: null), value

All varints are zigzag; an int takes at most 5 bytes, a long at most 10.

What is refused, with Kafka's code for it:

* CORRUPT_MESSAGE: the payload does not decompress with the codec its attributes name
  (Kafka answers a codec failure with a generic KafkaException; its CORRUPT_MESSAGE,
  "otherwise corrupt", is the code that names the fault);
* INVALID_RECORD (Kafka's InvalidRecordException from its record iterator): an overlong
  varint, a record length below the smallest record or past the end of the records, a
  number of records other than the header's recordsCount, bytes after the last record;
  on produce, offset deltas other than 0, 1, ..., count - 1 (Kafka rewrites such a
  compressed batch; we store batches as sent, so we refuse it); and when a record is
  read whole, fields that do not fill its length exactly, a key or value length below
  -1, a negative header count, a header key length below 0 or value length below -1;
* MESSAGE_TOO_LARGE: the payload decompresses to more than ``max_decompressed_bytes``
  (our bound against decompression bombs; Kafka has none).  A Java producer that gets
  it splits the batch and retries.

``check_records`` is the produce hot path: it walks each record's length and offset
delta in place, with no object per record, and never reads a key, value or header (a
full parse costs a Python loop about twice as long; Kafka's in-place path for
compressed batches skips keys and values too).  ``read_records`` is for cold paths
(ListOffsets by timestamp, the log cleaner): it parses every field and does not check
offset deltas, since a cleaned batch keeps the offsets of the records that survived.
Both decompress through ``decompress``, which never produces more than the bound.  The
codec libraries are kafka-python's (``kafka.codec`` imports them): the codecs it reads
are the ones we read.
"""
from __future__ import annotations

import struct
import zlib
from typing import Any

from kafka import codec as _codec

from .errors import ErrorCode, RecordError
from .primitives import Buffer

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
CODEC_NAMES = {GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
#: 64 x message.max.bytes' default; a batch of 1 MiB compressed 64:1 still passes
DEFAULT_MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024
#: attributes, timestampDelta, offsetDelta, keyLength, valueLength, headersCount
MIN_RECORD_BODY_BYTES = 6
MIN_RECORD_BYTES = 1 + MIN_RECORD_BODY_BYTES
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_BYTES = 16
_INT32 = struct.Struct(">i")
#: zigzag value of every one-byte varint
_ZIGZAG = tuple((b >> 1) ^ -(b & 1) for b in range(128))
#: a zstd block of 4 input bytes may stand for 128 KiB of output
_ZSTD_MAX_RATIO_SHIFT = 15


class RecordDecodeError(RecordError):
    """Records that cannot be decoded or break the format's rules; ``code`` is Kafka's
    answer (CORRUPT_MESSAGE, INVALID_RECORD or MESSAGE_TOO_LARGE, see the module).  The
    one error every decoding failure of this module leaves as."""


def _invalid(message: str) -> RecordDecodeError:
    return RecordDecodeError(ErrorCode.INVALID_RECORD, message)


def _corrupt(message: str) -> RecordDecodeError:
    return RecordDecodeError(ErrorCode.CORRUPT_MESSAGE, message)


# -- decompression ----------------------------------------------------------------------------

def decompress(compression: int, payload: Buffer, max_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
               ) -> bytes:
    """The records ``payload`` holds compressed with ``compression`` (1-4), at most
    ``max_bytes`` of them (inclusive); RecordDecodeError otherwise."""
    name = CODEC_NAMES.get(compression)
    decompressor = _DECOMPRESSORS.get(compression)
    if name is None or decompressor is None:
        raise RecordDecodeError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                                f"compression type {compression} is not available")
    try:
        records = decompressor(payload, max_bytes)
    except RecordDecodeError:
        raise
    except Exception as exc:  # each codec library has errors of its own (zlib.error, ...)
        raise _corrupt(f"{name} payload does not decompress: {exc!r}") from exc
    if len(records) > max_bytes:
        raise _too_large(name, max_bytes)
    return records


def _too_large(name: str, max_bytes: int) -> RecordDecodeError:
    return RecordDecodeError(ErrorCode.MESSAGE_TOO_LARGE,
                             f"{name} payload decompresses to more than {max_bytes} bytes")


def _gunzip(payload: Buffer, max_bytes: int) -> bytes:
    """Every gzip member of ``payload`` (Java's GZIPInputStream reads them all)."""
    out = bytearray()
    data = bytes(payload)
    while data:
        member = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out += member.decompress(data, max_bytes + 1 - len(out))
        if len(out) > max_bytes:
            raise _too_large("gzip", max_bytes)
        if not member.eof:
            raise _corrupt("gzip stream ends before its trailer")
        data = member.unused_data
    if not out and not payload:
        raise _corrupt("empty gzip payload")
    return bytes(out)


def _unlz4(payload: Buffer, max_bytes: int) -> bytes:
    """Every LZ4 frame of ``payload`` (Kafka's LZ4 is the frame format)."""
    out = bytearray()
    data = bytes(payload)
    while True:
        frame = _codec.lz4.LZ4FrameDecompressor()
        out += frame.decompress(data, max_length=max_bytes + 1 - len(out))
        if len(out) > max_bytes:
            raise _too_large("lz4", max_bytes)
        if not frame.eof:
            raise _corrupt("lz4 frame ends before its end mark")
        data = frame.unused_data
        if not data:
            return bytes(out)


def _unzstd(payload: Buffer, max_bytes: int) -> bytes:
    """Every zstd frame of ``payload``.  Input goes in slices small enough that one
    slice cannot expand past the bound by much (zstd's largest ratio is about 2^15)."""
    out = bytearray()
    data = memoryview(bytes(payload))
    while data:
        frame = _codec.zstd.ZstdDecompressor().decompressobj()
        position = 0
        while not frame.eof:
            if position >= len(data):
                raise _corrupt("zstd frame ends early")
            step = max(256, (max_bytes - len(out)) >> _ZSTD_MAX_RATIO_SHIFT)
            out += frame.decompress(data[position:position + step])
            position += step
            if len(out) > max_bytes:
                raise _too_large("zstd", max_bytes)
        data = memoryview(frame.unused_data + bytes(data[position:]))
    if not payload:
        raise _corrupt("empty zstd payload")
    return bytes(out)


def _unsnappy(payload: Buffer, max_bytes: int) -> bytes:
    """Xerial-framed snappy (what Kafka's Java client writes) or one raw snappy block."""
    data = bytes(payload)
    if not data.startswith(_XERIAL_MAGIC):
        return _snappy_block(data, max_bytes)
    out = bytearray()
    position = _XERIAL_HEADER_BYTES
    while position < len(data):
        if position + 4 > len(data):
            raise _corrupt("snappy block size cut short")
        size = _INT32.unpack_from(data, position)[0]
        position += 4
        if size < 0 or position + size > len(data):
            raise _corrupt(f"snappy block of {size} bytes runs past the payload")
        out += _snappy_block(data[position:position + size], max_bytes - len(out))
        position += size
    return bytes(out)


def _snappy_block(block: bytes, max_bytes: int) -> bytes:
    """One raw snappy block; its preamble (the uncompressed length, an unsigned
    little-endian base-128 varint) is checked against the bound before decompressing."""
    length = shift = 0
    for position in range(min(len(block), 5)):
        length |= (block[position] & 0x7F) << shift
        if block[position] < 0x80:
            break
        shift += 7
    else:
        raise _corrupt("snappy block without a length preamble")
    if length > max_bytes:
        raise _too_large("snappy", max_bytes)
    return _codec.snappy.decompress(block)


_DECOMPRESSORS = {
    GZIP: _gunzip,
    SNAPPY: _unsnappy if _codec.snappy is not None else None,
    LZ4: _unlz4 if _codec.lz4 is not None else None,
    ZSTD: _unzstd if _codec.zstd is not None else None,
}


# -- varints ----------------------------------------------------------------------------------

def _varint(data: Buffer, position: int, max_bytes: int) -> tuple[int, int]:
    """(zigzag value, next position) of the varint at ``position``, at most ``max_bytes``
    long (5 for an int, 10 for a long); IndexError when the data ends inside it."""
    value = shift = 0
    for i in range(max_bytes):
        byte = data[position + i]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (value >> 1) ^ -(value & 1), position + i + 1
        shift += 7
    raise _invalid(f"varint longer than {max_bytes} bytes at byte {position}")


# -- the produce path: check in place -------------------------------------------------------------

def check_records(data: Buffer, position: int, end: int, records_count: int) -> None:
    """Check the records in ``data[position:end]`` (uncompressed) as Kafka's produce path
    does, at the depth that keeps the offsets right: each record's length (at least the
    smallest record, within the records), lengths adding up to the records' size
    exactly, offset deltas 0..records_count-1 in order, and ``records_count`` records;
    RecordDecodeError(INVALID_RECORD) at the first fault.

    The hot path: no object per record, one- and two-byte varints (nearly all lengths)
    decoded inline, nothing inside a record read past its offset delta.  The fields after
    it (key, value, headers) are walked by ``read_records`` on the cold paths.
    """
    if records_count > (end - position) // MIN_RECORD_BYTES:
        raise _invalid(f"{records_count} records cannot fit in {end - position} bytes")
    zigzag = _ZIGZAG
    index = 0
    try:
        while position < end:
            byte = data[position]
            if byte < 0x80:
                length, position = zigzag[byte], position + 1
            elif data[position + 1] < 0x80:
                raw = (byte & 0x7F) | (data[position + 1] << 7)
                length, position = (raw >> 1) ^ -(raw & 1), position + 2
            else:
                length, position = _varint(data, position, 5)
            record_end = position + length
            if length < MIN_RECORD_BODY_BYTES or record_end > end:
                raise _invalid(f"record {index} has length {length}, "
                               f"{end - position} bytes remain")
            position += 1  # attributes; then timestampDelta, any value
            position = position + 1 if data[position] < 0x80 else _varint(data, position, 10)[1]
            # A one-byte varint equal to 2 * index is exactly offset delta ``index``.
            if not (index < 64 and data[position] == index << 1) \
                    and _varint(data, position, 5)[0] != index:
                raise _invalid(f"record {index} has offset delta "
                               f"{_varint(data, position, 5)[0]}")
            position = record_end
            index += 1
    except IndexError:
        raise _invalid(f"record {index} runs past the end of the records") from None
    if index != records_count:
        raise _invalid(f"the batch holds {index} records, its header says {records_count}")


def _read_headers(data: bytes, position: int, count: int, into: list[Any]) -> int:
    """Read ``count`` headers from ``position`` into ``into`` as (key, value or None);
    the position after them."""
    if count < 0:
        raise _invalid(f"header count {count}")
    for _ in range(count):
        size, position = _varint(data, position, 5)
        if size < 0:
            raise _invalid(f"header key length {size}")
        key = data[position:position + size]
        position += size
        value_size, position = _varint(data, position, 5)
        if value_size < -1:
            raise _invalid(f"header value length {value_size}")
        value = None if value_size < 0 else data[position:position + value_size]
        position += max(value_size, 0)
        if position > len(data):
            raise IndexError(position)
        into.append((bytes(key), None if value is None else bytes(value)))
    return position


def check_batch_records(batch: Buffer, position: int, end: int, compression: int,
                        records_count: int,
                        max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> None:
    """``check_records`` over a batch's records at ``batch[position:end]`` (after the
    header), decompressed first when ``compression`` names a codec."""
    if compression:
        records = decompress(compression, memoryview(batch)[position:end],
                             max_decompressed_bytes)
        check_records(records, 0, len(records), records_count)
    else:
        check_records(batch, position, end, records_count)


# -- cold paths: read every record ------------------------------------------------------------

def read_records(batch: Buffer, position: int, end: int, compression: int, records_count: int,
                 max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
                 ) -> list[tuple[Any, ...]]:
    """Every record of a stored batch's records at ``batch[position:end]``, as
    ``(offset_delta, timestamp_delta, key, value, headers)`` with ``headers`` a list of
    ``(key bytes, value bytes or None)``.  Offset deltas are not checked (a cleaned batch
    keeps its survivors' offsets); everything else is, as in ``check_records``."""
    if compression:
        data = decompress(compression, memoryview(batch)[position:end], max_decompressed_bytes)
        position, end = 0, len(data)
    else:
        data = bytes(memoryview(batch)[position:end])
        position, end = 0, len(data)
    records: list[tuple[Any, ...]] = []
    try:
        while position < end:
            length, position = _varint(data, position, 5)
            record_end = position + length
            if length < MIN_RECORD_BODY_BYTES or record_end > end:
                raise _invalid(f"record {len(records)} has length {length}")
            timestamp_delta, position = _varint(data, position + 1, 10)
            offset_delta, position = _varint(data, position, 5)
            key, position = _read_bytes(data, position)
            value, position = _read_bytes(data, position)
            count, position = _varint(data, position, 5)
            headers: list[Any] = []
            position = _read_headers(data, position, count, headers)
            if position != record_end:
                raise _invalid(f"record {len(records)} does not fill its {length} bytes")
            records.append((offset_delta, timestamp_delta, key, value, headers))
    except IndexError:
        raise _invalid(f"record {len(records)} runs past the end of the records") from None
    if len(records) != records_count:
        raise _invalid(f"the batch holds {len(records)} records, its header says "
                       f"{records_count}")
    return records


def _read_bytes(data: bytes, position: int) -> tuple[bytes | None, int]:
    size, position = _varint(data, position, 5)
    if size < -1:
        raise _invalid(f"key or value length {size}")
    if size < 0:
        return None, position
    if position + size > len(data):
        raise IndexError(position + size)
    return data[position:position + size], position + size

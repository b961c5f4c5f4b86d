"""Records of the ``__transaction_state`` topic, in Kafka's own format (pure).

The key and value of Kafka's ``TransactionLog`` (the ``TransactionLogKey`` and
``TransactionLogValue`` schemas, version 0, which Kafka 3.x writes), so the topic reads
the same as Kafka's:

    key    int16 version (0), transactional_id string
    value  int16 version (0), producer_id int64, producer_epoch int16,
           transaction_timeout_ms int32, transaction_status int8,
           transaction_partitions nullable array of (topic string, partition_ids
           array of int32), transaction_last_update_timestamp_ms int64,
           transaction_start_timestamp_ms int64

A null value (tombstone) means the transactional id was removed (expired).  The
partitions are written null for an Empty transaction, as Kafka does; both null and an
empty array read as no partitions.  Status codes are Kafka's (``TransactionState``
in ``metadata.py``).  Strings are int16-length UTF-8, arrays have an int32 count.

Value version 1 (Kafka 4's, flexible) is written for a transaction of a client on
transaction version 2 (KIP-890 part 2): the same fields with compact strings and
arrays (unsigned-varint length + 1, 0 for null), an empty tag section per partition
entry, then the tagged fields PreviousProducerId (tag 0), NextProducerId (tag 1) and
ClientTransactionVersion (tag 2), each written only when not its default (-1, -1, 0).
Both versions are read, so a log written before transaction version 2 still loads;
unknown tags are skipped.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from protocol.primitives import Reader, int16, int32, int64, string, uvarint

KEY_VERSION = 0
VALUE_VERSION = 0
FLEXIBLE_VALUE_VERSION = 1
_TAG_PREVIOUS_PRODUCER_ID, _TAG_NEXT_PRODUCER_ID, _TAG_CLIENT_TRANSACTION_VERSION = 0, 1, 2


class RecordFormatError(ValueError):
    """A key or value this module cannot read (unknown version, truncated bytes)."""


@dataclass(frozen=True)
class TxnValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    status: int
    # (topic, partition) pairs, sorted when written so the bytes are deterministic.
    partitions: frozenset[tuple[str, int]]
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


def txn_key(transactional_id: str) -> bytes:
    return int16(KEY_VERSION) + string(transactional_id)


def txn_value(value: TxnValue, empty_status: int) -> bytes:
    """``empty_status``: the status whose partitions are written null (Empty).  Version 1
    for a transaction version 2 client, else version 0 (module doc)."""
    if value.client_transaction_version >= 2:
        return _flexible_value(value, empty_status)
    parts = [int16(VALUE_VERSION), int64(value.producer_id), int16(value.producer_epoch),
             int32(value.transaction_timeout_ms), struct.pack(">b", value.status)]
    if value.status == empty_status:
        parts.append(int32(-1))
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(value.partitions):
            by_topic.setdefault(topic, []).append(partition)
        parts.append(int32(len(by_topic)))
        for topic, indexes in by_topic.items():
            parts += [string(topic), int32(len(indexes)), *(int32(i) for i in indexes)]
    parts += [int64(value.last_update_timestamp_ms), int64(value.start_timestamp_ms)]
    return b"".join(parts)


def _flexible_value(value: TxnValue, empty_status: int) -> bytes:
    parts = [int16(FLEXIBLE_VALUE_VERSION), int64(value.producer_id),
             int16(value.producer_epoch), int32(value.transaction_timeout_ms),
             struct.pack(">b", value.status)]
    if value.status == empty_status:
        parts.append(uvarint(0))
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(value.partitions):
            by_topic.setdefault(topic, []).append(partition)
        parts.append(uvarint(len(by_topic) + 1))
        for topic, indexes in by_topic.items():
            encoded = topic.encode()
            parts += [uvarint(len(encoded) + 1), encoded, uvarint(len(indexes) + 1),
                      *(int32(i) for i in indexes), uvarint(0)]
    parts += [int64(value.last_update_timestamp_ms), int64(value.start_timestamp_ms)]
    tags = [(tag, data) for tag, data, default in (
        (_TAG_PREVIOUS_PRODUCER_ID, int64(value.previous_producer_id),
         value.previous_producer_id == -1),
        (_TAG_NEXT_PRODUCER_ID, int64(value.next_producer_id), value.next_producer_id == -1),
        (_TAG_CLIENT_TRANSACTION_VERSION, int16(value.client_transaction_version),
         value.client_transaction_version == 0)) if not default]
    parts.append(uvarint(len(tags)))
    for tag, data in tags:
        parts += [uvarint(tag), uvarint(len(data)), data]
    return b"".join(parts)


def _uvarint(reader: Reader) -> int:
    value = shift = 0
    while shift <= 28:
        byte = reader._take(1)[0]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value
        shift += 7
    raise RecordFormatError("unsigned varint longer than 5 bytes")


def _compact_length(reader: Reader) -> int:
    """A compact string or array's length, -1 for null; bounded by the bytes left."""
    length = _uvarint(reader) - 1
    if length > len(reader.data) - reader.pos:
        raise RecordFormatError(f"bad compact length {length}")
    return length


def _int8(reader: Reader) -> int:
    # Reader has no int8: no other hand-read format has one.
    return struct.unpack(">b", reader._take(1))[0]


def decode_key(data: bytes) -> str:
    reader = Reader(data, RecordFormatError)
    version = reader.int16()
    if version != KEY_VERSION:
        raise RecordFormatError(f"unknown transaction log key version {version}")
    return reader.string()


def decode_value(data: bytes) -> TxnValue:
    reader = Reader(data, RecordFormatError)
    version = reader.int16()
    if version == FLEXIBLE_VALUE_VERSION:
        return _decode_flexible(reader)
    if version != VALUE_VERSION:
        raise RecordFormatError(f"unknown transaction log value version {version}")
    producer_id, epoch, timeout = reader.int64(), reader.int16(), reader.int32()
    status = _int8(reader)
    partitions = set()
    topics = reader.int32()
    if topics < -1 or topics > len(reader.data) - reader.pos:
        raise RecordFormatError(f"bad array length {topics}")
    for _ in range(max(topics, 0)):
        topic = reader.string()
        partitions.update((topic, reader.int32()) for _ in range(reader.count()))
    return TxnValue(producer_id, epoch, timeout, status, frozenset(partitions),
                    reader.int64(), reader.int64())


def _decode_flexible(reader: Reader) -> TxnValue:
    producer_id, epoch, timeout = reader.int64(), reader.int16(), reader.int32()
    status = _int8(reader)
    partitions = set()
    for _ in range(max(_compact_length(reader), 0)):
        length = _compact_length(reader)
        if length < 0:
            raise RecordFormatError("null topic name")
        topic = reader._take(length).decode()
        partitions.update((topic, reader.int32()) for _ in range(max(_compact_length(reader), 0)))
        _skip_tags(reader)
    last_update, start = reader.int64(), reader.int64()
    tagged = {}
    for _ in range(_uvarint(reader)):
        tag, size = _uvarint(reader), _uvarint(reader)
        tagged[tag] = reader._take(size)
    previous = _tagged_int(tagged, _TAG_PREVIOUS_PRODUCER_ID, 8, -1)
    next_id = _tagged_int(tagged, _TAG_NEXT_PRODUCER_ID, 8, -1)
    client_version = _tagged_int(tagged, _TAG_CLIENT_TRANSACTION_VERSION, 2, 0)
    return TxnValue(producer_id, epoch, timeout, status, frozenset(partitions), last_update,
                    start, previous, next_id, client_version)


def _skip_tags(reader: Reader) -> None:
    for _ in range(_uvarint(reader)):
        _uvarint(reader)
        reader._take(_uvarint(reader))


def _tagged_int(tagged: dict[int, bytes], tag: int, size: int, default: int) -> int:
    data = tagged.get(tag)
    if data is None:
        return default
    if len(data) != size:
        raise RecordFormatError(f"tagged field {tag} has {len(data)} bytes, not {size}")
    return int.from_bytes(data, "big", signed=True)

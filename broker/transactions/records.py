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
The flexible version 1 of newer Kafka (its tagged previous/next producer ids) is not
read: only Raftwood writes this topic.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from protocol.primitives import Reader, int16, int32, int64, string

KEY_VERSION = 0
VALUE_VERSION = 0


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


def txn_key(transactional_id: str) -> bytes:
    return int16(KEY_VERSION) + string(transactional_id)


def txn_value(value: TxnValue, empty_status: int) -> bytes:
    """``empty_status``: the status whose partitions are written null (Empty)."""
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

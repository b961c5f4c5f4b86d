"""Records of the ``__consumer_offsets`` topic, in Kafka's own formats (pure).

The same keys and values as Kafka's ``GroupMetadataManager`` (the ``OffsetCommitKey``,
``OffsetCommitValue``, ``GroupMetadataKey`` and ``GroupMetadataValue`` schemas of
``group-coordinator/src/main/resources/common/message``), so the topic reads the same as
Kafka's and Kafka's tools could decode it:

    key   int16 version; 0/1 → offset commit: group string, topic string, partition int32
                         2   → group metadata: group string
    offset commit value  int16 version
                         v0, v2: offset int64, metadata string, commit_timestamp int64
                         v1:     offset, metadata, commit_timestamp, expire_timestamp int64
                         v3:     offset int64, leader_epoch int32, metadata, commit_timestamp
    group metadata value int16 version (0-3): protocol_type string, generation int32,
                         protocol string?, leader string?, [v2+] current_state_timestamp
                         int64, members [member_id, [v3+] group_instance_id string?,
                         client_id, client_host, [v1+] rebalance_timeout int32,
                         session_timeout int32, subscription bytes, assignment bytes]

Written: key v1 / value v3 for offsets (value v1 when the commit carries its own
retention), key v2 / value v3 for groups.  A null value (tombstone) deletes the key.
The flexible v4 values of newer Kafka are not read: only Raftwood writes this topic.
Strings are int16-length UTF-8 (-1 = null); bytes are int32-length.
"""
from __future__ import annotations

from dataclasses import dataclass

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from protocol.primitives import Reader, bytes_, int16, int32, int64, string

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3


class RecordFormatError(ValueError):
    """A key or value this module cannot read (unknown version, truncated bytes)."""


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


@dataclass(frozen=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int = -1


@dataclass(frozen=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupValue:
    protocol_type: str
    generation_id: int
    protocol_name: str | None
    leader_id: str | None
    state_timestamp_ms: int
    members: tuple[MemberValue, ...]


# -- writing ---------------------------------------------------------------------------------

def offset_key(group: str, topic: str, partition: int) -> bytes:
    return int16(OFFSET_KEY_VERSION) + string(group) + string(topic) + int32(partition)


def group_key(group: str) -> bytes:
    return int16(GROUP_KEY_VERSION) + string(group)


def offset_value(value: OffsetValue) -> bytes:
    if value.expire_timestamp_ms >= 0:
        return (int16(OFFSET_VALUE_VERSION_WITH_EXPIRY) + int64(value.offset)
                + string(value.metadata) + int64(value.commit_timestamp_ms)
                + int64(value.expire_timestamp_ms))
    return (int16(OFFSET_VALUE_VERSION) + int64(value.offset)
            + int32(value.leader_epoch) + string(value.metadata)
            + int64(value.commit_timestamp_ms))


def group_value(value: GroupValue) -> bytes:
    parts = [int16(GROUP_VALUE_VERSION), string(value.protocol_type),
             int32(value.generation_id), string(value.protocol_name),
             string(value.leader_id), int64(value.state_timestamp_ms),
             int32(len(value.members))]
    for m in value.members:
        parts += [string(m.member_id), string(m.group_instance_id), string(m.client_id),
                  string(m.client_host), int32(m.rebalance_timeout_ms),
                  int32(m.session_timeout_ms), bytes_(m.subscription),
                  bytes_(m.assignment)]
    return b"".join(parts)


def build_batch(records: list[tuple[bytes, bytes | None]], timestamp_ms: int,
                producer_id: int = -1, producer_epoch: int = -1) -> bytes:
    """One uncompressed RecordBatch v2 (baseOffset 0, as a producer sends it); with a
    producer id, a transactional batch of that producer (a TxnOffsetCommit's offsets,
    which its transaction's marker commits or aborts).  No sequence: the log checks a
    coordinator's batch by its producer epoch alone."""
    size = sum(len(k) + len(v or b"") + 32 for k, v in records) + 128
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0,
                                        is_transactional=producer_id >= 0,
                                        producer_id=producer_id, producer_epoch=producer_epoch,
                                        base_sequence=-1, batch_size=size)
    for offset_delta, (key, value) in enumerate(records):
        if builder.append(offset_delta, timestamp=timestamp_ms, key=key, value=value,
                          headers=[]) is None:
            raise RecordFormatError(f"record {offset_delta} does not fit the batch")
    return bytes(builder.build())


# -- reading ---------------------------------------------------------------------------------

def decode_key(data: bytes) -> OffsetKey | GroupKey:
    reader = Reader(data, RecordFormatError)
    version = reader.int16()
    if version in (0, 1):
        return OffsetKey(reader.nullable_string() or "", reader.nullable_string() or "",
                         reader.int32())
    if version == 2:
        return GroupKey(reader.nullable_string() or "")
    raise RecordFormatError(f"unknown key version {version}")


def decode_offset_value(data: bytes) -> OffsetValue:
    reader = Reader(data, RecordFormatError)
    version = reader.int16()
    if version in (0, 2):
        return OffsetValue(reader.int64(), -1, reader.nullable_string() or "", reader.int64())
    if version == 1:
        return OffsetValue(reader.int64(), -1, reader.nullable_string() or "", reader.int64(),
                           reader.int64())
    if version == 3:
        return OffsetValue(reader.int64(), reader.int32(), reader.nullable_string() or "",
                           reader.int64())
    raise RecordFormatError(f"unknown offset commit value version {version}")


def decode_group_value(data: bytes) -> GroupValue:
    reader = Reader(data, RecordFormatError)
    version = reader.int16()
    if not 0 <= version <= 3:
        raise RecordFormatError(f"unknown group metadata value version {version}")
    protocol_type = reader.nullable_string() or ""
    generation = reader.int32()
    protocol = reader.nullable_string()
    leader = reader.nullable_string()
    state_timestamp = reader.int64() if version >= 2 else -1
    members = []
    for _ in range(reader.int32()):
        member_id = reader.nullable_string() or ""
        instance_id = reader.nullable_string() if version >= 3 else None
        client_id = reader.nullable_string() or ""
        client_host = reader.nullable_string() or ""
        session_timeout = reader.int32()
        rebalance_timeout = session_timeout
        if version >= 1:
            rebalance_timeout, session_timeout = session_timeout, reader.int32()
        members.append(MemberValue(member_id, instance_id, client_id, client_host,
                                   rebalance_timeout, session_timeout, reader.bytes_(),
                                   reader.bytes_()))
    return GroupValue(protocol_type, generation, protocol, leader, state_timestamp,
                      tuple(members))


def iter_records(data: bytes):
    """(log offset, key bytes, value bytes or None) of every record in ``data`` (whole
    data batches, as a log read returns them; control batches are read by their header,
    see ``protocol.control``)."""
    for batch in MemoryRecords(bytes(data)):
        for record in batch:
            yield record.offset, record.key, record.value

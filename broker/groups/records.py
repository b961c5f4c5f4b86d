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

KIP-848 consumer groups (``group.protocol=consumer``) use Kafka's own records too: the
key's version is the record type, its fields plain strings; every value is version 0,
flexible (compact strings and arrays, a tagged-field buffer after each struct, unknown
tags skipped):

    3 ConsumerGroupMetadata         key group; value epoch int32
    5 ConsumerGroupMemberMetadata   key group, member; value instance_id string?,
                                    rack_id string?, client_id, client_host,
                                    subscribed_topic_names [string],
                                    subscribed_topic_regex string?,
                                    rebalance_timeout_ms int32, server_assignor string?
    6 ConsumerGroupTargetAssignmentMetadata   key group; value assignment_epoch int32
    7 ConsumerGroupTargetAssignmentMember     key group, member;
                                    value topic_partitions [topic_id uuid, [int32]]
    8 ConsumerGroupCurrentMemberAssignment    key group, member; value member_epoch,
                                    previous_member_epoch int32, state int8,
                                    assigned_partitions, partitions_pending_revocation
                                    (both [topic_id uuid, partitions [int32]])

Type 4 (ConsumerGroupPartitionMetadata, which Kafka 4.1 replaced by a hash) is neither
written nor read: a loading coordinator takes the subscribed topics' metadata from its
own image.  Topic ids are the image's UUID strings in memory, 16 bytes on disk.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from protocol import consumer_group_messages as flex
from protocol.primitives import Reader, bytes_, int16, int32, int64, string

# The batch a coordinator writes and the records a loader reads: the core's.
from ..coordinator.batches import build_batch, iter_records  # noqa: F401

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3
CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
_CONSUMER_GROUP_KEYS = {CONSUMER_GROUP_METADATA, CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA}
_CONSUMER_MEMBER_KEYS = {CONSUMER_GROUP_MEMBER_METADATA, CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
                         CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT}


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


@dataclass(frozen=True)
class ConsumerGroupKey:
    """A KIP-848 record's key: ``record_type`` 3-8, ``member_id`` for types 5, 7, 8."""

    record_type: int
    group: str
    member_id: str | None = None


@dataclass(frozen=True)
class ConsumerMemberValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    rebalance_timeout_ms: int
    server_assignor: str | None
    subscribed_topic_regex: str | None = None


@dataclass(frozen=True)
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: dict
    pending_revocation: dict


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


def consumer_group_key(record_type: int, group: str, member_id: str | None = None) -> bytes:
    key = int16(record_type) + string(group)
    return key + string(member_id) if record_type in _CONSUMER_MEMBER_KEYS else key


def _flex_value(body: bytes) -> bytes:
    return int16(0) + body + flex.tagged_fields()


def epoch_value(epoch: int) -> bytes:
    """The value of types 3 (group epoch) and 6 (assignment epoch)."""
    return _flex_value(int32(epoch))


def consumer_member_value(value: ConsumerMemberValue) -> bytes:
    return _flex_value(
        flex.compact_string(value.instance_id) + flex.compact_string(value.rack_id)
        + flex.compact_string(value.client_id) + flex.compact_string(value.client_host)
        + flex.compact_array(value.subscribed_topic_names, flex.compact_string)
        + flex.compact_string(value.subscribed_topic_regex) + int32(value.rebalance_timeout_ms)
        + flex.compact_string(value.server_assignor))


def _topic_partitions(assignment: dict) -> bytes:
    """topic id (UUID string) -> partitions, as [topic_id uuid, partitions [int32]]."""
    return flex.compact_array(sorted(assignment.items()), lambda item: (
        uuid.UUID(item[0]).bytes + flex.compact_array(sorted(item[1]), int32)
        + flex.tagged_fields()))


def target_member_value(assignment: dict) -> bytes:
    return _flex_value(_topic_partitions(assignment))


def current_assignment_value(value: CurrentAssignmentValue) -> bytes:
    return _flex_value(int32(value.member_epoch) + int32(value.previous_member_epoch)
                       + flex.int8(value.state) + _topic_partitions(value.assigned)
                       + _topic_partitions(value.pending_revocation))


# -- reading ---------------------------------------------------------------------------------

def decode_key(data: bytes) -> OffsetKey | GroupKey | ConsumerGroupKey:
    reader = Reader(data, RecordFormatError)
    version = reader.int16()
    if version in (0, 1):
        return OffsetKey(reader.nullable_string() or "", reader.nullable_string() or "",
                         reader.int32())
    if version == 2:
        return GroupKey(reader.nullable_string() or "")
    if version in _CONSUMER_GROUP_KEYS:
        return ConsumerGroupKey(version, reader.nullable_string() or "")
    if version in _CONSUMER_MEMBER_KEYS:
        return ConsumerGroupKey(version, reader.nullable_string() or "",
                                reader.nullable_string() or "")
    raise RecordFormatError(f"unknown key version {version}")


def _flex_reader(data: bytes) -> flex.FlexReader:
    reader = flex.FlexReader(data)
    version = reader.int16()
    if version != 0:
        raise RecordFormatError(f"unknown consumer group value version {version}")
    return reader


def _flex_read(read):
    """``read(reader)``'s result, with the reader's errors as RecordFormatError."""
    def decode(data: bytes):
        try:
            return read(_flex_reader(data))
        except flex.FlexDecodeError as exc:
            raise RecordFormatError(str(exc)) from None
    return decode


def _read_topic_partitions(reader: flex.FlexReader) -> dict[str, set[int]]:
    def one():
        topic_id = str(reader.uuid())
        partitions = set(reader.array(reader.int32) or [])
        reader.tagged_fields()
        return topic_id, partitions
    return {topic_id: parts for topic_id, parts in reader.array(one) or [] if parts}


decode_epoch_value = _flex_read(lambda r: r.int32())
decode_target_member_value = _flex_read(_read_topic_partitions)


@_flex_read
def decode_consumer_member_value(reader: flex.FlexReader) -> ConsumerMemberValue:
    instance_id, rack_id = reader.nullable_string(), reader.nullable_string()
    client_id, client_host = reader.string(), reader.string()
    topics = tuple(reader.array(reader.string) or ())
    regex = reader.nullable_string()
    return ConsumerMemberValue(instance_id, rack_id, client_id, client_host, topics,
                               reader.int32(), reader.nullable_string(), regex)


@_flex_read
def decode_current_assignment_value(reader: flex.FlexReader) -> CurrentAssignmentValue:
    return CurrentAssignmentValue(reader.int32(), reader.int32(), reader.int8(),
                                  _read_topic_partitions(reader),
                                  _read_topic_partitions(reader))


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

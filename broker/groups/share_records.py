"""Share-group records of ``__consumer_offsets``, in Kafka's own formats (pure).

Kafka's group coordinator keeps a share group with these record types (the key's version
is the type; key fields are plain strings; every value is version 0, flexible, like the
KIP-848 records in records.py):

    10 ShareGroupMemberMetadata          key group, member; value rack_id string?,
                                         client_id, client_host,
                                         subscribed_topic_names [string]
    11 ShareGroupMetadata                key group; value epoch int32, metadata_hash int64
    12 ShareGroupTargetAssignmentMetadata  key group; value assignment_epoch int32
    13 ShareGroupTargetAssignmentMember  key group, member;
                                         value topic_partitions [topic_id uuid, [int32]]
    14 ShareGroupCurrentMemberAssignment key group, member; value member_epoch,
                                         previous_member_epoch int32, state int8,
                                         assigned_partitions [topic_id uuid, [int32]]

Type 9 (ShareGroupPartitionMetadata) and 15 (ShareGroupStatePartitionMetadata) are
neither written nor read: a loading coordinator takes topic metadata from its image, and
the share-partition state lives with the partition leaders.  The metadata hash is
written as 0 for the same reason.  A tombstone of type 11 deletes the group.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from protocol import consumer_group_messages as flex
from protocol.primitives import Reader, int16, int32, int64, string

from . import records
from .records import RecordFormatError
from .share_group import ShareGroupState, ShareMember

SHARE_GROUP_MEMBER_METADATA = 10
SHARE_GROUP_METADATA = 11
SHARE_GROUP_TARGET_ASSIGNMENT_METADATA = 12
SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER = 13
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT = 14
GROUP_KEYS = frozenset({SHARE_GROUP_METADATA, SHARE_GROUP_TARGET_ASSIGNMENT_METADATA})
MEMBER_KEYS = frozenset({SHARE_GROUP_MEMBER_METADATA, SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER,
                         SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT})
MEMBER_RECORD_TYPES = tuple(sorted(MEMBER_KEYS))
STABLE_STATE = 0  # Kafka's MemberState.STABLE: the only state a share member has


@dataclass(frozen=True)
class ShareGroupKey:
    record_type: int
    group: str
    member_id: str | None = None


@dataclass(frozen=True)
class ShareMemberValue:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True)
class ShareCurrentValue:
    member_epoch: int
    previous_member_epoch: int
    assigned: dict


def is_share_key(data: bytes) -> bool:
    return len(data) >= 2 and int.from_bytes(data[:2], "big", signed=True) in \
        GROUP_KEYS | MEMBER_KEYS


# -- writing ---------------------------------------------------------------------------------

def key(record_type: int, group: str, member_id: str | None = None) -> bytes:
    data = int16(record_type) + string(group)
    return data + string(member_id) if record_type in MEMBER_KEYS else data


def group_value(epoch: int) -> bytes:
    return int16(0) + int32(epoch) + int64(0) + flex.tagged_fields()


def member_value(value: ShareMemberValue) -> bytes:
    return (int16(0) + flex.compact_string(value.rack_id)
            + flex.compact_string(value.client_id) + flex.compact_string(value.client_host)
            + flex.compact_array(value.subscribed_topic_names, flex.compact_string)
            + flex.tagged_fields())


def current_value(value: ShareCurrentValue) -> bytes:
    target = records.target_member_value(value.assigned)  # int16 0, partitions, tags
    return (int16(0) + int32(value.member_epoch) + int32(value.previous_member_epoch)
            + flex.int8(STABLE_STATE) + target[2:])


# -- reading ---------------------------------------------------------------------------------

def decode_key(data: bytes) -> ShareGroupKey:
    reader = Reader(data, RecordFormatError)
    record_type = reader.int16()
    if record_type not in GROUP_KEYS | MEMBER_KEYS:
        raise RecordFormatError(f"not a share group key: type {record_type}")
    group = reader.nullable_string() or ""
    member_id = (reader.nullable_string() or "") if record_type in MEMBER_KEYS else None
    return ShareGroupKey(record_type, group, member_id)


def _read(read):
    def decode(data: bytes):
        reader = flex.FlexReader(data)
        try:
            version = reader.int16()
            if version != 0:
                raise RecordFormatError(f"unknown share group value version {version}")
            return read(reader)
        except flex.FlexDecodeError as exc:
            raise RecordFormatError(str(exc)) from None
    return decode


decode_epoch = _read(lambda r: r.int32())


@_read
def decode_member_value(reader: flex.FlexReader) -> ShareMemberValue:
    rack_id = reader.nullable_string()
    client_id, client_host = reader.string(), reader.string()
    return ShareMemberValue(rack_id, client_id, client_host,
                            tuple(reader.array(reader.string) or ()))


def decode_target_value(data: bytes) -> dict[str, set[int]]:
    return records.decode_target_member_value(data)


@_read
def decode_current_value(reader: flex.FlexReader) -> ShareCurrentValue:
    member_epoch, previous = reader.int32(), reader.int32()
    reader.int8()
    return ShareCurrentValue(member_epoch, previous, records._read_topic_partitions(reader))


@dataclass
class ShareRecords:
    """What the log says of one share group, by record type (the latest of each key)."""

    epoch: int | None = None
    assignment_epoch: int = 0
    members: dict = field(default_factory=dict)   # member id -> ShareMemberValue
    targets: dict = field(default_factory=dict)   # member id -> topic id -> partitions
    current: dict = field(default_factory=dict)   # member id -> ShareCurrentValue

    def apply(self, record_type: int, member_id: str | None, value: bytes | None) -> None:
        """One record of this group (not the type-11 tombstone: the loader drops the
        group for that)."""
        if record_type == SHARE_GROUP_METADATA:
            self.epoch = decode_epoch(value)
            return
        if record_type == SHARE_GROUP_TARGET_ASSIGNMENT_METADATA:
            self.assignment_epoch = 0 if value is None else decode_epoch(value)
            return
        decode, table = {
            SHARE_GROUP_MEMBER_METADATA: (decode_member_value, self.members),
            SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER: (decode_target_value, self.targets),
            SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT: (decode_current_value, self.current),
        }[record_type]
        if value is None:
            table.pop(member_id, None)
        else:
            table[member_id] = decode(value)

    def restore(self, group) -> None:
        """The loaded ``group`` (a GroupMetadata): its members with their epochs and
        assignments, the target; ``subscribed_metadata`` is left for the coordinator to
        take from its image."""
        state = ShareGroupState(group_epoch=self.epoch or 0,
                                assignment_epoch=self.assignment_epoch)
        for member_id, meta in self.members.items():
            member = ShareMember(member_id, meta.client_id, meta.client_host, meta.rack_id,
                                 meta.subscribed_topic_names)
            current = self.current.get(member_id)
            if current is not None:
                member.member_epoch = current.member_epoch
                member.previous_member_epoch = current.previous_member_epoch
                member.assigned = {t: set(p) for t, p in current.assigned.items() if p}
            state.members[member_id] = member
            state.target[member_id] = {t: set(p) for t, p in
                                       self.targets.get(member_id, {}).items() if p}
        group.share = state
        group.protocol_type = "share"

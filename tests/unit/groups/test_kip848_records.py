"""KIP-848 records of ``__consumer_offsets`` (types 3, 5-8): Kafka's key layout (the
record type as the key version), flexible version-0 values, and the loader's replay."""
from __future__ import annotations

import struct
import uuid

import pytest

from broker.groups import records
from broker.groups.manager import _Loader

TOPIC = str(uuid.UUID(int=0x1234))


def test_keys_carry_the_record_type_and_member_id():
    assert records.consumer_group_key(3, "g") == struct.pack(">hh", 3, 1) + b"g"
    key = records.consumer_group_key(8, "g", "m1")
    assert key == struct.pack(">hh", 8, 1) + b"g" + struct.pack(">h", 2) + b"m1"
    assert records.decode_key(key) == records.ConsumerGroupKey(8, "g", "m1")
    assert records.decode_key(records.consumer_group_key(6, "g")) == \
        records.ConsumerGroupKey(6, "g")


def test_epoch_value_is_version_0_flexible():
    assert records.epoch_value(7) == b"\x00\x00" + struct.pack(">i", 7) + b"\x00"
    assert records.decode_epoch_value(records.epoch_value(7)) == 7


def test_member_and_assignment_values_round_trip():
    member = records.ConsumerMemberValue(None, "rack-1", "client", "/127.0.0.1", ("a", "b"),
                                         300_000, "uniform")
    assert records.decode_consumer_member_value(records.consumer_member_value(member)) == member
    regex = records.ConsumerMemberValue(None, None, "c", "/h", (), 1000, None, "^orders-.*")
    assert records.decode_consumer_member_value(records.consumer_member_value(regex)) == regex
    target = {TOPIC: {0, 2}}
    assert records.decode_target_member_value(records.target_member_value(target)) == target
    current = records.CurrentAssignmentValue(4, 3, 1, {TOPIC: {0}}, {TOPIC: {5}})
    assert records.decode_current_assignment_value(
        records.current_assignment_value(current)) == current


def test_topic_partitions_are_16_byte_ids_and_compact_arrays():
    value = records.target_member_value({TOPIC: {1}})
    assert value == (b"\x00\x00" + b"\x02" + uuid.UUID(TOPIC).bytes + b"\x02"
                     + struct.pack(">i", 1) + b"\x00" + b"\x00")


def test_unknown_value_versions_and_truncations_are_format_errors():
    with pytest.raises(records.RecordFormatError):
        records.decode_epoch_value(b"\x00\x01" + struct.pack(">i", 1) + b"\x00")
    with pytest.raises(records.RecordFormatError):
        records.decode_current_assignment_value(records.current_assignment_value(
            records.CurrentAssignmentValue(1, 0, 0, {TOPIC: {0}}, {}))[:-4])


def replay(entries):
    loader = _Loader(0)
    batch = records.build_batch(entries, 1_700_000_000_000)
    loader.apply(batch, 0)
    return {g.group_id: g for g in loader.groups()}


def member_records(member_id, epoch, assigned):
    return [
        (records.consumer_group_key(5, "g", member_id), records.consumer_member_value(
            records.ConsumerMemberValue(None, None, "c", "/h", ("t",), 1000, None))),
        (records.consumer_group_key(7, "g", member_id), records.target_member_value(assigned)),
        (records.consumer_group_key(8, "g", member_id), records.current_assignment_value(
            records.CurrentAssignmentValue(epoch, epoch - 1, 0, assigned, {}))),
    ]


def test_the_loader_rebuilds_a_group_and_applies_member_tombstones():
    entries = [(records.consumer_group_key(3, "g"), records.epoch_value(2))]
    entries += member_records("m1", 2, {TOPIC: {0, 1}})
    entries += member_records("m2", 2, {TOPIC: {2}})
    entries += [(records.consumer_group_key(6, "g"), records.epoch_value(2))]
    entries += [(records.consumer_group_key(t, "g", "m2"), None) for t in (8, 7, 5)]
    entries += [(records.consumer_group_key(3, "g"), records.epoch_value(3))]
    group = replay(entries)["g"]
    consumer = group.consumer
    assert (group.group_type, group.protocol_type) == ("consumer", "consumer")
    assert (consumer.group_epoch, consumer.assignment_epoch) == (3, 2)
    assert list(consumer.members) == ["m1"]
    m1 = consumer.members["m1"]
    assert (m1.member_epoch, m1.previous_member_epoch, m1.assigned) == (2, 1, {TOPIC: {0, 1}})
    assert consumer.target == {"m1": {TOPIC: {0, 1}}}


def test_a_tombstone_of_the_group_record_deletes_the_group():
    entries = [(records.consumer_group_key(3, "g"), records.epoch_value(2)),
               (records.consumer_group_key(6, "g"), None),
               (records.consumer_group_key(3, "g"), None)]
    assert replay(entries) == {}

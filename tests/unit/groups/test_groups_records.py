"""__consumer_offsets records in Kafka's formats, and the consumer protocol readers."""
from __future__ import annotations

import struct

import pytest

from broker.groups import consumer_protocol as cp
from broker.groups import records as r


def test_offset_key_is_kafkas_version_1_layout():
    assert r.offset_key("g", "t", 3) == (
        b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03")
    assert r.decode_key(r.offset_key("grp", "orders", 7)) == r.OffsetKey("grp", "orders", 7)


def test_version_0_offset_keys_still_read():
    key = b"\x00\x00" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x01"
    assert r.decode_key(key) == r.OffsetKey("g", "t", 1)


def test_group_key_is_version_2():
    assert r.group_key("g") == b"\x00\x02\x00\x01g"
    assert r.decode_key(r.group_key("my-group")) == r.GroupKey("my-group")


def test_offset_value_v3_round_trips_with_its_leader_epoch():
    value = r.OffsetValue(offset=42, leader_epoch=5, metadata="meta", commit_timestamp_ms=1000)
    data = r.offset_value(value)
    assert data[:2] == b"\x00\x03"
    assert data == struct.pack(">hqi", 3, 42, 5) + b"\x00\x04meta" + struct.pack(">q", 1000)
    assert r.decode_offset_value(data) == value


def test_an_offset_value_with_its_own_expiry_is_version_1():
    value = r.OffsetValue(42, -1, "", 1000, expire_timestamp_ms=5000)
    data = r.offset_value(value)
    assert data[:2] == b"\x00\x01"
    assert r.decode_offset_value(data) == value


def test_version_0_and_2_offset_values_read():
    body = struct.pack(">q", 9) + b"\x00\x00" + struct.pack(">q", 77)
    for version in (0, 2):
        assert r.decode_offset_value(struct.pack(">h", version) + body) == \
            r.OffsetValue(9, -1, "", 77)


def test_group_value_v3_round_trips():
    value = r.GroupValue("consumer", 4, "range", "m1", 1234, (
        r.MemberValue("m1", None, "c1", "/127.0.0.1", 30000, 10000, b"sub1", b"asg1"),
        r.MemberValue("m2", "instance-2", "c2", "/127.0.0.2", 30000, 10000, b"sub2", b""),
    ))
    data = r.group_value(value)
    assert data[:2] == b"\x00\x03"
    assert r.decode_group_value(data) == value


def test_an_empty_group_value_round_trips_with_null_protocol_and_leader():
    value = r.GroupValue("consumer", 7, None, None, 99, ())
    assert r.decode_group_value(r.group_value(value)) == value


def test_a_version_0_group_value_reads_with_the_session_timeout_as_rebalance_timeout():
    member = (b"\x00\x02m1" + b"\x00\x02c1" + b"\x00\x04host" + struct.pack(">i", 6000)
              + struct.pack(">i", 3) + b"sub" + struct.pack(">i", 3) + b"asg")
    data = (struct.pack(">h", 0) + b"\x00\x08consumer" + struct.pack(">i", 2) + b"\x00\x05range"
            + b"\x00\x02m1" + struct.pack(">i", 1) + member)
    value = r.decode_group_value(data)
    assert (value.generation_id, value.protocol_name, value.leader_id) == (2, "range", "m1")
    assert value.members == (r.MemberValue("m1", None, "c1", "host", 6000, 6000, b"sub", b"asg"),)


@pytest.mark.parametrize("decode,data", [
    (r.decode_key, b"\x00\x09\x00\x01g"),
    (r.decode_offset_value, b"\x00\x04" + b"\x00" * 20),
    (r.decode_group_value, b"\x00\x05"),
    (r.decode_offset_value, b"\x00\x03\x00"),
    (r.decode_key, b"\x00\x01\x00\x05ab"),
])
def test_unknown_versions_and_truncated_bytes_raise_record_format_error(decode, data):
    with pytest.raises(r.RecordFormatError):
        decode(data)


def test_a_batch_carries_records_and_tombstones_in_order():
    batch = r.build_batch([(r.group_key("g"), b"value"), (r.offset_key("g", "t", 0), None)],
                          timestamp_ms=1_700_000_000_000)
    assert list(r.iter_records(batch)) == [
        (0, r.group_key("g"), b"value"), (1, r.offset_key("g", "t", 0), None)]


# -- the consumer protocol -----------------------------------------------------------------------

def test_subscription_topics_are_read_from_any_version():
    assert cp.subscribed_topics(cp.encode_subscription(["a", "b"])) == {"a", "b"}
    # A v1+ subscription has more fields after the topics; they are ignored.
    v3 = cp.encode_subscription(["x"], version=3) + b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff"
    assert cp.subscribed_topics(v3) == {"x"}


def test_assignment_partitions_are_read_and_sorted():
    data = cp.encode_assignment({"t": [3, 1], "u": [0]})
    assert cp.assigned_partitions(data) == {"t": [1, 3], "u": [0]}
    assert cp.assigned_partitions(b"") == {}


@pytest.mark.parametrize("garbage", [
    b"\x00", b"\x00\x00\x7f\xff\xff\xff", b"\x00\x00\x00\x00\x00\x01\x00\x09ab"])
def test_bytes_that_do_not_parse_give_none_never_an_exception(garbage):
    assert cp.subscribed_topics(garbage) is None
    assert cp.assigned_partitions(garbage) is None


def test_aiokafkas_own_subscription_and_assignment_bytes_parse():
    from aiokafka.coordinator.protocol import (
        ConsumerProtocolMemberAssignment,
        ConsumerProtocolMemberMetadata,
    )
    metadata = ConsumerProtocolMemberMetadata(0, ["orders", "audit"], b"").encode()
    assert cp.subscribed_topics(bytes(metadata)) == {"orders", "audit"}
    assignment = ConsumerProtocolMemberAssignment(0, [("orders", [0, 2])], b"").encode()
    assert cp.assigned_partitions(bytes(assignment)) == {"orders": [0, 2]}

"""Transactional offsets in a group and in the loader (pure): pending per producer until
the marker, Kafka's newer-record rule on commit, tombstones, and a log replayed batch by
batch.  Control batches are built here by hand from the v2 layout, independently of the
broker's own marker builder.
"""
from __future__ import annotations

import struct

import crc32c

from broker.groups import records
from broker.groups.manager import _Loader
from broker.groups.state import CommittedOffset, GroupMetadata, GroupState
from protocol.records import assign_offset_and_epoch, parse_header

TP = ("t", 0)
TP1 = ("t", 1)


def committed(offset: int, record_offset: int) -> CommittedOffset:
    return CommittedOffset(offset, record_offset=record_offset)


# -- GroupMetadata ---------------------------------------------------------------------------

def test_a_committed_transaction_replaces_only_offsets_written_before_its_own():
    group = GroupMetadata("g", 0)
    group.offsets[TP] = committed(5, record_offset=10)   # written after the txn's record
    group.offsets[TP1] = committed(5, record_offset=2)   # written before it
    group.prepare_txn_offsets(7, {TP: committed(9, record_offset=4),
                                  TP1: committed(9, record_offset=4)})
    assert group.has_pending_offsets(TP) and group.has_offsets()
    assert group.complete_pending_txn_offsets(7, commit=True) == 2
    assert (group.offsets[TP].offset, group.offsets[TP1].offset) == (5, 9)
    assert not group.pending_txn_offsets and not group.has_pending_offsets(TP)


def test_an_aborted_transaction_leaves_the_committed_offsets_and_other_producers_alone():
    group = GroupMetadata("g", 0)
    group.offsets[TP] = committed(5, record_offset=1)
    group.prepare_txn_offsets(7, {TP: committed(9, record_offset=4)})
    group.prepare_txn_offsets(8, {TP1: committed(3, record_offset=6)})
    assert group.complete_pending_txn_offsets(7, commit=False) == 1
    assert group.offsets[TP].offset == 5
    assert list(group.pending_txn_offsets) == [8] and group.has_pending_offsets(TP1)
    assert group.complete_pending_txn_offsets(99, commit=True) == 0  # nothing pending: no-op


def test_a_failed_write_forgets_only_its_own_pending_offset():
    group = GroupMetadata("g", 0)
    first, second = committed(1, record_offset=3), committed(2, record_offset=4)
    group.prepare_txn_offsets(7, {TP: first})
    group.prepare_txn_offsets(7, {TP: second})  # a later commit in the same transaction
    group.fail_pending_txn_offset(7, TP, first)
    assert group.pending_txn_offsets == {7: {TP: second}}
    group.fail_pending_txn_offset(7, TP, second)
    assert group.pending_txn_offsets == {}


def test_tombstones_drop_committed_and_pending_offsets_of_their_partitions():
    group = GroupMetadata("g", 0)
    group.offsets[TP] = committed(5, record_offset=1)
    group.prepare_txn_offsets(7, {TP: committed(9, record_offset=4)})
    group.prepare_txn_offsets(8, {TP: committed(9, record_offset=5),
                                  TP1: committed(9, record_offset=5)})
    group.remove_offsets([TP])
    assert group.offsets == {} and group.pending_txn_offsets == {8: {TP1: committed(9, 5)}}


def test_partitions_with_a_commit_in_flight_do_not_expire_and_count_as_pending():
    group = GroupMetadata("g", 0, state_timestamp_ms=0)
    group.offsets[TP] = committed(5, record_offset=1)
    group.offsets[TP1] = committed(5, record_offset=2)
    group.pending_offset_commits[TP] += 1
    assert group.expired_offsets(now_ms=10_000, retention_ms=1) == [TP1]
    assert group.has_pending_offsets(TP) and not group.has_pending_offsets(TP1)
    empty = GroupMetadata("e", 0)
    assert empty.is_state(GroupState.EMPTY) and not empty.has_offsets()
    empty.prepare_txn_offsets(7, {TP: committed(1, record_offset=0)})
    assert empty.has_offsets()  # expiry must not remove it


# -- the loader ------------------------------------------------------------------------------

class Log:
    """Batches with offsets assigned, as a log read returns them."""

    def __init__(self):
        self.data = bytearray()
        self.next_offset = 0

    def _add(self, batch: bytes) -> int:
        batch = bytearray(batch)
        base = self.next_offset
        assign_offset_and_epoch(batch, 0, base, 0)
        self.data += batch
        self.next_offset = parse_header(batch).next_offset
        return base

    def commit(self, group: str, tp, offset: int | None, producer_id: int = -1) -> int:
        value = None if offset is None else records.offset_value(
            records.OffsetValue(offset, -1, "", 1000))
        return self._add(records.build_batch(
            [(records.offset_key(group, *tp), value)], 1000, producer_id, 0))

    def group(self, group: str) -> int:
        return self._add(records.build_batch([(records.group_key(group), records.group_value(
            records.GroupValue("consumer", 3, "range", None, 1000, ())))], 1000))

    def marker(self, producer_id: int, commit: bool) -> int:
        return self._add(control_batch(producer_id, 0, commit))


def _varint(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    return bytes(out + bytes([value]))


def control_batch(producer_id: int, epoch: int, commit: bool) -> bytes:
    """A COMMIT/ABORT marker: attributes TRANSACTIONAL|CONTROL, one record whose key is
    version 0 + type (1 commit, 0 abort) and value version 0 + coordinator epoch."""
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, 0)
    body = (b"\x00" + _varint(0) + _varint(0) + _varint(len(key)) + key
            + _varint(len(value)) + value + _varint(0))
    record = _varint(len(body)) + body
    after_crc = struct.pack(">hiqqqhii", 0x10 | 0x20, 0, 1000, 1000, producer_id, epoch, -1,
                            1) + record
    header = struct.pack(">qiib", 0, 4 + 1 + 4 + len(after_crc), -1, 2)
    return header + struct.pack(">I", crc32c.crc32c(after_crc)) + after_crc


def load(log: Log, chunks: int = 1) -> dict[str, GroupMetadata]:
    loader = _Loader(0)
    data = bytes(log.data)
    if chunks == 1:
        loader.apply(data, 0)
    else:  # batch by batch, as separate log reads
        position, start = 0, 0
        while start < len(data):
            header = parse_header(data, start)
            position = loader.apply(data[start:start + header.size], position)
            start += header.size
        assert position == log.next_offset
    return {g.group_id: g for g in loader.groups()}


def test_a_commit_marker_applies_the_transactions_offsets_and_an_abort_drops_them():
    log = Log()
    log.commit("g", TP, 5)
    log.commit("g", TP, 9, producer_id=7)
    log.commit("g", TP1, 9, producer_id=8)
    log.marker(7, commit=True)
    log.marker(8, commit=False)
    for chunks in (1, 2):
        g = load(log, chunks)["g"]
        assert (g.offsets[TP].offset, g.offsets[TP].record_offset) == (9, 1)
        assert TP1 not in g.offsets and g.pending_txn_offsets == {}


def test_a_plain_commit_written_after_the_transactional_one_wins_at_commit():
    log = Log()
    log.commit("g", TP, 9, producer_id=7)
    log.commit("g", TP, 6)
    log.marker(7, commit=True)
    assert load(log)["g"].offsets[TP].offset == 6


def test_offsets_without_a_marker_stay_pending_in_a_group_the_log_only_knows_from_them():
    log = Log()
    log.group("g")
    log.commit("g", TP, 5)
    log.commit("g", TP, 9, producer_id=7)
    log.commit("txn-only", TP1, 3, producer_id=8)
    groups = load(log)
    assert groups["g"].offsets[TP].offset == 5
    assert groups["g"].pending_txn_offsets[7][TP].offset == 9
    assert groups["g"].generation_id == 3
    only = groups["txn-only"]
    assert only.state is GroupState.EMPTY and only.offsets == {}
    assert only.pending_txn_offsets[8][TP1].offset == 3


def test_a_plain_tombstone_drops_pending_offsets_so_a_later_commit_marker_finds_none():
    log = Log()
    log.commit("g", TP, 9, producer_id=7)
    log.commit("g", TP, None)  # expiry or group deletion
    log.marker(7, commit=True)
    assert "g" not in load(log)


def test_records_before_the_load_position_are_not_applied_again():
    log = Log()
    log.commit("g", TP, 9, producer_id=7)
    marker_at = log.marker(7, commit=True)
    loader = _Loader(0)
    assert loader.apply(bytes(log.data), marker_at) == log.next_offset
    assert loader.groups() == []  # the txn batch lies before the position: not replayed

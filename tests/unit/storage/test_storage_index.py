"""OffsetIndex and TimeIndex: strictly increasing entries, largest-entry-at-or-below
lookups, truncation, round trips through their files, and sanity checks that catch
every kind of damage recovery must rebuild from."""
from __future__ import annotations

import pytest

from storage import CorruptIndex, InvalidIndexEntry
from storage.index import OffsetIndex, TimeIndex

BASE = 100


@pytest.fixture
def offset_index(tmp_path):
    return OffsetIndex(str(tmp_path / "00000000000000000100.index"), BASE)


@pytest.fixture
def time_index(tmp_path):
    return TimeIndex(str(tmp_path / "00000000000000000100.timeindex"), BASE)


def test_offset_index_rejects_non_increasing_offsets_and_positions(offset_index):
    offset_index.append(110, 400)
    with pytest.raises(InvalidIndexEntry):
        offset_index.append(110, 800)
    with pytest.raises(InvalidIndexEntry):
        offset_index.append(105, 800)
    with pytest.raises(InvalidIndexEntry):
        offset_index.append(120, 400)
    with pytest.raises(InvalidIndexEntry):
        offset_index.append(BASE - 1, 0)
    with pytest.raises(InvalidIndexEntry):
        offset_index.append(BASE + 2**31, 900)
    assert len(offset_index) == 1


def test_offset_index_lookup_returns_the_largest_entry_at_or_below(offset_index):
    for offset, position in [(110, 400), (120, 800), (130, 1200)]:
        offset_index.append(offset, position)
    assert offset_index.lookup(99) == (BASE, 0)
    assert offset_index.lookup(109) == (BASE, 0)
    assert offset_index.lookup(110) == (110, 400)
    assert offset_index.lookup(125) == (120, 800)
    assert offset_index.lookup(10**9) == (130, 1200)


def test_offset_index_truncate_removes_entries_at_or_after(offset_index):
    for offset, position in [(110, 400), (120, 800), (130, 1200)]:
        offset_index.append(offset, position)
    offset_index.truncate_to(120)
    assert offset_index.lookup(10**9) == (110, 400)
    offset_index.append(115, 600)
    assert len(offset_index) == 2


def test_time_index_appends_only_when_the_timestamp_grows(time_index):
    assert time_index.maybe_append(1_000, 100)
    assert not time_index.maybe_append(1_000, 110)
    assert not time_index.maybe_append(900, 120)
    assert not time_index.maybe_append(-1, 130)
    assert time_index.maybe_append(2_000, 140)
    assert len(time_index) == 2
    with pytest.raises(InvalidIndexEntry):
        time_index.maybe_append(3_000, 140)  # offsets must increase too


def test_time_index_lookup_and_truncate(time_index):
    for timestamp, offset in [(1_000, 100), (2_000, 110), (3_000, 120)]:
        time_index.maybe_append(timestamp, offset)
    assert time_index.lookup(999) == (-1, BASE)
    assert time_index.lookup(2_500) == (2_000, 110)
    assert time_index.last_entry == (3_000, 120)
    time_index.truncate_to(110)
    assert time_index.last_entry == (1_000, 100)


def test_indexes_round_trip_through_their_files_and_tail_appends(offset_index, time_index):
    offset_index.append(110, 400)
    time_index.maybe_append(1_000, 105)
    offset_index.write(fsync=True)
    time_index.write(fsync=True)
    offset_index.append(120, 800)
    offset_index.write(fsync=False)
    reloaded = OffsetIndex(offset_index.path, BASE)
    assert [reloaded.lookup(o) for o in (115, 125)] == [(110, 400), (120, 800)]
    assert TimeIndex(time_index.path, BASE).last_entry == (1_000, 105)
    offset_index.truncate_to(120)
    offset_index.write(fsync=True)
    assert len(OffsetIndex(offset_index.path, BASE)) == 1


def test_offset_index_sanity_check_catches_damage(offset_index):
    offset_index.append(110, 400)
    offset_index.write(fsync=True)
    base_offsets = {400: 110}
    OffsetIndex(offset_index.path, BASE).sanity_check(1_000, base_offsets.get)
    with pytest.raises(CorruptIndex):  # last entry past the end of the log
        OffsetIndex(offset_index.path, BASE).sanity_check(400, base_offsets.get)
    with pytest.raises(CorruptIndex):  # last entry not at that batch's start
        OffsetIndex(offset_index.path, BASE).sanity_check(1_000, {400: 111}.get)
    with open(offset_index.path, "ab") as f:
        f.write(b"\x00\x01")
    with pytest.raises(CorruptIndex):  # not a whole number of entries
        OffsetIndex(offset_index.path, BASE).sanity_check(1_000, base_offsets.get)


def test_sanity_check_catches_entries_that_do_not_increase(offset_index, time_index):
    with open(offset_index.path, "wb") as f:
        f.write(bytes.fromhex("0000000a00000100" "00000005 00000200".replace(" ", "")))
    with pytest.raises(CorruptIndex):
        OffsetIndex(offset_index.path, BASE).sanity_check(10_000, lambda p: BASE + 5)
    with open(time_index.path, "wb") as f:
        f.write(bytes.fromhex("00000000000007d0 00000001 00000000000003e8 00000002"
                              .replace(" ", "")))
    with pytest.raises(CorruptIndex):
        TimeIndex(time_index.path, BASE).sanity_check(BASE + 10)


def test_time_index_sanity_check_refuses_entries_past_the_segment(time_index):
    time_index.maybe_append(1_000, 105)
    time_index.write(fsync=True)
    TimeIndex(time_index.path, BASE).sanity_check(106)
    with pytest.raises(CorruptIndex):
        TimeIndex(time_index.path, BASE).sanity_check(105)


def test_is_full_counts_entries(offset_index):
    offset_index.append(101, 10)
    assert not offset_index.is_full(2)
    offset_index.append(102, 20)
    assert offset_index.is_full(2)

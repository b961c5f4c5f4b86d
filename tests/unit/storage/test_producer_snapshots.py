"""The log owns its producer state: kept in step by every change, snapshotted so that
opening does not rescan the log.

Every test states the invariant it protects: whatever path the log took (clean close,
crash, corrupt snapshot, truncation, retention, reset), its producer state equals a
fresh header scan of the batches it holds, and no snapshot describes a log that is not
there.  The reference scan (``rescan``) is the old broker-side rebuild: read every batch
from log_start_offset and feed its header to an empty manager.
"""
from __future__ import annotations

import logging
import os
import shutil
import struct

import crc32c
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from protocol.records import iter_headers, validate_produce_records
from storage import LogConfig, PartitionLog
from storage.producer_snapshot import (
    SNAPSHOT_VERSION,
    CorruptSnapshot,
    decode,
    encode,
    list_snapshots,
    read_snapshot,
    snapshot_file_name,
    write_snapshot,
)
from storage.producer_state import BATCHES_KEPT, MAX_SEQUENCE, ProducerStateManager

PRODUCER_ID_AT = 43  # byte position of producerId in a v2 batch header


def client_batch(producer_id: int, sequence: int, count: int = 2, epoch: int = 0):
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=producer_id, producer_epoch=epoch,
                                        base_sequence=sequence, batch_size=1 << 20)
    for i in range(count):
        builder.append(i, timestamp=1_000 + i, key=None, value=b"v" * 40, headers=[])
    return validate_produce_records(bytes(builder.build()))[0]


class Producers:
    """Idempotent producers appending round robin through ``PartitionLog.append_as_leader``."""

    def __init__(self, ids=(7, 8, 9), epoch: int = 0):
        self.next_sequence = dict.fromkeys(ids, 0)
        self.epoch = epoch
        self.batches = 0

    def append(self, log: PartitionLog, batches: int, count: int = 2) -> None:
        ids = list(self.next_sequence)
        for n in range(batches):
            producer_id = ids[(self.batches + n) % len(ids)]
            log.append_as_leader(client_batch(producer_id, self.next_sequence[producer_id],
                                              count, self.epoch), 0)
            self.next_sequence[producer_id] += count
        self.batches += batches


def state_of(manager: ProducerStateManager) -> dict:
    return {pid: (entry.producer_epoch, list(entry.batches))
            for pid, entry in manager.producers.items()}


def rescan(log: PartitionLog) -> dict:
    """The reference: a header scan of every batch from log_start_offset."""
    manager = ProducerStateManager()
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        for header in iter_headers(bytes(log.read(offset, 1 << 20))):
            manager.update(header)
            offset = header.next_offset
    return state_of(manager)


def snapshot_files(directory) -> list[int]:
    return list_snapshots(os.fspath(directory))


@pytest.fixture
def directory(tmp_path):
    return tmp_path / "t-0"


@pytest.fixture
def open_log(directory):
    logs = []

    def _open(**config) -> PartitionLog:
        config.setdefault("segment_bytes", 1024)
        log = PartitionLog.open(directory, LogConfig(**config))
        logs.append(log)
        return log

    yield _open
    for log in logs:
        log.close_handlers()


# -- the file ----------------------------------------------------------------------------

ENTRIES = [
    (7, 0, [(0, 1, 0, 1), (2, 3, 2, 3)], -1, -1, 1_700_000_000_000),
    (8, 3, [(MAX_SEQUENCE - 1, 0, 4, 5)] + [(n, n, 6 + n, 6 + n) for n in range(1, 5)], 4, 2,
     5),
    (2 ** 62, 32_767, [(1_000_000, 1_000_000, 2 ** 40, 2 ** 40)], -1, 7, -1),
    (9, 1, [], -1, 3, 12),  # only a marker seen (a fenced producer's abort)
]
ABORTED = [(8, 0, 3, 4), (2 ** 62, 10, 2 ** 40 - 1, 2 ** 40)]


def test_a_snapshot_decodes_to_exactly_what_was_encoded(tmp_path):
    assert decode(encode(ENTRIES, ABORTED), BATCHES_KEPT) == (ENTRIES, ABORTED)
    assert decode(encode([]), BATCHES_KEPT) == ([], [])
    write_snapshot(os.fspath(tmp_path), 2 ** 40 + 1, ENTRIES, ABORTED)
    assert os.listdir(tmp_path) == [snapshot_file_name(2 ** 40 + 1)]
    assert snapshot_file_name(2 ** 40 + 1) == "00000001099511627777.snapshot"
    assert list_snapshots(os.fspath(tmp_path)) == [2 ** 40 + 1]
    assert read_snapshot(os.fspath(tmp_path), 2 ** 40 + 1, BATCHES_KEPT) == (ENTRIES, ABORTED)


def test_a_version_1_snapshot_from_before_transactions_still_loads():
    body = struct.pack(">i", 1) + struct.pack(">qhi", 7, 0, 1) + struct.pack(">iiqq", 0, 1, 0, 1)
    data = struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    assert decode(data, BATCHES_KEPT) == ([(7, 0, [(0, 1, 0, 1)], -1, -1, -1)], [])
    empty_producer = struct.pack(">i", 1) + struct.pack(">qhi", 7, 0, 0)
    with pytest.raises(CorruptSnapshot):  # version 1 never had a producer without batches
        decode(struct.pack(">hI", 1, crc32c.crc32c(empty_producer)) + empty_producer,
               BATCHES_KEPT)


def flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1:]


@pytest.mark.parametrize("damage", [
    pytest.param(lambda d: b"", id="empty"),
    pytest.param(lambda d: d[:5], id="shorter-than-header"),
    pytest.param(lambda d: d[:-1], id="torn-tail"),
    pytest.param(lambda d: d + b"\0", id="trailing-byte"),
    pytest.param(lambda d: flip(d, len(d) - 3), id="bit-flip-in-body"),
    pytest.param(lambda d: flip(d, 3), id="bit-flip-in-crc"),
    pytest.param(lambda d: d[:-32] + b"\0\0\0\x05" + d[-28:], id="aborted-count"),
    pytest.param(lambda d: (SNAPSHOT_VERSION + 1).to_bytes(2, "big") + d[2:], id="version"),
])
def test_a_damaged_snapshot_never_decodes(damage):
    with pytest.raises(CorruptSnapshot):
        decode(damage(encode(ENTRIES, ABORTED)), BATCHES_KEPT)


# -- snapshots are taken at rolls and at a clean close --------------------------------------

def test_a_roll_snapshots_the_state_at_the_new_segment_base(open_log, directory):
    log = open_log()
    producers = Producers()
    producers.append(log, 30)
    bases = [segment.base_offset for segment in log.segments]
    assert len(bases) >= 3
    assert snapshot_files(directory) == list(log.producer_state.snapshot_offsets) == bases[1:]
    log.close()
    assert snapshot_files(directory) == bases[1:] + [log.log_end_offset]


def test_open_after_a_clean_close_reads_no_batch_below_the_snapshot(open_log, directory):
    """Proved twice: nothing is replayed, and a header below the snapshot that a rescan
    would read (its producer id changed on disk) does not reach the state."""
    log = open_log()
    Producers().append(log, 30)
    before = state_of(log.producer_state)
    log_end_offset = log.log_end_offset
    log.close()
    first_segment = os.path.join(directory, f"{0:020d}.log")
    with open(first_segment, "r+b") as f:
        f.seek(PRODUCER_ID_AT)
        f.write((4242).to_bytes(8, "big"))

    reopened = open_log()
    assert reopened.recovery_report.producer_snapshot_offset == log_end_offset
    assert reopened.recovery_report.producer_batches_replayed == 0
    assert state_of(reopened.producer_state) == before
    reopened.close()

    # the control: without snapshots the same open does read the changed header
    for offset in snapshot_files(directory):
        os.unlink(os.path.join(directory, snapshot_file_name(offset)))
    rescanned = open_log()
    assert rescanned.recovery_report.producer_batches_replayed == 30
    assert 4242 in rescanned.producer_state.producers


def test_a_log_without_producers_also_opens_without_a_scan(open_log):
    log = open_log()
    for _ in range(20):
        log.append_as_leader(client_batch(-1, -1, epoch=-1), 0)
    log.close()
    reopened = open_log()
    assert reopened.recovery_report.producer_batches_replayed == 0
    assert reopened.producer_state.producers == {}


def test_an_empty_log_closes_without_a_snapshot(open_log, directory):
    open_log().close()
    assert snapshot_files(directory) == []
    assert open_log().recovery_report.producer_batches_replayed == 0


# -- crashes and damaged snapshots -----------------------------------------------------------

def test_after_a_crash_the_state_equals_a_full_rescan(open_log, directory):
    log = open_log()
    Producers().append(log, 31)
    before = state_of(log.producer_state)
    last_roll = log.segments[-1].base_offset
    log.close_handlers()  # no flush, no snapshot at the end, no clean-shutdown marker

    reopened = open_log()
    report = reopened.recovery_report
    assert not report.clean_shutdown
    assert report.producer_snapshot_offset == last_roll
    assert 0 < report.producer_batches_replayed < 31
    assert state_of(reopened.producer_state) == before == rescan(reopened)


def test_snapshots_above_a_recovered_log_end_are_deleted(open_log, directory):
    """A crash that loses the tail (here: a torn batch in the second segment) leaves
    snapshots that describe offsets the log no longer has; they must go."""
    log = open_log()
    Producers().append(log, 30)
    second = log.segments[1]
    second_path, second_size = second.log_path, second.size_bytes
    log.close_handlers()
    os.truncate(second_path, second_size - 5)

    reopened = open_log()
    log_end_offset = reopened.log_end_offset
    assert log_end_offset < second.next_offset
    assert snapshot_files(directory) == [second.base_offset]
    assert reopened.recovery_report.producer_snapshot_offset == second.base_offset
    assert state_of(reopened.producer_state) == rescan(reopened)


def damage_snapshot(directory, offset: int, how: str) -> None:
    path = os.path.join(directory, snapshot_file_name(offset))
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[:len(data) // 2] if how == "torn" else flip(data, len(data) - 1))


@pytest.mark.parametrize("how", ["torn", "bit-flip"])
def test_a_corrupt_snapshot_falls_back_to_an_older_one_with_the_same_state(
        open_log, directory, caplog, how):
    log = open_log()
    Producers().append(log, 30)
    before = state_of(log.producer_state)
    last_roll, log_end_offset = log.segments[-1].base_offset, log.log_end_offset
    log.close()
    damage_snapshot(directory, log_end_offset, how)

    with caplog.at_level(logging.WARNING, logger="storage.producer_state"):
        reopened = open_log()
    assert any("unusable" in r.message and r.levelno == logging.WARNING
               for r in caplog.records)
    assert log_end_offset not in snapshot_files(directory)
    assert reopened.recovery_report.producer_snapshot_offset == last_roll
    assert state_of(reopened.producer_state) == before == rescan(reopened)


def test_with_every_snapshot_corrupt_the_log_is_rescanned(open_log, directory, caplog):
    log = open_log()
    Producers().append(log, 30)
    before = state_of(log.producer_state)
    log.close()
    for offset in snapshot_files(directory):
        damage_snapshot(directory, offset, "bit-flip")

    with caplog.at_level(logging.WARNING, logger="storage.producer_state"):
        reopened = open_log()
    assert reopened.recovery_report.producer_snapshot_offset is None
    assert reopened.recovery_report.producer_batches_replayed == 30
    assert state_of(reopened.producer_state) == before
    assert snapshot_files(directory) == []


# -- truncation, retention, reset --------------------------------------------------------------

def test_truncation_below_a_snapshot_deletes_it_and_the_state_equals_a_rescan(
        open_log, directory):
    log = open_log()
    producers = Producers(ids=(7,))  # one producer: its five-batch window is what moves
    producers.append(log, 30)
    bases = [segment.base_offset for segment in log.segments]
    cut = bases[2] + 3                  # inside the third segment, above two snapshots
    log.truncate_to(cut)
    assert log.log_end_offset <= cut
    assert snapshot_files(directory) == list(log.producer_state.snapshot_offsets) \
        == [b for b in bases[1:] if b <= log.log_end_offset]
    assert state_of(log.producer_state) == rescan(log)
    assert len(log.producer_state.producers[7].batches) == BATCHES_KEPT

    log.close()
    reopened = open_log()
    assert state_of(reopened.producer_state) == rescan(reopened)


def test_truncation_to_a_shorter_log_never_keeps_a_cut_batch(open_log):
    log = open_log()
    Producers().append(log, 12)
    log.truncate_to(10)
    assert all(batch.last_offset < log.log_end_offset
               for entry in log.producer_state.producers.values() for batch in entry.batches)
    assert log.producer_state.map_end_offset == log.log_end_offset
    assert state_of(log.producer_state) == rescan(log)


def test_cutting_only_batches_without_producer_ids_keeps_the_state(open_log, directory):
    """The shortcut: no producer's newest batch is cut, so the state stands (and equals
    the rescan); the snapshots above the new end still go."""
    log = open_log()
    Producers().append(log, 10)
    producers_end = log.log_end_offset
    for _ in range(20):
        log.append_as_leader(client_batch(-1, -1, epoch=-1), 0)
    before = state_of(log.producer_state)
    log.truncate_to(producers_end + 6)
    assert state_of(log.producer_state) == before == rescan(log)
    assert log.producer_state.map_end_offset == log.log_end_offset
    assert max(snapshot_files(directory)) <= log.log_end_offset


def test_retention_deletes_the_snapshots_below_the_log_start(open_log, directory):
    log = open_log()
    Producers().append(log, 40)
    log.update_high_watermark(log.log_end_offset)
    log.update_config(LogConfig(segment_bytes=1024, retention_bytes=2048))
    assert log.enforce_retention() > 0
    log_start_offset = log.log_start_offset
    remaining = snapshot_files(directory)
    assert remaining and min(remaining) >= log_start_offset
    assert remaining == list(log.producer_state.snapshot_offsets)
    live = state_of(log.producer_state)

    log.close()
    reopened = open_log()
    assert reopened.recovery_report.producer_batches_replayed == 0
    assert state_of(reopened.producer_state) == live


def test_a_full_reset_forgets_every_producer_and_snapshot(open_log, directory):
    log = open_log()
    Producers().append(log, 20)
    log.truncate_fully_and_start_at(500)
    assert log.producer_state.producers == {}
    assert snapshot_files(directory) == []
    Producers(ids=(11,)).append(log, 1)
    assert set(log.producer_state.producers) == {11}


# -- appends as follower ------------------------------------------------------------------------

def test_a_follower_copy_has_the_leaders_state_and_snapshots(open_log, tmp_path):
    leader = open_log()
    Producers().append(leader, 30)
    follower = PartitionLog.open(tmp_path / "follower-0", LogConfig(segment_bytes=1024))
    try:
        offset = 0
        while offset < leader.log_end_offset:
            data = bytes(leader.read(offset, 700))
            follower.append_as_follower(data)
            offset = follower.log_end_offset
        assert state_of(follower.producer_state) == state_of(leader.producer_state)
        assert follower.producer_state.map_end_offset == follower.log_end_offset
        assert list(follower.producer_state.snapshot_offsets) == \
            [segment.base_offset for segment in follower.segments[1:]]
    finally:
        follower.close()


def test_a_crash_copy_of_the_directory_recovers_the_same_state(open_log, directory, tmp_path):
    """What a kill -9 leaves (the files as they are, mid-segment) opens to the state the
    live log has."""
    log = open_log()
    Producers().append(log, 23)
    copy = tmp_path / "copy-0"
    shutil.copytree(directory, copy)
    opened = PartitionLog.open(copy, LogConfig(segment_bytes=1024))
    try:
        assert state_of(opened.producer_state) == state_of(log.producer_state)
        assert opened.recovery_report.producer_batches_replayed < 23
    finally:
        opened.close_handlers()

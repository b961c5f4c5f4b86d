"""Startup recovery: what a crash or a damaged file leaves behind is cut or rebuilt,
and everything acknowledged before the damage survives.

A "crash" here drops a PartitionLog without close(): no flush of indexes, no
checkpoint, no clean-shutdown marker.  The bytes already written with os.write stay in
the file, as they would after a process kill.
"""
from __future__ import annotations

import logging
import os

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from protocol.records import iter_headers
from storage import LogConfig, PartitionLog


def make_batch(count: int = 3, *, timestamp: int = 1_000, value_size: int = 50) -> bytearray:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(count):
        builder.append(i, timestamp=timestamp + i, key=None, value=b"v" * value_size, headers=[])
    return builder.build()


BATCH_SIZE = len(make_batch())


def crash(log: PartitionLog) -> None:
    """Drop the log like a killed process would: close fds, write nothing."""
    for segment in log.segments:
        segment.close()
    log._closed = True


@pytest.fixture
def directory(tmp_path):
    return tmp_path / "t-0"


def write_log(directory, batches: int, *, epoch: int = 0, close: bool = False,
              **config) -> PartitionLog:
    log = PartitionLog.open(directory, LogConfig(**config))
    for i in range(batches):
        log.append_as_leader(make_batch(timestamp=1_000 * (i + 1)), epoch)
    if close:
        log.close()
    return log


def reopen(directory, **config) -> PartitionLog:
    return PartitionLog.open(directory, LogConfig(**config))


def read_ranges(log: PartitionLog) -> list[tuple[int, int]]:
    data = log.read(log.log_start_offset, 1 << 30)
    return [(h.base_offset, h.last_offset) for h in iter_headers(data)]


def segment_path(directory, base_offset: int, suffix: str = ".log"):
    return directory / f"{base_offset:020d}{suffix}"


# -- cutting the damaged tail ------------------------------------------------------------


def test_torn_tail_is_cut_back_to_the_last_whole_batch(directory, caplog):
    crash(write_log(directory, 4))
    path = segment_path(directory, 0)
    os.truncate(path, 3 * BATCH_SIZE + BATCH_SIZE // 2)
    with caplog.at_level(logging.WARNING, logger="storage"):
        log = reopen(directory)
    report = log.recovery_report
    assert log.log_end_offset == 9 and read_ranges(log) == [(0, 2), (3, 5), (6, 8)]
    assert report.bytes_truncated == BATCH_SIZE // 2 and report.batches_recovered == 3
    assert any("recovery cut" in r.getMessage() for r in caplog.records)
    log.append_as_leader(make_batch(), 0)
    assert read_ranges(log)[-1] == (9, 11)
    log.close()


def test_crc_failing_last_batch_is_cut(directory):
    crash(write_log(directory, 3))
    path = segment_path(directory, 0)
    data = bytearray(path.read_bytes())
    data[2 * BATCH_SIZE + 70] ^= 0x01  # inside the records of the last batch
    path.write_bytes(bytes(data))
    log = reopen(directory)
    assert log.log_end_offset == 6 and log.size_bytes == 2 * BATCH_SIZE
    assert log.recovery_report.bytes_truncated == BATCH_SIZE
    log.close()


def test_garbage_after_valid_data_is_cut_and_valid_data_kept(directory):
    crash(write_log(directory, 3))
    with open(segment_path(directory, 0), "ab") as f:
        f.write(b"\x00\x07garbage-not-a-batch" * 5)
    log = reopen(directory)
    assert read_ranges(log) == [(0, 2), (3, 5), (6, 8)]
    assert log.recovery_report.bytes_truncated == len(b"\x00\x07garbage-not-a-batch") * 5
    log.close()


def test_batch_whose_base_offset_goes_back_is_cut(directory):
    crash(write_log(directory, 3))
    path = segment_path(directory, 0)
    data = bytearray(path.read_bytes())
    data[BATCH_SIZE:BATCH_SIZE + 8] = (1).to_bytes(8, "big")  # baseOffset is outside the CRC
    path.write_bytes(bytes(data))
    log = reopen(directory)
    assert read_ranges(log) == [(0, 2)]
    assert "expected at least 3" in log.recovery_report.cuts[0]
    log.close()


def test_a_gap_between_batches_is_kept_as_the_cleaner_leaves_them(directory):
    crash(write_log(directory, 3))
    path = segment_path(directory, 0)
    data = bytearray(path.read_bytes())
    data[BATCH_SIZE:BATCH_SIZE + 8] = (10).to_bytes(8, "big")
    data[2 * BATCH_SIZE:2 * BATCH_SIZE + 8] = (20).to_bytes(8, "big")
    path.write_bytes(bytes(data))
    log = reopen(directory)
    assert read_ranges(log) == [(0, 2), (10, 12), (20, 22)]
    assert not log.recovery_report.cuts and log.log_end_offset == 23
    log.close()


def test_corruption_in_a_middle_segment_cuts_it_and_every_later_segment(directory):
    log = write_log(directory, 9, segment_bytes=3 * BATCH_SIZE)
    assert [s.base_offset for s in log.segments] == [0, 9, 18]
    crash(log)
    path = segment_path(directory, 9)
    data = bytearray(path.read_bytes())
    data[BATCH_SIZE + 80] ^= 0xFF  # the second batch of the middle segment
    path.write_bytes(bytes(data))
    log = reopen(directory, segment_bytes=3 * BATCH_SIZE)
    report = log.recovery_report
    assert [s.base_offset for s in log.segments] == [0, 9]
    assert log.log_end_offset == 12
    assert report.segments_deleted == 1 and report.bytes_truncated == 5 * BATCH_SIZE
    assert not segment_path(directory, 18).exists()
    assert not segment_path(directory, 18, ".index").exists()
    log.close()


def test_checkpoints_and_epochs_are_clamped_to_what_survived(directory):
    log = write_log(directory, 2, epoch=1)
    log.append_as_leader(make_batch(), 2)
    log.update_high_watermark(9)
    log.checkpoint()
    crash(log)
    os.truncate(segment_path(directory, 0), 2 * BATCH_SIZE + 10)
    log = reopen(directory)
    assert (log.log_end_offset, log.high_watermark) == (6, 6)
    assert log.recovery_point <= 6
    assert log.epoch_cache.epoch_entries() == [(1, 0)]
    log.close()


# -- clean shutdown versus crash -----------------------------------------------------


def test_reopen_after_close_trusts_the_files_and_scans_nothing(directory):
    write_log(directory, 6, segment_bytes=2 * BATCH_SIZE, close=True)
    assert (directory / ".clean-shutdown").exists()
    log = reopen(directory, segment_bytes=2 * BATCH_SIZE)
    report = log.recovery_report
    assert report.clean_shutdown and report.segments_scanned == 0
    assert report.indexes_rebuilt == 0
    assert not (directory / ".clean-shutdown").exists()
    assert log.log_end_offset == 18 and read_ranges(log)[-1] == (15, 17)
    log.close()


def test_reopen_after_a_crash_scans_from_the_recovery_point(directory):
    log = write_log(directory, 6, segment_bytes=2 * BATCH_SIZE)
    log.flush(up_to_offset=12)
    log.checkpoint()
    log.append_as_leader(make_batch(), 0)
    crash(log)
    log = reopen(directory, segment_bytes=2 * BATCH_SIZE)
    report = log.recovery_report
    assert not report.clean_shutdown
    # segments 0 and 6 are below the recovery point; 12 holds it; 18 is after it
    assert report.segments_scanned == 2 and report.batches_recovered == 3
    assert log.log_end_offset == 21
    log.close()


def test_a_crash_before_any_checkpoint_scans_everything(directory):
    crash(write_log(directory, 6, segment_bytes=2 * BATCH_SIZE))
    log = reopen(directory, segment_bytes=2 * BATCH_SIZE)
    assert log.recovery_report.segments_scanned == 3
    assert log.recovery_report.batches_recovered == 6
    assert log.log_end_offset == 18
    log.close()


def test_the_clean_marker_is_consumed_so_a_later_crash_is_scanned(directory):
    write_log(directory, 2, close=True)
    log = reopen(directory)
    log.append_as_leader(make_batch(), 0)
    crash(log)
    os.truncate(segment_path(directory, 0), 2 * BATCH_SIZE + 5)
    log = reopen(directory)
    assert not log.recovery_report.clean_shutdown
    assert log.log_end_offset == 6
    log.close()


# -- indexes -------------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["delete", "garble", "partial_entry", "time_index_delete"])
def test_a_missing_or_damaged_index_is_rebuilt(directory, damage):
    config = dict(index_interval_bytes=BATCH_SIZE, segment_bytes=8 * BATCH_SIZE)
    write_log(directory, 12, close=True, **config)
    index = segment_path(directory, 0, ".index")
    entries_before = index.read_bytes()
    assert len(entries_before) >= 8
    if damage == "delete":
        index.unlink()
    elif damage == "garble":
        index.write_bytes(bytes(range(255, 231, -1)))
    elif damage == "partial_entry":
        index.write_bytes(entries_before + b"\x01\x02\x03")
    else:
        segment_path(directory, 0, ".timeindex").unlink()
    log = reopen(directory, **config)
    assert log.recovery_report.indexes_rebuilt == 1
    assert log.recovery_report.segments_scanned == 0
    assert index.read_bytes() == entries_before
    assert [h.base_offset for h in iter_headers(log.read(13, 1 << 20))][:1] == [12]
    assert log.offset_for_timestamp(4_000) == (9, 4_000)
    log.close()


def test_an_index_pointing_inside_a_batch_is_rebuilt(directory):
    config = dict(index_interval_bytes=BATCH_SIZE)
    write_log(directory, 6, close=True, **config)
    index = segment_path(directory, 0, ".index")
    data = bytearray(index.read_bytes())
    data[-4:] = (int.from_bytes(data[-4:], "big") + 7).to_bytes(4, "big")
    index.write_bytes(bytes(data))
    log = reopen(directory, **config)
    assert log.recovery_report.indexes_rebuilt == 1
    assert [h.base_offset for h in iter_headers(log.read(16, 1 << 20))] == [15]
    log.close()


# -- leftovers and checkpoints ---------------------------------------------------------


def test_leftover_temporary_and_orphan_files_are_removed(directory):
    write_log(directory, 2, close=True)
    (directory / "offsets.checkpoint.tmp").write_bytes(b"half written")
    (directory / "00000000000000000003.log.deleted").write_bytes(b"x")
    (directory / "00000000000000000099.index").write_bytes(b"")
    (directory / "partition.metadata").write_bytes(b"broker-owned")
    log = reopen(directory)
    assert sorted(log.recovery_report.leftover_files_removed) == [
        "00000000000000000003.log.deleted", "00000000000000000099.index",
        "offsets.checkpoint.tmp"]
    assert (directory / "partition.metadata").exists()
    assert log.log_end_offset == 6
    log.close()


@pytest.mark.parametrize("content", [b"", b"\xff\xfe\x00garbage", b"7\nhigh_watermark x\n",
                                     b"0\nhigh_watermark 1\n"])
def test_a_garbled_offsets_checkpoint_never_stops_startup(directory, content):
    write_log(directory, 3, close=True)
    (directory / "offsets.checkpoint").write_bytes(content)
    (directory / ".clean-shutdown").unlink()  # a crash: scan from offset 0
    log = reopen(directory)
    assert log.log_end_offset == 9 and log.recovery_report.batches_recovered == 3
    assert log.high_watermark == 0
    log.close()


def test_a_garbled_epoch_checkpoint_is_rebuilt_from_batch_headers(directory):
    log = write_log(directory, 2, epoch=1)
    log.append_as_leader(make_batch(), 4)
    log.close()
    (directory / "leader-epoch-checkpoint").write_bytes(b"0\n5\n1 0\n")
    log = reopen(directory)
    assert log.epoch_cache.epoch_entries() == [(1, 0), (4, 6)]
    log.close()
    assert (directory / "leader-epoch-checkpoint").read_text() == "0\n2\n1 0\n4 6\n"


def test_scanned_batches_restore_epochs_the_checkpoint_missed(directory):
    log = write_log(directory, 2, epoch=1)
    log.append_as_leader(make_batch(), 3)
    crash(log)
    (directory / "leader-epoch-checkpoint").write_text("0\n1\n1 0\n")
    log = reopen(directory)
    assert log.epoch_cache.epoch_entries() == [(1, 0), (3, 6)]
    log.close()


def test_recovery_of_an_empty_directory_creates_one_empty_segment(directory):
    log = reopen(directory)
    assert [s.base_offset for s in log.segments] == [0]
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    # nothing to checkpoint yet: a missing offsets.checkpoint reads back as these offsets
    assert not (directory / "offsets.checkpoint").exists()
    log.close()


@pytest.mark.parametrize("chunk_bytes", [50, BATCH_SIZE + 1, 3 * BATCH_SIZE - 7])
def test_recovery_reading_in_chunks_keeps_batches_that_straddle_chunk_ends(
        directory, monkeypatch, chunk_bytes):
    import storage.segment
    monkeypatch.setattr(storage.segment, "RECOVERY_CHUNK_BYTES", chunk_bytes)
    crash(write_log(directory, 7))
    os.truncate(segment_path(directory, 0), 6 * BATCH_SIZE + 30)
    log = reopen(directory)
    assert log.recovery_report.batches_recovered == 6
    assert log.recovery_report.bytes_truncated == 30
    assert log.log_end_offset == 18
    log.close()

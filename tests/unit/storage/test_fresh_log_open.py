"""Opening a partition directory that is empty (a partition created just now): nothing to
recover, so nothing is scanned and no file but the empty segment is written (a missing
offsets checkpoint reads back as the fresh log's offsets); the log then behaves as any
other through appends, crashes and clean reopens."""
from __future__ import annotations

from kafka.record.default_records import DefaultRecordBatchBuilder

from protocol.records import iter_headers
from storage import LogConfig, PartitionLog


def make_batch(count: int = 3, timestamp: int = 1_000) -> bytearray:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(count):
        builder.append(i, timestamp=timestamp + i, key=None, value=b"v" * 40, headers=[])
    return builder.build()


def crash(log: PartitionLog) -> None:
    """Drop the log like a killed process: close fds, write nothing more."""
    for segment in log.segments:
        segment.close()
    log._closed = True


def offsets_read(log: PartitionLog) -> list[tuple[int, int]]:
    data = log.read(log.log_start_offset, 1 << 30)
    return [(h.base_offset, h.last_offset) for h in iter_headers(data)]


def test_an_empty_directory_is_opened_without_scanning_or_index_writes(tmp_path):
    directory = tmp_path / "t-0"
    log = PartitionLog.open(directory, LogConfig())
    assert log.recovery_report.segments_scanned == 0
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (0, 0, 0)
    assert log.epoch_cache.epoch_entries() == []
    names = sorted(p.name for p in directory.iterdir())
    assert names == ["00000000000000000000.log"]
    crash(log)
    log = PartitionLog.open(directory, LogConfig())
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (0, 0, 0)
    log.close()


def test_a_fresh_log_checkpoints_once_its_offsets_move(tmp_path):
    directory = tmp_path / "t-0"
    log = PartitionLog.open(directory, LogConfig())
    log.checkpoint()
    assert not (directory / "offsets.checkpoint").exists()
    log.append_as_leader(make_batch(), 0)
    log.update_high_watermark(3)
    log.checkpoint()
    assert (directory / "offsets.checkpoint").exists()
    crash(log)
    log = PartitionLog.open(directory, LogConfig())
    assert (log.log_end_offset, log.high_watermark) == (3, 3)
    log.close()


def test_a_fresh_log_keeps_its_data_through_a_crash(tmp_path):
    directory = tmp_path / "t-0"
    config = LogConfig(segment_bytes=2 * len(make_batch()))
    log = PartitionLog.open(directory, config)
    for i in range(5):
        log.append_as_leader(make_batch(timestamp=1_000 * (i + 1)), 2)
    crash(log)
    log = PartitionLog.open(directory, config)
    assert log.recovery_report.segments_scanned >= 1
    assert offsets_read(log) == [(3 * i, 3 * i + 2) for i in range(5)]
    assert log.epoch_cache.epoch_entries() == [(2, 0)]
    log.close()


def test_a_fresh_log_closed_cleanly_reopens_without_rebuilding_indexes(tmp_path):
    directory = tmp_path / "t-0"
    log = PartitionLog.open(directory, LogConfig())
    log.append_as_leader(make_batch(), 1)
    log.close()
    log = PartitionLog.open(directory, LogConfig())
    assert log.recovery_report.indexes_rebuilt == 0
    assert log.recovery_report.segments_scanned == 0
    assert offsets_read(log) == [(0, 2)]
    assert log.epoch_cache.epoch_entries() == [(1, 0)]
    log.close()


def test_a_closed_empty_log_reopens_empty(tmp_path):
    directory = tmp_path / "t-0"
    PartitionLog.open(directory, LogConfig()).close()
    log = PartitionLog.open(directory, LogConfig())
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    assert log.recovery_report.indexes_rebuilt == 0
    log.append_as_leader(make_batch(), 0)
    assert offsets_read(log) == [(0, 2)]
    log.close()

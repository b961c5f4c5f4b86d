"""FileRecords: a zero-copy read names the very bytes a plain read returns, and refuses
its regions once the segment was truncated or closed (storage/file_records.py).

Real logs in tmp_path; batches built by kafka-python the way a client builds them.
``bytes_of`` turns either kind of answer into bytes, so every comparison is between a
plain read and a zero-copy read of the same arguments.
"""
from __future__ import annotations

import os
import random

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from protocol.records import iter_headers
from storage import FileRecords, LogConfig, PartitionLog, StaleRegion, cleaner
from storage.file_records import ZERO_COPY_MIN_BYTES

NOW_MS = 10_000_000_000


def make_batch(count: int, value_size: int, *, keys: int | None = None,
               seed: int = 0) -> bytearray:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 24)
    for i in range(count):
        key = b"k%d" % ((seed + i) % keys) if keys else None
        builder.append(i, timestamp=1_000 + i, key=key,
                       value=bytes([65 + (seed + i) % 26]) * value_size, headers=[])
    return builder.build()


def open_log(tmp_path, **config) -> PartitionLog:
    return PartitionLog.open(tmp_path / "t-0", LogConfig(**config), clock_ms=lambda: NOW_MS)


def bytes_of(records) -> bytes:
    return records.read() if isinstance(records, FileRecords) else bytes(records)


def varied_log(tmp_path, batches: int = 120, **config) -> PartitionLog:
    """Batches of 1 to 40 records of 10 B to 3 KiB, over several segments."""
    config.setdefault("segment_bytes", 96 * 1024)
    config.setdefault("index_interval_bytes", 1024)
    log = open_log(tmp_path, **config)
    rng = random.Random(7)
    for n in range(batches):
        log.append_as_leader(make_batch(rng.randint(1, 40), rng.choice([10, 300, 3000]),
                                        seed=n), 0)
    log.update_high_watermark(log.log_end_offset)
    return log


def test_a_zero_copy_read_gives_the_bytes_of_a_plain_read_for_any_bounds(tmp_path):
    log = varied_log(tmp_path)
    assert len(log.segments) >= 4
    rng = random.Random(11)
    end = log.log_end_offset
    checked_files = 0
    for _ in range(1500):
        offset = rng.randrange(0, end)
        max_bytes = rng.choice([0, 1, 100, 5000, 20_000, 70_000, 300_000, 1 << 30])
        max_offset = rng.choice([None, end, rng.randrange(offset, end + 1)])
        min_one = rng.random() < 0.7
        plain = log.read(offset, max_bytes, max_offset, min_one)
        zero = log.read(offset, max_bytes, max_offset, min_one, zero_copy=True)
        assert bytes_of(zero) == bytes(plain), (offset, max_bytes, max_offset, min_one)
        if isinstance(zero, FileRecords):
            checked_files += 1
            assert len(zero) >= ZERO_COPY_MIN_BYTES and len(zero) == len(plain)
            assert sum(length for _, _, length in zero.fds()) == len(zero)
        else:
            assert len(zero) < ZERO_COPY_MIN_BYTES
    assert checked_files > 300  # most draws were large enough to stay in the files
    log.close()


def test_regions_spanning_segments_read_back_from_any_start(tmp_path):
    log = varied_log(tmp_path)
    zero = log.read(0, 1 << 30, zero_copy=True)
    plain = bytes(log.read(0, 1 << 30))
    assert isinstance(zero, FileRecords) and len(zero.fds()) == len(log.segments)
    for start in (0, 1, 4095, len(plain) // 2, len(plain) - 1, len(plain)):
        assert zero.read(start) == plain[start:]
    # the regions name the log files themselves: os.pread through them gives the bytes
    assert b"".join(os.pread(fd, length, position)
                    for fd, position, length in zero.fds()) == plain
    log.close()


def test_a_compacted_log_with_gaps_reads_the_same_both_ways(tmp_path):
    log = open_log(tmp_path, cleanup_policy="compact", segment_bytes=8 * 1024,
                   index_interval_bytes=512)
    for n in range(300):
        log.append_as_leader(make_batch(4, 200, keys=50, seed=n * 4), 0)
    log.update_high_watermark(log.log_end_offset)
    cleaner.commit(log, cleaner.clean(cleaner.plan_cleaning(log, NOW_MS)))
    spans = [(h.base_offset, h.next_offset) for h in iter_headers(log.read(0, 1 << 30))]
    assert any(base > end for (_, end), (base, _) in zip(spans, spans[1:])), "no gap"
    for offset in range(0, log.log_end_offset, 3):
        for max_bytes in (10, 3000, 40_000, 1 << 30):
            assert bytes_of(log.read(offset, max_bytes, zero_copy=True)) == \
                bytes(log.read(offset, max_bytes)), (offset, max_bytes)
    log.close()


def test_appends_after_the_read_leave_the_regions_valid(tmp_path):
    log = varied_log(tmp_path, batches=30)
    zero = log.read(0, 1 << 30, zero_copy=True)
    before = bytes(log.read(0, 1 << 30))
    for n in range(20):
        log.append_as_leader(make_batch(5, 3000, seed=n), 0)
    assert zero.read() == before
    log.close()


def test_a_truncation_after_the_read_makes_the_regions_stale(tmp_path):
    log = varied_log(tmp_path, batches=60)
    tail_start = log.segments[-1].base_offset
    zero = log.read(tail_start, 1 << 30, zero_copy=True)
    assert isinstance(zero, FileRecords)
    log.truncate_to(tail_start + 1)
    # new appends would put other bytes at the positions the regions name
    log.append_as_leader(make_batch(40, 3000), 0)
    with pytest.raises(StaleRegion):
        zero.read()
    with pytest.raises(StaleRegion):
        zero.fds()
    with pytest.raises(StaleRegion):
        zero.check()
    log.close()


@pytest.mark.parametrize("how", ["retention", "delete_records", "close"])
def test_a_segment_deleted_or_closed_after_the_read_makes_the_regions_stale(tmp_path, how):
    log = varied_log(tmp_path, batches=60)
    first = log.segments[0]
    zero = log.read(0, first.size_bytes, zero_copy=True)
    assert isinstance(zero, FileRecords)
    if how == "retention":
        log.update_config(LogConfig(segment_bytes=96 * 1024, index_interval_bytes=1024,
                                    retention_bytes=1))
        assert log.enforce_retention(NOW_MS) > 0
        assert first not in log.segments
    elif how == "delete_records":
        assert log.maybe_increment_log_start_offset(log.segments[1].base_offset,
                                                    "DeleteRecords")
        assert first not in log.segments
    else:
        log.close()
    # the fd number the region named may now belong to any file opened next
    reused = os.open(os.devnull, os.O_RDONLY)
    try:
        with pytest.raises(StaleRegion):
            zero.fds()
        with pytest.raises(StaleRegion):
            zero.read()
    finally:
        os.close(reused)
    log.close()


def test_small_reads_come_back_as_bytes(tmp_path):
    log = varied_log(tmp_path, batches=30)
    small = log.read(0, ZERO_COPY_MIN_BYTES - 1, zero_copy=True, min_one_batch=False)
    assert not isinstance(small, FileRecords) and 0 < len(small) < ZERO_COPY_MIN_BYTES
    assert log.read(log.log_end_offset, 1 << 20, zero_copy=True) == b""
    log.close()

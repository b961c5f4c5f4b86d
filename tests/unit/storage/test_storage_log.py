"""PartitionLog: appends, reads, rolls, retention, truncation, timestamps, flush policy.

Real files in tmp_path; batches built by kafka-python's DefaultRecordBatchBuilder, the
way a client builds them (baseOffset 0).
"""
from __future__ import annotations

import os

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from protocol.records import iter_headers
from storage import InvalidAppend, LogClosed, LogConfig, OffsetOutOfRange, PartitionLog


def make_batch(count: int = 3, *, timestamp: int = 1_000, value_size: int = 50,
               compression: int = 0, timestamps: list[int] | None = None) -> bytearray:
    """A client batch: baseOffset 0, offsets 0..count-1, CreateTime timestamps."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    timestamps = timestamps or [timestamp + i for i in range(count)]
    for i, ts in enumerate(timestamps):
        builder.append(i, timestamp=ts, key=b"k%d" % i, value=bytes([65 + i % 26]) * value_size,
                       headers=[])
    return builder.build()


def batch_ranges(data: bytes) -> list[tuple[int, int]]:
    """(first, last) offsets of every batch in ``data``; asserts nothing is left over."""
    headers = list(iter_headers(data))
    assert sum(h.size for h in headers) == len(data), "read returned a partial batch"
    return [(h.base_offset, h.last_offset) for h in headers]


def record_offsets(data: bytes) -> list[int]:
    offsets = []
    for header in iter_headers(data):
        batch = DefaultRecordBatch(bytes(data[header.position:header.position + header.size]))
        offsets.extend(record.offset for record in batch)
    return offsets


class FakeClock:
    def __init__(self, now_ms: int = 1_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def open_log(tmp_path, clock):
    logs = []

    def _open(**config) -> PartitionLog:
        log = PartitionLog.open(tmp_path / "t-0", LogConfig(**config), clock_ms=clock)
        logs.append(log)
        return log

    yield _open
    for log in logs:
        log.close()  # idempotent, and a no-op after delete()


def fill(log: PartitionLog, batches: int, count: int = 3, epoch: int = 0, **kwargs) -> None:
    for _ in range(batches):
        log.append_as_leader(make_batch(count, **kwargs), epoch)


# -- append / read ----------------------------------------------------------------------


@pytest.mark.parametrize("compression", [0, 1, 2, 3, 4])
def test_appended_batches_read_back_byte_identical_except_offset_and_epoch(open_log, compression):
    log = open_log()
    originals = []
    for i in range(5):
        batch = make_batch(4, timestamp=1_000 + i, compression=compression, value_size=200)
        originals.append(bytes(batch))
        info = log.append_as_leader(batch, leader_epoch=7)
        assert (info.first_offset, info.last_offset) == (4 * i, 4 * i + 3)
        assert info.size_bytes == len(batch)
        assert info.log_append_time_ms == -1
    data = log.read(0, 1 << 20)
    assert batch_ranges(data) == [(4 * i, 4 * i + 3) for i in range(5)]
    assert record_offsets(data) == list(range(20))
    for header, original in zip(iter_headers(data), originals):
        stored = data[header.position:header.position + header.size]
        assert stored[8:12] == original[8:12] and stored[16:] == original[16:]
        assert header.partition_leader_epoch == 7
    assert log.log_end_offset == 20


def test_append_as_leader_rewrites_the_callers_buffer_in_place(open_log):
    log = open_log()
    fill(log, 2)
    batch = make_batch(2)
    log.append_as_leader(batch, 3)
    header = next(iter_headers(batch))
    assert (header.base_offset, header.partition_leader_epoch) == (6, 3)


def test_read_from_a_middle_offset_returns_the_containing_batch(open_log):
    log = open_log(index_interval_bytes=0)
    fill(log, 10, count=5)
    assert batch_ranges(log.read(23, 1 << 20))[0] == (20, 24)
    assert batch_ranges(log.read(20, 1 << 20))[0] == (20, 24)
    assert batch_ranges(log.read(24, 1 << 20))[0] == (20, 24)


def test_read_stops_before_batch_at_max_offset_exclusive(open_log):
    log = open_log()
    fill(log, 5)  # batches 0-2, 3-5, 6-8, 9-11, 12-14
    assert batch_ranges(log.read(0, 1 << 20, max_offset=9)) == [(0, 2), (3, 5), (6, 8)]
    assert batch_ranges(log.read(0, 1 << 20, max_offset=10)) == [(0, 2), (3, 5), (6, 8), (9, 11)]
    assert log.read(9, 1 << 20, max_offset=9) == b""
    assert log.read(12, 1 << 20, max_offset=9) == b""


def test_read_returns_whole_batches_within_max_bytes(open_log):
    log = open_log()
    fill(log, 5)
    size = len(make_batch(3))
    assert batch_ranges(log.read(0, 2 * size + size // 2)) == [(0, 2), (3, 5)]
    assert batch_ranges(log.read(0, 2 * size)) == [(0, 2), (3, 5)]


def test_min_one_batch_returns_a_first_batch_larger_than_max_bytes(open_log):
    log = open_log()
    fill(log, 3)
    assert batch_ranges(log.read(3, 10)) == [(3, 5)]
    assert log.read(3, 10, min_one_batch=False) == b""
    assert log.read(3, 0, min_one_batch=False) == b""


def test_read_outside_log_raises_offset_out_of_range_and_log_end_is_empty(open_log):
    log = open_log(retention_bytes=0, segment_bytes=500)
    fill(log, 4)
    log.update_high_watermark(log.log_end_offset)
    log.enforce_retention()
    assert log.log_start_offset > 0
    with pytest.raises(OffsetOutOfRange) as excinfo:
        log.read(log.log_start_offset - 1, 1000)
    assert (excinfo.value.log_start_offset, excinfo.value.log_end_offset) == (
        log.log_start_offset, log.log_end_offset)
    with pytest.raises(OffsetOutOfRange):
        log.read(log.log_end_offset + 1, 1000)
    assert log.read(log.log_end_offset, 1000) == b""


def test_read_continues_across_segments(open_log):
    log = open_log(segment_bytes=600)
    fill(log, 6)
    assert len(log.segments) >= 3
    assert record_offsets(log.read(1, 1 << 20)) == list(range(18))


def test_append_as_leader_refuses_an_epoch_older_than_the_latest(open_log):
    log = open_log()
    log.append_as_leader(make_batch(), 5)
    with pytest.raises(InvalidAppend):
        log.append_as_leader(make_batch(), 4)
    assert log.log_end_offset == 3
    assert log.epoch_cache.epoch_entries() == [(5, 0)]
    log.append_as_leader(make_batch(), 6)
    assert log.epoch_cache.epoch_entries() == [(5, 0), (6, 3)]


def test_append_as_leader_refuses_incomplete_or_immutable_buffers(open_log):
    log = open_log()
    batch = make_batch()
    with pytest.raises(InvalidAppend):
        log.append_as_leader(batch[:-1], 0)
    with pytest.raises(InvalidAppend):
        log.append_as_leader(batch + batch, 0)
    with pytest.raises(InvalidAppend):
        log.append_as_leader(bytes(batch), 0)
    assert log.log_end_offset == 0 and log.size_bytes == 0


# -- follower appends ---------------------------------------------------------------------


def leader_bytes(tmp_path, batches: int, epochs: list[int] | None = None) -> bytes:
    leader = PartitionLog.open(tmp_path / "leader-0", LogConfig())
    for i in range(batches):
        leader.append_as_leader(make_batch(3, timestamp=1_000 + i), (epochs or [0] * batches)[i])
    data = leader.read(0, 1 << 30)
    leader.close()
    return data


def test_follower_append_copies_leader_batches_and_epochs(open_log, tmp_path):
    data = leader_bytes(tmp_path, 4, epochs=[1, 1, 3, 3])
    log = open_log(segment_bytes=500)
    info = log.append_as_follower(data)
    assert (info.first_offset, info.last_offset, info.size_bytes) == (0, 11, len(data))
    assert log.read(0, 1 << 30) == data
    assert log.epoch_cache.epoch_entries() == [(1, 0), (3, 6)]
    assert len(log.segments) > 1
    assert log.append_as_follower(b"") is None


def test_follower_append_must_not_start_below_log_end_offset(open_log, tmp_path):
    data = leader_bytes(tmp_path, 3)
    log = open_log()
    log.append_as_follower(data)
    size = log.size_bytes
    with pytest.raises(InvalidAppend):
        log.append_as_follower(data[len(make_batch()):])  # offsets 3.. are already here
    assert log.log_end_offset == 9 and log.size_bytes == size


def test_follower_append_accepts_the_gaps_a_compacted_leader_returns(open_log, tmp_path):
    data = leader_bytes(tmp_path, 3)
    log = open_log()
    second_onwards = data[len(make_batch()):]  # the leader's cleaner dropped offsets 0..2
    log.append_as_follower(second_onwards)
    assert log.log_end_offset == 9
    assert batch_ranges(log.read(0, 1 << 30)) == [(3, 5), (6, 8)]


def test_follower_append_refuses_corrupt_or_torn_input_without_writing(open_log, tmp_path):
    data = bytearray(leader_bytes(tmp_path, 3))
    log = open_log()
    with pytest.raises(InvalidAppend):
        log.append_as_follower(bytes(data[:-5]))
    data[-3] ^= 0xFF
    with pytest.raises(InvalidAppend):
        log.append_as_follower(bytes(data))
    assert log.log_end_offset == 0 and log.size_bytes == 0


# -- rolling --------------------------------------------------------------------------


def test_roll_by_size_keeps_segments_within_segment_bytes(open_log):
    size = len(make_batch())
    log = open_log(segment_bytes=3 * size)
    fill(log, 10)
    assert [s.size_bytes for s in log.segments] == [3 * size, 3 * size, 3 * size, size]
    assert [s.base_offset for s in log.segments] == [0, 9, 18, 27]


def test_a_batch_larger_than_segment_bytes_gets_its_own_segment(open_log):
    log = open_log(segment_bytes=100)
    fill(log, 3)
    assert [s.base_offset for s in log.segments] == [0, 3, 6]


def test_roll_by_segment_ms_since_first_append(open_log, clock):
    log = open_log(segment_ms=1_000)
    fill(log, 2)
    clock.now_ms += 1_000
    fill(log, 1)
    assert len(log.segments) == 1
    clock.now_ms += 1
    fill(log, 1)
    assert [s.base_offset for s in log.segments] == [0, 9]
    clock.now_ms += 5_000  # an empty-then-first-append segment starts its own clock
    fill(log, 1)
    assert [s.base_offset for s in log.segments] == [0, 9, 12]


def test_segment_jitter_ms_rolls_each_partition_a_little_before_segment_ms(tmp_path, clock):
    """segment.jitter.ms (Kafka's): each partition's segment rolls within
    (segment.ms - jitter, segment.ms], at its own point; without a jitter at segment.ms."""
    config = LogConfig(segment_ms=1_000, segment_jitter_ms=1_000)
    logs = [PartitionLog.open(tmp_path / f"t-{i}", config, clock_ms=clock) for i in range(8)]
    rolled_at: dict[int, int] = {}
    try:
        for log in logs:
            fill(log, 1)
        start = clock.now_ms
        for step in range(1, 12):  # 100 ms steps up to 1.1 s
            clock.now_ms = start + 100 * step
            for i, log in enumerate(logs):
                fill(log, 1)
                if len(log.segments) > 1:
                    rolled_at.setdefault(i, 100 * step)
    finally:
        for log in logs:
            log.close()
    assert sorted(rolled_at) == list(range(8))
    assert all(100 <= at <= 1_100 for at in rolled_at.values())
    assert len(set(rolled_at.values())) > 1, rolled_at


def test_roll_when_the_index_is_full(open_log):
    log = open_log(index_interval_bytes=0, segment_index_bytes=24)  # 3 offset / 2 time entries
    fill(log, 8, timestamp=1_000)
    assert len(log.segments) > 1
    for segment in log.segments:
        assert len(segment.offset_index) <= 3


# -- retention -----------------------------------------------------------------------


def test_retention_ms_deletes_old_segments_and_moves_log_start_offset(open_log, clock):
    size = len(make_batch())
    log = open_log(segment_bytes=2 * size, retention_ms=10_000)
    for i in range(6):
        fill(log, 1, timestamp=1_000 * (i + 1))  # segments: [1000,2000] [3000,4000] [5000,6000]
    log.update_high_watermark(log.log_end_offset)
    assert log.enforce_retention(now_ms=14_500) == 2
    assert log.log_start_offset == 12 and log.segments[0].base_offset == 12
    assert log.epoch_cache.epoch_entries() == [(0, 12)]
    with pytest.raises(OffsetOutOfRange):
        log.read(0, 1000)


def test_retention_never_deletes_a_segment_not_entirely_below_the_high_watermark(open_log):
    size = len(make_batch())
    log = open_log(segment_bytes=2 * size, retention_ms=0)
    fill(log, 6, timestamp=1_000)
    log.update_high_watermark(5)  # inside the first segment (offsets 0-5)
    assert log.enforce_retention(now_ms=10**9) == 0
    log.update_high_watermark(6)
    assert log.enforce_retention(now_ms=10**9) == 1
    assert log.log_start_offset == 6


def test_retention_bytes_deletes_oldest_while_the_rest_stays_above_the_limit(open_log):
    size = len(make_batch())
    log = open_log(segment_bytes=2 * size, retention_bytes=3 * size)
    fill(log, 8)
    log.update_high_watermark(log.log_end_offset)
    assert log.enforce_retention() == 2  # 8 batches → 4 segments; keep >= 3 batches' worth
    assert log.size_bytes == 4 * size and log.log_start_offset == 12


def test_an_expired_active_segment_is_rolled_then_deleted(open_log):
    log = open_log(retention_ms=100)
    fill(log, 2, timestamp=1_000)
    log.update_high_watermark(log.log_end_offset)
    assert log.enforce_retention(now_ms=10**9) == 1
    assert [s.base_offset for s in log.segments] == [6]
    assert log.log_start_offset == log.log_end_offset == log.high_watermark == 6
    fill(log, 1)
    assert batch_ranges(log.read(6, 1000)) == [(6, 8)]


def test_unlimited_retention_deletes_nothing(open_log):
    log = open_log(segment_bytes=300, retention_ms=-1, retention_bytes=-1)
    fill(log, 5, timestamp=1)
    log.update_high_watermark(log.log_end_offset)
    assert log.enforce_retention(now_ms=10**12) == 0 and log.log_start_offset == 0


# -- truncation ----------------------------------------------------------------------


def test_truncate_to_then_append_continues_densely(open_log):
    log = open_log(segment_bytes=600)
    fill(log, 8, epoch=1)
    fill(log, 2, epoch=2)
    log.update_high_watermark(30)
    log.truncate_to(12)
    assert log.log_end_offset == 12 and log.high_watermark == 12
    assert all(s.base_offset <= 12 for s in log.segments)
    assert log.epoch_cache.epoch_entries() == [(1, 0)]
    log.append_as_leader(make_batch(2), 3)
    assert record_offsets(log.read(0, 1 << 20)) == list(range(14))
    assert log.epoch_cache.epoch_entries() == [(1, 0), (3, 12)]


def test_truncate_inside_a_batch_removes_the_whole_batch(open_log):
    log = open_log()
    fill(log, 3)
    log.truncate_to(4)
    assert log.log_end_offset == 3
    assert batch_ranges(log.read(0, 1 << 20)) == [(0, 2)]


def test_truncate_at_or_beyond_log_end_is_a_no_op(open_log):
    log = open_log()
    fill(log, 2)
    log.truncate_to(6)
    log.truncate_to(100)
    assert log.log_end_offset == 6


def test_truncate_fully_and_start_at_resets_every_offset(open_log):
    log = open_log(segment_bytes=300)
    fill(log, 4)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (100, 100, 100)
    assert [s.base_offset for s in log.segments] == [100]
    assert log.epoch_cache.epoch_entries() == []
    fill(log, 1, epoch=4)
    assert batch_ranges(log.read(100, 1000)) == [(100, 102)]
    assert log.epoch_cache.epoch_entries() == [(4, 100)]


def test_update_high_watermark_clamps_into_the_log(open_log):
    log = open_log()
    fill(log, 2)
    log.update_high_watermark(100)
    assert log.high_watermark == 6
    log.update_high_watermark(-5)
    assert log.high_watermark == 0


# -- timestamps ----------------------------------------------------------------------


def timestamp_log(open_log) -> PartitionLog:
    """Batches with max timestamps 1002, 2002, 5002 (gzip), 3002, 4002, in 2 segments."""
    size = len(make_batch(3, value_size=50))
    log = open_log(segment_bytes=3 * size, index_interval_bytes=0)
    fill(log, 1, timestamp=1_000)
    fill(log, 1, timestamp=2_000)
    fill(log, 1, timestamps=[2_500, 5_002, 2_600], compression=1, value_size=400)
    fill(log, 1, timestamp=3_000)
    fill(log, 1, timestamp=4_000)
    return log


def test_offset_for_timestamp_finds_the_first_record_at_or_after(open_log):
    log = timestamp_log(open_log)
    assert len(log.segments) == 2
    assert log.offset_for_timestamp(0) == (0, 1_000)
    assert log.offset_for_timestamp(1_001) == (1, 1_001)
    assert log.offset_for_timestamp(2_003) == (6, 2_500)
    assert log.offset_for_timestamp(2_501) == (7, 5_002)
    assert log.offset_for_timestamp(5_002) == (7, 5_002)
    assert log.offset_for_timestamp(5_003) is None


def test_max_timestamp_and_offset_is_the_record_with_the_largest_timestamp(open_log):
    log = timestamp_log(open_log)
    assert log.max_timestamp_and_offset() == (5_002, 7)
    fill(log, 1, timestamps=[9_000, 8_000])
    assert log.max_timestamp_and_offset() == (9_000, 15)


def test_timestamp_lookups_on_an_empty_log_find_nothing(open_log):
    log = open_log()
    assert log.offset_for_timestamp(0) is None
    assert log.max_timestamp_and_offset() is None


def test_timestamp_lookups_survive_reopen(open_log, tmp_path, clock):
    log = timestamp_log(open_log)
    log.close()
    log = PartitionLog.open(tmp_path / "t-0", log.config, clock_ms=clock)
    assert log.recovery_report.segments_scanned == 0
    assert log.offset_for_timestamp(2_501) == (7, 5_002)
    assert log.max_timestamp_and_offset() == (5_002, 7)
    log.close()


# -- flush policy, lifecycle ---------------------------------------------------------


def test_flush_messages_policy_advances_the_recovery_point(open_log):
    log = open_log(flush_messages=5)
    fill(log, 1)
    log.maybe_flush()
    assert log.recovery_point == 0
    fill(log, 1)
    log.maybe_flush()
    assert log.recovery_point == 6


def test_flush_ms_policy_uses_the_clock(open_log, clock):
    log = open_log(flush_ms=1_000)
    fill(log, 1)
    log.maybe_flush()
    assert log.recovery_point == 0
    clock.now_ms += 1_000
    log.maybe_flush()
    assert log.recovery_point == 3


def test_flush_up_to_an_offset_sets_the_recovery_point_there(open_log):
    log = open_log(segment_bytes=300)
    fill(log, 4)
    log.flush(up_to_offset=6)
    assert log.recovery_point == 6
    log.flush()
    assert log.recovery_point == 12


def test_checkpoint_persists_offsets_for_the_next_open(open_log, tmp_path, clock):
    log = open_log()
    fill(log, 3)
    log.update_high_watermark(6)
    log.flush()
    log.checkpoint()
    text = (tmp_path / "t-0" / "offsets.checkpoint").read_text().split("\n")
    assert text[:4] == ["0", "high_watermark 6", "recovery_point 9", "log_start_offset 0"]
    log.close()
    reopened = PartitionLog.open(tmp_path / "t-0", LogConfig(), clock_ms=clock)
    assert (reopened.high_watermark, reopened.log_end_offset) == (6, 9)
    reopened.close()


def test_a_closed_log_refuses_reads_and_appends(open_log):
    log = open_log()
    fill(log, 1)
    log.close()
    log.close()  # idempotent
    with pytest.raises(LogClosed):
        log.read(0, 100)
    with pytest.raises(LogClosed):
        log.append_as_leader(make_batch(), 0)


def test_delete_removes_the_partition_directory(open_log, tmp_path):
    log = open_log()
    fill(log, 2)
    log.delete()
    assert not os.path.exists(tmp_path / "t-0")


def test_update_config_applies_to_the_next_roll(open_log):
    log = open_log()
    fill(log, 2)
    log.update_config(LogConfig(segment_bytes=len(make_batch())))
    fill(log, 1)
    assert [s.base_offset for s in log.segments] == [0, 6]


def test_retention_ms_of_a_segment_without_timestamps_counts_from_its_file_time(open_log):
    size = len(make_batch())
    log = open_log(segment_bytes=size, retention_ms=60_000)
    fill(log, 2, timestamps=[-1, -1, -1])
    log.update_high_watermark(log.log_end_offset)
    mtime_ms = os.stat(log.segments[0].log_path).st_mtime_ns // 1_000_000
    assert log.enforce_retention(now_ms=mtime_ms + 1_000) == 0
    assert log.enforce_retention(now_ms=mtime_ms + 61_000) == 2  # the active one rolled too
    assert log.log_start_offset == log.log_end_offset == 6

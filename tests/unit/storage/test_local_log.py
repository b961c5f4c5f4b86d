"""LocalLog, the segment half of the partition log: its own invariants, without the
offsets, epochs and producer state ``PartitionLog`` keeps over it.

Real files in tmp_path; batches built by kafka-python's DefaultRecordBatchBuilder with
their offsets assigned the way ``PartitionLog`` assigns them before handing them down.
"""
from __future__ import annotations

import os

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from protocol.records import assign_offset_and_epoch, iter_headers, valid_prefix
from storage import LogConfig
from storage.local_log import LocalLog
from storage.segment import LogSegment


def batch_at(base_offset: int, count: int = 3, value_size: int = 50) -> bytearray:
    """A stored batch: offsets base_offset..base_offset+count-1, leader epoch 0."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(count):
        builder.append(i, timestamp=1_000 + i, key=None, value=b"v" * value_size, headers=[])
    batch = builder.build()
    assign_offset_and_epoch(batch, 0, base_offset, 0)
    return batch


class Clock:
    now_ms = 1_000_000

    def __call__(self) -> int:
        return self.now_ms


@pytest.fixture
def local_log(tmp_path):
    directory = str(tmp_path / "t-0")
    os.makedirs(directory)
    config = LogConfig()
    log = LocalLog(directory, config, [LogSegment.create(directory, 0,
                                                         config.index_interval_bytes)],
                   0, Clock(), "[LocalLog t-0]")
    yield log
    log.close_handlers()


def append(log: LocalLog, batch: bytearray) -> None:
    headers, _ = valid_prefix(batch)
    log.append(batch, headers, 1_000_000, sum(h.records_count for h in headers))


def fill(log: LocalLog, segments: int, batches_per_segment: int = 2) -> None:
    """``segments`` segments of ``batches_per_segment`` 3-record batches, the last active."""
    for segment in range(segments):
        if segment:
            log.roll("test")
        for _ in range(batches_per_segment):
            append(log, batch_at(log.log_end_offset))


def assert_bases_match(log: LocalLog) -> None:
    assert log.bases == [segment.base_offset for segment in log.segments]
    assert log.bases == sorted(set(log.bases))
    assert log.active_segment is log.segments[-1]
    assert log.recovery_point <= log.log_end_offset


def ranges(data) -> list[tuple[int, int]]:
    return [(h.base_offset, h.last_offset) for h in iter_headers(bytes(data))]


def test_bases_follow_the_segments_through_roll_truncation_and_deletion(local_log):
    fill(local_log, 4)
    assert local_log.bases == [0, 6, 12, 18]
    assert_bases_match(local_log)
    local_log.truncate_to(13)  # inside the batch 12..14: the whole batch goes
    assert local_log.log_end_offset == 12
    assert_bases_match(local_log)
    local_log.remove_and_delete_segments(1, "test")
    assert local_log.bases == [6, 12]
    assert_bases_match(local_log)
    local_log.truncate_fully_and_start_at(40)
    assert local_log.bases == [40] and local_log.log_end_offset == 40
    assert_bases_match(local_log)


def test_deleted_segments_leave_no_files(local_log):
    fill(local_log, 3)
    local_log.remove_and_delete_segments(2, "test")
    names = sorted(os.listdir(local_log.directory))
    assert f"{12:020d}.log" in names
    assert all(name.startswith(f"{12:020d}.") for name in names), names


def test_a_read_spans_segments_and_stops_before_the_upper_offset(local_log):
    fill(local_log, 3)
    everything = local_log.read(0, 1 << 20, local_log.log_end_offset, True, False)
    assert ranges(everything) == [(0, 2), (3, 5), (6, 8), (9, 11), (12, 14), (15, 17)]
    below_third_segment = local_log.read(4, 1 << 20, 12, True, False)
    assert ranges(below_third_segment) == [(3, 5), (6, 8), (9, 11)]


def test_a_read_returns_one_whole_batch_beyond_max_bytes_only_with_min_one_batch(local_log):
    fill(local_log, 1)
    assert ranges(local_log.read(0, 1, local_log.log_end_offset, True, False)) == [(0, 2)]
    assert local_log.read(0, 1, local_log.log_end_offset, False, False) == b""


def test_the_recovery_point_never_passes_log_end_offset(local_log):
    fill(local_log, 2)
    local_log.flush(local_log.log_end_offset)
    local_log.mark_flushed(local_log.log_end_offset)
    assert local_log.recovery_point == 12
    local_log.truncate_to(6)
    assert local_log.recovery_point == local_log.log_end_offset == 6
    local_log.truncate_fully_and_start_at(30)
    assert local_log.recovery_point == local_log.log_end_offset == 30


def test_the_recovery_point_only_moves_forward(local_log):
    fill(local_log, 2)
    local_log.mark_flushed(9)
    local_log.mark_flushed(3)
    local_log.maybe_increment_recovery_point(6)
    assert local_log.recovery_point == 9


def test_unflushed_messages_reset_only_when_everything_is_flushed(local_log):
    fill(local_log, 1)
    assert local_log.unflushed_messages == 6
    local_log.flush(3)
    local_log.mark_flushed(3)
    assert local_log.unflushed_messages == 6
    local_log.flush(6)
    local_log.mark_flushed(6)
    assert local_log.unflushed_messages == 0


def test_an_empty_active_segment_never_rolls(local_log):
    assert local_log.roll_reason(1 << 40, 0, 1_000_000) is None
    append(local_log, batch_at(0))
    assert local_log.roll_reason(1 << 40, 3, 1_000_000).startswith("segment.bytes")


def test_the_swap_refuses_segments_that_are_no_longer_the_logs(local_log):
    fill(local_log, 3)
    old = list(local_log.segments[:2])
    sizes = [segment.size_bytes for segment in old]
    local_log.remove_and_delete_segments(1, "retention meanwhile")
    cleaned = LogSegment.create(local_log.directory, 0, LogConfig().index_interval_bytes,
                                ".cleaned")
    assert local_log.replace_segments(old, sizes, cleaned, lambda step: None) is False
    assert local_log.bases == [6, 12]
    assert not [name for name in os.listdir(local_log.directory) if name.endswith(".cleaned")]


def test_the_swap_never_takes_the_active_segment(local_log):
    fill(local_log, 2)
    old = list(local_log.segments)
    cleaned = LogSegment.create(local_log.directory, 0, LogConfig().index_interval_bytes,
                                ".cleaned")
    assert local_log.replace_segments(old, [s.size_bytes for s in old], cleaned,
                                      lambda step: None) is False
    assert local_log.segments == old

"""PartitionLog.maybe_increment_log_start_offset (DeleteRecords; followers taking the
leader's log_start_offset): the start moves only forward and never past the high
watermark, whole segments below it go, the rest stays readable from the new start, and
a reopened log keeps it."""
from __future__ import annotations

import pytest

from storage import LogConfig, OffsetOutOfRange, PartitionLog
from tests.unit.storage.test_storage_log import batch_ranges, make_batch


def filled(tmp_path, batches: int = 10) -> PartitionLog:
    """10 batches of 3 records (offsets 0..29), about two batches per segment, HW at 30."""
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=700))
    for _ in range(batches):
        log.append_as_leader(make_batch(3), 0)
    log.update_high_watermark(log.log_end_offset)
    return log


def test_the_start_moves_inside_a_segment_deleting_only_whole_segments_below_it(tmp_path):
    log = filled(tmp_path)
    assert len(log.segments) > 3
    assert log.maybe_increment_log_start_offset(13, "delete records") is True
    assert log.log_start_offset == 13
    assert log.segments[0].base_offset <= 13 < log.segments[0].next_offset
    assert batch_ranges(log.read(13, 1 << 20))[0] == (12, 14)   # the batch holding 13
    with pytest.raises(OffsetOutOfRange):
        log.read(12, 1 << 20)
    assert log.recovery_point >= 13
    log.close()
    reopened = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=700))
    assert reopened.log_start_offset == 13 and reopened.log_end_offset == 30
    reopened.close()


def test_the_start_never_moves_back_nor_past_the_high_watermark(tmp_path):
    log = filled(tmp_path)
    log.update_high_watermark(21)
    assert log.maybe_increment_log_start_offset(9, "r") is True
    assert log.maybe_increment_log_start_offset(9, "r") is False
    assert log.maybe_increment_log_start_offset(4, "r") is False
    assert log.log_start_offset == 9
    with pytest.raises(OffsetOutOfRange):
        log.maybe_increment_log_start_offset(22, "r")
    assert log.log_start_offset == 9 and log.log_end_offset == 30
    log.close()


def test_deleting_up_to_the_log_end_leaves_an_empty_log_that_takes_appends(tmp_path):
    log = filled(tmp_path)
    assert log.maybe_increment_log_start_offset(30, "r") is True
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (30, 30, 0)
    assert log.read(30, 1 << 20) == b""
    info = log.append_as_leader(make_batch(2), 1)
    assert (info.first_offset, info.last_offset) == (30, 31)
    log.close()

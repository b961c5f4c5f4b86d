"""PartitionLog.append_as_follower's single pass (storage/log.py): a fetch appended batch
by batch, or whole, or across segment rolls leaves the same log; the AppendInfo is the
whole fetch's; a disk error anywhere in the append (not only in the segment's write)
still leaves as StorageIOError.

Real files in tmp_path; the leader's bytes come from a leader PartitionLog, as a
follower's fetch does.
"""
from __future__ import annotations

import errno

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from protocol.records import iter_headers
from storage import LogConfig, PartitionLog
from storage.errors import StorageIOError
from storage.segment import LogSegment


def client_batch(first_timestamp: int, count: int = 3) -> bytearray:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(count):
        builder.append(i, timestamp=first_timestamp + i, key=None, value=b"v" * 40, headers=[])
    return builder.build()


def leader_fetch(tmp_path, timestamps: list[int], epochs: list[int]) -> bytes:
    """What a follower fetches from offset 0 of a leader that appended one batch per
    entry of ``timestamps`` (its first record's) in the matching leader epoch."""
    leader = PartitionLog.open(tmp_path / "leader-0", LogConfig())
    for first_timestamp, epoch in zip(timestamps, epochs):
        leader.append_as_leader(client_batch(first_timestamp), epoch)
    data = bytes(leader.read(0, 1 << 30))
    leader.close()
    return data


def state(log: PartitionLog) -> tuple:
    return (bytes(log.read(0, 1 << 30)), log.log_end_offset,
            log.epoch_cache.epoch_entries(), log.producer_state.map_end_offset,
            [(s.base_offset, s.next_offset, s.size_bytes) for s in log.segments])


@pytest.mark.parametrize("segment_bytes", [1 << 20, 400])
def test_a_fetch_appended_whole_or_batch_by_batch_leaves_the_same_log(tmp_path, segment_bytes):
    data = leader_fetch(tmp_path, [5_000, 1_000, 9_000, 2_000], [1, 1, 4, 4])
    whole = PartitionLog.open(tmp_path / "whole-0", LogConfig(segment_bytes=segment_bytes))
    piecewise = PartitionLog.open(tmp_path / "piecewise-0",
                                  LogConfig(segment_bytes=segment_bytes))
    try:
        info = whole.append_as_follower(data)
        for header in iter_headers(data):
            piecewise.append_as_follower(data[header.position:header.position + header.size])
        assert state(whole) == state(piecewise)
        assert whole.epoch_cache.epoch_entries() == [(1, 0), (4, 6)]
        # The AppendInfo covers the whole fetch: its largest timestamp, not its last.
        assert (info.first_offset, info.last_offset, info.max_timestamp, info.size_bytes) \
            == (0, 11, 9_002, len(data))
        if segment_bytes == 400:
            assert len(whole.segments) > 1
    finally:
        whole.close()
        piecewise.close()


def test_a_disk_error_outside_the_segment_write_is_a_storage_io_error(tmp_path, monkeypatch):
    """The roll before the append cannot create the new segment (a full disk): the
    OSError leaves as StorageIOError, as every storage failure does, and nothing is
    appended."""
    data = leader_fetch(tmp_path, [1_000, 2_000], [0, 0])
    first = next(iter_headers(data))
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=first.size))
    try:
        log.append_as_follower(data[:first.size])

        def no_space(*args, **kwargs):
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(LogSegment, "create", no_space)
        with pytest.raises(StorageIOError, match="append_as_follower failed"):
            log.append_as_follower(data[first.size:])
        assert log.log_end_offset == 3
    finally:
        monkeypatch.undo()
        log.close()

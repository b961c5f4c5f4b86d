"""The leader-epoch checkpoint: an assignment is written (and fsynced) by the log's flush,
not at once, and one lost in a crash comes back from the batches above the recovery point."""
from __future__ import annotations

import os

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from storage import LogConfig, PartitionLog, checkpoint


def _batch(count: int = 3) -> bytearray:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(count):
        builder.append(i, timestamp=1_000 + i, key=None, value=b"v" * 20, headers=[])
    return builder.build()


@pytest.fixture
def fsyncs(monkeypatch):
    """Paths (or fds) fsynced through storage.checkpoint, in order."""
    calls = []
    real_fsync = os.fsync

    def counting_fsync(fd):
        calls.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(checkpoint.os, "fsync", counting_fsync)
    return calls


def test_assigning_an_epoch_leaves_the_checkpoint_to_the_next_flush(tmp_path, fsyncs):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    try:
        before = len(fsyncs)
        log.append_as_leader(_batch(), 4)
        assert len(fsyncs) == before, "an epoch assignment fsynced on the append path"
        assert log.epoch_cache.unflushed
        assert not checkpoint.read_leader_epochs(log.directory)
        log.flush()
        assert not log.epoch_cache.unflushed
        assert len(fsyncs) > before
        assert checkpoint.read_leader_epochs(log.directory) == [(4, 0)]
    finally:
        log.close()


def test_close_leaves_no_assignment_unflushed(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    log.append_as_leader(_batch(), 1)
    log.append_as_leader(_batch(), 2)
    log.close()
    assert not log.epoch_cache.unflushed
    assert checkpoint.read_leader_epochs(tmp_path / "t-0") == [(1, 0), (2, 3)]


@pytest.mark.parametrize("lost_file", ["older version", "garbled", "missing"])
def test_an_assignment_lost_in_a_crash_comes_back_from_the_log(tmp_path, lost_file):
    """The crash may leave the old file, a torn one or none: recovery re-adds every
    epoch of the batches above the recovery point, so the cache is whole again."""
    directory = tmp_path / "t-0"
    log = PartitionLog.open(directory, LogConfig())
    log.append_as_leader(_batch(), 1)
    log.flush()  # epoch 1 durable, recovery point 3
    log.checkpoint()  # ... and saved: recovery reads only the batches from offset 3
    older = (directory / checkpoint.LEADER_EPOCH_CHECKPOINT).read_bytes()
    log.append_as_leader(_batch(), 2)
    log.append_as_leader(_batch(), 3)
    assert log.epoch_cache.epoch_entries() == [(1, 0), (2, 3), (3, 6)]
    log.close_handlers()  # crash: no flush, no clean-shutdown marker
    path = directory / checkpoint.LEADER_EPOCH_CHECKPOINT
    if lost_file == "older version":
        path.write_bytes(older)
    elif lost_file == "garbled":
        path.write_bytes(b"\x00\x17garbage")
    else:
        path.unlink()
    reopened = PartitionLog.open(directory, LogConfig())
    try:
        assert reopened.log_end_offset == 9
        assert reopened.epoch_cache.epoch_entries() == [(1, 0), (2, 3), (3, 6)]
    finally:
        reopened.close()

"""The offsets-checkpoint pass and the shutdown close run in worker threads
(broker/replication/log_io.py), not on the event loop: at 10,000 partitions each was
tens of thousands of fsyncs, which stalled every request (the checkpoint) or outlasted
the stop bound after SIGTERM (the close).  One process, a ReplicaManager on a tmp dir.
"""
from __future__ import annotations

import asyncio
import os
import threading

import storage.checkpoint
from protocol.errors import ErrorCode
from storage.checkpoint import CLEAN_SHUTDOWN_MARKER, read_offsets
from tests.unit.replication.test_log_dir_offline import (
    produce,
    reopened,
    replica_manager,
    single_broker_image,
)

PARTITIONS = 12


def record_threads(monkeypatch, name: str) -> list[str]:
    """Wrap ``storage.checkpoint.<name>`` to record the thread of every call."""
    threads: list[str] = []
    original = getattr(storage.checkpoint, name)

    def recording(*args, **kwargs):
        threads.append(threading.current_thread().name)
        return original(*args, **kwargs)

    monkeypatch.setattr(storage.checkpoint, name, recording)
    return threads


def test_the_checkpoint_pass_writes_the_moved_offsets_off_the_event_loop(tmp_path, monkeypatch):
    rm, stops = replica_manager(tmp_path, single_broker_image(PARTITIONS))
    for index in range(PARTITIONS):
        assert produce(rm, index, b"a", b"b").error == ErrorCode.NONE
    writes = record_threads(monkeypatch, "write_offsets")

    asyncio.run(rm._checkpoint_once())

    assert len(writes) == PARTITIONS, "one write per partition whose offsets moved"
    assert threading.main_thread().name not in writes
    for index in range(PARTITIONS):
        offsets = read_offsets(tmp_path / f"t-{index}")
        assert offsets is not None and offsets.high_watermark == 2
    asyncio.run(rm._checkpoint_once())
    assert len(writes) == PARTITIONS, "nothing moved: the second pass writes nothing"
    assert not stops
    asyncio.run(rm.shutdown())


def test_shutdown_closes_every_log_cleanly_off_the_event_loop(tmp_path, monkeypatch):
    rm, stops = replica_manager(tmp_path, single_broker_image(PARTITIONS))
    for index in range(PARTITIONS):
        assert produce(rm, index, b"v%d" % index).error == ErrorCode.NONE
    markers = record_threads(monkeypatch, "write_clean_shutdown_marker")

    asyncio.run(rm.shutdown())

    assert len(markers) == PARTITIONS and threading.main_thread().name not in markers
    assert not stops
    for index in range(PARTITIONS):
        assert os.path.exists(tmp_path / f"t-{index}" / CLEAN_SHUTDOWN_MARKER)
        assert reopened(tmp_path, index) == [b"v%d" % index]

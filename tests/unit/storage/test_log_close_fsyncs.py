"""Closing a log fsyncs only what holds data: the clean-shutdown marker is created
without fsync (lost in a crash, it only costs a recovery scan), so a broker closing
thousands of idle partitions at SIGTERM does not wait on two fsyncs for each."""
from __future__ import annotations

import os

import storage.checkpoint
from storage.checkpoint import CLEAN_SHUTDOWN_MARKER, consume_clean_shutdown_marker
from storage.config import LogConfig
from storage.log import PartitionLog


def test_closing_an_empty_log_fsyncs_nothing_and_marks_a_clean_shutdown(tmp_path, monkeypatch):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    fsyncs: list[int] = []

    class CountingOs:
        def __getattr__(self, name):
            return getattr(os, name)

        def fsync(self, fd):
            fsyncs.append(fd)
            os.fsync(fd)

    monkeypatch.setattr(storage.checkpoint, "os", CountingOs())
    log.close()
    monkeypatch.undo()

    assert fsyncs == []
    assert os.path.exists(tmp_path / "t-0" / CLEAN_SHUTDOWN_MARKER)
    assert consume_clean_shutdown_marker(tmp_path / "t-0")

"""LogConfig speaks Kafka's topic-config names; checkpoints are atomic and a garbled one
is treated as absent rather than stopping startup."""
from __future__ import annotations

import logging
import os

import pytest

from storage import LogConfig, checkpoint
from storage.checkpoint import PartitionOffsets


def test_defaults_are_kafkas():
    config = LogConfig()
    assert config.segment_bytes == 1 << 30
    assert config.segment_ms == 7 * 24 * 3600 * 1000 == config.retention_ms
    assert config.retention_bytes == -1
    assert config.flush_messages == config.flush_ms == 2**63 - 1
    assert config.index_interval_bytes == 4096
    assert config.segment_index_bytes == 10 * 1024 * 1024


def test_from_properties_maps_topic_config_names_and_ignores_unknown_keys():
    config = LogConfig.from_properties({
        "segment.bytes": "1048576", "segment.ms": "60000", "retention.ms": "-1",
        "retention.bytes": "5000000", "flush.messages": "1", "flush.ms": "1000",
        "index.interval.bytes": "512", "segment.index.bytes": "4096",
        "cleanup.policy": "delete", "min.insync.replicas": "2"})
    assert config == LogConfig(segment_bytes=1048576, segment_ms=60000, retention_ms=-1,
                               retention_bytes=5000000, flush_messages=1, flush_ms=1000,
                               index_interval_bytes=512, segment_index_bytes=4096)


def test_from_properties_applies_overrides_over_a_base():
    base = LogConfig(retention_ms=1000)
    assert LogConfig.from_properties({"segment.ms": "5"}, base) == LogConfig(
        retention_ms=1000, segment_ms=5)


@pytest.mark.parametrize("key, value", [
    ("segment.bytes", "lots"), ("segment.bytes", "10"), ("segment.bytes", str(2**31)),
    ("retention.ms", "-2"), ("flush.messages", "0"), ("segment.ms", "1.5"),
])
def test_a_bad_value_raises_value_error_naming_the_key(key, value):
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        LogConfig.from_properties({key: value})


def test_to_properties_round_trips():
    config = LogConfig(segment_bytes=12345, retention_bytes=99)
    properties = config.to_properties()
    assert properties["segment.bytes"] == "12345" and properties["retention.bytes"] == "99"
    assert LogConfig.from_properties(properties) == config


def test_write_atomically_replaces_the_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "state"
    checkpoint.write_atomically(path, b"one")
    checkpoint.write_atomically(path, b"two")
    assert path.read_bytes() == b"two"
    assert os.listdir(tmp_path) == ["state"]


def test_an_interrupted_write_leaves_the_previous_checkpoint_readable(tmp_path):
    checkpoint.write_offsets(tmp_path, PartitionOffsets(5, 4, 0))
    (tmp_path / "offsets.checkpoint.tmp").write_bytes(b"0\nhigh_water")  # crash mid-write
    assert checkpoint.read_offsets(tmp_path) == PartitionOffsets(5, 4, 0)


def test_offsets_checkpoint_round_trips_with_a_version_line(tmp_path):
    checkpoint.write_offsets(tmp_path, PartitionOffsets(10, 8, 2))
    assert (tmp_path / "offsets.checkpoint").read_text() == (
        "0\nhigh_watermark 10\nrecovery_point 8\nlog_start_offset 2\n")
    assert checkpoint.read_offsets(tmp_path) == PartitionOffsets(10, 8, 2)


def test_a_missing_checkpoint_is_absent_without_a_warning(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        assert checkpoint.read_offsets(tmp_path) is None
        assert checkpoint.read_leader_epochs(tmp_path) is None
    assert not caplog.records


@pytest.mark.parametrize("content", [
    b"", b"\x00\xff\x10", b"1\nhigh_watermark 1\nrecovery_point 1\nlog_start_offset 0\n",
    b"0\nhigh_watermark 1\n", b"0\nhigh_watermark 1\nrecovery_point x\nlog_start_offset 0\n",
    b"0\nhigh_watermark -1\nrecovery_point 1\nlog_start_offset 0\n",
    b"0\nhigh_watermark 1\nhigh_watermark 1\nlog_start_offset 0\n",
])
def test_a_garbled_offsets_checkpoint_is_absent_with_a_warning(tmp_path, caplog, content):
    (tmp_path / "offsets.checkpoint").write_bytes(content)
    with caplog.at_level(logging.WARNING, logger="storage.checkpoint"):
        assert checkpoint.read_offsets(tmp_path) is None
    assert caplog.records and caplog.records[0].levelno == logging.WARNING


def test_leader_epoch_checkpoint_round_trips_in_kafkas_layout(tmp_path):
    checkpoint.write_leader_epochs(tmp_path, [(0, 0), (3, 100)])
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n3 100\n"
    assert checkpoint.read_leader_epochs(tmp_path) == [(0, 0), (3, 100)]
    checkpoint.write_leader_epochs(tmp_path, [])
    assert checkpoint.read_leader_epochs(tmp_path) == []


@pytest.mark.parametrize("content", [
    b"0\n2\n0 0\n", b"0\n2\n3 0\n1 10\n", b"0\n2\n1 10\n3 5\n", b"0\n1\n1\n", b"9\n0\n",
    b"0\n1\n-1 0\n", b"\xfe\xff",
])
def test_a_garbled_leader_epoch_checkpoint_is_absent(tmp_path, content):
    (tmp_path / "leader-epoch-checkpoint").write_bytes(content)
    assert checkpoint.read_leader_epochs(tmp_path) is None


def test_the_clean_shutdown_marker_is_consumed_once(tmp_path):
    assert not checkpoint.consume_clean_shutdown_marker(tmp_path)
    checkpoint.write_clean_shutdown_marker(tmp_path)
    assert checkpoint.consume_clean_shutdown_marker(tmp_path)
    assert not checkpoint.consume_clean_shutdown_marker(tmp_path)

"""LeaderEpochCache: epochs never move backwards, truncation is the only way to forget,
OffsetForLeaderEpoch answers as Kafka's LeaderEpochFileCache does, and every change
reaches leader-epoch-checkpoint."""
from __future__ import annotations

import pytest

from storage import InvalidEpochAssignment, LeaderEpochCache

UNDEFINED = (-1, -1)


@pytest.fixture
def cache(tmp_path):
    return LeaderEpochCache(tmp_path)


def reloaded(cache: LeaderEpochCache) -> list[tuple[int, int]]:
    return LeaderEpochCache(cache.directory).epoch_entries()


def test_assign_appends_new_epochs_and_ignores_repeats(cache):
    assert cache.latest_epoch is None
    assert cache.assign(0, 0)
    assert not cache.assign(0, 5)  # later batches of the same epoch
    assert cache.assign(2, 10)
    assert cache.epoch_entries() == [(0, 0), (2, 10)]
    assert cache.latest_epoch == 2


def test_an_older_epoch_is_refused(cache):
    cache.assign(3, 10)
    with pytest.raises(InvalidEpochAssignment):
        cache.assign(2, 20)
    assert cache.epoch_entries() == [(3, 10)]


def test_an_epoch_is_never_moved_to_an_earlier_start_offset(cache):
    cache.assign(3, 10)
    with pytest.raises(InvalidEpochAssignment):
        cache.assign(3, 5)
    with pytest.raises(InvalidEpochAssignment):
        cache.assign(4, 5)
    assert cache.epoch_entries() == [(3, 10)]


def test_a_newer_epoch_at_the_same_start_replaces_an_epoch_that_wrote_nothing(cache):
    cache.assign(1, 0)
    cache.assign(3, 10)
    cache.assign(4, 10)
    assert cache.epoch_entries() == [(1, 0), (4, 10)]


def test_negative_epochs_or_offsets_are_refused(cache):
    with pytest.raises(InvalidEpochAssignment):
        cache.assign(-1, 0)
    with pytest.raises(InvalidEpochAssignment):
        cache.assign(0, -1)


@pytest.mark.parametrize("requested, expected", [
    (5, (5, 100)),        # the latest epoch: the log end offset
    (3, (3, 50)),         # a cached epoch: the next epoch's start
    (4, (3, 50)),         # between cached epochs: the largest below, next epoch's start
    (1, (1, 20)),
    (0, (0, 10)),         # below the earliest: Kafka answers (requested, earliest start)
    (6, UNDEFINED),       # above the latest
    (-1, UNDEFINED),      # undefined
])
def test_end_offset_for_follows_kafka_offset_for_leader_epoch(cache, requested, expected):
    for epoch, start in [(1, 10), (3, 20), (5, 50)]:
        cache.assign(epoch, start)
    assert cache.end_offset_for(requested, 100) == expected


def test_end_offset_for_on_an_empty_cache_is_undefined(cache):
    assert cache.end_offset_for(0, 100) == UNDEFINED


def test_truncate_from_end_removes_epochs_starting_at_or_after(cache):
    for epoch, start in [(1, 0), (2, 10), (3, 20)]:
        cache.assign(epoch, start)
    cache.truncate_from_end(25)
    assert cache.epoch_entries() == [(1, 0), (2, 10), (3, 20)]
    cache.truncate_from_end(10)
    assert cache.epoch_entries() == [(1, 0)]
    assert reloaded(cache) == [(1, 0)]
    cache.assign(2, 12)  # after truncation the epoch may start elsewhere
    assert cache.epoch_entries() == [(1, 0), (2, 12)]


def test_truncate_from_start_keeps_the_epoch_covering_the_new_start(cache):
    for epoch, start in [(1, 0), (2, 10), (3, 20)]:
        cache.assign(epoch, start)
    cache.truncate_from_start(15)
    assert cache.epoch_entries() == [(2, 15), (3, 20)]
    cache.truncate_from_start(20)
    assert cache.epoch_entries() == [(3, 20)]
    cache.truncate_from_start(5)  # below the first entry: nothing to drop
    assert cache.epoch_entries() == [(3, 20)]
    assert reloaded(cache) == [(3, 20)]


def test_clear_forgets_everything_durably(cache):
    cache.assign(1, 0)
    cache.clear()
    assert cache.epoch_entries() == [] and reloaded(cache) == []


def test_every_assignment_is_persisted_in_kafkas_layout_by_flush(cache, tmp_path):
    cache.assign(0, 0)
    cache.assign(7, 42)
    cache.flush()
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n7 42\n"
    assert reloaded(cache) == [(0, 0), (7, 42)]


def test_epoch_cache_survives_partition_log_reopen_and_truncation(tmp_path):
    from kafka.record.default_records import DefaultRecordBatchBuilder

    from storage import LogConfig, PartitionLog

    def batch():
        builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
        builder.append(0, timestamp=1, key=None, value=b"x", headers=[])
        return builder.build()

    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    for epoch in (1, 1, 2, 4):
        log.append_as_leader(batch(), epoch)
    log.truncate_to(3)
    log.close()
    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    assert log.epoch_cache.epoch_entries() == [(1, 0), (2, 2)]
    assert log.epoch_cache.end_offset_for(1, log.log_end_offset) == (1, 2)
    assert log.epoch_cache.end_offset_for(2, log.log_end_offset) == (2, 3)
    log.close()

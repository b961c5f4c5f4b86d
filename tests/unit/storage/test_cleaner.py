"""The log cleaner: the latest record per key survives, offsets never change, tombstones
go only after delete.retention.ms, young records wait for min.compaction.lag.ms, cleaned
segments are valid batches a client parses, producer state and epochs stay right, and
every file state a crash can leave during the swap recovers to the old or the new log.
"""
from __future__ import annotations

import os

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from protocol.records import iter_headers, valid_prefix
from storage import LogConfig, PartitionLog, cleaner

NOW_MS = 10_000_000_000
DAY_MS = 24 * 3600 * 1000


def make_batch(pairs, *, timestamp: int = 1_000, compression: int = 0, producer=None):
    producer_id, epoch, sequence = producer or (-1, -1, -1)
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=False, producer_id=producer_id,
        producer_epoch=epoch, base_sequence=sequence, batch_size=1 << 20)
    for i, (key, value) in enumerate(pairs):
        builder.append(i, timestamp=timestamp + i, key=key, value=value, headers=[])
    return builder.build()


def records(log: PartitionLog, start: int | None = None):
    """(offset, key, value) of every record readable from ``start`` (kafka-python's parser)."""
    data = log.read(log.log_start_offset if start is None else start, 1 << 30)
    out = []
    for header in iter_headers(data):
        batch = DefaultRecordBatch(bytes(data[header.position:header.position + header.size]))
        assert batch.validate_crc()
        out.extend((r.offset, r.key, r.value) for r in batch)
    return out


def latest_per_key(rows):
    latest = {}
    for offset, key, value in rows:
        latest[key] = (offset, value)
    return latest


def open_log(directory, **config):
    config.setdefault("cleanup_policy", "compact")
    return PartitionLog.open(directory, LogConfig(**config), clock_ms=lambda: NOW_MS)


def fill(log, updates: int, keys: int, *, per_batch: int = 2, compression: int = 0,
         timestamp: int = 1_000, epoch: int = 0):
    n = 0
    while n < updates:
        pairs = [(b"key-%d" % ((n + i) % keys), b"value-%d" % (n + i)) for i in range(per_batch)]
        log.append_as_leader(make_batch(pairs, compression=compression, timestamp=timestamp),
                             epoch)
        n += per_batch
    log.update_high_watermark(log.log_end_offset)


def clean(log, now_ms: int = NOW_MS) -> cleaner.CleaningResult | None:
    plan = cleaner.plan_cleaning(log, now_ms)
    if plan is None:
        return None
    result = cleaner.clean(plan)
    cleaner.commit(log, result)
    return result


def crash(log: PartitionLog) -> None:
    for segment in log.segments:
        segment.close()
    log._closed = True


@pytest.mark.parametrize("compression", [0, 1, 2, 3, 4])
def test_cleaning_keeps_the_latest_value_per_key_at_its_original_offset(tmp_path, compression):
    log = open_log(tmp_path / "t-0", segment_bytes=4096)
    fill(log, 2_000, 50, per_batch=4, compression=compression)
    before = records(log)
    active_base = log.segments[-1].base_offset
    result = clean(log)
    after = records(log)
    assert result.stats.records_kept < result.stats.records_read
    by_offset = {offset: (key, value) for offset, key, value in before}
    for offset, key, value in after:
        assert by_offset[offset] == (key, value), "a kept record changed or moved"
    assert latest_per_key(after) == latest_per_key(before)
    cleaned = [row for row in after if row[0] < active_base]
    keys = [key for _, key, _ in cleaned]
    assert len(keys) == len(set(keys)), "an older record of a key survived below the active segment"
    assert log.log_end_offset == 2_000 and log.log_start_offset == 0
    log.close()


def test_cleaned_segments_are_crc_valid_batches_and_survive_a_reopen(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=2048)
    fill(log, 600, 20, per_batch=3, compression=1)
    clean(log)
    expected = records(log)
    for segment in log.segments:
        data = open(segment.log_path, "rb").read()
        assert valid_prefix(data, check_crc=True)[1] == len(data)
    log.close()
    log = open_log(tmp_path / "t-0", segment_bytes=2048)
    assert records(log) == expected and not log.recovery_report.cuts
    log.close()


def test_reads_from_any_offset_start_at_the_first_kept_record_at_or_after_it(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=1024)
    fill(log, 400, 10)
    clean(log)
    kept = [offset for offset, _, _ in records(log)]
    for start in range(0, 400, 7):
        got = [offset for offset, _, _ in records(log, start) if offset >= start]
        assert got == [o for o in kept if o >= start]
    log.close()


def test_a_read_in_a_gap_with_a_tiny_max_bytes_returns_the_next_batch(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=1024)
    fill(log, 400, 10)
    clean(log)
    spans = [(h.base_offset, h.next_offset) for h in iter_headers(log.read(0, 1 << 30))]
    assert any(base > end for (_, end), (base, _) in zip(spans, spans[1:]))
    for (_, end), (base, next_end) in zip(spans, spans[1:]):
        for start in {end, (end + base) // 2, base - 1} - {base}:
            if start < end:
                continue
            got = [(h.base_offset, h.next_offset) for h in iter_headers(log.read(start, 10))]
            assert got == [(base, next_end)], f"read at {start} (gap {end}..{base})"
    log.close()


def test_tombstones_stay_until_delete_retention_ms_after_they_were_cleaned(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=1024, delete_retention_ms=DAY_MS)
    fill(log, 100, 10)
    log.append_as_leader(make_batch([(b"key-9", None)]), 0)
    fill(log, 100, 5)  # keys 0..4 only: the tombstone of key-9 stays the latest
    clean(log)
    assert (b"key-9" in {k for _, k, v in records(log) if v is None})
    # Cleaned again, later but within delete.retention.ms of the segment's last write:
    fill(log, 60, 5)
    clean(log, NOW_MS + 1000)
    assert b"key-9" in {k for _, k, v in records(log) if v is None}
    # After delete.retention.ms the next pass drops it, and nothing else.
    fill(log, 60, 5)
    before = latest_per_key(records(log))
    tombstone_segment = next(s for s in log.segments if any(
        k == b"key-9" for _, k, _ in records(log, s.base_offset)))
    tombstone_segment.set_last_modified(NOW_MS - 2 * DAY_MS)
    result = clean(log, NOW_MS + 10_000)
    assert result.stats.tombstones_dropped == 1
    after = latest_per_key(records(log))
    assert b"key-9" not in after
    del before[b"key-9"]
    assert after == before
    log.close()


def test_records_younger_than_min_compaction_lag_are_not_cleaned(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=1024, min_compaction_lag_ms=60_000)
    fill(log, 200, 5, timestamp=NOW_MS - 1_000)  # written a second ago
    assert cleaner.plan_cleaning(log, NOW_MS) is None
    plan = cleaner.plan_cleaning(log, NOW_MS + 61_000)
    assert plan is not None and plan.clean_end_offset == log.segments[-1].base_offset
    log.close()


def test_max_compaction_lag_forces_a_pass_below_the_dirty_ratio(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=1024, max_compaction_lag_ms=60_000,
                   min_cleanable_dirty_ratio=1.0)
    fill(log, 200, 200, timestamp=NOW_MS - 1_000)
    clean(log)
    fill(log, 40, 200, timestamp=NOW_MS - 1_000)
    plan = cleaner.plan_cleaning(log, NOW_MS)
    assert plan is not None and not plan.forced and not cleaner.needs_cleaning(plan, 1.0)
    plan = cleaner.plan_cleaning(log, NOW_MS + 120_000)
    assert plan.forced and cleaner.needs_cleaning(plan, 1.0)
    log.close()


def test_nothing_at_or_above_the_high_watermark_or_in_the_active_segment_is_cleaned(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=1024)
    fill(log, 300, 5)
    log.update_high_watermark(log.segments[2].base_offset + 1)
    plan = cleaner.plan_cleaning(log, NOW_MS)
    assert plan.clean_end_offset == log.segments[2].base_offset
    active = records(log, log.segments[-1].base_offset)
    clean(log)
    assert records(log, log.segments[-1].base_offset) == active
    log.close()


def test_an_idempotent_producers_last_batch_stays_so_its_sequence_survives(tmp_path):
    directory = tmp_path / "t-0"
    log = open_log(directory, segment_bytes=1024)
    for sequence in range(0, 40, 2):
        log.append_as_leader(make_batch([(b"a", b"%d" % sequence), (b"b", b"%d" % sequence)],
                                        producer=(7, 0, sequence)), 0)
    last_batch = log.producer_state.producers[7].batches[-1]
    log.append_as_leader(make_batch([(b"a", b"new"), (b"b", b"new")]), 0)  # supersedes all
    fill(log, 200, 3)  # roll the producer's batches out of the active segment
    result = clean(log)
    assert result.stats.empty_batches_kept == 1
    headers = list(iter_headers(log.read(0, 1 << 30)))
    kept = [(h.base_offset, h.last_offset, h.records_count, h.base_sequence)
            for h in headers if h.producer_id == 7]
    assert kept[-1] == (last_batch.first_offset, last_batch.last_offset, 0, 38)
    assert all(count == 0 for _, _, count, _ in kept)  # others: ends of cleaned segments
    log.close()
    log = open_log(directory, segment_bytes=1024)
    assert log.producer_state.producers[7].last_sequence == 39
    duplicate = make_batch([(b"a", b"38"), (b"b", b"38")], producer=(7, 0, 38))
    assert log.producer_state.check(next(iter_headers(duplicate))) is not None
    log.close()


def test_the_epoch_cache_is_unchanged_by_cleaning(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=1024)
    fill(log, 100, 5, epoch=1)
    fill(log, 100, 5, epoch=4)
    fill(log, 100, 5, epoch=6)
    entries = log.epoch_cache.epoch_entries()
    clean(log)
    assert log.epoch_cache.epoch_entries() == entries
    log.close()
    log = open_log(tmp_path / "t-0", segment_bytes=1024)
    assert log.epoch_cache.epoch_entries() == entries
    log.close()


def test_a_truncation_while_cleaning_discards_the_cleaned_segments(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=1024)
    fill(log, 300, 5)
    plan = cleaner.plan_cleaning(log, NOW_MS)
    result = cleaner.clean(plan)
    log.truncate_to(log.segments[1].base_offset + 3)
    expected = records(log)
    assert cleaner.commit(log, result) == 0
    assert records(log) == expected
    assert not [n for n in os.listdir(log.directory) if n.endswith(".cleaned")]
    log.close()


def test_a_follower_truncating_into_a_gap_keeps_the_batches_below_it(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=1024)
    fill(log, 300, 5)
    clean(log)
    spans = [(h.base_offset, h.next_offset) for h in iter_headers(log.read(0, 1 << 30))]
    cut = next(end for (_, end), (base, _) in zip(spans, spans[1:]) if base > end + 1) + 1
    log.truncate_to(cut)  # inside a gap: every batch below it stays
    assert [(h.base_offset, h.next_offset) for h in iter_headers(log.read(0, 1 << 30))] == \
        [span for span in spans if span[1] < cut]
    assert log.log_end_offset == cut - 1
    log.close()


# -- crash safety of the swap ------------------------------------------------------------------


class Crash(Exception):
    pass


def crash_at(step):
    def hook(name):
        if name == step:
            raise Crash(name)
    return hook


def _one_group_log(directory):
    """600 updates of 20 keys in sealed segments the cleaner rewrites as one group."""
    log = open_log(directory, segment_bytes=8192)
    fill(log, 600, 20, per_batch=3)
    log.update_config(LogConfig(cleanup_policy="compact", segment_bytes=100_000))
    log._roll("test")
    log.update_high_watermark(log.log_end_offset)
    log.flush()
    return log


@pytest.mark.parametrize("step", ["cleaned", "swap", "deleted", "renamed"])
def test_a_crash_at_each_swap_step_recovers_the_old_or_the_new_log(tmp_path, monkeypatch, step):
    directory = tmp_path / "t-0"
    log = _one_group_log(directory)
    assert len(log.segments) > 2
    old = records(log)
    reference = _one_group_log(tmp_path / "ref")
    clean(reference)
    new = records(reference)
    reference.close()
    monkeypatch.setattr(cleaner, "crash_point", crash_at(step))
    with pytest.raises(Crash):
        clean(log)
    crash(log)
    log = open_log(directory, segment_bytes=100_000)
    assert records(log) == (old if step == "cleaned" else new)
    assert not [n for n in os.listdir(directory)
                if n.endswith((".cleaned", ".swap", ".deleted"))]
    assert log.log_end_offset == 600
    log.close()


def _cleaned_but_not_swapped(tmp_path):
    """A log and the finished ``.cleaned`` files of its first group, not swapped in."""
    directory = tmp_path / "t-0"
    log = _one_group_log(directory)
    old = records(log)
    result = cleaner.clean(cleaner.plan_cleaning(log, NOW_MS))
    assert len(result.groups) == 1
    crash(log)
    return directory, old, result.groups[0]


@pytest.mark.parametrize("renamed", [["log"], ["log", "index"], ["log", "index", "timeindex"]])
def test_a_crash_between_the_swap_renames_completes_the_swap(tmp_path, renamed):
    directory, old, group = _cleaned_but_not_swapped(tmp_path)
    new_base = group.new.base_offset
    for kind in renamed:
        name = f"{new_base:020d}.{kind}"
        os.replace(directory / (name + ".cleaned"), directory / (name + ".swap"))
    log = open_log(directory, segment_bytes=100_000)
    assert log.recovery_report.swaps_completed == [new_base]
    rows = records(log)
    assert latest_per_key(rows) == latest_per_key(old)
    assert len(rows) == 20
    log.close()


def test_cleaned_files_never_renamed_are_dropped_and_the_old_log_stays(tmp_path):
    directory, old, _ = _cleaned_but_not_swapped(tmp_path)
    log = open_log(directory, segment_bytes=100_000)
    assert records(log) == old
    assert not [n for n in os.listdir(directory) if n.endswith(".cleaned")]
    log.close()


def test_a_crash_after_the_old_log_file_was_renamed_deleted_completes_the_swap(tmp_path):
    directory, old, group = _cleaned_but_not_swapped(tmp_path)
    base = f"{group.new.base_offset:020d}"
    for kind in ("log", "index", "timeindex"):
        os.replace(directory / f"{base}.{kind}.cleaned", directory / f"{base}.{kind}.swap")
    os.replace(directory / f"{base}.log", directory / f"{base}.log.deleted")  # index stays
    log = open_log(directory, segment_bytes=100_000)
    rows = records(log)
    assert latest_per_key(rows) == latest_per_key(old) and len(rows) == 20
    log.close()

"""Bringing a partition directory back to a consistent log at startup, as named steps.

1. ``remove_leftover_files``: ``.tmp`` / ``.deleted`` / ``.cleaned`` files, index
   ``.swap`` files and index files whose ``.log`` is gone; then ``complete_swaps``
   finishes a log cleaner's swap that a crash interrupted: a ``<base>.log.swap`` was
   fsynced before it got that name, so it replaces every segment whose base offset
   lies in [base, its next offset) and is renamed to ``<base>.log`` (its indexes are
   rebuilt by step 4).  A cleaned segment still named ``.cleaned`` was never swapped
   in and is dropped: recovery ends with the old segments or the new, never a mix of
   one segment's two versions.
2. ``load_segments``: every ``<20 digits>.log``, in base-offset order (one empty
   segment at the saved log_start_offset if there is none).
3. ``recover_segments``: walking the segments in order, each one that may hold
   unflushed data (at/after the recovery point; none after a clean shutdown) is
   scanned batch by batch with CRC checks and its indexes rebuilt; the others only
   get their indexes' sanity check (4), and a full scan if it fails.  The first torn,
   malformed, CRC-failing or non-contiguous batch and everything after it — the rest
   of that segment and all later segments — are cut.
5. ``clamp_offsets``: log_start_offset, high_watermark and recovery_point are brought
   inside what survived; ``restore_epoch_cache`` truncates the leader-epoch cache to
   the new log_end_offset and adds the epochs seen in scanned batches.
6. ``restore_producer_state``: the newest valid producer snapshot at or below the new
   log_end_offset is loaded (the others above it, and any below log_start_offset, are
   deleted) and only the batch headers from its offset on are replayed; with no usable
   snapshot, every batch from log_start_offset.

Each step reports what it removed into a ``RecoveryReport``.  Called once, by
``PartitionLog.open``, before the log is shared; ``PartitionLog.truncate_to`` reuses
step 6 (``reload_producer_state``), as Kafka's truncateAndReload does.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

from protocol.control import marker_of
from protocol.records import BATCH_HEADER, HEADER_SIZE, BatchHeader

from . import checkpoint
from .checkpoint import PartitionOffsets
from .config import LogConfig
from .epoch_cache import LeaderEpochCache
from .errors import CorruptIndex
from .producer_state import ProducerStateManager
from .segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    SegmentScan,
    parse_segment_name,
)

logger = logging.getLogger(__name__)

LEFTOVER_SUFFIXES = (".tmp", ".deleted", ".cleaned")
SWAP_SUFFIX = ".swap"


@dataclass
class RecoveryReport:
    """What recovery did to one partition directory."""

    clean_shutdown: bool = False
    #: the directory was empty: nothing was recovered and no file written
    fresh: bool = False
    segments_scanned: int = 0
    indexes_rebuilt: int = 0
    batches_recovered: int = 0
    bytes_truncated: int = 0
    segments_deleted: int = 0
    leftover_files_removed: list[str] = field(default_factory=list)
    swaps_completed: list[int] = field(default_factory=list)
    cuts: list[str] = field(default_factory=list)
    log_start_offset: int = 0
    log_end_offset: int = 0
    high_watermark: int = 0
    recovery_point: int = 0
    producer_snapshot_offset: int | None = None
    producer_batches_replayed: int = 0

    @property
    def cut_anything(self) -> bool:
        return bool(self.bytes_truncated or self.segments_deleted)


@dataclass
class RecoveredLog:
    segments: list[LogSegment]
    offsets: PartitionOffsets
    epoch_cache: LeaderEpochCache
    producer_state: ProducerStateManager
    report: RecoveryReport


def recover_log(directory: str, config: LogConfig, log_prefix: str) -> RecoveredLog:
    """Run every step on ``directory`` (which must exist) and return the consistent log.

    An empty directory (a partition created just now) holds nothing to recover: its new
    segment is not scanned and no index, epoch or offsets file is written for it yet (they
    are written with the first data or offsets that differ from what their absence
    means), so creating thousands of partitions costs no fsync per partition here.
    """
    fresh = not os.listdir(directory)
    report = RecoveryReport(clean_shutdown=checkpoint.consume_clean_shutdown_marker(directory),
                            fresh=fresh)
    report.leftover_files_removed = remove_leftover_files(directory)
    report.swaps_completed = complete_swaps(directory, log_prefix)
    saved = checkpoint.read_offsets(directory)
    saved_epochs = checkpoint.read_leader_epochs(directory)
    segments = load_segments(directory, config, saved)
    if saved is None and (len(segments) > 1 or segments[0].size_bytes):
        logger.warning("%s no usable %s: recovering from the first segment",
                       log_prefix, checkpoint.OFFSETS_CHECKPOINT)
    first_scan = len(segments) if fresh else first_scan_index(segments, saved, report)
    scans = recover_segments(segments, first_scan, report, log_prefix)
    offsets = clamp_offsets(saved, segments, report)
    epoch_cache = restore_epoch_cache(directory, [] if fresh else saved_epochs, segments,
                                      scans, offsets, log_prefix)
    producer_state = restore_producer_state(directory, segments, offsets, report, log_prefix)
    report.log_start_offset = offsets.log_start_offset
    report.log_end_offset = segments[-1].next_offset
    report.high_watermark = offsets.high_watermark
    report.recovery_point = offsets.recovery_point
    _log_summary(report, log_prefix)
    return RecoveredLog(segments, offsets, epoch_cache, producer_state, report)


def remove_leftover_files(directory: str) -> list[str]:
    """Step 1: remove interrupted writes and deletions; return the names removed."""
    names = sorted(os.listdir(directory))
    logs = {name[:-len(LOG_SUFFIX)] for name in names if name.endswith(LOG_SUFFIX)}
    removed = []
    swap_logs = {name[:-len(LOG_SUFFIX + SWAP_SUFFIX)] for name in names
                 if name.endswith(LOG_SUFFIX + SWAP_SUFFIX)}
    for name in names:
        stem, suffix = os.path.splitext(name)
        orphan_index = suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX) and stem not in logs \
            and stem not in swap_logs
        swap_index = suffix == SWAP_SUFFIX and not name.endswith(LOG_SUFFIX + SWAP_SUFFIX)
        if name.endswith(LEFTOVER_SUFFIXES) or orphan_index or swap_index:
            os.unlink(os.path.join(directory, name))
            removed.append(name)
    return removed


def complete_swaps(directory: str, log_prefix: str) -> list[int]:
    """Step 1b: install each ``<base>.log.swap`` (see the module docstring); returns the
    base offsets of the swaps completed.  The directory is fsynced when anything moved."""
    names = sorted(os.listdir(directory))
    completed = []
    for name in names:
        if not name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            continue
        path = os.path.join(directory, name)
        base = parse_segment_name(name[:-len(SWAP_SUFFIX)])
        if base is None:
            os.unlink(path)
            continue
        end = _next_offset_of(path, base)
        for other in os.listdir(directory):
            stem, suffix = os.path.splitext(other)
            if suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX) and len(stem) == 20 \
                    and stem.isdigit() and base <= int(stem) < max(end, base + 1):
                os.unlink(os.path.join(directory, other))  # replaced, or a stale index
        os.replace(path, path[:-len(SWAP_SUFFIX)])
        completed.append(base)
        logger.warning("%s completed an interrupted cleaner swap: segment %d (offsets up to "
                       "%d) replaced the segments it covers", log_prefix, base, end)
    if completed:
        checkpoint.fsync_directory(directory)
    return completed


def _next_offset_of(path: str, base_offset: int) -> int:
    """One past the last offset of the segment file at ``path``: a walk over batch
    headers (the file was fsynced whole before it was named ``.swap``)."""
    next_offset, position = base_offset, 0
    fd = os.open(path, os.O_RDONLY)
    try:
        while True:
            data = os.pread(fd, HEADER_SIZE, position)
            if len(data) < HEADER_SIZE:
                return next_offset
            header = BatchHeader(position, *BATCH_HEADER.unpack(data))
            next_offset = header.next_offset
            position += header.size
    finally:
        os.close(fd)


def load_segments(directory: str, config: LogConfig,
                  saved: PartitionOffsets | None) -> list[LogSegment]:
    """Step 2: the segments on disk, by base offset; never empty."""
    bases = sorted(base for base in map(parse_segment_name, os.listdir(directory))
                   if base is not None)
    if not bases:
        start = saved.log_start_offset if saved is not None else 0
        return [LogSegment.create(directory, start, config.index_interval_bytes)]
    return [LogSegment(directory, base, config.index_interval_bytes) for base in bases]


def first_scan_index(segments: list[LogSegment], saved: PartitionOffsets | None,
                     report: RecoveryReport) -> int:
    """Index of the first segment that may hold unflushed data (len(segments) if none)."""
    if report.clean_shutdown:
        return len(segments)
    recovery_point = saved.recovery_point if saved is not None else 0
    for i in range(len(segments) - 1):
        if segments[i + 1].base_offset > recovery_point:
            return i
    return len(segments) - 1


def recover_segments(segments: list[LogSegment], first_scan: int, report: RecoveryReport,
                     log_prefix: str) -> dict[int, SegmentScan]:
    """Steps 3 and 4, in segment order; ``segments`` is cut in place.  Returns the scans."""
    scans: dict[int, SegmentScan] = {}
    expected = segments[0].base_offset
    for i, segment in enumerate(segments):
        if segment.base_offset < expected:  # above is a gap the cleaner left: normal
            report.cuts.append(f"segment {segment.base_offset} overlaps the previous "
                               f"segment, whose next offset is {expected}")
            _delete_from(segments, i, report)
            break
        scan = None
        if i >= first_scan:
            scan = segment.recover()
            report.segments_scanned += 1
        else:
            scan = _validate_unscanned(segment, report, log_prefix)
        if scan is not None:
            scans[segment.base_offset] = scan
            report.batches_recovered += scan.batches
            report.bytes_truncated += scan.truncated_bytes
        expected = segment.next_offset
        if scan is not None and scan.cut_reason is not None:
            report.cuts.append(f"segment {segment.base_offset}: {scan.cut_reason}; cut "
                               f"{scan.truncated_bytes} bytes")
            _delete_from(segments, i + 1, report)
            break
    return scans


def _validate_unscanned(segment: LogSegment, report: RecoveryReport,
                        log_prefix: str) -> SegmentScan | None:
    """Step 4: sanity-check a flushed segment's indexes; rebuild them (full scan) if bad."""
    try:
        segment.sanity_check()
        return None
    except CorruptIndex as exc:
        logger.warning("%s rebuilding indexes: %s", log_prefix, exc)
    report.indexes_rebuilt += 1
    return segment.recover()


def _delete_from(segments: list[LogSegment], start: int, report: RecoveryReport) -> None:
    """Delete ``segments[start:]`` (newest first, so a crash leaves a prefix)."""
    doomed = segments[start:]
    del segments[start:]
    for segment in reversed(doomed):
        report.bytes_truncated += segment.size_bytes
        report.segments_deleted += 1
        segment.delete()
    if doomed:
        report.cuts.append(f"deleted segments {[s.base_offset for s in doomed]}")


def clamp_offsets(saved: PartitionOffsets | None, segments: list[LogSegment],
                  report: RecoveryReport) -> PartitionOffsets:
    """Step 5: first_base <= log_start_offset <= high_watermark <= log_end_offset,
    recovery_point <= log_end_offset (== log_end_offset after a clean shutdown)."""
    first_base = segments[0].base_offset
    log_end_offset = segments[-1].next_offset
    if saved is None:
        saved = PartitionOffsets(first_base, first_base, first_base)
    log_start_offset = min(max(saved.log_start_offset, first_base), log_end_offset)
    high_watermark = min(max(saved.high_watermark, log_start_offset), log_end_offset)
    if report.clean_shutdown:
        recovery_point = log_end_offset
    else:
        recovery_point = min(max(saved.recovery_point, first_base), log_end_offset)
    return PartitionOffsets(high_watermark, recovery_point, log_start_offset)


def restore_epoch_cache(directory: str, saved_epochs: list[tuple[int, int]] | None,
                        segments: list[LogSegment], scans: dict[int, SegmentScan],
                        offsets: PartitionOffsets, log_prefix: str) -> LeaderEpochCache:
    """Step 5b: the epoch cache, consistent with the recovered log.

    Entries at/after the new log_end_offset go; epochs seen in scanned batches that
    are newer than the cache's latest are added (the log wins over the checkpoint).
    With no usable checkpoint, every segment's headers are walked to rebuild it.
    """
    cache = LeaderEpochCache(directory, saved_epochs or [], log_prefix=log_prefix)
    if saved_epochs is None:
        cache.clear()  # replace a garbled file now, so the next start does not warn again
    log_end_offset = segments[-1].next_offset
    cache.truncate_from_end(log_end_offset)
    rebuild_all = saved_epochs is None and log_end_offset > segments[0].base_offset
    if rebuild_all:
        logger.warning("%s no usable %s: rebuilding it from batch headers",
                       log_prefix, checkpoint.LEADER_EPOCH_CHECKPOINT)
    for segment in segments:
        scan = scans.get(segment.base_offset)
        if scan is not None:
            starts = scan.epoch_starts
        elif rebuild_all:
            starts = _epoch_starts_from_headers(segment)
        else:
            continue
        for epoch, start_offset in starts:
            latest = cache.latest_epoch
            if latest is None or epoch > latest:
                cache.truncate_from_end(start_offset)
                cache.assign(epoch, start_offset)
    cache.truncate_from_start(offsets.log_start_offset)
    return cache


def _epoch_starts_from_headers(segment: LogSegment) -> list[tuple[int, int]]:
    starts: list[tuple[int, int]] = []
    for header in segment.iter_headers():
        epoch = header.partition_leader_epoch
        if epoch >= 0 and (not starts or starts[-1][0] != epoch):
            starts.append((epoch, header.base_offset))
    return starts


def restore_producer_state(directory: str, segments: list[LogSegment],
                           offsets: PartitionOffsets, report: RecoveryReport,
                           log_prefix: str) -> ProducerStateManager:
    """Step 6: the producer state of the recovered log, from a snapshot and a replay."""
    state = ProducerStateManager(directory, log_prefix)
    start_offset, report.producer_batches_replayed = reload_producer_state(
        state, segments, offsets.log_start_offset)
    if start_offset in state.snapshot_offsets:
        report.producer_snapshot_offset = start_offset
    return state


def reload_producer_state(state: ProducerStateManager, segments: list[LogSegment],
                          log_start_offset: int) -> tuple[int, int]:
    """Bring ``state`` to the log's end: the newest usable snapshot, then a header-only
    replay of the batches from its offset.  Returns (that offset, batches replayed)."""
    log_end_offset = segments[-1].next_offset
    start_offset = state.truncate_and_reload(log_start_offset, log_end_offset)
    replayed = 0
    for segment in segments:
        if segment.next_offset <= start_offset:
            continue
        position = 0 if start_offset <= segment.base_offset \
            else segment.find_position(start_offset)
        for header in segment.iter_headers(position):
            if header.base_offset >= start_offset:
                marker = None
                if header.is_control:  # rare and small: read the marker's record
                    marker = marker_of(segment.batch_at(header.position),
                                       header._replace(position=0))
                state.update(header, marker)
                replayed += 1
    state.map_end_offset = log_end_offset
    return start_offset, replayed


def _log_summary(report: RecoveryReport, log_prefix: str) -> None:
    if report.leftover_files_removed:
        logger.info("%s removed leftover files %s", log_prefix, report.leftover_files_removed)
    if report.cut_anything:
        logger.warning("%s recovery cut %d bytes (%d segments deleted): %s; "
                       "log_end_offset is now %d", log_prefix, report.bytes_truncated,
                       report.segments_deleted, "; ".join(report.cuts), report.log_end_offset)
    logger.info("%s loaded: clean_shutdown=%s, %d segments scanned, %d indexes rebuilt, "
                "%d batches recovered, log_start_offset=%d log_end_offset=%d "
                "high_watermark=%d, producer snapshot %s + %d batches replayed", log_prefix,
                report.clean_shutdown, report.segments_scanned, report.indexes_rebuilt,
                report.batches_recovered, report.log_start_offset, report.log_end_offset,
                report.high_watermark, report.producer_snapshot_offset,
                report.producer_batches_replayed)

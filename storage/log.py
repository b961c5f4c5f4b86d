"""``PartitionLog``: the on-disk log of one partition, the facade the broker uses.

Hot paths (``append_as_leader``, ``append_as_follower``, ``read``) touch only batch
headers: an append is one ``os.write`` of the batch bytes to the active segment plus
in-memory index and producer-state bookkeeping; a read is a bisect over segment base
offsets, an index lookup, a short walk over 12-byte prefixes and one ``os.pread``
(or, for the Fetch handler, no read of the records at all: ``FileRecords``, regions the
network layer sends with ``os.sendfile``).
Everything that decodes records (``offset_for_timestamp``, ``max_timestamp_and_offset``)
is a cold path.
"""
from __future__ import annotations

import bisect
import functools
import logging
import os
import shutil
import time
from dataclasses import dataclass
from typing import Callable

from protocol.control import marker_of
from protocol.records import CONTROL_FLAG, LOG_OVERHEAD, BatchHeader, RecordError, \
    assign_offset_and_epoch, first_offset_at_or_after, parse_header, valid_prefix, \
    with_offset_and_epoch

from . import checkpoint
from .checkpoint import PartitionOffsets
from .config import LONG_MAX, LogConfig
from .epoch_cache import LeaderEpochCache
from .errors import InvalidAppend, InvalidOffset, LogClosed, OffsetOutOfRange, StorageIOError, \
    UndecodableBatch
from .file_records import ZERO_COPY_MIN_BYTES, FileRecords
from .index import INT32_MAX
from .producer_state import ProducerStateManager
from .recovery import RecoveredLog, RecoveryReport, recover_log, reload_producer_state
from .segment import LogSegment

logger = logging.getLogger(__name__)


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def _converts_os_errors(method):
    """An OSError inside ``method`` (ENOSPC, EIO, ...) leaves as StorageIOError, so every
    failure that leaves storage/ is a StorageError (errors.py's contract).  Decoding
    records never raises OSError (protocol/ turns codec failures into RecordDecodeError),
    so a bad batch cannot pass for a disk failure here; see ``_decoding``."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except OSError as exc:
            raise StorageIOError(f"{self._prefix} {method.__name__} failed: {exc}") from exc

    return wrapper


def _decoding(method):
    """Around the cold paths that decode a stored batch: RecordError (a batch whose
    records do not decode) leaves as UndecodableBatch, a per-request error, never a disk
    failure.  The one place storage/ converts decoding errors."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except RecordError as exc:
            logger.warning("%s %s: a stored batch does not decode: %s", self._prefix,
                           method.__name__, exc)
            raise UndecodableBatch(f"{self._prefix} {method.__name__}: {exc}") from exc

    return wrapper


@dataclass(frozen=True, slots=True)
class AppendInfo:
    """Where an append landed: offsets inclusive, ``size_bytes`` as stored."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    log_append_time_ms: int
    size_bytes: int


class PartitionLog:
    """Segments, indexes, checkpoints, the leader-epoch cache and the producer state
    (with its snapshots) of one partition.

    Invariants (checked with explicit raises where a caller could break them):

    * offsets are dense: batch ``n+1`` starts at batch ``n``'s next offset; the first
      segment starts at or below ``log_start_offset``;
    * ``log_start_offset <= high_watermark <= log_end_offset`` and
      ``recovery_point <= log_end_offset``; everything below ``recovery_point`` has
      been fsynced;
    * the epoch cache has no entry at or after ``log_end_offset``, and its epochs and
      start offsets strictly increase;
    * ``producer_state`` is at ``log_end_offset``: every append, truncation, retention
      and reset updates it in the same call, and its snapshots lie within
      [log_start_offset, log_end_offset];
    * only the last segment (the active one) is ever appended to.

    Who may call: the broker's event loop only (no locks, no threads, nothing awaits
    inside a call).  Calls are synchronous and do blocking file I/O; the hot paths
    are one write or one read each, fsyncs happen only in ``flush``, ``checkpoint``,
    a roll (the producer snapshot), truncation, retention and ``close``.

    Disk failures: every OSError leaves as ``StorageIOError``.  A failed append writes
    nothing (the segment is cut back to its previous size); after any StorageIOError
    the files may no longer match what is in memory, so the only call left for the
    caller is ``close_handlers`` (the next ``open`` recovers from the files).
    """

    def __init__(self, directory: str, config: LogConfig, clock_ms: Callable[[], int],
                 recovered: RecoveredLog) -> None:
        """Use ``PartitionLog.open``."""
        self.directory = directory
        self._config = config
        self._clock_ms = clock_ms
        self._prefix = f"[Log {os.path.basename(os.path.normpath(directory))}]"
        self._segments: list[LogSegment] = recovered.segments
        self._bases: list[int] = [segment.base_offset for segment in self._segments]
        self._log_start_offset = recovered.offsets.log_start_offset
        self._high_watermark = recovered.offsets.high_watermark
        self._recovery_point = recovered.offsets.recovery_point
        self.epoch_cache: LeaderEpochCache = recovered.epoch_cache
        #: read it (``check``) freely; only this log changes it
        self.producer_state: ProducerStateManager = recovered.producer_state
        self.recovery_report: RecoveryReport = recovered.report
        self._unflushed_messages = 0
        self._last_flush_ms = clock_ms()
        self._directory_dirty = False
        self._checkpointed: PartitionOffsets | None = None
        self._closed = False
        #: the log cleaner's: everything below it was cleaned at least once
        self.first_dirty_offset = min(max(checkpoint.read_cleaner_offset(directory) or 0,
                                          self._log_start_offset), self.log_end_offset)

    @classmethod
    def open(cls, directory: str | os.PathLike, config: LogConfig, *,
             clock_ms: Callable[[], int] | None = None) -> PartitionLog:
        """Open (creating the directory if missing), recover, and checkpoint the result."""
        directory = os.fspath(directory)
        prefix = f"[Log {os.path.basename(os.path.normpath(directory))}]"
        try:
            os.makedirs(directory, exist_ok=True)
            recovered = recover_log(directory, config, prefix)
        except OSError as exc:
            raise StorageIOError(f"{prefix} open failed: {exc}") from exc
        log = cls(directory, config, clock_ms or _wall_clock_ms, recovered)
        log.checkpoint()
        return log

    # -- state -----------------------------------------------------------------------

    @property
    def config(self) -> LogConfig:
        return self._config

    def update_config(self, config: LogConfig) -> None:
        """New settings apply to the next roll / retention / flush decision."""
        self._config = config
        for segment in self._segments:
            segment.index_interval_bytes = config.index_interval_bytes

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The next offset to assign (exclusive end of the log)."""
        return self._segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def recovery_point(self) -> int:
        """Everything below this offset has been fsynced."""
        return self._recovery_point

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    @property
    def size_bytes(self) -> int:
        return sum(segment.size_bytes for segment in self._segments)

    def __repr__(self) -> str:
        return (f"PartitionLog({self.directory!r}, log_start_offset={self._log_start_offset}, "
                f"log_end_offset={self.log_end_offset}, high_watermark={self._high_watermark})")

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosed(f"{self._prefix} is closed")

    # -- appends ---------------------------------------------------------------------

    @_converts_os_errors
    def append_as_leader(self, batch: bytearray, leader_epoch: int,
                         header: BatchHeader | None = None) -> AppendInfo:
        """Append one client batch (baseOffset 0, already validated by protocol.records).

        Mutates ``batch`` in place: baseOffset := log_end_offset and
        partitionLeaderEpoch := ``leader_epoch`` (both outside the CRC).  Assigns
        ``leader_epoch`` in the epoch cache at the batch's first offset when it is new,
        and records the batch in ``producer_state`` (whose ``check`` the caller ran).
        ``header``: the batch's header as ``validate_produce_records`` returned it with
        ``batch`` (its one batch, filling it); None parses it here.  Raises
        InvalidAppend (nothing written) for an incomplete buffer or an epoch older than
        the cache's latest.
        """
        self._check_open()
        if not isinstance(batch, bytearray):
            raise InvalidAppend(f"{self._prefix} append_as_leader needs a bytearray to "
                                f"assign offsets in place, got {type(batch).__name__}")
        if header is None:
            try:
                header = parse_header(batch)
            except RecordError as exc:
                raise InvalidAppend(f"{self._prefix} {exc}") from exc
        size = len(batch)
        if header is None or header.batch_length + LOG_OVERHEAD != size \
                or header.last_offset_delta < 0:
            raise InvalidAppend(f"{self._prefix} expected exactly one complete batch, "
                                f"got {size} bytes")
        latest = self.epoch_cache.latest_epoch
        if leader_epoch < 0 or (latest is not None and leader_epoch < latest):
            raise InvalidAppend(f"{self._prefix} leader epoch {leader_epoch} is older than "
                                f"the log's latest epoch {latest}")
        base_offset = self._segments[-1].next_offset
        header = with_offset_and_epoch(header, base_offset, leader_epoch)
        now_ms = self._clock_ms()
        self._maybe_roll(size, base_offset + header.last_offset_delta, now_ms)
        assign_offset_and_epoch(batch, 0, base_offset, leader_epoch)
        self.epoch_cache.assign(leader_epoch, base_offset)
        self._segments[-1].append(batch, [header], now_ms)
        self.producer_state.update(header, marker_of(batch, header))
        self._unflushed_messages += header.records_count
        return AppendInfo(base_offset, base_offset + header.last_offset_delta,
                          header.max_timestamp, -1, size)

    def append_as_follower(self, batches: bytes) -> AppendInfo | None:
        """Append batches copied from the leader, offsets and epochs already assigned.

        All of ``batches`` must be complete, CRC-valid batches with increasing offsets
        starting at or after log_end_offset (gaps are the leader's compaction), with
        non-decreasing leader epochs not older than the cache's latest; otherwise
        InvalidAppend and nothing is written.  The epoch cache gains each new epoch at
        its first batch; the producer state records every batch.  Empty input → None.

        A follower calls this once per fetch that brings records, so it reads each
        header once per pass and keeps ``_converts_os_errors``'s conversion inline (an
        OSError still leaves as StorageIOError) rather than through the wrapper.
        """
        if self._closed:
            raise LogClosed(f"{self._prefix} is closed")
        if not batches:
            return None
        try:
            headers, valid_bytes = valid_prefix(batches, check_crc=True)
            if valid_bytes != len(batches):
                raise InvalidAppend(f"{self._prefix} torn, malformed or CRC-failing batch at "
                                    f"byte {valid_bytes} of {len(batches)}")
            max_timestamp = self._check_follower_batches(headers)
            now_ms = self._clock_ms()
            epoch_cache = self.epoch_cache
            producer_state = self.producer_state
            count = len(headers)
            start = 0
            while start < count:
                first = headers[start]
                self._maybe_roll(LOG_OVERHEAD + first.batch_length,
                                 first.base_offset + first.last_offset_delta, now_ms)
                end = start + 1 if start + 1 == count else \
                    self._run_fitting_active_segment(headers, start)
                if end - start == count:
                    run, data = headers, batches  # the usual case: one write of all
                else:
                    run = headers[start:end]
                    last = run[-1]
                    data = memoryview(batches)[first.position:
                                               last.position + LOG_OVERHEAD + last.batch_length]
                latest = epoch_cache.latest_epoch
                records = 0
                for header in run:
                    epoch = header.partition_leader_epoch
                    if epoch >= 0 and (latest is None or epoch > latest):
                        epoch_cache.assign(epoch, header.base_offset)
                        latest = epoch
                    records += header.records_count
                self._segments[-1].append(data, run, now_ms)
                for header in run:
                    producer_state.update(header, marker_of(batches, header)
                                          if header.attributes & CONTROL_FLAG else None)
                self._unflushed_messages += records
                start = end
            last = headers[-1]
            return AppendInfo(headers[0].base_offset, last.base_offset + last.last_offset_delta,
                              max_timestamp, -1, valid_bytes)
        except OSError as exc:
            raise StorageIOError(f"{self._prefix} append_as_follower failed: {exc}") from exc

    def _check_follower_batches(self, headers) -> int:
        """InvalidAppend unless ``headers`` start at or after log_end_offset, each past the
        one before, with leader epochs that never go back; returns their largest
        max_timestamp (the AppendInfo's, read in the same pass)."""
        expected = self._segments[-1].next_offset
        epoch = self.epoch_cache.latest_epoch
        max_timestamp = headers[0].max_timestamp
        for header in headers:
            base_offset = header.base_offset
            # >=, not ==: below a leader's compacted range a fetch returns gaps.
            if base_offset < expected:
                raise InvalidAppend(f"{self._prefix} batch base offset {base_offset} "
                                    f"< expected {expected} (log_end_offset "
                                    f"{self.log_end_offset})")
            if header.partition_leader_epoch >= 0:
                if epoch is not None and header.partition_leader_epoch < epoch:
                    raise InvalidAppend(f"{self._prefix} batch at {base_offset} has "
                                        f"leader epoch {header.partition_leader_epoch} < {epoch}")
                epoch = header.partition_leader_epoch
            if header.max_timestamp > max_timestamp:
                max_timestamp = header.max_timestamp
            expected = base_offset + header.last_offset_delta + 1
        return max_timestamp

    def _run_fitting_active_segment(self, headers, start: int) -> int:
        """End (exclusive) of the run of batches from ``start`` the active segment takes."""
        active = self._segments[-1]
        size = active.size_bytes + headers[start].size
        end = start + 1
        while end < len(headers):
            size += headers[end].size
            if size > self._config.segment_bytes or not active.can_hold(headers[end].last_offset):
                break
            end += 1
        return end

    def _maybe_roll(self, batch_size: int, last_offset: int, now_ms: int) -> None:
        """Roll before an append if segment.bytes, segment.ms, the index size or the
        int32 relative-offset range would be exceeded.  An empty segment never rolls."""
        active = self._segments[-1]
        if not active.size_bytes:
            return
        config = self._config
        if active.size_bytes + batch_size > config.segment_bytes:
            reason = f"segment.bytes {config.segment_bytes} reached"
        elif active.rolling_base_ms is not None \
                and now_ms - active.rolling_base_ms > config.segment_ms:
            reason = f"segment.ms {config.segment_ms} elapsed"
        elif active.index_full(config.max_index_entries_offset, config.max_index_entries_time):
            reason = "index full"
        elif last_offset - active.base_offset > INT32_MAX:  # LogSegment.can_hold, inline
            reason = "relative offsets would overflow int32"
        else:
            return
        self._roll(reason)

    def _roll(self, reason: str) -> None:
        old = self._segments[-1]
        old.on_become_inactive()
        new = LogSegment.create(self.directory, old.next_offset, self._config.index_interval_bytes)
        self._segments.append(new)
        self._bases.append(new.base_offset)
        self._directory_dirty = True
        self.producer_state.take_snapshot(new.base_offset)
        logger.info("%s rolled segment %d (%d bytes) → new segment %d: %s", self._prefix,
                    old.base_offset, old.size_bytes, new.base_offset, reason)

    # -- reads -----------------------------------------------------------------------

    @_converts_os_errors
    def read(self, offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_batch: bool = True, zero_copy: bool = False
             ) -> bytes | memoryview | FileRecords:
        """Whole batches starting with the one that contains ``offset`` (bytes-like).

        Stops before any batch whose base offset is >= ``max_offset`` (exclusive; the
        high watermark for consumers) and before ``max_bytes`` would be exceeded, except
        that with ``min_one_batch`` the first batch is returned whatever its size
        (KIP-74).  ``offset`` == log_end_offset (or >= max_offset) → b"".  Raises
        OffsetOutOfRange outside [log_start_offset, log_end_offset].  May span segments.

        ``zero_copy``: the same batches as a ``FileRecords`` (regions of the segment
        files, not read; ``storage/file_records.py`` says when they stay valid), unless
        they come to less than ``ZERO_COPY_MIN_BYTES``, which are returned as bytes.
        """
        self._check_open()
        log_end_offset = self.log_end_offset
        if offset < self._log_start_offset or offset > log_end_offset:
            raise OffsetOutOfRange(offset, self._log_start_offset, log_end_offset)
        upper = log_end_offset if max_offset is None else min(max_offset, log_end_offset)
        if offset >= upper:
            return b""
        index = bisect.bisect_right(self._bases, offset) - 1
        if zero_copy:
            return self._locate(index, offset, max_bytes, upper, log_end_offset, min_one_batch)
        chunks: list[bytes] = []
        remaining = max_bytes
        while True:
            data, exhausted = self._segments[index].read(
                offset, remaining, upper if upper < log_end_offset else None,
                min_one_batch and not chunks)
            if data:
                chunks.append(data)
                remaining -= len(data)
            index += 1
            if not exhausted or index == len(self._segments) or remaining <= 0 \
                    or self._bases[index] >= upper:
                break
            offset = self._bases[index]
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def _locate(self, index: int, offset: int, max_bytes: int, upper: int,
                log_end_offset: int, min_one_batch: bool) -> bytes | FileRecords:
        """``read``'s segment walk with ``LogSegment.locate``: regions, not bytes."""
        regions = []
        remaining = max_bytes
        while True:
            segment = self._segments[index]
            position, length, exhausted = segment.locate(
                offset, remaining, upper if upper < log_end_offset else None,
                min_one_batch and not regions)
            if length:
                regions.append((segment, segment.generation, position, length))
                remaining -= length
            index += 1
            if not exhausted or index == len(self._segments) or remaining <= 0 \
                    or self._bases[index] >= upper:
                break
            offset = self._bases[index]
        records = FileRecords(regions)
        if len(records) < ZERO_COPY_MIN_BYTES:
            return records.read() if regions else b""
        return records

    @_decoding
    @_converts_os_errors
    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp >= ``timestamp_ms``.

        Segments whose largest timestamp is smaller are skipped; in the first other one,
        the time index gives a starting batch, headers find the first batch reaching
        the target, and only that batch is decoded.  None if no record qualifies;
        UndecodableBatch if that batch does not decode.
        """
        self._check_open()
        for segment in self._segments:
            if segment.largest_timestamp < timestamp_ms \
                    or segment.next_offset <= self._log_start_offset:
                continue
            for header in segment.batches_reaching_timestamp(timestamp_ms):
                found = first_offset_at_or_after(segment.batch_at(header.position), timestamp_ms)
                if found is not None:
                    return found
        return None

    @_decoding
    @_converts_os_errors
    def max_timestamp_and_offset(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record with the largest timestamp in the log.

        Kafka's ListOffsets MAX_TIMESTAMP.  The segment with the largest timestamp knows
        the batch that first reached it; that one batch is decoded for the exact record.
        None for an empty log (or one without timestamps); UndecodableBatch if that batch
        does not decode.
        """
        self._check_open()
        best = None
        for segment in self._segments:
            if segment.size_bytes and segment.largest_timestamp >= 0 and (
                    best is None or segment.largest_timestamp > best.largest_timestamp):
                best = segment
        if best is None:
            return None
        timestamp = best.largest_timestamp
        batch = best.batch_at(best.find_position(best.offset_of_max_timestamp))
        found = first_offset_at_or_after(batch, timestamp)
        offset = found[0] if found is not None else best.offset_of_max_timestamp
        return timestamp, offset

    # -- high watermark, truncation --------------------------------------------------

    def update_high_watermark(self, high_watermark: int) -> None:
        """Set the high watermark, clamped into [log_start_offset, log_end_offset].

        In memory only; ``checkpoint`` persists it.  Whether it may move backwards is
        the replica layer's rule, not this one's.
        """
        self._high_watermark = min(max(high_watermark, self._log_start_offset),
                                   self.log_end_offset)
        self.producer_state.on_high_watermark(self._high_watermark)

    @property
    def last_stable_offset(self) -> int:
        """Where read_committed readers stop: the high watermark, or the first offset of
        an undecided transaction below it (the producer state's docstring)."""
        first_unstable = self.producer_state.first_unstable_offset()
        if first_unstable is None:
            return self._high_watermark
        return max(min(self._high_watermark, first_unstable), self._log_start_offset)

    def aborted_transactions(self, start_offset: int, end_offset: int):
        """The aborted transactions with records in [start_offset, end_offset)."""
        return self.producer_state.aborted_between(start_offset, end_offset)

    @_converts_os_errors
    def truncate_to(self, offset: int) -> None:
        """Remove everything at and after ``offset``; no-op if offset >= log_end_offset.

        Batches are atomic: an ``offset`` inside a batch removes that whole batch, so
        log_end_offset ends <= ``offset``.  Below the first segment this is
        ``truncate_fully_and_start_at(offset)``.  High watermark, recovery point, the
        epoch cache and the producer state follow (snapshots above the new
        log_end_offset are deleted, the state is reloaded from the newest remaining one);
        files and checkpoints are fsynced before returning.
        """
        self._check_open()
        if offset < 0:
            raise InvalidOffset(f"{self._prefix} cannot truncate to {offset}")
        if offset >= self.log_end_offset:
            return
        if offset < self._bases[0]:
            self.truncate_fully_and_start_at(offset)
            return
        old_log_end_offset = self.log_end_offset
        keep = bisect.bisect_right(self._bases, offset)
        removed = self._delete_segments_from(keep)
        removed += self._segments[-1].truncate_to(offset)
        log_end_offset = self.log_end_offset
        self._log_start_offset = min(self._log_start_offset, log_end_offset)
        self._high_watermark = min(self._high_watermark, log_end_offset)
        self._recovery_point = min(self._recovery_point, log_end_offset)
        self.epoch_cache.truncate_from_end(log_end_offset)
        self.first_dirty_offset = min(self.first_dirty_offset, log_end_offset)
        reload_producer_state(self.producer_state, self._segments, self._log_start_offset)
        checkpoint.fsync_directory(self.directory)
        self.checkpoint()
        logger.info("%s truncated to offset %d: log_end_offset %d → %d, %d bytes removed",
                    self._prefix, offset, old_log_end_offset, log_end_offset, removed)

    @_converts_os_errors
    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start empty at ``offset``: log_start_offset =
        log_end_offset = high_watermark = recovery_point = ``offset``; epoch cache,
        producer state and producer snapshots cleared."""
        self._check_open()
        if offset < 0:
            raise InvalidOffset(f"{self._prefix} cannot start at {offset}")
        removed = self._delete_segments_from(0)
        self._segments = [LogSegment.create(self.directory, offset,
                                            self._config.index_interval_bytes)]
        self._bases = [offset]
        self._log_start_offset = self._high_watermark = self._recovery_point = offset
        self.first_dirty_offset = offset
        self._unflushed_messages = 0
        self.epoch_cache.clear()
        self.producer_state.reset(offset)
        checkpoint.fsync_directory(self.directory)
        self.checkpoint()
        logger.info("%s truncated fully (%d bytes removed), now starts at offset %d",
                    self._prefix, removed, offset)

    def _delete_segments_from(self, start: int) -> int:
        """Delete ``segments[start:]``, newest first; return the bytes removed."""
        doomed = self._segments[start:]
        del self._segments[start:]
        del self._bases[start:]
        for segment in reversed(doomed):
            segment.delete()
        return sum(segment.size_bytes for segment in doomed)

    # -- retention -------------------------------------------------------------------

    @_converts_os_errors
    def enforce_retention(self, now_ms: int | None = None) -> int:
        """Delete the oldest whole segments breaching retention.ms or retention.bytes
        (only when cleanup.policy includes ``delete``).

        Only segments entirely below the high watermark go.  retention.ms: the
        segment's largest timestamp (file mtime if it has none) is more than
        retention.ms before ``now_ms``.
        retention.bytes: oldest first while the log stays >= retention.bytes without
        it.  An expired active segment is rolled first, then deleted.
        log_start_offset moves to the first remaining segment; producers and producer
        snapshots wholly below it are forgotten.  Returns the count.
        """
        self._check_open()
        now_ms = self._clock_ms() if now_ms is None else now_ms
        config = self._config
        deleted = 0
        if not config.delete:
            return 0  # cleanup.policy=compact: the cleaner, not retention, bounds the log
        if config.retention_ms >= 0:
            deleted += self._delete_old_segments(
                lambda segment: now_ms - segment.retention_timestamp_ms() > config.retention_ms,
                f"retention.ms {config.retention_ms}")
        if config.retention_bytes >= 0:
            excess = [self.size_bytes - config.retention_bytes]

            def over_size(segment: LogSegment) -> bool:
                if excess[0] - segment.size_bytes < 0:
                    return False
                excess[0] -= segment.size_bytes
                return True

            deleted += self._delete_old_segments(over_size,
                                                 f"retention.bytes {config.retention_bytes}")
        return deleted

    def _delete_old_segments(self, breached: Callable[[LogSegment], bool], reason: str) -> int:
        doomed = []
        for segment in self._segments:
            # An empty segment stops retention only when it is the active one: the
            # cleaner may leave an emptied segment anywhere below it.
            if (not segment.size_bytes and segment is self._segments[-1]) \
                    or segment.next_offset > self._high_watermark or not breached(segment):
                break
            doomed.append(segment)
        if not doomed:
            return 0
        if len(doomed) == len(self._segments):
            self._roll(f"active segment breaches {reason}")
        del self._segments[:len(doomed)]
        del self._bases[:len(doomed)]
        for segment in doomed:
            segment.delete()
            logger.info("%s deleted segment %d (offsets %d..%d, %d bytes, largest timestamp "
                        "%d): %s", self._prefix, segment.base_offset, segment.base_offset,
                        segment.next_offset - 1, segment.size_bytes,
                        segment.largest_timestamp, reason)
        self._log_start_offset = max(self._log_start_offset, self._bases[0])
        self._recovery_point = max(self._recovery_point, self._log_start_offset)
        self._high_watermark = max(self._high_watermark, self._log_start_offset)
        self.epoch_cache.truncate_from_start(self._log_start_offset)
        self.producer_state.truncate_before(self._log_start_offset)
        checkpoint.fsync_directory(self.directory)
        self.checkpoint()
        return len(doomed)

    @_converts_os_errors
    def maybe_increment_log_start_offset(self, offset: int, reason: str) -> bool:
        """Move log_start_offset up to ``offset`` (Kafka's maybeIncrementLogStartOffset:
        DeleteRecords on a leader, a follower taking its leader's log_start_offset).

        Raises OffsetOutOfRange when ``offset`` is above the high watermark (nothing
        uncommitted is deleted); returns False, changing nothing, when it is not above
        the current log_start_offset.  Whole segments entirely below ``offset`` are
        deleted (the active one rolled first when every record goes); the segment
        holding ``offset`` stays and reads from ``offset`` answer the batch containing
        it.  Recovery point, epoch cache and producer state follow as for retention,
        and the checkpoint is written, so a restart keeps the new start.
        """
        self._check_open()
        if offset > self._high_watermark:
            raise OffsetOutOfRange(offset, self._log_start_offset, self._high_watermark)
        if offset <= self._log_start_offset:
            return False
        self._log_start_offset = offset
        self.first_dirty_offset = max(self.first_dirty_offset, offset)
        if not self._delete_old_segments(lambda segment: segment.next_offset <= offset,
                                         reason):
            # Nothing deleted: what _delete_old_segments does after a deletion, here.
            self._recovery_point = max(self._recovery_point, offset)
            self.epoch_cache.truncate_from_start(offset)
            self.producer_state.truncate_before(offset)
            self.checkpoint()
        logger.info("%s log_start_offset moved to %d: %s", self._prefix, offset, reason)
        return True

    # -- the log cleaner's swap --------------------------------------------------------

    @_converts_os_errors
    def replace_segments(self, old: list[LogSegment], old_sizes: list[int], new: LogSegment,
                         step: Callable[[str], None] = lambda name: None) -> bool:
        """Swap the cleaner's ``new`` segment in for ``old`` (Kafka's replaceSegments).

        ``old`` must still be consecutive segments of this log, below the active one, with
        the sizes the cleaner read (``old_sizes``); otherwise (retention or a truncation changed them
        meanwhile) ``new`` is deleted and False returned.  ``new`` is written and
        fsynced, its files named ``.cleaned``, its offsets within ``old``'s.  Steps, each
        made durable by a directory fsync before the next (``step(name)`` is called after
        each; tests crash there):

        1. ``swap``: new's files ``.cleaned`` → ``.swap``.  From here recovery completes
           the swap (it deletes the segments a ``.swap`` covers and renames it);
        2. in memory: the segment list holds ``new`` instead of ``old``.  Reads see one
           list or the other, never a mix: nothing here awaits;
        3. ``deleted``: old's files renamed ``.deleted``, then removed;
        4. ``renamed``: new's files ``.swap`` → their final names.
        """
        self._check_open()
        first = next((i for i, s in enumerate(self._segments) if s is old[0]), None)
        if first is None or self._segments[first:first + len(old)] != old \
                or first + len(old) >= len(self._segments) \
                or [s.size_bytes for s in old] != old_sizes:
            new.delete()
            logger.info("%s cleaned segment %d discarded: the log changed while cleaning",
                        self._prefix, new.base_offset)
            return False
        new.change_file_suffix(".swap")
        checkpoint.fsync_directory(self.directory)
        step("swap")
        self._segments[first:first + len(old)] = [new]
        self._bases[first:first + len(old)] = [new.base_offset]
        for segment in old:
            segment.close()
            segment.change_file_suffix(".deleted")
        checkpoint.fsync_directory(self.directory)
        step("deleted")
        for segment in old:
            segment.delete()
        new.change_file_suffix("")
        checkpoint.fsync_directory(self.directory)
        step("renamed")
        return True

    @_converts_os_errors
    def advance_first_dirty_offset(self, offset: int) -> None:
        """The cleaner cleaned everything below ``offset``: persist it (never backwards;
        never past log_end_offset)."""
        self._check_open()
        offset = min(offset, self.log_end_offset)
        if offset > self.first_dirty_offset:
            self.first_dirty_offset = offset
            checkpoint.write_cleaner_offset(self.directory, offset)

    # -- durability ------------------------------------------------------------------

    def maybe_flush(self) -> None:
        """Flush if flush.messages appended messages or flush.ms have accumulated.

        Cheap when nothing is due (two comparisons, one clock read only when flush.ms
        is set).  Call after appends, and on a timer if flush.ms matters for idle logs.
        """
        if self.log_end_offset <= self._recovery_point:
            return
        config = self._config
        if self._unflushed_messages >= config.flush_messages or (
                config.flush_ms != LONG_MAX
                and self._clock_ms() - self._last_flush_ms >= config.flush_ms):
            self.flush()

    @_converts_os_errors
    def flush(self, up_to_offset: int | None = None) -> None:
        """fsync the segments holding [recovery_point, up_to_offset) (default: all)
        and their indexes; recovery_point := up_to_offset (clamped to log_end_offset).

        Does not write offsets.checkpoint; ``checkpoint`` does.
        """
        self._check_open()
        log_end_offset = self.log_end_offset
        target = log_end_offset if up_to_offset is None else min(up_to_offset, log_end_offset)
        if target > self._recovery_point:
            for segment in self._segments:
                if segment.next_offset > self._recovery_point and segment.base_offset < target:
                    segment.flush()
        # Before the recovery point moves: recovery no longer re-reads the epochs of the
        # batches below it, so the assignments there must be on disk.
        self.epoch_cache.flush()
        if target > self._recovery_point:
            self._recovery_point = target
        if self._directory_dirty:
            checkpoint.fsync_directory(self.directory)
            self._directory_dirty = False
        if target == log_end_offset:
            self._unflushed_messages = 0
        self._last_flush_ms = self._clock_ms()

    @_converts_os_errors
    def checkpoint(self) -> None:
        """Atomically write offsets.checkpoint (high watermark, recovery point, log start
        offset) if they changed since the last write.  Costs two fsyncs when it writes."""
        self._check_open()
        offsets = PartitionOffsets(self._high_watermark, self._recovery_point,
                                   self._log_start_offset)
        if offsets != self._checkpointed:
            checkpoint.write_offsets(self.directory, offsets)
            self._checkpointed = offsets

    @_converts_os_errors
    def close(self) -> None:
        """Flush, checkpoint, snapshot the producer state at log_end_offset, close the
        files, then mark a clean shutdown.  Idempotent."""
        if self._closed:
            return
        self.flush()
        self.checkpoint()
        if self.log_end_offset > self._log_start_offset:  # an empty log replays nothing
            self.producer_state.take_snapshot(self.log_end_offset)
        for segment in self._segments:
            segment.close()
        self._closed = True
        checkpoint.write_clean_shutdown_marker(self.directory)
        logger.info("%s closed at log_end_offset %d", self._prefix, self.log_end_offset)

    def close_handlers(self) -> None:
        """Close the files without writing anything: no flush, no checkpoint, no
        clean-shutdown marker (Kafka's closeHandlers, for a log whose directory failed).
        Later reads and appends raise LogClosed; the next ``open`` runs full recovery.
        Idempotent."""
        if self._closed:
            return
        self._closed = True
        for segment in self._segments:
            try:
                segment.close()
            except OSError:
                pass  # nothing was to be written anyway
        logger.warning("%s closed without flushing at log_end_offset %d (recovery point %d)",
                       self._prefix, self.log_end_offset, self._recovery_point)

    def delete(self) -> None:
        """Close the files and remove the whole directory (topic deletion)."""
        for segment in self._segments:
            segment.close()
        self._closed = True
        shutil.rmtree(self.directory, ignore_errors=True)
        logger.info("%s deleted", self._prefix)

"""``PartitionLog``: the on-disk log of one partition, the facade the broker uses (the
half Kafka calls UnifiedLog).

It keeps what is about offsets rather than files: the log start offset, the high
watermark, the last stable offset, the leader-epoch cache, the producer state (with its
snapshots), the log cleaner's first dirty offset, the offsets checkpoint; it validates
appends, decides retention and truncation, and converts every OSError to
StorageIOError.  The segments themselves (roll, write, read, flush, delete, the
cleaner's swap) are ``storage/local_log.py``'s ``LocalLog``, which only this class calls.

Hot paths (``append_as_leader``, ``append_as_follower``, ``read``) touch only batch
headers: an append is one ``os.write`` of the batch bytes to the active segment plus
in-memory index and producer-state bookkeeping; a read is a bisect over segment base
offsets, an index lookup, a short walk over 12-byte prefixes and one ``os.pread``
(or, for the Fetch handler, no read of the records at all: ``FileRecords``, regions the
network layer sends with ``os.sendfile``).
Everything that decodes records (``offset_for_timestamp``, ``max_timestamp_and_offset``)
is a cold path.

Size (about 620 lines): one class, because every mutator here moves several of the
offsets above together (a truncation moves the high watermark, the epoch cache, the
producer state and the cleaner's offset in one call); what is not offsets is in
``local_log``, ``append_checks`` and ``errors``.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from protocol.control import marker_of
from protocol.records import (
    CONTROL_FLAG,
    LOG_OVERHEAD,
    BatchHeader,
    assign_offset_and_epoch,
    valid_prefix,
    with_offset_and_epoch,
)

from . import checkpoint
from .append_checks import check_follower_batches, check_leader_batch
from .checkpoint import PartitionOffsets
from .config import LONG_MAX, LogConfig
from .epoch_cache import LeaderEpochCache
from .errors import (
    InvalidAppend,
    InvalidOffset,
    LogClosed,
    OffsetOutOfRange,
    StorageIOError,
    converts_os_errors,
    converts_record_errors,
)
from .file_records import FileRecords
from .local_log import LocalLog
from .producer_state import AbortedTxn, ProducerStateManager
from .recovery import RecoveredLog, RecoveryReport, recover_log, reload_producer_state
from .segment import LogSegment

logger = logging.getLogger(__name__)


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class AppendInfo:
    """Where an append landed: offsets inclusive, ``size_bytes`` as stored."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    log_append_time_ms: int
    size_bytes: int


class PartitionLog:
    """The offsets, leader-epoch cache, producer state and checkpoints of one
    partition, over its segments (``LocalLog``).

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
    * only the last segment (the active one) is ever appended to, and only after the
      batch passed this class's checks (offsets, epochs) and the roll decision;
    * once closed (``close``, ``close_handlers``, ``delete``), every call that reads
      or writes raises LogClosed, so no file of ``LocalLog``'s is touched after that.

    Who may call: one thread at a time (the broker's event loop; at shutdown one
    worker thread per log), nothing awaits inside a call; the one exception is
    ``checkpoint``, which another thread may run beside the owner (the broker's
    offsets-checkpoint pass): it, ``close``, ``close_handlers`` and ``delete`` hold
    the log's checkpoint lock, so the file holds the offsets of the last write to
    finish, taken after every truncation that wrote before it (a truncation checkpoints
    under the lock after lowering the offsets), and no write follows a close.
    Calls are synchronous and do blocking file I/O; the hot paths
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
        self._local = LocalLog(directory, config, recovered.segments,
                               recovered.offsets.recovery_point, clock_ms, self._prefix)
        #: ``LocalLog.segments``, the same list for the log's life, read here for
        #: log_end_offset without a second property call on the hot paths
        self._segments = self._local.segments
        self._log_start_offset = recovered.offsets.log_start_offset
        self._high_watermark = recovered.offsets.high_watermark
        self.epoch_cache: LeaderEpochCache = recovered.epoch_cache
        #: read it (``check``) freely; only this log changes it
        self.producer_state: ProducerStateManager = recovered.producer_state
        # The recovery replay counts every transaction it closes as unreplicated: those
        # whose marker is below the checkpointed high watermark are stable already.
        self.producer_state.on_high_watermark(self._high_watermark)
        self.recovery_report: RecoveryReport = recovered.report
        self._checkpointed: PartitionOffsets | None = None
        self._checkpoint_lock = threading.RLock()
        self._closed = False
        #: the log cleaner's: everything below it was cleaned at least once
        self.first_dirty_offset = min(max(checkpoint.read_cleaner_offset(directory) or 0,
                                          self._log_start_offset), self.log_end_offset)

    @classmethod
    def open(cls, directory: str | os.PathLike[str], config: LogConfig, *,
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
        if recovered.report.fresh:
            # A missing offsets.checkpoint reads back as these offsets (all the first
            # segment's base): nothing to write until one of them moves.
            log._checkpointed = log._offsets()
        else:
            log.checkpoint()
        return log

    # -- state -----------------------------------------------------------------------

    @property
    def config(self) -> LogConfig:
        return self._config

    def update_config(self, config: LogConfig) -> None:
        """New settings apply to the next roll / retention / flush decision."""
        self._config = config
        self._local.update_config(config)

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
        return self._local.recovery_point

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._local.segments)

    @property
    def size_bytes(self) -> int:
        return self._local.size_bytes

    def __repr__(self) -> str:
        return (f"PartitionLog({self.directory!r}, log_start_offset={self._log_start_offset}, "
                f"log_end_offset={self.log_end_offset}, high_watermark={self._high_watermark})")

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosed(f"{self._prefix} is closed")

    # -- appends ---------------------------------------------------------------------

    @converts_os_errors
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
        header = check_leader_batch(batch, header, leader_epoch, self.epoch_cache.latest_epoch,
                                    self._prefix)
        size = len(batch)
        local = self._local
        base_offset = self._segments[-1].next_offset
        header = with_offset_and_epoch(header, base_offset, leader_epoch)
        now_ms = self._clock_ms()
        reason = local.roll_reason(size, base_offset + header.last_offset_delta, now_ms)
        if reason is not None:
            self._roll(reason)
        assign_offset_and_epoch(batch, 0, base_offset, leader_epoch)
        self.epoch_cache.assign(leader_epoch, base_offset)
        local.append(batch, [header], now_ms, header.records_count)
        self.producer_state.update(header, marker_of(batch, header))
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
        header once per pass and keeps ``converts_os_errors``'s conversion inline (an
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
            max_timestamp = check_follower_batches(headers, self.log_end_offset,
                                                   self.epoch_cache.latest_epoch, self._prefix)
            now_ms = self._clock_ms()
            local = self._local
            epoch_cache = self.epoch_cache
            producer_state = self.producer_state
            count = len(headers)
            start = 0
            data: bytes | memoryview  # all of ``batches``, or a run of them as a view
            while start < count:
                first = headers[start]
                reason = local.roll_reason(LOG_OVERHEAD + first.batch_length,
                                           first.base_offset + first.last_offset_delta, now_ms)
                if reason is not None:
                    self._roll(reason)
                end = start + 1 if start + 1 == count else \
                    local.run_fitting_active_segment(headers, start)
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
                local.append(data, run, now_ms, records)
                for header in run:
                    producer_state.update(header, marker_of(batches, header)
                                          if header.attributes & CONTROL_FLAG else None)
                start = end
            last = headers[-1]
            return AppendInfo(headers[0].base_offset, last.base_offset + last.last_offset_delta,
                              max_timestamp, -1, valid_bytes)
        except OSError as exc:
            raise StorageIOError(f"{self._prefix} append_as_follower failed: {exc}") from exc

    def _roll(self, reason: str) -> None:
        """A new active segment, and a producer snapshot at its base offset (recovery
        replays producer state from the newest snapshot, not from the log start)."""
        new = self._local.roll(reason)
        self.producer_state.take_snapshot(new.base_offset)

    # -- reads -----------------------------------------------------------------------

    @converts_os_errors
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
        return self._local.read(offset, max_bytes, upper, min_one_batch, zero_copy)

    @converts_record_errors
    @converts_os_errors
    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp >= ``timestamp_ms``.

        Segments whose largest timestamp is smaller are skipped; in the first other one,
        the time index gives a starting batch, headers find the first batch reaching
        the target, and only that batch is decoded.  None if no record qualifies;
        UndecodableBatch if that batch does not decode.
        """
        self._check_open()
        return self._local.offset_for_timestamp(timestamp_ms, self._log_start_offset)

    @converts_record_errors
    @converts_os_errors
    def max_timestamp_and_offset(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record with the largest timestamp in the log.

        Kafka's ListOffsets MAX_TIMESTAMP.  The segment with the largest timestamp knows
        the batch that first reached it; that one batch is decoded for the exact record.
        None for an empty log (or one without timestamps); UndecodableBatch if that batch
        does not decode.
        """
        self._check_open()
        return self._local.max_timestamp_and_offset()

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

    def aborted_transactions(self, start_offset: int, end_offset: int) -> list[AbortedTxn]:
        """The aborted transactions with records in [start_offset, end_offset)."""
        return self.producer_state.aborted_between(start_offset, end_offset)

    @converts_os_errors
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
        if offset < self._local.bases[0]:
            self.truncate_fully_and_start_at(offset)
            return
        old_log_end_offset = self.log_end_offset
        removed = self._local.truncate_to(offset)
        log_end_offset = self.log_end_offset
        self._log_start_offset = min(self._log_start_offset, log_end_offset)
        self._high_watermark = min(self._high_watermark, log_end_offset)
        self.epoch_cache.truncate_from_end(log_end_offset)
        self.first_dirty_offset = min(self.first_dirty_offset, log_end_offset)
        reload_producer_state(self.producer_state, self._local.segments,
                              self._log_start_offset)
        # The replay counts every transaction it closes as unreplicated: those whose
        # marker is below the high watermark are stable, or the LSO would fall back.
        self.producer_state.on_high_watermark(self._high_watermark)
        checkpoint.fsync_directory(self.directory)
        self.checkpoint()
        logger.info("%s truncated to offset %d: log_end_offset %d → %d, %d bytes removed",
                    self._prefix, offset, old_log_end_offset, log_end_offset, removed)

    @converts_os_errors
    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start empty at ``offset``: log_start_offset =
        log_end_offset = high_watermark = recovery_point = ``offset``; epoch cache,
        producer state and producer snapshots cleared."""
        self._check_open()
        if offset < 0:
            raise InvalidOffset(f"{self._prefix} cannot start at {offset}")
        removed = self._local.truncate_fully_and_start_at(offset)
        self._log_start_offset = self._high_watermark = offset
        self.first_dirty_offset = offset
        self.epoch_cache.clear()
        self.producer_state.reset(offset)
        checkpoint.fsync_directory(self.directory)
        self.checkpoint()
        logger.info("%s truncated fully (%d bytes removed), now starts at offset %d",
                    self._prefix, removed, offset)

    # -- retention -------------------------------------------------------------------

    @converts_os_errors
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
        """Delete the oldest segments while ``breached`` holds and they lie wholly below
        the high watermark; the log start offset and what hangs on it follow."""
        local = self._local
        segments = local.segments
        doomed = 0
        for segment in segments:
            # An empty segment stops retention only when it is the active one: the
            # cleaner may leave an emptied segment anywhere below it.
            if (not segment.size_bytes and segment is segments[-1]) \
                    or segment.next_offset > self._high_watermark or not breached(segment):
                break
            doomed += 1
        if not doomed:
            return 0
        if doomed == len(segments):
            self._roll(f"active segment breaches {reason}")
        local.remove_and_delete_segments(doomed, reason)
        self._log_start_offset = max(self._log_start_offset, local.bases[0])
        local.maybe_increment_recovery_point(self._log_start_offset)
        self._high_watermark = max(self._high_watermark, self._log_start_offset)
        self.epoch_cache.truncate_from_start(self._log_start_offset)
        self.producer_state.truncate_before(self._log_start_offset)
        checkpoint.fsync_directory(self.directory)
        self.checkpoint()
        return doomed

    @converts_os_errors
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
            self._local.maybe_increment_recovery_point(offset)
            self.epoch_cache.truncate_from_start(offset)
            self.producer_state.truncate_before(offset)
            self.checkpoint()
        logger.info("%s log_start_offset moved to %d: %s", self._prefix, offset, reason)
        return True

    # -- the log cleaner's swap --------------------------------------------------------

    @converts_os_errors
    def replace_segments(self, old: list[LogSegment], old_sizes: list[int], new: LogSegment,
                         step: Callable[[str], None] = lambda name: None) -> bool:
        """Swap the cleaner's ``new`` segment in for ``old``, or discard ``new`` and
        return False if the log changed meanwhile: ``LocalLog.replace_segments`` says
        how, step by step.  Offsets, epochs and producer state do not move (the
        cleaner keeps every offset it does not drop, and the last batch of every
        producer)."""
        self._check_open()
        return self._local.replace_segments(old, old_sizes, new, step)

    @converts_os_errors
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
        local = self._local
        if self._segments[-1].next_offset <= local.recovery_point:
            return
        config = self._config
        if local.unflushed_messages >= config.flush_messages or (
                config.flush_ms != LONG_MAX
                and self._clock_ms() - local.last_flush_ms >= config.flush_ms):
            self.flush()

    @converts_os_errors
    def flush(self, up_to_offset: int | None = None) -> None:
        """fsync the segments holding [recovery_point, up_to_offset) (default: all)
        and their indexes; recovery_point := up_to_offset (clamped to log_end_offset).

        Does not write offsets.checkpoint; ``checkpoint`` does.
        """
        self._check_open()
        log_end_offset = self.log_end_offset
        target = log_end_offset if up_to_offset is None else min(up_to_offset, log_end_offset)
        self._local.flush(target)
        # Before the recovery point moves: recovery no longer re-reads the epochs of the
        # batches below it, so the assignments there must be on disk.
        self.epoch_cache.flush()
        self._local.mark_flushed(target)

    @converts_os_errors
    def checkpoint(self) -> None:
        """Atomically write offsets.checkpoint (high watermark, recovery point, log start
        offset) if they changed since the last write.  Costs two fsyncs when it writes.
        Any thread (see the class doc); LogClosed once the log is closed."""
        with self._checkpoint_lock:
            self._check_open()
            offsets = self._offsets()
            if offsets != self._checkpointed:
                checkpoint.write_offsets(self.directory, offsets)
                self._checkpointed = offsets

    def checkpoint_pending(self) -> bool:
        """Whether ``checkpoint`` would write (offsets moved since the last write); no
        I/O, owner thread."""
        return not self._closed and self._offsets() != self._checkpointed

    def _offsets(self) -> PartitionOffsets:
        return PartitionOffsets(self._high_watermark, self._local.recovery_point,
                                self._log_start_offset)

    @converts_os_errors
    def close(self) -> None:
        """Flush, checkpoint, snapshot the producer state at log_end_offset, close the
        files, then mark a clean shutdown.  Idempotent."""
        with self._checkpoint_lock:
            if self._closed:
                return
            self.flush()
            self.checkpoint()
            if self.log_end_offset > self._log_start_offset:  # an empty log replays nothing
                self.producer_state.take_snapshot(self.log_end_offset)
            self._local.close()
            self._closed = True
            checkpoint.write_clean_shutdown_marker(self.directory)
        logger.info("%s closed at log_end_offset %d", self._prefix, self.log_end_offset)

    def close_handlers(self) -> None:
        """Close the files without writing anything: no flush, no checkpoint, no
        clean-shutdown marker (Kafka's closeHandlers, for a log whose directory failed).
        Later reads and appends raise LogClosed; the next ``open`` runs full recovery.
        Idempotent."""
        with self._checkpoint_lock:
            if self._closed:
                return
            self._closed = True
            self._local.close_handlers()
        logger.warning("%s closed without flushing at log_end_offset %d (recovery point %d)",
                       self._prefix, self.log_end_offset, self._local.recovery_point)

    def delete(self) -> None:
        """Close the files and remove the whole directory (topic deletion)."""
        with self._checkpoint_lock:
            self._local.close()
            self._closed = True
            self._local.delete_directory()
        logger.info("%s deleted", self._prefix)

"""``LocalLog``: the segments of one partition in its directory (Kafka's LocalLog).

The segment half of the partition log: roll, append bytes to the active segment,
read by offset (bytes or file regions), find by timestamp, flush and the recovery
point, delete segments from either end, the log cleaner's swap, closing the files.
It knows nothing of leader epochs, producers, the high watermark or the log start
offset; ``storage/log.py``'s ``PartitionLog`` keeps those and tells this class what to
do (which segments retention deletes, where a read must stop).

Hot paths: ``append`` is one ``os.write`` to the active segment; ``read`` is a bisect
over segment base offsets, an index lookup, a short walk over 12-byte batch prefixes
and one ``os.pread`` (or, with ``zero_copy``, no read of the records at all).
"""
from __future__ import annotations

import bisect
import logging
import shutil
import zlib
from collections.abc import Callable

from protocol.records import BatchHeader, first_offset_at_or_after

from . import checkpoint
from .config import LogConfig
from .file_records import ZERO_COPY_MIN_BYTES, FileRecords
from .index import INT32_MAX
from .segment import LogSegment

logger = logging.getLogger(__name__)


class LocalLog:
    """The ordered segments of one partition directory and how far they are on disk.

    Invariants:

    * ``segments`` is never empty and sorted by base offset, and is always the same
      list object (changed in place, never rebound: the owner may keep it); batch offsets increase
      across it (dense on appends; the cleaner's gaps never move an offset); only the
      last segment (the active one) is ever appended to;
    * ``bases[i] == segments[i].base_offset`` for every i (the list ``read`` bisects);
    * ``recovery_point <= log_end_offset``, and everything below ``recovery_point`` has
      been fsynced (``flush`` then ``mark_flushed``);
    * a new segment file's directory entry is fsynced by the next ``flush`` (a roll) or
      before the call returns (every deletion and the swap).

    Who may call: the owning ``PartitionLog`` only, on the broker's event loop (no
    locks, nothing awaits).  It checks that the log is open and converts OSError to
    StorageIOError at its own boundary; here an OSError leaves raw.
    """

    def __init__(self, directory: str, config: LogConfig, segments: list[LogSegment],
                 recovery_point: int, clock_ms: Callable[[], int], prefix: str) -> None:
        self.directory = directory
        self._config = config
        self._clock_ms = clock_ms
        self._prefix = prefix
        self._segments = segments
        self.bases: list[int] = [segment.base_offset for segment in segments]
        #: everything below it has been fsynced; read it freely, only this class sets it
        #: (a plain attribute, not a property: the append path reads it)
        self.recovery_point = recovery_point
        #: messages appended since the last full flush (flush.messages counts them)
        self.unflushed_messages = 0
        #: wall-clock ms of the last flush (flush.ms counts from it)
        self.last_flush_ms = clock_ms()
        self._directory_dirty = False

    # -- state -----------------------------------------------------------------------

    @property
    def segments(self) -> list[LogSegment]:
        """The live list (the same object for the log's life): read it, never change it."""
        return self._segments

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def log_end_offset(self) -> int:
        """The next offset to assign (exclusive end of the log)."""
        return self._segments[-1].next_offset

    @property
    def size_bytes(self) -> int:
        return sum(segment.size_bytes for segment in self._segments)

    def update_config(self, config: LogConfig) -> None:
        """New settings apply to the next roll and to every segment's index interval."""
        self._config = config
        for segment in self._segments:
            segment.index_interval_bytes = config.index_interval_bytes

    # -- roll and append ---------------------------------------------------------------

    def roll_reason(self, batch_size: int, last_offset: int, now_ms: int) -> str | None:
        """Why the active segment must roll before a ``batch_size`` append ending at
        ``last_offset`` (segment.bytes, segment.ms, a full index, the int32
        relative-offset range), or None.  An empty segment never rolls."""
        active = self._segments[-1]
        if not active.size_bytes:
            return None
        config = self._config
        if active.size_bytes + batch_size > config.segment_bytes:
            return f"segment.bytes {config.segment_bytes} reached"
        if active.rolling_base_ms is not None and now_ms - active.rolling_base_ms \
                > config.segment_ms - (config.segment_jitter_ms and self._roll_jitter_ms(active)):
            return f"segment.ms {config.segment_ms} elapsed (less segment.jitter.ms' share)"
        if active.index_full(config.max_index_entries_offset, config.max_index_entries_time):
            return "index full"
        if last_offset - active.base_offset > INT32_MAX:  # LogSegment.can_hold, inline
            return "relative offsets would overflow int32"
        return None

    def _roll_jitter_ms(self, segment: LogSegment) -> int:
        """``segment``'s share of segment.jitter.ms, drawn from a number fixed per segment
        and spread across partitions (its directory and base offset)."""
        seed = zlib.crc32(f"{self.directory}:{segment.base_offset}".encode())
        return self._config.roll_jitter_ms(seed)

    def roll(self, reason: str) -> LogSegment:
        """Seal the active segment and start a new, empty one at log_end_offset."""
        old = self._segments[-1]
        old.on_become_inactive()
        new = LogSegment.create(self.directory, old.next_offset, self._config.index_interval_bytes)
        self._segments.append(new)
        self.bases.append(new.base_offset)
        self._directory_dirty = True
        logger.info("%s rolled segment %d (%d bytes) → new segment %d: %s", self._prefix,
                    old.base_offset, old.size_bytes, new.base_offset, reason)
        return new

    def run_fitting_active_segment(self, headers: list[BatchHeader], start: int) -> int:
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

    def append(self, data: bytes | bytearray | memoryview, headers: list[BatchHeader],
               now_ms: int, records: int) -> None:
        """Write ``data`` (the batches ``headers`` describe, offsets assigned) to the
        active segment; ``records`` more messages are unflushed.  A failed write
        writes nothing (``LogSegment.append``)."""
        self._segments[-1].append(data, headers, now_ms)
        self.unflushed_messages += records

    # -- reads -----------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, upper: int, min_one_batch: bool,
             zero_copy: bool) -> bytes | memoryview | FileRecords:
        """Whole batches from the one containing ``offset`` (which the caller checked
        is in [first base offset, ``upper``)), stopping before a batch whose base
        offset is >= ``upper`` (exclusive) and before ``max_bytes`` would be exceeded
        (except the first batch with ``min_one_batch``).  May span segments."""
        log_end_offset = self.log_end_offset
        index = bisect.bisect_right(self.bases, offset) - 1
        if zero_copy:
            return self._locate(index, offset, max_bytes, upper, log_end_offset, min_one_batch)
        chunks: list[bytes | memoryview] = []
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
                    or self.bases[index] >= upper:
                break
            offset = self.bases[index]
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def _locate(self, index: int, offset: int, max_bytes: int, upper: int,
                log_end_offset: int, min_one_batch: bool) -> bytes | FileRecords:
        """``read``'s segment walk with ``LogSegment.locate``: regions, not bytes."""
        regions: list[tuple[LogSegment, int, int, int]] = []
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
                    or self.bases[index] >= upper:
                break
            offset = self.bases[index]
        records = FileRecords(regions)
        if len(records) < ZERO_COPY_MIN_BYTES:
            return records.read() if regions else b""
        return records

    def offset_for_timestamp(self, timestamp_ms: int,
                             log_start_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or above ``log_start_offset`` whose
        timestamp >= ``timestamp_ms``, or None.  Decodes one batch (RecordError if it
        does not decode; the caller converts it)."""
        for segment in self._segments:
            if segment.largest_timestamp < timestamp_ms \
                    or segment.next_offset <= log_start_offset:
                continue
            for header in segment.batches_reaching_timestamp(timestamp_ms):
                found = first_offset_at_or_after(segment.batch_at(header.position), timestamp_ms)
                if found is not None:
                    return found
        return None

    def max_timestamp_and_offset(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record with the largest timestamp, or None
        (no timestamps).  Decodes one batch, like ``offset_for_timestamp``."""
        best: LogSegment | None = None
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

    # -- deleting segments ---------------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove everything at and after ``offset`` (``offset`` at or above the first
        base offset; batches are atomic, so log_end_offset ends <= ``offset``); the
        recovery point follows.  Returns the bytes removed.  The caller fsyncs the
        directory."""
        keep = bisect.bisect_right(self.bases, offset)
        removed = self._delete_segments_from(keep)
        removed += self._segments[-1].truncate_to(offset)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        return removed

    def truncate_fully_and_start_at(self, offset: int) -> int:
        """Delete every segment and start one empty segment at ``offset``, which is the
        recovery point too.  Returns the bytes removed.  The caller fsyncs the
        directory."""
        removed = self._delete_segments_from(0)
        self._segments[:] = [LogSegment.create(self.directory, offset,
                                               self._config.index_interval_bytes)]
        self.bases[:] = [offset]
        self.recovery_point = offset
        self.unflushed_messages = 0
        return removed

    def _delete_segments_from(self, start: int) -> int:
        """Delete ``segments[start:]``, newest first; return the bytes removed."""
        doomed = self._segments[start:]
        del self._segments[start:]
        del self.bases[start:]
        for segment in reversed(doomed):
            segment.delete()
        return sum(segment.size_bytes for segment in doomed)

    def remove_and_delete_segments(self, count: int, reason: str) -> None:
        """Delete the ``count`` oldest segments (never the active one: the caller rolls
        first) and log each; the caller fsyncs the directory."""
        doomed = self._segments[:count]
        del self._segments[:count]
        del self.bases[:count]
        for segment in doomed:
            segment.delete()
            logger.info("%s deleted segment %d (offsets %d..%d, %d bytes, largest timestamp "
                        "%d): %s", self._prefix, segment.base_offset, segment.base_offset,
                        segment.next_offset - 1, segment.size_bytes,
                        segment.largest_timestamp, reason)

    # -- the log cleaner's swap --------------------------------------------------------

    def replace_segments(self, old: list[LogSegment], old_sizes: list[int], new: LogSegment,
                         step: Callable[[str], None]) -> bool:
        """Swap the cleaner's ``new`` segment in for ``old`` (Kafka's replaceSegments).

        ``old`` must still be consecutive segments of this log, below the active one, with
        the sizes the cleaner read (``old_sizes``); otherwise (retention or a truncation
        changed them meanwhile) ``new`` is deleted and False returned.  ``new`` is written
        and fsynced, its files named ``.cleaned``, its offsets within ``old``'s.  Steps,
        each made durable by a directory fsync before the next (``step(name)`` is called
        after each; tests crash there):

        1. ``swap``: new's files ``.cleaned`` → ``.swap``.  From here recovery completes
           the swap (it deletes the segments a ``.swap`` covers and renames it);
        2. in memory: the segment list holds ``new`` instead of ``old``.  Reads see one
           list or the other, never a mix: nothing here awaits;
        3. ``deleted``: old's files renamed ``.deleted``, then removed;
        4. ``renamed``: new's files ``.swap`` → their final names.
        """
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
        self.bases[first:first + len(old)] = [new.base_offset]
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

    # -- durability ------------------------------------------------------------------

    def flush(self, up_to_offset: int) -> None:
        """fsync the segments holding [recovery_point, ``up_to_offset``) and their
        indexes.  The recovery point moves only in ``mark_flushed``."""
        if up_to_offset > self.recovery_point:
            for segment in self._segments:
                if segment.next_offset > self.recovery_point \
                        and segment.base_offset < up_to_offset:
                    segment.flush()

    def mark_flushed(self, offset: int) -> None:
        """After ``flush(offset)``: recovery_point := ``offset`` if higher, the
        directory's new entries fsynced, the flush.messages count reset when the whole
        log is flushed."""
        if offset > self.recovery_point:
            self.recovery_point = offset
        if self._directory_dirty:
            checkpoint.fsync_directory(self.directory)
            self._directory_dirty = False
        if offset == self.log_end_offset:
            self.unflushed_messages = 0
        self.last_flush_ms = self._clock_ms()

    def maybe_increment_recovery_point(self, offset: int) -> None:
        """recovery_point := ``offset`` if higher (everything below it is gone: deleted
        by retention or below a new log start offset)."""
        self.recovery_point = max(self.recovery_point, offset)

    def close(self) -> None:
        """Close every segment's files (the caller flushed first)."""
        for segment in self._segments:
            segment.close()

    def close_handlers(self) -> None:
        """Close the files, ignoring errors: nothing is written."""
        for segment in self._segments:
            try:
                segment.close()
            except OSError:
                pass  # nothing was to be written anyway

    def delete_directory(self) -> None:
        """Remove the whole directory (after ``close``)."""
        shutil.rmtree(self.directory, ignore_errors=True)

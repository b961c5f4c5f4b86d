"""One log segment: ``<base_offset:020d>.log`` plus its ``.index`` and ``.timeindex``.

The ``.log`` file is the concatenation of record batches exactly as stored (baseOffset
and partitionLeaderEpoch already assigned).  Only batch headers are ever parsed here:
the 12-byte (baseOffset, batchLength) prefix to walk the file, the 61-byte header when
timestamps or epochs are needed.  Records are never decoded.

Size (about 630 lines): one class, Kafka's LogSegment, because the log file and its two
indexes change together on append, truncation and recovery; the indexes' own rules are in
``index.py``.
"""
from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

from protocol.records import (
    BATCH_HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    Buffer,
    valid_prefix,
)

from .errors import CorruptIndex, CorruptLog, InvalidAppend, StaleRegion, StorageIOError
from .index import INT32_MAX, OffsetIndex, TimeIndex

logger = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)
RECOVERY_CHUNK_BYTES = 8 * 1024 * 1024

_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength
_LAST_OFFSET_DELTA = struct.Struct(">i")
_LAST_OFFSET_DELTA_AT = 23


def _last_offset_in(data: Buffer) -> int:
    """Last offset of the batch ``data`` starts with; a large number when ``data`` is
    too short to tell (the caller then reads the header)."""
    if len(data) < _LAST_OFFSET_DELTA_AT + 4:
        return 2**63
    return _PREFIX.unpack_from(data)[0] + _LAST_OFFSET_DELTA.unpack_from(
        data, _LAST_OFFSET_DELTA_AT)[0]


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


def parse_segment_name(file_name: str) -> int | None:
    """The base offset of ``<20 digits>.log``, or None for any other name."""
    stem, suffix = os.path.splitext(file_name)
    if suffix != LOG_SUFFIX or len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem)


@dataclass
class SegmentScan:
    """What ``LogSegment.recover`` found: the valid prefix and what it cut."""

    base_offset: int
    batches: int = 0
    valid_bytes: int = 0
    truncated_bytes: int = 0
    next_offset: int = 0
    cut_reason: str | None = None
    epoch_starts: list[tuple[int, int]] = field(default_factory=list)


class LogSegment:
    """A contiguous run of batches starting at ``base_offset``.

    Invariants: batch offsets strictly increase (each base offset is at or above the
    previous batch's next offset, the first at or above ``base_offset``): appends are
    dense, and the log cleaner leaves gaps where it dropped whole batches, never moving
    an offset; ``size_bytes`` is the file
    length; ``next_offset`` is one past the last offset stored (``base_offset`` when
    empty); every index entry points at a batch boundary.  Only the owning ``LocalLog``
    (recovery, before there is one) changes it, on the event loop; only the last
    segment is appended to.
    """

    def __init__(self, directory: str, base_offset: int, index_interval_bytes: int,
                 file_suffix: str = "") -> None:
        """Open (creating if missing) ``<base>.log<file_suffix>`` and its indexes; the log
        cleaner writes segments with the suffix ``.cleaned`` and swaps them in with
        ``change_file_suffix``."""
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.file_suffix = file_suffix
        stem = os.path.join(directory, segment_name(base_offset))
        self.log_path = stem + LOG_SUFFIX + file_suffix
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        stat = os.fstat(self._fd)
        # ``size_bytes`` and ``next_offset`` are plain attributes, not properties: the log
        # reads them several times per append and per fetch.  Only this segment sets them.
        self.size_bytes: int = stat.st_size  #: the ``.log`` file's length
        self.offset_index = OffsetIndex(stem + INDEX_SUFFIX + file_suffix, base_offset)
        self.time_index = TimeIndex(stem + TIME_INDEX_SUFFIX + file_suffix, base_offset)
        #: one past the last offset in this segment (exclusive end)
        self.next_offset: int = base_offset
        self._max_timestamp = -1
        self._offset_of_max_timestamp = base_offset
        self._bytes_since_index_entry = 0
        #: Bumped whenever bytes already written may change or the fd may go: a
        #: truncation cuts the file, ``close`` frees the fd number (the kernel may hand it
        #: to another file).  A zero-copy read (``storage/file_records.py``) remembers it
        #: and refuses its regions once it moved.  Appends only add bytes past every region
        #: read so far and leave it alone.
        self.generation = 0
        #: when the segment.ms clock started: first append, or the file's mtime on reload
        self.rolling_base_ms: int | None = stat.st_mtime_ns // 1_000_000 if stat.st_size else None

    @classmethod
    def create(cls, directory: str, base_offset: int, index_interval_bytes: int,
               file_suffix: str = "") -> LogSegment:
        """A new empty segment; refuses to reuse a non-empty ``.log`` of the same name."""
        segment = cls(directory, base_offset, index_interval_bytes, file_suffix)
        if segment.size_bytes:
            segment.close()
            raise CorruptLog(f"{segment.log_path} already exists with {segment.size_bytes} bytes")
        segment.offset_index.reset()
        segment.time_index.reset()
        return segment

    # -- properties ------------------------------------------------------------------

    @property
    def largest_timestamp(self) -> int:
        """The largest batch max_timestamp in this segment; -1 when none."""
        return self._max_timestamp

    def retention_timestamp_ms(self) -> int:
        """The time retention.ms measures from: the largest timestamp, or (for a segment
        without timestamps) the log file's modification time, as Kafka does."""
        if self._max_timestamp >= 0:
            return self._max_timestamp
        return os.stat(self.log_path).st_mtime_ns // 1_000_000

    @property
    def offset_of_max_timestamp(self) -> int:
        """Base offset of the first batch that reached ``largest_timestamp``."""
        return self._offset_of_max_timestamp

    def index_full(self, max_offset_entries: int, max_time_entries: int) -> bool:
        return (self.offset_index.is_full(max_offset_entries)
                or self.time_index.is_full(max_time_entries))

    def can_hold(self, last_offset: int) -> bool:
        """True if ``last_offset`` fits the int32 relative offsets of the indexes."""
        return last_offset - self.base_offset <= INT32_MAX

    def __repr__(self) -> str:
        return (f"LogSegment(base_offset={self.base_offset}, next_offset={self.next_offset}, "
                f"size_bytes={self.size_bytes})")

    # -- append ----------------------------------------------------------------------

    def append(self, data: Buffer, headers: list[BatchHeader], now_ms: int) -> None:
        """Write ``data`` (the batches of ``headers``, back to back) with one os.write.

        ``headers[i].position`` are positions in the caller's buffer, whose first
        batch starts ``data``.  Raises InvalidAppend if the first batch starts below
        ``next_offset`` (a follower may append past a gap the leader's cleaner left);
        StorageIOError (file cut back) if the write fails.
        """
        if headers[0].base_offset < self.next_offset:
            raise InvalidAppend(f"{self.log_path}: batch base offset {headers[0].base_offset} "
                                f"< next offset {self.next_offset}")
        position = self.size_bytes
        self._write_all(data)
        origin = headers[0].position
        for header in headers:
            self._track_batch(header, position + header.position - origin)
        if self.rolling_base_ms is None:
            self.rolling_base_ms = now_ms

    def _write_all(self, data: Buffer) -> None:
        view = memoryview(data)
        size = len(view)
        written = 0
        try:
            while written < size:
                written += os.write(self._fd, view[written:] if written else view)
        except OSError as exc:
            try:
                os.ftruncate(self._fd, self.size_bytes)
            except OSError:
                pass
            raise StorageIOError(f"{self.log_path}: write failed: {exc}") from exc
        self.size_bytes += written

    def _track_batch(self, header: BatchHeader, position: int) -> None:
        """In-memory bookkeeping for a batch now stored at ``position`` (append, recovery).
        The header's ``size`` and ``next_offset`` are computed here, not read through
        its properties (one call each per batch appended)."""
        if header.max_timestamp > self._max_timestamp:
            self._max_timestamp = header.max_timestamp
            self._offset_of_max_timestamp = header.base_offset
        if self._bytes_since_index_entry > self.index_interval_bytes:
            self.offset_index.append(header.base_offset, position)
            self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
            self._bytes_since_index_entry = 0
        self._bytes_since_index_entry += LOG_OVERHEAD + header.batch_length
        self.next_offset = header.base_offset + header.last_offset_delta + 1

    # -- reads -----------------------------------------------------------------------

    def _pread(self, size: int, position: int) -> bytes:
        data = os.pread(self._fd, size, position)
        while len(data) < size:
            more = os.pread(self._fd, size - len(data), position + len(data))
            if not more:
                raise CorruptLog(f"{self.log_path}: {size} bytes at {position} run past the end")
            data += more
        return data

    def _prefix_at(self, position: int) -> tuple[int, int]:
        """(base_offset, batch size in bytes) of the batch at ``position``."""
        base_offset, length = _PREFIX.unpack(self._pread(LOG_OVERHEAD, position))
        if length < HEADER_SIZE - LOG_OVERHEAD \
                or position + LOG_OVERHEAD + length > self.size_bytes:
            raise CorruptLog(f"{self.log_path}: batch at {position} has length {length}")
        return base_offset, LOG_OVERHEAD + length

    def base_offset_at(self, position: int) -> int | None:
        """Base offset of the batch at ``position``, None if that is not a batch start."""
        try:
            return self._prefix_at(position)[0]
        except CorruptLog:
            return None

    def _last_offset_at(self, position: int) -> int:
        """Last offset of the batch at ``position`` (its prefix and lastOffsetDelta)."""
        data = self._pread(_LAST_OFFSET_DELTA_AT + 4, position)
        return _PREFIX.unpack_from(data)[0] + _LAST_OFFSET_DELTA.unpack_from(
            data, _LAST_OFFSET_DELTA_AT)[0]

    def header_at(self, position: int) -> BatchHeader:
        return BatchHeader(position, *BATCH_HEADER.unpack(self._pread(HEADER_SIZE, position)))

    def batch_at(self, position: int) -> bytes:
        """The whole batch at ``position``."""
        return self._pread(self._prefix_at(position)[1], position)

    def iter_headers(self, position: int = 0) -> Iterator[BatchHeader]:
        """61-byte headers of the batches from ``position`` to the end (cold paths)."""
        while position < self.size_bytes:
            header = self.header_at(position)
            yield header
            position += header.size

    def find_position(self, offset: int) -> int:
        """Byte position of the batch containing ``offset`` (base_offset <= offset < next_offset).

        Offset-index lookup, then a walk over 12-byte prefixes: the batch containing
        ``offset`` is the last one whose base offset is <= ``offset``.
        """
        return self._find_batch(offset)[0]

    def _find_batch(self, offset: int) -> tuple[int, int, int]:
        """(position, base offset, size in bytes) of the batch ``find_position`` finds."""
        if not self.base_offset <= offset < self.next_offset:
            raise CorruptLog(f"{self.log_path}: offset {offset} is not in "
                             f"[{self.base_offset}, {self.next_offset})")
        _, position = self.offset_index.lookup(offset)
        base, size = self._prefix_at(position)
        while position + size < self.size_bytes:
            next_base, next_size = self._prefix_at(position + size)
            if next_base > offset:
                break
            position, base, size = position + size, next_base, next_size
        return position, base, size

    def read(self, offset: int, max_bytes: int, max_offset: int | None,
             min_one_batch: bool) -> tuple[bytes | memoryview, bool]:
        """Whole batches from the one containing ``offset``; returns (data, exhausted).

        Stops before a batch whose base offset is >= ``max_offset`` (exclusive) or that
        would take the total past ``max_bytes``; with ``min_one_batch`` the first batch
        is returned even if larger (KIP-74).  ``exhausted`` is True when the segment's
        end was reached within both limits (the caller may continue in the next one).
        An ``offset`` in a gap the cleaner left starts at the next batch.
        One pread of up to ``max_bytes``, then the prefixes are walked in memory.
        """
        if offset >= self.next_offset:
            return b"", True  # in a gap the cleaner left at the end: the next segment
        position = self.find_position(offset)
        remaining = self.size_bytes - position
        data = self._pread(min(max(max_bytes, 0), remaining), position)
        if _last_offset_in(data) < offset or (len(data) < _LAST_OFFSET_DELTA_AT + 4
                                              and self._last_offset_at(position) < offset):
            # ``offset`` lies in a gap the cleaner left (rare: compacted logs only):
            # start at the next batch.
            position += self._prefix_at(position)[1]
            if position == self.size_bytes:
                return b"", True
            remaining = self.size_bytes - position
            data = self._pread(min(max(max_bytes, 0), remaining), position)
        used = 0
        exhausted = False
        while True:
            if used == remaining:
                exhausted = True
                break
            if used + LOG_OVERHEAD > len(data):
                break
            base_offset, length = _PREFIX.unpack_from(data, used)
            if (max_offset is not None and base_offset >= max_offset) \
                    or used + LOG_OVERHEAD + length > len(data):
                break
            used += LOG_OVERHEAD + length
        if used == 0 and not exhausted and min_one_batch:
            base_offset, size = self._prefix_at(position)
            if max_offset is None or base_offset < max_offset:
                return self._pread(size, position), False
        # A view, not a slice: the trimmed tail (a partial batch) is not worth copying
        # the whole read for.  Callers treat the result as any bytes-like object.
        return (data if used == len(data) else memoryview(data)[:used]), exhausted

    def locate(self, offset: int, max_bytes: int, max_offset: int | None,
               min_one_batch: bool) -> tuple[int, int, bool]:
        """What ``read`` would return, as (position, length, exhausted), without reading
        the records: the zero-copy path (``PartitionLog.read(zero_copy=True)``) sends them
        from the file later.  Same limits and the same answer, byte for byte, as ``read``.

        Only batch prefixes are read: the first batch's (and its last offset when
        ``offset`` is not its base offset, to step over a gap the cleaner left), the
        batch holding ``max_offset`` when that bound falls inside this segment, and a
        walk over prefixes from the last offset-index entry before ``max_bytes`` runs
        out, which ends where the last whole batch within the budget ends.
        """
        if offset >= self.next_offset:
            return self.size_bytes, 0, True
        position, base, size = self._find_batch(offset)
        if base != offset and self._last_offset_at(position) < offset:
            position += size  # ``offset`` lies in a gap the cleaner left
            if position == self.size_bytes:
                return position, 0, True
            base, size = self._prefix_at(position)
        if max_offset is not None and base >= max_offset:
            return position, 0, False
        end_bound = self.size_bytes  # a batch boundary, as is every candidate below
        if max_offset is not None and max_offset < self.next_offset:
            at, at_base, at_size = self._find_batch(max_offset)
            end_bound = at if at_base >= max_offset else at + at_size
        budget_end = position + max(max_bytes, 0)
        if budget_end >= end_bound:
            end = end_bound
        else:
            end = max(self.offset_index.lookup_position(budget_end)[1], position)
            while True:
                step = self._prefix_at(end)[1]
                if end + step > budget_end:
                    break
                end += step
        if end == position and min_one_batch:
            return position, size, False
        return position, end - position, end == self.size_bytes

    def read_region(self, generation: int, position: int, length: int) -> bytes:
        """The ``length`` bytes at ``position`` of a region located at ``generation``;
        StaleRegion if the segment was truncated or closed since."""
        self.check_generation(generation)
        return self._pread(length, position)

    def region_fd(self, generation: int) -> int:
        """The log file's fd, for ``os.sendfile`` right now (on the event loop, before
        anything else can touch the segment); StaleRegion if the segment was truncated
        or closed since ``generation``."""
        self.check_generation(generation)
        return self._fd

    def check_generation(self, generation: int) -> None:
        if generation != self.generation or self._fd < 0:
            raise StaleRegion(f"{self.log_path} was truncated or closed after the read")

    def batches_reaching_timestamp(self, timestamp_ms: int) -> Iterator[BatchHeader]:
        """Headers of the batches whose max_timestamp >= ``timestamp_ms``, in offset order.

        Starts at the time-index entry for ``timestamp_ms`` (every earlier batch has a
        smaller max timestamp), then walks 61-byte headers.  Cold path (ListOffsets).
        """
        _, start_offset = self.time_index.lookup(timestamp_ms)
        if start_offset >= self.next_offset:
            return
        for header in self.iter_headers(self.find_position(start_offset)):
            if header.max_timestamp >= timestamp_ms:
                yield header

    # -- recovery --------------------------------------------------------------------

    def sanity_check(self) -> None:
        """Raise CorruptIndex unless both indexes are consistent with the log.

        Also establishes ``next_offset`` and the largest timestamp of a segment that
        recovery does not scan: the offset index's last entry is trusted as a batch
        boundary and only the tail after it is walked.
        """
        if self.size_bytes and not (self.offset_index.file_existed
                                     and self.time_index.file_existed):
            raise CorruptIndex(f"{self.log_path}: index file missing")
        self.offset_index.sanity_check(self.size_bytes, self.base_offset_at)
        self._load_tail()
        self.time_index.sanity_check(self.next_offset)
        if self.size_bytes and not len(self.time_index):
            raise CorruptIndex(f"{self.log_path}: empty time index for a non-empty log")

    def _load_tail(self) -> None:
        last_offset, position = self.offset_index.last_entry
        if not self.size_bytes:
            self.next_offset = self.base_offset
            return
        try:
            last_position = position
            while position < self.size_bytes:
                last_position = position
                position += self._prefix_at(position)[1]
            delta_bytes = self._pread(4, last_position + _LAST_OFFSET_DELTA_AT)
        except CorruptLog as exc:
            raise CorruptIndex(f"{self.log_path}: tail after the last index entry: {exc}") from exc
        base_offset = self._prefix_at(last_position)[0]
        self.next_offset = base_offset + _LAST_OFFSET_DELTA.unpack(delta_bytes)[0] + 1
        self._bytes_since_index_entry = self.size_bytes - self.offset_index.last_entry[1]
        last = self.time_index.last_entry
        if last is not None:
            self._max_timestamp, self._offset_of_max_timestamp = last

    def recover(self) -> SegmentScan:
        """Scan every batch (CRC included), rebuild both indexes, cut the invalid tail.

        The first torn, malformed or CRC-failing batch, or one whose base offset does
        not continue the previous batch, and everything after it are removed from the
        file.  Reads in chunks of ``RECOVERY_CHUNK_BYTES``.
        """
        self.offset_index.reset()
        self.time_index.reset()
        self._max_timestamp, self._offset_of_max_timestamp = -1, self.base_offset
        self._bytes_since_index_entry = 0
        self.next_offset = self.base_offset
        file_size = os.fstat(self._fd).st_size
        self.size_bytes = file_size
        scan = SegmentScan(self.base_offset, next_offset=self.base_offset)
        position, read_size = 0, RECOVERY_CHUNK_BYTES
        while position < file_size and scan.cut_reason is None:
            chunk = self._pread(min(read_size, file_size - position), position)
            headers, valid = valid_prefix(chunk, check_crc=True)
            valid = self._recover_batches(headers, position, valid, scan)
            position += valid
            if scan.cut_reason is None and valid < len(chunk):
                read_size = self._rescan_size(chunk, valid, position, file_size, scan)
            else:
                read_size = RECOVERY_CHUNK_BYTES
        scan.valid_bytes = position
        scan.truncated_bytes = file_size - position
        if scan.truncated_bytes:
            self._cut_file(position)
        self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
        self.offset_index.write(fsync=True)
        self.time_index.write(fsync=True)
        return scan

    def _recover_batches(self, headers: list[BatchHeader], chunk_position: int, valid: int,
                         scan: SegmentScan) -> int:
        """Track the chunk's valid batches; return the bytes kept (less if a gap cuts)."""
        for header in headers:
            # A gap is normal (the cleaner dropped batches); going back is not.
            if header.base_offset < self.next_offset or not self.can_hold(header.last_offset):
                scan.cut_reason = (f"batch at byte {chunk_position + header.position} has base "
                                   f"offset {header.base_offset}, expected at least "
                                   f"{self.next_offset}")
                return header.position
            self._track_batch(header, chunk_position + header.position)
            scan.batches += 1
            scan.next_offset = header.next_offset
            epoch = header.partition_leader_epoch
            if epoch >= 0 and (not scan.epoch_starts or scan.epoch_starts[-1][0] != epoch):
                scan.epoch_starts.append((epoch, header.base_offset))
        return valid

    @staticmethod
    def _rescan_size(chunk: bytes, valid: int, position: int, file_size: int,
                     scan: SegmentScan) -> int:
        """After valid_prefix stopped early: the chunk size to retry with, or cut (→ 0)."""
        rest = len(chunk) - valid
        if rest >= LOG_OVERHEAD:
            needed = LOG_OVERHEAD + _PREFIX.unpack_from(chunk, valid)[1]
        else:
            needed = HEADER_SIZE
        reached_end = position + rest >= file_size
        if not reached_end and needed > rest:
            return max(RECOVERY_CHUNK_BYTES, needed)  # the batch straddles the chunk end
        if needed > rest:
            scan.cut_reason = f"torn batch at byte {position} ({rest} of {needed} bytes present)"
        else:
            scan.cut_reason = f"invalid batch at byte {position} (bad length, magic or CRC)"
        return RECOVERY_CHUNK_BYTES

    def _cut_file(self, position: int) -> None:
        try:
            self.generation += 1
            os.ftruncate(self._fd, position)
            os.fsync(self._fd)
        except OSError as exc:
            raise StorageIOError(f"{self.log_path}: truncate failed: {exc}") from exc
        self.size_bytes = position

    # -- truncation, flush, close ----------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove every batch containing an offset >= ``offset``; return bytes removed.

        Batches are atomic: when ``offset`` falls inside a batch, that whole batch goes
        and ``next_offset`` becomes the end of the batch before it (< ``offset``; its
        base offset unless the cleaner left a gap there).  The log file and
        the rewritten indexes are fsynced before returning.
        """
        if offset >= self.next_offset:
            return 0
        position, new_next_offset = 0, self.base_offset
        if offset > self.base_offset:
            position = self.find_position(offset)
            last_offset = self._last_offset_at(position)
            if last_offset < offset:  # ``offset`` is in a gap after this batch: it stays
                position += self._prefix_at(position)[1]
                new_next_offset = last_offset + 1
            else:
                new_next_offset = self._next_offset_before(position)
        removed = self.size_bytes - position
        self._cut_file(position)
        self.next_offset = new_next_offset
        self.offset_index.truncate_to(new_next_offset)
        self.time_index.truncate_to(new_next_offset)
        self._recompute_max_timestamp()
        self._bytes_since_index_entry = self.size_bytes - self.offset_index.last_entry[1]
        if not self.size_bytes:
            self.rolling_base_ms = None
        self.offset_index.write(fsync=True)
        self.time_index.write(fsync=True)
        return removed

    def _next_offset_before(self, position: int) -> int:
        """Next offset of the batch that ends at ``position`` (``base_offset`` at 0)."""
        if position == 0:
            return self.base_offset
        walk = self.offset_index.lookup(self._prefix_at(position)[0] - 1)[1]
        previous = None
        while walk < position:
            previous = walk
            walk += self._prefix_at(walk)[1]
        if previous is None or walk != position:
            raise CorruptLog(f"{self.log_path}: no batch ends at byte {position}")
        return self._last_offset_at(previous) + 1

    def _recompute_max_timestamp(self) -> None:
        last = self.time_index.last_entry
        self._max_timestamp, self._offset_of_max_timestamp = last or (-1, self.base_offset)
        if self.size_bytes == 0:
            return
        for header in self.iter_headers(self.find_position(self._offset_of_max_timestamp)):
            if header.max_timestamp > self._max_timestamp:
                self._max_timestamp = header.max_timestamp
                self._offset_of_max_timestamp = header.base_offset

    def _seal_time_index(self) -> None:
        """Make the time index's last entry carry this segment's largest timestamp."""
        self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)

    def on_become_inactive(self) -> None:
        """At roll: seal the time index and write both indexes (fsync comes with flush)."""
        self._seal_time_index()
        self.offset_index.write(fsync=False)
        self.time_index.write(fsync=False)

    def flush(self) -> None:
        """fsync the log, then write and fsync both indexes."""
        try:
            os.fsync(self._fd)
            self._seal_time_index()
            self.offset_index.write(fsync=True)
            self.time_index.write(fsync=True)
        except OSError as exc:
            raise StorageIOError(f"{self.log_path}: flush failed: {exc}") from exc

    def change_file_suffix(self, new_suffix: str) -> None:
        """Rename the three files from ``file_suffix`` to ``new_suffix`` (open fds stay
        valid); the log first, so a crash between renames leaves indexes that recovery
        either removes with their suffix or rebuilds.  The caller fsyncs the directory."""
        renames = []
        for holder, attr in ((self, "log_path"), (self.offset_index, "path"),
                             (self.time_index, "path")):
            old = getattr(holder, attr)
            new = old[:len(old) - len(self.file_suffix)] + new_suffix
            renames.append((holder, attr, old, new))
        for holder, attr, old, new in renames:
            if holder is not self and not os.path.exists(old):
                setattr(holder, attr, new)  # an index never written: nothing to rename
                continue
            os.replace(old, new)
            setattr(holder, attr, new)
        self.file_suffix = new_suffix

    @property
    def last_modified_ms(self) -> int:
        """The log file's modification time: when data was last written to it (the
        cleaner sets a cleaned segment's to the newest of the segments it replaces)."""
        return os.stat(self.log_path).st_mtime_ns // 1_000_000

    def set_last_modified(self, time_ms: int) -> None:
        os.utime(self.log_path, ns=(time_ms * 1_000_000, time_ms * 1_000_000))

    def close(self) -> None:
        if self._fd >= 0:
            self.generation += 1
            fd, self._fd = self._fd, -1
            os.close(fd)

    def delete(self) -> None:
        """Close and remove the files: the log first, so a crash leaves only index orphans."""
        self.close()
        for path in (self.log_path, self.offset_index.path, self.time_index.path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

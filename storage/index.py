"""Sparse segment indexes: offset → file position, and timestamp → offset.

Both live in memory as two parallel ``array`` columns (4 or 8 bytes per value, so a
full 10 MiB index costs 10 MiB) and reach their file only at flush, roll, truncation
or close; the file is a cache of the log, and recovery rebuilds any index whose
segment it scans or whose sanity check fails.  Files are big-endian like Kafka's.
"""
from __future__ import annotations

import bisect
import os
import struct
from array import array
from collections.abc import Callable

from .errors import CorruptIndex, InvalidIndexEntry

INT32_MAX = 2**31 - 1


def _typecode(size: int) -> str:
    for code in ("i", "l", "q"):
        if array(code).itemsize == size:
            return code
    raise ImportError(f"no array typecode of {size} bytes")  # pragma: no cover


_INT32 = _typecode(4)
_INT64 = _typecode(8)


class _SparseIndex:
    """Shared machinery: two strictly increasing columns, lazily written to ``path``.

    Invariants: ``keys`` strictly increase and ``values`` strictly increase; entries
    ``[:_persisted]`` equal the file's first entries unless ``_rewrite`` is set.
    Owned by one LogSegment; event-loop only.
    """

    ENTRY: struct.Struct
    KEY_CODE: str
    VALUE_CODE: str

    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._keys = array(self.KEY_CODE)
        self._values = array(self.VALUE_CODE)
        self._persisted = 0
        self._rewrite = False
        self.file_existed = False
        self._file_size = 0
        self._load()

    def _load(self) -> None:
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return
        self.file_existed = True
        self._file_size = len(data)
        whole = len(data) - len(data) % self.ENTRY.size
        for key, value in self.ENTRY.iter_unpack(memoryview(data)[:whole]):
            self._keys.append(key)
            self._values.append(value)
        self._persisted = len(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def is_full(self, max_entries: int) -> bool:
        return len(self._keys) >= max_entries

    def _check_shape(self) -> None:
        """Raise CorruptIndex unless the file was whole entries, strictly increasing."""
        if self._file_size % self.ENTRY.size:
            raise CorruptIndex(f"{self.path}: size {self._file_size} is not a multiple "
                               f"of {self.ENTRY.size}")
        for name, column in (("keys", self._keys), ("values", self._values)):
            if list(column) != sorted(set(column)):
                raise CorruptIndex(f"{self.path}: {name} do not strictly increase")

    def _append_entry(self, key: int, value: int) -> None:
        if self._keys and (key <= self._keys[-1] or value <= self._values[-1]):
            raise InvalidIndexEntry(
                f"{self.path}: entry ({key}, {value}) does not increase past "
                f"({self._keys[-1]}, {self._values[-1]})")
        self._keys.append(key)
        self._values.append(value)

    def _truncate_entries(self, keep: int) -> None:
        if keep >= len(self._keys):
            return
        del self._keys[keep:]
        del self._values[keep:]
        if keep < self._persisted:
            self._persisted = keep
            self._rewrite = True

    def reset(self) -> None:
        """Forget every entry (before a rebuild); the file is rewritten at next write."""
        self._truncate_entries(0)
        self._rewrite = True
        self._file_size = 0

    def write(self, *, fsync: bool) -> None:
        """Bring the file up to date with memory (append the tail, or rewrite it)."""
        if not self._rewrite and self._persisted == len(self._keys) and self.file_existed:
            return
        start = 0 if self._rewrite else self._persisted
        payload = b"".join(self.ENTRY.pack(k, v) for k, v in
                           zip(self._keys[start:], self._values[start:]))
        flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if self._rewrite else os.O_APPEND)
        fd = os.open(self.path, flags, 0o644)
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view):]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        self._persisted = len(self._keys)
        self._rewrite = False
        self.file_existed = True
        self._file_size = self._persisted * self.ENTRY.size

    def delete_file(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class OffsetIndex(_SparseIndex):
    """Relative offset (int32) → byte position (int32) of the batch with that base offset.

    Entries are appended every ``index.interval.bytes`` of log; ``lookup(target)``
    returns the largest entry whose offset is <= target, so the batch containing
    ``target`` starts at or after the returned position.  Appends must strictly
    increase in both offset and position (InvalidIndexEntry otherwise).
    """

    ENTRY = struct.Struct(">ii")
    KEY_CODE = _INT32
    VALUE_CODE = _INT32

    def append(self, offset: int, position: int) -> None:
        relative = offset - self.base_offset
        if not 0 <= relative <= INT32_MAX or not 0 <= position <= INT32_MAX:
            raise InvalidIndexEntry(f"{self.path}: ({offset}, {position}) overflows int32")
        self._append_entry(relative, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry <= ``offset``; (base_offset, 0) if none."""
        slot = bisect.bisect_right(self._keys, offset - self.base_offset) - 1
        if slot < 0:
            return self.base_offset, 0
        return self.base_offset + self._keys[slot], self._values[slot]

    def lookup_position(self, position: int) -> tuple[int, int]:
        """(offset, position) of the entry with the largest position <= ``position``;
        (base_offset, 0) if none.  Every entry points at a batch start, so a zero-copy
        read finds where its last whole batch ends with a short walk from here."""
        slot = bisect.bisect_right(self._values, position) - 1
        if slot < 0:
            return self.base_offset, 0
        return self.base_offset + self._keys[slot], self._values[slot]

    @property
    def last_entry(self) -> tuple[int, int]:
        return self.lookup(self.base_offset + INT32_MAX)

    def truncate_to(self, offset: int) -> None:
        """Remove the entries for offsets >= ``offset``."""
        self._truncate_entries(bisect.bisect_left(self._keys, offset - self.base_offset))

    def sanity_check(self, log_size_bytes: int,
                     base_offset_at: Callable[[int], int | None]) -> None:
        """Raise CorruptIndex unless the index fits its log.

        Checks whole entries, strictly increasing columns, and that the last entry
        points inside the log at a batch whose base offset matches the entry
        (``base_offset_at(position)`` reads it, None if unreadable).
        """
        self._check_shape()
        if not self._keys:
            return
        offset, position = self.last_entry
        if position >= log_size_bytes or base_offset_at(position) != offset:
            raise CorruptIndex(f"{self.path}: last entry ({offset}, {position}) does not "
                               f"point at a batch of the {log_size_bytes}-byte log")


class TimeIndex(_SparseIndex):
    """Timestamp (int64) → relative offset (int32): the segment's max timestamp so far
    and the base offset of the batch that first reached it.

    An entry is added only when the max timestamp grows, so both columns strictly
    increase (InvalidIndexEntry otherwise).  Every batch before an entry's offset has a
    smaller max timestamp, which makes the entry a safe place to start a search for
    "first record with timestamp >= target".  The last entry, written at flush, roll
    and close, carries the segment's largest timestamp.
    """

    ENTRY = struct.Struct(">qi")
    KEY_CODE = _INT64
    VALUE_CODE = _INT32

    def maybe_append(self, timestamp: int, offset: int) -> bool:
        """Append unless ``timestamp`` does not exceed the last entry's; True if appended."""
        if timestamp < 0 or (self._keys and timestamp <= self._keys[-1]):
            return False
        relative = offset - self.base_offset
        if not 0 <= relative <= INT32_MAX:
            raise InvalidIndexEntry(f"{self.path}: offset {offset} overflows int32")
        self._append_entry(timestamp, relative)
        return True

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry <= ``timestamp``; (-1, base_offset) if none."""
        slot = bisect.bisect_right(self._keys, timestamp) - 1
        if slot < 0:
            return -1, self.base_offset
        return self._keys[slot], self.base_offset + self._values[slot]

    @property
    def last_entry(self) -> tuple[int, int] | None:
        if not self._keys:
            return None
        return self._keys[-1], self.base_offset + self._values[-1]

    def truncate_to(self, offset: int) -> None:
        """Remove the entries whose offset is >= ``offset``."""
        self._truncate_entries(bisect.bisect_left(self._values, offset - self.base_offset))

    def sanity_check(self, next_offset: int) -> None:
        """Raise CorruptIndex unless entries are whole, increasing and below ``next_offset``."""
        self._check_shape()
        last = self.last_entry
        if last is not None and last[1] >= next_offset:
            raise CorruptIndex(f"{self.path}: last entry {last} is past the segment's "
                               f"next offset {next_offset}")

"""Producer-state snapshot files: ``<offset:020d>.snapshot`` in the partition directory.

A snapshot named ``N`` holds the producer entries made by every batch below offset
``N`` (exclusive).  The byte layout is in ``producer_state``'s docstring.  This module
only encodes, decodes, lists, writes and deletes the files; which snapshots exist and
when they are taken is ``ProducerStateManager``'s business.

Writes use ``checkpoint.write_atomically`` (tmp file, fsync, rename), so a reader sees
a whole old file or a whole new one; a leftover ``.snapshot.tmp`` is removed by
recovery's first step.  The rename is left to the log's next directory fsync (flush,
the clean-shutdown marker): a snapshot lost with it is only a longer replay.  Decoding never trusts
the file: a wrong version, a CRC32C mismatch, a short or over-long body raise ``CorruptSnapshot`` (a
ValueError that never leaves storage/: the manager logs it and falls back).  Pure functions; any
thread.
"""
from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Sequence

import crc32c

from .checkpoint import write_atomically

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 2
_VERSION_WITHOUT_TRANSACTIONS = 1

_HEADER = struct.Struct(">hI")        # version, crc32c of everything after the header
_COUNT = struct.Struct(">i")          # producer count
_PRODUCER = struct.Struct(">qhi")     # producer_id, producer_epoch, batch count
_BATCH = struct.Struct(">iiqq")       # first/last sequence, first/last offset
_TXN = struct.Struct(">qiq")          # current_txn_first_offset, coordinator_epoch,
                                      # last_timestamp (v2)
_ABORTED = struct.Struct(">qqqq")     # producer_id, first, last, last stable offset (v2)

#: (producer_id, producer_epoch, [(first_sequence, last_sequence, first_offset,
#: last_offset), ...] oldest batch first, current_txn_first_offset, coordinator_epoch,
#: last_timestamp)
SnapshotEntry = tuple[int, int, Sequence[tuple[int, int, int, int]], int, int, int]
#: (producer_id, first_offset, last_offset, last_stable_offset)
AbortedEntry = tuple[int, int, int, int]


class CorruptSnapshot(ValueError):
    """A snapshot file that does not decode: torn, bit-flipped or of another version."""


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def parse_snapshot_name(file_name: str) -> int | None:
    """The offset of ``<20 digits>.snapshot``, or None for any other name."""
    stem, suffix = os.path.splitext(file_name)
    if suffix != SNAPSHOT_SUFFIX or len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem)


def list_snapshots(directory: str) -> list[int]:
    """Offsets of the snapshot files in ``directory``, ascending."""
    return sorted(offset for offset in map(parse_snapshot_name, os.listdir(directory))
                  if offset is not None)


def encode(entries: Iterable[SnapshotEntry], aborted: Sequence[AbortedEntry] = ()) -> bytes:
    entries = list(entries)
    parts = [_COUNT.pack(len(entries))]
    for producer_id, producer_epoch, batches, *transactional in entries:
        parts.append(_PRODUCER.pack(producer_id, producer_epoch, len(batches)))
        parts.extend(_BATCH.pack(*batch) for batch in batches)
        parts.append(_TXN.pack(*transactional))
    parts.append(_COUNT.pack(len(aborted)))
    parts.extend(_ABORTED.pack(*txn) for txn in aborted)
    body = b"".join(parts)
    return _HEADER.pack(SNAPSHOT_VERSION, crc32c.crc32c(body)) + body


def decode(data: bytes, max_batches: int) -> tuple[list[SnapshotEntry], list[AbortedEntry]]:
    """The entries and aborted transactions of one snapshot file; CorruptSnapshot if
    anything is off.  A version 1 file (written before transactions) has neither open
    transactions nor aborts.

    Every producer has 0..``max_batches`` batches (1.. in version 1), and the body is
    consumed exactly."""
    if len(data) < _HEADER.size + _COUNT.size:
        raise CorruptSnapshot(f"{len(data)} bytes is shorter than a snapshot header")
    version, crc = _HEADER.unpack_from(data, 0)
    if version not in (SNAPSHOT_VERSION, _VERSION_WITHOUT_TRANSACTIONS):
        raise CorruptSnapshot(f"unknown version {version}")
    transactional = version == SNAPSHOT_VERSION
    body = memoryview(data)[_HEADER.size:]
    if crc32c.crc32c(body) != crc:
        raise CorruptSnapshot(f"CRC32C mismatch (stored {crc:#010x})")
    try:
        (count,) = _COUNT.unpack_from(body, 0)
        position = _COUNT.size
        if count < 0:
            raise CorruptSnapshot(f"negative producer count {count}")
        entries: list[SnapshotEntry] = []
        for _ in range(count):
            producer_id, producer_epoch, batch_count = _PRODUCER.unpack_from(body, position)
            position += _PRODUCER.size
            if not int(not transactional) <= batch_count <= max_batches:
                raise CorruptSnapshot(f"producer {producer_id} has {batch_count} batches")
            batches = [_BATCH.unpack_from(body, position + i * _BATCH.size)
                       for i in range(batch_count)]
            position += batch_count * _BATCH.size
            extra = (-1, -1, -1)
            if transactional:
                extra = _TXN.unpack_from(body, position)
                position += _TXN.size
            entries.append((producer_id, producer_epoch, batches, *extra))
        aborted: list[AbortedEntry] = []
        if transactional:
            (aborted_count,) = _COUNT.unpack_from(body, position)
            position += _COUNT.size
            if aborted_count < 0 or position + aborted_count * _ABORTED.size > len(body):
                raise CorruptSnapshot(f"aborted transaction count {aborted_count}")
            aborted = [_ABORTED.unpack_from(body, position + i * _ABORTED.size)
                       for i in range(aborted_count)]
            position += aborted_count * _ABORTED.size
    except struct.error as exc:
        raise CorruptSnapshot(f"truncated body: {exc}") from exc
    if position != len(body):
        raise CorruptSnapshot(f"{len(body) - position} unexpected bytes after the entries")
    return entries, aborted


def write_snapshot(directory: str, offset: int, entries: Iterable[SnapshotEntry],
                   aborted: Sequence[AbortedEntry] = ()) -> None:
    """Atomically (re)write the snapshot at ``offset``: the file is fsynced, the
    directory is not (see above)."""
    write_atomically(os.path.join(directory, snapshot_file_name(offset)),
                     encode(entries, aborted), sync_directory=False)


def read_snapshot(directory: str, offset: int, max_batches: int
                  ) -> tuple[list[SnapshotEntry], list[AbortedEntry]]:
    """Decode the snapshot at ``offset``: CorruptSnapshot if it does not decode, OSError
    if it cannot be read."""
    with open(os.path.join(directory, snapshot_file_name(offset)), "rb") as f:
        return decode(f.read(), max_batches)


def delete_snapshot(directory: str, offset: int) -> None:
    """Remove the snapshot at ``offset`` (missing is fine); the caller fsyncs the directory."""
    try:
        os.unlink(os.path.join(directory, snapshot_file_name(offset)))
    except FileNotFoundError:
        pass

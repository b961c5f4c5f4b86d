"""Small per-partition files written atomically, and their tolerant readers.

Files in the partition directory:

``offsets.checkpoint``
    high_watermark, recovery_point and log_start_offset, written together::

        0
        high_watermark 120
        recovery_point 100
        log_start_offset 0

``leader-epoch-checkpoint``
    Kafka's layout: a version line, the entry count, then ``epoch start_offset`` lines::

        0
        2
        0 0
        3 100

``cleaner-offset-checkpoint``
    The log cleaner's first dirty offset (everything below it was cleaned at least
    once); a version line, then the offset.  Missing: nothing was cleaned yet.

``.clean-shutdown``
    An empty marker written by ``PartitionLog.close`` after everything was flushed
    (not fsynced: losing it only costs a recovery scan).

Writes go to ``<name>.tmp``, are flushed and fsynced, renamed over the old file, and
the directory is fsynced, so a reader sees the old or the new content, never a mix.
Readers never raise on bad content: a missing file is "absent" (normal for a new
partition), an unparsable one is "absent" plus a WARNING.  Pure functions; any thread.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass

logger = logging.getLogger(__name__)

OFFSETS_CHECKPOINT = "offsets.checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
CLEAN_SHUTDOWN_MARKER = ".clean-shutdown"
TMP_SUFFIX = ".tmp"
CHECKPOINT_VERSION = 0


def fsync_directory(directory: str | os.PathLike[str]) -> None:
    """Make renames and unlinks inside ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: str | os.PathLike[str], data: bytes, *,
                     sync_directory: bool = True) -> None:
    """Replace ``path`` with ``data``: write tmp, fsync, rename, fsync the directory
    (unless ``sync_directory`` is False: then the caller's next directory fsync makes
    the rename durable)."""
    path = os.fspath(path)
    tmp_path = path + TMP_SUFFIX
    fd = os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp_path, path)
    if sync_directory:
        fsync_directory(os.path.dirname(path) or ".")


def _read_lines(path: str) -> list[str] | None:
    """The file's lines, or None when it does not exist or is not text."""
    try:
        with open(path, "rb") as f:
            return f.read().decode("ascii").splitlines()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        logger.warning("[Checkpoint %s] unreadable, treated as absent: %s", path, exc)
        return None


@dataclass(frozen=True)
class PartitionOffsets:
    """The offsets kept in ``offsets.checkpoint``; no ordering is implied on read."""

    high_watermark: int
    recovery_point: int
    log_start_offset: int


_OFFSET_KEYS = ("high_watermark", "recovery_point", "log_start_offset")


def write_offsets(directory: str | os.PathLike[str], offsets: PartitionOffsets) -> None:
    lines = [str(CHECKPOINT_VERSION)]
    lines += [f"{key} {getattr(offsets, key)}" for key in _OFFSET_KEYS]
    write_atomically(os.path.join(directory, OFFSETS_CHECKPOINT),
                     ("\n".join(lines) + "\n").encode())


def read_offsets(directory: str | os.PathLike[str]) -> PartitionOffsets | None:
    """The saved offsets, or None if missing or unparsable (WARNING in the latter case)."""
    path = os.path.join(directory, OFFSETS_CHECKPOINT)
    lines = _read_lines(path)
    if lines is None:
        return None
    try:
        if not lines or int(lines[0]) != CHECKPOINT_VERSION:
            raise ValueError(f"unknown version line {lines[:1]!r}")
        values: dict[str, int] = {}
        for line in lines[1:]:
            key, value = line.split()
            if key not in _OFFSET_KEYS or key in values:
                raise ValueError(f"unexpected line {line!r}")
            values[key] = int(value)
            if values[key] < 0:
                raise ValueError(f"negative offset in {line!r}")
        return PartitionOffsets(**values)
    except (ValueError, TypeError) as exc:
        logger.warning("[Checkpoint %s] unparsable, treated as absent: %s", path, exc)
        return None


def write_leader_epochs(directory: str | os.PathLike[str], entries: list[tuple[int, int]]) -> None:
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    lines += [f"{epoch} {start_offset}" for epoch, start_offset in entries]
    write_atomically(os.path.join(directory, LEADER_EPOCH_CHECKPOINT),
                     ("\n".join(lines) + "\n").encode())


def read_leader_epochs(directory: str | os.PathLike[str]) -> list[tuple[int, int]] | None:
    """(epoch, start_offset) entries, or None if missing or unparsable (WARNING then).

    Entries must have strictly increasing epochs and start offsets, all >= 0.
    """
    path = os.path.join(directory, LEADER_EPOCH_CHECKPOINT)
    lines = _read_lines(path)
    if lines is None:
        return None
    try:
        if len(lines) < 2 or int(lines[0]) != CHECKPOINT_VERSION:
            raise ValueError(f"unknown version line {lines[:1]!r}")
        count = int(lines[1])
        if count != len(lines) - 2:
            raise ValueError(f"count {count} but {len(lines) - 2} entries")
        entries: list[tuple[int, int]] = []
        for line in lines[2:]:
            epoch_text, offset_text = line.split()
            entry = (int(epoch_text), int(offset_text))
            if entry[0] < 0 or entry[1] < 0:
                raise ValueError(f"negative value in {line!r}")
            if entries and (entry[0] <= entries[-1][0] or entry[1] <= entries[-1][1]):
                raise ValueError(f"entry {line!r} does not increase")
            entries.append(entry)
        return entries
    except ValueError as exc:
        logger.warning("[Checkpoint %s] unparsable, treated as absent: %s", path, exc)
        return None


def write_cleaner_offset(directory: str | os.PathLike[str], first_dirty_offset: int) -> None:
    write_atomically(os.path.join(directory, CLEANER_OFFSET_CHECKPOINT),
                     f"{CHECKPOINT_VERSION}\n{first_dirty_offset}\n".encode())


def read_cleaner_offset(directory: str | os.PathLike[str]) -> int | None:
    """The cleaner's first dirty offset, or None if missing or unparsable (WARNING then)."""
    path = os.path.join(directory, CLEANER_OFFSET_CHECKPOINT)
    lines = _read_lines(path)
    if lines is None:
        return None
    try:
        if len(lines) != 2 or int(lines[0]) != CHECKPOINT_VERSION or int(lines[1]) < 0:
            raise ValueError(f"expected a version line and an offset, got {lines!r}")
        return int(lines[1])
    except ValueError as exc:
        logger.warning("[Checkpoint %s] unparsable, treated as absent: %s", path, exc)
        return None


def write_clean_shutdown_marker(directory: str | os.PathLike[str]) -> None:
    """Create the (empty) marker, without fsync: it must come after everything it
    vouches for is durable (the caller flushed and checkpointed first), but need not
    be durable itself.  A marker lost in a crash only costs the next start a recovery
    scan; one that survives is true.  (Two fsyncs per partition made a broker with
    10,000 partitions take over a minute to stop.)"""
    with open(os.path.join(directory, CLEAN_SHUTDOWN_MARKER), "wb"):
        pass


def consume_clean_shutdown_marker(directory: str | os.PathLike[str]) -> bool:
    """True if the marker was present; it is removed durably before returning.

    The removal is fsynced: a marker that survived a later crash would make the next
    start skip the scan of data appended after this one.
    """
    path = os.path.join(directory, CLEAN_SHUTDOWN_MARKER)
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    fsync_directory(directory)
    return True

"""The errors the storage layer raises.

Every failure that leaves ``storage/`` is a ``StorageError``; the broker converts them
to Kafka error codes at one boundary (``OffsetOutOfRange`` → OFFSET_OUT_OF_RANGE,
``InvalidAppend`` → CORRUPT_MESSAGE / INVALID_RECORD or a fetcher reset, anything else
→ KAFKA_STORAGE_ERROR).  Two kinds are distinguished, as in h11's ``_util``:

* the caller misused the log (a stale epoch, a non-contiguous follower append, an
  offset outside the log): ``OffsetOutOfRange``, ``InvalidAppend``,
  ``InvalidEpochAssignment``, ``InvalidIndexEntry``, ``LogClosed``;
* the disk misbehaved: ``CorruptIndex`` (recovery handles it by rebuilding),
  ``CorruptLog`` (a segment no longer holds what was written to it, found after
  startup) and ``StorageIOError`` (an OSError while writing); for the last two the
  partition's directory should go offline;
* a stored batch's content does not decode (``UndecodableBatch``): its CRC holds, so the
  disk returned what was written; the data itself is bad (a batch stored by an older
  version, or copied from a leader that had it).  Only the request that needed those
  records fails (CORRUPT_MESSAGE); nothing goes offline.

The two decorators at the end are the one place storage/ converts foreign errors
(OSError, protocol's RecordError) into these, around ``PartitionLog``'s methods.
"""
from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar, cast

from protocol.records import RecordError

logger = logging.getLogger(__name__)

_Method = TypeVar("_Method", bound=Callable[..., Any])


class StorageError(Exception):
    """Base class of everything raised by ``storage/``."""


class OffsetOutOfRange(StorageError):
    """A read asked for an offset outside ``[log_start_offset, log_end_offset]``."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(f"offset {offset} is outside [{log_start_offset}, {log_end_offset}] "
                         f"(log_start_offset, log_end_offset, both inclusive)")
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class InvalidAppend(StorageError):
    """An append was refused before anything was written (bad batch, gap, stale epoch)."""


class InvalidOffset(StorageError):
    """An offset argument that can never be valid (negative, for instance)."""


class InvalidEpochAssignment(StorageError):
    """A leader epoch would move backwards or be reassigned to another start offset."""


class InvalidIndexEntry(StorageError):
    """An index append whose offset (or timestamp) does not increase, or overflows int32."""


class CorruptIndex(StorageError):
    """An index file failed its sanity check; recovery rebuilds it from the log."""


class CorruptLog(StorageError):
    """A segment file no longer matches what was appended (changed underneath the log)."""


class StorageIOError(StorageError):
    """An OSError while writing the log; the partition's directory should go offline."""


class UndecodableBatch(StorageError):
    """A stored batch whose records do not decode (bad compression or record structure,
    CRC intact): a per-request error, never a reason to take a directory offline."""


class LogClosed(StorageError):
    """The log was closed or deleted; no further reads or appends."""


class StaleRegion(StorageError):
    """A zero-copy read's file region is no longer what was read: its segment was
    truncated or closed (retention, DeleteRecords, the cleaner's swap, a follower's
    truncation) before the bytes were sent.  The only safe answer is to send nothing
    more of that response: the connection closes and the client fetches again."""


def converts_os_errors(method: _Method) -> _Method:
    """An OSError inside ``method`` (ENOSPC, EIO, ...) leaves as StorageIOError, so every
    failure that leaves storage/ is a StorageError.  Decoding records never raises
    OSError (protocol/ turns codec failures into RecordDecodeError), so a bad batch
    cannot pass for a disk failure here; see ``converts_record_errors``.  ``method``'s
    object has a ``_prefix`` (its log's name) for the message."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except OSError as exc:
            raise StorageIOError(f"{self._prefix} {method.__name__} failed: {exc}") from exc

    return cast(_Method, wrapper)


def converts_record_errors(method: _Method) -> _Method:
    """Around the cold paths that decode a stored batch: RecordError (a batch whose
    records do not decode) leaves as UndecodableBatch, a per-request error, never a disk
    failure.  The one place storage/ converts decoding errors."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except RecordError as exc:
            logger.warning("%s %s: a stored batch does not decode: %s", self._prefix,
                           method.__name__, exc)
            raise UndecodableBatch(f"{self._prefix} {method.__name__}: {exc}") from exc

    return cast(_Method, wrapper)

"""The leader-epoch cache: for each leader epoch, the first offset written in it.

Followers use it (through OffsetForLeaderEpoch) to find where their log diverges from
the new leader's, as in KIP-101 / KIP-279.
"""
from __future__ import annotations

import bisect
import logging
import os

from . import checkpoint
from .errors import InvalidEpochAssignment, InvalidOffset, StorageIOError

logger = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    """epoch → start_offset, written to ``leader-epoch-checkpoint`` on every change.

    Invariants: epochs strictly increase and so do their start offsets; an epoch is
    never given a different start offset except by ``truncate_from_end`` /
    ``truncate_from_start`` / ``clear``.  Each change rewrites the checkpoint atomically.

    Durability: truncations and ``clear`` rewrite the file and fsync it at once.
    ``assign`` only marks the cache ``unflushed``: a leader election assigns a new epoch
    in every partition it moves, and a file write (create, rename, fsync) each made
    electing leaders for 1,000 partitions take seconds.  The owning log calls ``flush``
    before its recovery point passes the assigned offset, and recovery re-adds the
    epochs of every batch above the recovery point, so an assignment a crash lost comes
    back from the log itself.  Owned by one ``PartitionLog``; event-loop only.
    """

    def __init__(self, directory: str | os.PathLike[str],
                 entries: list[tuple[int, int]] | None = None, *,
                 log_prefix: str = "") -> None:
        """Start from ``entries`` if given (not persisted until the next change), else
        from the checkpoint file (missing or unparsable → empty)."""
        self.directory = os.fspath(directory)
        self._prefix = log_prefix or f"[LeaderEpochCache {os.path.basename(self.directory)}]"
        if entries is None:
            entries = checkpoint.read_leader_epochs(self.directory) or []
        self._epochs: list[int] = [epoch for epoch, _ in entries]
        self._start_offsets: list[int] = [start for _, start in entries]
        self.unflushed = False  # an assignment is not in the file yet

    # -- queries ---------------------------------------------------------------------

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    def epoch_entries(self) -> list[tuple[int, int]]:
        """(epoch, start_offset) pairs, oldest first."""
        return list(zip(self._epochs, self._start_offsets))

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end_offset) for OffsetForLeaderEpoch, with Kafka's semantics.

        * requested == latest epoch → (latest, log_end_offset);
        * requested undefined (-1), above the latest, or the cache empty → (-1, -1);
        * otherwise → (largest epoch <= requested, start offset of the first epoch
          > requested).  When requested is below every cached epoch, Kafka answers
          (requested, start offset of the earliest epoch): the data of older epochs is
          gone, and the follower must truncate to where this log's history begins.
        """
        latest = self.latest_epoch
        if requested_epoch == UNDEFINED_EPOCH or latest is None:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == latest:
            return latest, log_end_offset
        higher = bisect.bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._start_offsets[0]
        return self._epochs[higher - 1], self._start_offsets[higher]

    # -- changes ---------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` begins at ``start_offset``; True if the cache changed.

        * same as the latest epoch at or after its start offset: no change;
        * a larger epoch at the latest entry's start offset replaces it (the older
          epoch wrote nothing, as when a leader is elected and loses leadership before
          its first append);
        * a larger epoch at a larger start offset: appended;
        * anything else (smaller epoch, or a start offset that would move an epoch
          backwards) raises InvalidEpochAssignment: the log must be truncated first.
        """
        if epoch < 0 or start_offset < 0:
            raise InvalidEpochAssignment(f"epoch {epoch} at offset {start_offset}: negative")
        latest = self.latest_epoch
        if latest is not None:
            latest_start = self._start_offsets[-1]
            if epoch == latest and start_offset >= latest_start:
                return False
            if epoch < latest or start_offset < latest_start:
                raise InvalidEpochAssignment(
                    f"{self._prefix} cannot assign epoch {epoch} at offset {start_offset}: "
                    f"latest is epoch {latest} at offset {latest_start}")
            if start_offset == latest_start:
                self._epochs.pop()
                self._start_offsets.pop()
        self._epochs.append(epoch)
        self._start_offsets.append(start_offset)
        self.unflushed = True  # written by the log's next flush
        logger.info("%s epoch %d starts at offset %d", self._prefix, epoch, start_offset)
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove every entry whose start offset is >= ``end_offset`` (log truncation)."""
        keep = bisect.bisect_left(self._start_offsets, end_offset)
        if keep == len(self._start_offsets):
            return
        removed = self.epoch_entries()[keep:]
        del self._epochs[keep:]
        del self._start_offsets[keep:]
        self._persist()
        logger.info("%s removed %s at/after offset %d", self._prefix, removed, end_offset)

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries entirely below ``start_offset``; the one covering it now starts there.

        Called when log_start_offset moves forward (retention).
        """
        if start_offset < 0:
            raise InvalidOffset(f"start offset {start_offset} is negative")
        covering = bisect.bisect_right(self._start_offsets, start_offset) - 1
        if covering < 0 or (covering == 0 and self._start_offsets[0] == start_offset):
            return
        del self._epochs[:covering]
        del self._start_offsets[:covering]
        self._start_offsets[0] = start_offset
        self._persist()
        logger.info("%s entries now start at offset %d", self._prefix, start_offset)

    def clear(self) -> None:
        """Forget every epoch (``truncate_fully_and_start_at``)."""
        self._epochs.clear()
        self._start_offsets.clear()
        self._persist()

    def flush(self) -> None:
        """Write and fsync the checkpoint if an assignment is not in it yet."""
        if self.unflushed:
            self._persist()

    def _persist(self) -> None:
        try:
            checkpoint.write_leader_epochs(self.directory, self.epoch_entries())
        except OSError as exc:
            raise StorageIOError(f"{self._prefix} writing the checkpoint failed: {exc}") from exc
        self.unflushed = False

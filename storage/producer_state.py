"""Idempotent-producer state of one partition (Kafka's ProducerStateManager, trimmed).

For each producer id: its epoch and the metadata of its last five batches (first and
last sequence, first and last offset).  Everything comes from batch headers, so the
state can always be rebuilt from the log by a header-only scan; records are never
decoded.  The partition's ``PartitionLog`` owns the manager and keeps it in step with
every change of the log (appends as leader and follower, truncation, retention, a full
reset); the broker only asks it ``check``.

Kafka's rules, checked before a leader appends a client batch:

* epoch below the producer's current epoch → INVALID_PRODUCER_EPOCH;
* a batch equal (epoch, first and last sequence) to one of the last five → duplicate:
  answered with the original offsets and not appended again;
* a new epoch must start at sequence 0 (unless the producer is unknown);
* within an epoch the first sequence must follow the last one (wrapping at 2^31-1),
  else OUT_OF_ORDER_SEQUENCE_NUMBER; an unknown producer may start anywhere.

Snapshots (Kafka's ``<offset>.snapshot`` files, ``producer_snapshot`` reads and writes
them) save a scan when the partition opens.  ``00000000000000001234.snapshot`` holds
the entries made by every batch below offset 1234 (exclusive).  One is taken when a
segment rolls (at the new segment's base offset) and when a non-empty log closes
cleanly (at log_end_offset); opening loads the newest valid one at or below the recovered
log_end_offset and replays only the batch headers from its offset on.  Layout, all
big-endian, Kafka's header but every kept batch rather than only the last::

    version          int16    1
    crc              uint32   CRC32C of every byte after this field
    producer_count   int32
    producer_count times:
      producer_id    int64
      producer_epoch int16
      batch_count    int32    1..5
      batch_count times, oldest first:
        first_sequence int32, last_sequence int32, first_offset int64, last_offset int64

A snapshot that fails any check (version, CRC, length, an offset at or above its own)
is deleted with a WARNING and the next older one is tried, then a scan from
log_start_offset.  Which snapshots exist: none above log_end_offset (truncation deletes
them before anything new is appended) and none below log_start_offset (retention
deletes them with their segments); so a snapshot always describes the log as it is.
"""
from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from protocol.records import BatchHeader

from .checkpoint import fsync_directory
from .errors import InvalidOffset
from .producer_snapshot import CorruptSnapshot, SnapshotEntry, delete_snapshot, \
    list_snapshots, read_snapshot, write_snapshot

logger = logging.getLogger(__name__)

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
BATCHES_KEPT = 5
MAX_SEQUENCE = 2 ** 31 - 1


class BatchMetadata(NamedTuple):
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int


@dataclass
class ProducerEntry:
    producer_id: int
    producer_epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=BATCHES_KEPT))

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE


class ProducerStateError(Exception):
    """Refuse the batch; ``code_name`` is the Kafka error code's name."""

    def __init__(self, code_name: str, message: str):
        super().__init__(message)
        self.code_name = code_name


def last_sequence_of(header: BatchHeader) -> int:
    return (header.base_sequence + header.last_offset_delta) % (MAX_SEQUENCE + 1)


def in_sequence(last_sequence: int, next_sequence: int) -> bool:
    return next_sequence == last_sequence + 1 or (
        next_sequence == 0 and last_sequence == MAX_SEQUENCE)


class ProducerStateManager:
    """Per-partition producer state and its snapshot files.

    Invariants: ``producers`` is what the batches below ``map_end_offset`` (exclusive)
    made of it, less the producers retention forgot; between the owning log's calls
    ``map_end_offset`` equals the log's log_end_offset.  ``snapshot_offsets`` are the
    snapshot files on disk, ascending, all within [log_start_offset, log_end_offset]
    once the log is open.

    Who may call: the owning ``PartitionLog`` (every mutator, on the event loop) and
    the broker through it (``check``, reads).  Without a ``directory`` no snapshot is
    read or written (the rules' unit tests).
    """

    def __init__(self, directory: str | None = None, log_prefix: str = "") -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self.map_end_offset = 0
        self._directory = directory
        self._prefix = log_prefix
        self._snapshots: list[int] = list_snapshots(directory) if directory else []
        #: a snapshot file at this offset holds the state as of this offset; while
        #: map_end_offset is still there, ``take_snapshot`` need not rewrite it
        self._snapshot_matches: int | None = None

    @property
    def snapshot_offsets(self) -> tuple[int, ...]:
        return tuple(self._snapshots)

    def check(self, header: BatchHeader) -> BatchMetadata | None:
        """Validate a client batch. Returns the original batch if it is a duplicate,
        None if it may be appended; raises ProducerStateError otherwise."""
        if header.producer_id == NO_PRODUCER_ID:
            return None
        entry = self.producers.get(header.producer_id)
        if entry is None:
            return None
        first, last = header.base_sequence, last_sequence_of(header)
        if header.producer_epoch < entry.producer_epoch:
            raise ProducerStateError(
                "INVALID_PRODUCER_EPOCH",
                f"producer {header.producer_id} epoch {header.producer_epoch} is older than "
                f"{entry.producer_epoch}")
        if header.producer_epoch == entry.producer_epoch:
            for batch in entry.batches:
                if batch.first_sequence == first and batch.last_sequence == last:
                    return batch
            if entry.last_sequence != NO_SEQUENCE and not in_sequence(entry.last_sequence, first):
                raise ProducerStateError(
                    "OUT_OF_ORDER_SEQUENCE_NUMBER",
                    f"producer {header.producer_id} sent sequence {first} after "
                    f"{entry.last_sequence}")
        elif first != 0:
            raise ProducerStateError(
                "OUT_OF_ORDER_SEQUENCE_NUMBER",
                f"producer {header.producer_id} starts epoch {header.producer_epoch} at "
                f"sequence {first}, not 0")
        return None

    # -- kept in step with the log (by the owning PartitionLog only) ----------------------

    def update(self, header: BatchHeader) -> None:
        """Record a batch now in the log: appended as leader (with its assigned base
        offset) or as follower, or replayed.  Any batch moves ``map_end_offset``."""
        self.map_end_offset = header.next_offset
        if header.producer_id == NO_PRODUCER_ID or header.is_control:
            return
        entry = self.producers.get(header.producer_id)
        if entry is None or header.producer_epoch > entry.producer_epoch:
            entry = ProducerEntry(header.producer_id, header.producer_epoch)
            self.producers[header.producer_id] = entry
        entry.batches.append(BatchMetadata(header.base_sequence, last_sequence_of(header),
                                           header.base_offset, header.last_offset))

    def truncate_before(self, log_start_offset: int) -> None:
        """Retention moved log_start_offset: forget the producers whose every kept batch
        is below it, and the snapshots below it (their segments are gone)."""
        for producer_id in list(self.producers):
            if all(b.last_offset < log_start_offset for b in self.producers[producer_id].batches):
                del self.producers[producer_id]
                self._snapshot_matches = None
        self._delete_snapshots([o for o in self._snapshots if o < log_start_offset])

    def reset(self, offset: int) -> None:
        """The log was emptied to start at ``offset``: no producers, no snapshots."""
        self.producers = {}
        self.map_end_offset = offset
        self._snapshot_matches = None
        self._delete_snapshots(list(self._snapshots))

    def take_snapshot(self, offset: int) -> None:
        """Write the state as the snapshot at ``offset`` (a segment roll, a clean close).

        ``offset`` must be ``map_end_offset``: InvalidOffset otherwise, nothing written.
        Skipped when the snapshot there already holds this state."""
        if offset != self.map_end_offset:
            raise InvalidOffset(f"{self._prefix} producer snapshot at {offset}, but the "
                                f"producer state is at {self.map_end_offset}")
        if self._directory is None or self._snapshot_matches == offset:
            return
        write_snapshot(self._directory, offset, self._entries())
        if offset not in self._snapshots:
            self._snapshots.append(offset)
            self._snapshots.sort()
        self._snapshot_matches = offset

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int) -> int:
        """After recovery or a truncation: the state as of the newest usable snapshot.

        Deletes the snapshots outside [log_start_offset, log_end_offset] (both
        inclusive), then loads the newest one that decodes, deleting unusable ones with
        a WARNING; with none, starts empty at log_start_offset.  Returns the offset the
        caller must replay the log's batches from (``update``) up to log_end_offset
        (exclusive).  Shortcut (Kafka's, for logs without idempotent producers,
        generalised): when the state was at or past log_end_offset and no producer's
        newest batch reaches it, the cut removed no producer batch, so the state stands
        and nothing is replayed."""
        self._delete_snapshots([o for o in self._snapshots
                                if o < log_start_offset or o > log_end_offset])
        if self.map_end_offset >= log_end_offset and all(
                entry.batches[-1].last_offset < log_end_offset
                for entry in self.producers.values()):
            self.map_end_offset = log_end_offset
            return log_end_offset
        self.producers = {}
        self.map_end_offset = log_start_offset
        self._snapshot_matches = None
        while self._snapshots:
            offset = self._snapshots[-1]
            try:
                self.producers = self._producers_from(
                    read_snapshot(self._directory, offset, BATCHES_KEPT), offset)
            except (CorruptSnapshot, FileNotFoundError) as exc:
                logger.warning("%s producer snapshot at offset %d is unusable, deleted: %s",
                               self._prefix, offset, exc)
                self._delete_snapshots([offset])
                continue
            self.map_end_offset = self._snapshot_matches = offset
            break
        self.truncate_before(log_start_offset)
        return self.map_end_offset

    # -- snapshot helpers ------------------------------------------------------------------

    def _entries(self) -> list[SnapshotEntry]:
        return [(entry.producer_id, entry.producer_epoch, list(entry.batches))
                for _, entry in sorted(self.producers.items())]

    @staticmethod
    def _producers_from(entries: list[SnapshotEntry], offset: int) -> dict[int, ProducerEntry]:
        """The producers of the snapshot at ``offset``; CorruptSnapshot if a producer id
        is -1 or repeats, or a batch does not end below ``offset``."""
        producers: dict[int, ProducerEntry] = {}
        for producer_id, producer_epoch, batches in entries:
            if producer_id in producers or producer_id == NO_PRODUCER_ID:
                raise CorruptSnapshot(f"producer id {producer_id} is invalid or repeated")
            entry = ProducerEntry(producer_id, producer_epoch)
            for batch in map(BatchMetadata._make, batches):
                if batch.last_offset >= offset:
                    raise CorruptSnapshot(f"producer {producer_id} has a batch ending at "
                                          f"{batch.last_offset}, not below {offset}")
                entry.batches.append(batch)
            producers[producer_id] = entry
        return producers

    def _delete_snapshots(self, offsets: list[int]) -> None:
        """Remove these snapshot files durably (the directory is fsynced): one that came
        back after a crash could describe a log that has changed since."""
        if self._directory is None or not offsets:
            return
        for offset in offsets:
            delete_snapshot(self._directory, offset)
            self._snapshots.remove(offset)
        fsync_directory(self._directory)

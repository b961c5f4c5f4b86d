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

Transactions (KIP-98).  A transactional batch opens its producer's transaction on this
partition (``current_txn_first_offset``) unless one is open already; the producer's
control batch (COMMIT or ABORT marker, its type passed by the log) closes it.  Open
transactions hold the *last stable offset* back: ``first_unstable_offset`` is the first
offset of the oldest open transaction, or of a closed one whose marker the high watermark
has not passed yet (``on_high_watermark`` forgets those; they are kept in memory only: after a
reload a marker is trusted at once, which only makes the coordinator's decision -- never
changed once markers are sent -- visible a little earlier).  Every ABORT that closes a transaction
adds an ``AbortedTxn`` (producer id, first and last offset, the last stable offset at that time)
to ``aborted``, ascending by last offset: what a read_committed Fetch reports so clients
can drop the aborted records.  A marker is refused when its producer epoch is older than
the producer's (INVALID_PRODUCER_EPOCH) or its coordinator epoch older than the last
marker's (TRANSACTION_COORDINATOR_FENCED): ``check_marker``.

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
      batch_count    int32    0..5 (0: only a marker was seen)
      batch_count times, oldest first:
        first_sequence int32, last_sequence int32, first_offset int64, last_offset int64
      current_txn_first_offset int64   -1: no open transaction      (version 2)
      coordinator_epoch int32           -1: no marker seen yet       (version 2)
      last_timestamp   int64            its newest batch's max timestamp (version 2)
    aborted_count    int32                                           (version 2)
    aborted_count times: producer_id int64, first_offset int64, last_offset int64,
                         last_stable_offset int64

Version 1 files (before transactions) still load: no open transactions, no aborts.

A snapshot that fails any check (version, CRC, length, an offset at or above its own)
is deleted with a WARNING and the next older one is tried, then a scan from
log_start_offset.  Which snapshots exist: none above log_end_offset (truncation deletes
them before anything new is appended) and none below log_start_offset (retention
deletes them with their segments); so a snapshot always describes the log as it is.
"""
from __future__ import annotations

import bisect
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from protocol.control import ABORT, COMMIT
from protocol.records import BatchHeader

from .checkpoint import fsync_directory
from .errors import InvalidOffset
from .producer_snapshot import (
    AbortedEntry,
    CorruptSnapshot,
    SnapshotEntry,
    delete_snapshot,
    list_snapshots,
    read_snapshot,
    write_snapshot,
)

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


class AbortedTxn(NamedTuple):
    """An aborted transaction of one partition (Kafka's AbortedTxn): its records lie in
    [first_offset, last_offset]; ``last_offset`` is its ABORT marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


@dataclass
class ProducerEntry:
    producer_id: int
    producer_epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_KEPT))
    current_txn_first_offset: int = -1
    coordinator_epoch: int = -1
    #: max timestamp of its newest batch or marker (-1: none; DescribeProducers shows it)
    last_timestamp: int = -1

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
        #: producer id -> first offset of its open transaction, oldest first (insertion
        #: order is offset order: transactions open in log order)
        self.ongoing_txns: dict[int, int] = {}
        #: (first offset, marker offset) of closed transactions the HW has not passed
        self._unreplicated_txns: list[tuple[int, int]] = []
        self.aborted: list[AbortedTxn] = []
        #: offset of the newest marker applied (-1: none); a truncation at or below it
        #: must rebuild the state (see truncate_and_reload)
        self._last_marker_offset = -1
        self._directory = directory
        self._prefix = log_prefix
        self._snapshots: list[int] = list_snapshots(directory) if directory else []
        #: a snapshot file at this offset holds the state as of this offset; while
        #: map_end_offset is still there, ``take_snapshot`` need not rewrite it
        self._snapshot_matches: int | None = None
        #: producer id -> the guard of its transaction verification in flight (KIP-890
        #: part 1); a marker for that producer drops it, so a write verified before the
        #: transaction ended finds its guard gone.  In memory only: a lost guard makes
        #: the write verify again.
        self._verification_guards: dict[int, object] = {}

    @property
    def snapshot_offsets(self) -> tuple[int, ...]:
        return tuple(self._snapshots)

    def check(self, header: BatchHeader, check_sequence: bool = True) -> BatchMetadata | None:
        """Validate a client batch. Returns the original batch if it is a duplicate,
        None if it may be appended; raises ProducerStateError otherwise.
        ``check_sequence`` False checks the epoch alone (a coordinator's transactional
        write, which carries no sequence)."""
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
        if not check_sequence:
            return None
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

    def check_marker(self, producer_id: int, producer_epoch: int,
                     coordinator_epoch: int) -> None:
        """Validate a COMMIT/ABORT marker before the leader appends it (Kafka's rules):
        ProducerStateError INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.producer_epoch:
            raise ProducerStateError(
                "INVALID_PRODUCER_EPOCH",
                f"marker for producer {producer_id} has epoch {producer_epoch}, older than "
                f"{entry.producer_epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise ProducerStateError(
                "TRANSACTION_COORDINATOR_FENCED",
                f"marker for producer {producer_id} comes from coordinator epoch "
                f"{coordinator_epoch}, older than {entry.coordinator_epoch}")

    def needs_verification(self, header: BatchHeader) -> bool:
        """Whether a client's transactional ``header`` would open a transaction here,
        which the transaction coordinator must confirm first (KIP-890 part 1): the
        producer has no transaction open here in that epoch."""
        if not header.is_transactional or header.producer_id == NO_PRODUCER_ID:
            return False
        entry = self.producers.get(header.producer_id)
        return entry is None or entry.current_txn_first_offset < 0 \
            or entry.producer_epoch != header.producer_epoch

    def start_verification(self, producer_id: int) -> object:
        """The guard of ``producer_id``'s verification: the one already started since its
        last marker (pipelined writes of one transaction share it), else a new one."""
        guard = self._verification_guards.get(producer_id)
        if guard is None:
            guard = self._verification_guards[producer_id] = object()
        return guard

    def verification_holds(self, producer_id: int, guard: object) -> bool:
        """True while no marker for ``producer_id`` came since ``guard`` was started:
        the coordinator's yes still describes the transaction the write belongs to."""
        return self._verification_guards.get(producer_id) is guard

    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest transaction not yet decided for readers (open, or
        closed by a marker still above the high watermark); None when there is none."""
        first = next(iter(self.ongoing_txns.values()), None)
        for txn_first, _ in self._unreplicated_txns:
            if first is None or txn_first < first:
                first = txn_first
        return first

    def on_high_watermark(self, high_watermark: int) -> None:
        """The high watermark moved: closed transactions whose marker it passed are stable."""
        if self._unreplicated_txns:
            self._unreplicated_txns = [t for t in self._unreplicated_txns
                                       if t[1] >= high_watermark]

    def aborted_between(self, start_offset: int, end_offset: int) -> list[AbortedTxn]:
        """The aborted transactions with records in [start_offset, end_offset): what a
        read_committed Fetch answering that range reports.  Stops, as Kafka does, at the
        first abort recorded when the last stable offset was already past ``end_offset``:
        every transaction starting below it had ended by then."""
        found = []
        index = bisect.bisect_left(self.aborted, start_offset, key=lambda t: t.last_offset)
        for txn in self.aborted[index:]:
            if txn.first_offset < end_offset:
                found.append(txn)
            if txn.last_stable_offset > end_offset:
                break
        return found

    # -- kept in step with the log (by the owning PartitionLog only) ----------------------

    def update(self, header: BatchHeader, marker: tuple[int, int] | None = None) -> None:
        """Record a batch now in the log: appended as leader (with its assigned base
        offset) or as follower, or replayed.  Any batch moves ``map_end_offset``.
        ``marker``: for a control batch, its (type, coordinator epoch) -- the log reads
        them from the batch; a control batch of another type changes no producer."""
        # header.next_offset, computed: no property call for every batch appended
        self.map_end_offset = header.base_offset + header.last_offset_delta + 1
        if header.producer_id == NO_PRODUCER_ID:
            return
        if header.is_control:
            if marker is not None and marker[0] in (ABORT, COMMIT):
                self._apply_marker(header, *marker)
            return
        entry = self.producers.get(header.producer_id)
        if entry is None or header.producer_epoch > entry.producer_epoch:
            entry = self._new_epoch(entry, header.producer_id, header.producer_epoch)
        entry.batches.append(BatchMetadata(header.base_sequence, last_sequence_of(header),
                                           header.base_offset, header.last_offset))
        entry.last_timestamp = header.max_timestamp
        if header.is_transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = header.base_offset
            self.ongoing_txns[header.producer_id] = header.base_offset

    def _new_epoch(self, entry: ProducerEntry | None, producer_id: int,
                   producer_epoch: int) -> ProducerEntry:
        """A producer seen for the first time or in a newer epoch: its batches start over;
        an open transaction and the coordinator epoch carry over."""
        fresh = ProducerEntry(producer_id, producer_epoch)
        if entry is not None:
            fresh.current_txn_first_offset = entry.current_txn_first_offset
            fresh.coordinator_epoch = entry.coordinator_epoch
            fresh.last_timestamp = entry.last_timestamp
        self.producers[producer_id] = fresh
        return fresh

    def _apply_marker(self, header: BatchHeader, marker_type: int,
                      coordinator_epoch: int) -> None:
        """A COMMIT or ABORT marker at ``header.base_offset`` closes the producer's open
        transaction here, if it has one (a retried marker finds none)."""
        entry = self.producers.get(header.producer_id)
        if entry is None or header.producer_epoch > entry.producer_epoch:
            entry = self._new_epoch(entry, header.producer_id, header.producer_epoch)
        entry.coordinator_epoch = max(entry.coordinator_epoch, coordinator_epoch)
        entry.last_timestamp = header.max_timestamp
        self._last_marker_offset = header.base_offset
        self._verification_guards.pop(header.producer_id, None)
        first = entry.current_txn_first_offset
        if first < 0:
            return
        entry.current_txn_first_offset = -1
        del self.ongoing_txns[header.producer_id]
        self._unreplicated_txns.append((first, header.base_offset))
        if marker_type == ABORT:
            last_stable = next(iter(self.ongoing_txns.values()), header.base_offset + 1)
            self.aborted.append(AbortedTxn(header.producer_id, first, header.base_offset,
                                           last_stable))

    def truncate_before(self, log_start_offset: int) -> None:
        """Retention moved log_start_offset: forget the producers whose every kept batch
        is below it, and the snapshots below it (their segments are gone)."""
        for producer_id in list(self.producers):
            entry = self.producers[producer_id]
            if entry.current_txn_first_offset < 0 and all(
                    b.last_offset < log_start_offset for b in entry.batches):
                del self.producers[producer_id]
                self._snapshot_matches = None
        kept = bisect.bisect_left(self.aborted, log_start_offset, key=lambda t: t.last_offset)
        if kept:
            del self.aborted[:kept]
            self._snapshot_matches = None
        self._delete_snapshots([o for o in self._snapshots if o < log_start_offset])

    def reset(self, offset: int) -> None:
        """The log was emptied to start at ``offset``: no producers, no snapshots."""
        self._clear(offset)
        self._delete_snapshots(list(self._snapshots))

    def _clear(self, offset: int) -> None:
        self.producers = {}
        self.ongoing_txns = {}
        self._unreplicated_txns = []
        self.aborted = []
        self._last_marker_offset = -1
        self.map_end_offset = offset
        self._snapshot_matches = None
        self._verification_guards = {}

    def take_snapshot(self, offset: int) -> None:
        """Write the state as the snapshot at ``offset`` (a segment roll, a clean close).

        ``offset`` must be ``map_end_offset``: InvalidOffset otherwise, nothing written.
        Skipped when the snapshot there already holds this state."""
        if offset != self.map_end_offset:
            raise InvalidOffset(f"{self._prefix} producer snapshot at {offset}, but the "
                                f"producer state is at {self.map_end_offset}")
        if self._directory is None or self._snapshot_matches == offset:
            return
        write_snapshot(self._directory, offset, self._entries(), self.aborted)
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
        if self.map_end_offset >= log_end_offset and self._last_marker_offset < log_end_offset \
                and all((not entry.batches or entry.batches[-1].last_offset < log_end_offset)
                        and entry.current_txn_first_offset < log_end_offset
                        for entry in self.producers.values()):
            self.map_end_offset = log_end_offset
            return log_end_offset
        self._clear(log_start_offset)
        while self._directory is not None and self._snapshots:  # no directory: no snapshots
            offset = self._snapshots[-1]
            try:
                entries, aborted = read_snapshot(self._directory, offset, BATCHES_KEPT)
                self.producers = self._producers_from(entries, offset)
                self.aborted = self._aborted_from(aborted, offset)
            except (CorruptSnapshot, FileNotFoundError) as exc:
                logger.warning("%s producer snapshot at offset %d is unusable, deleted: %s",
                               self._prefix, offset, exc)
                self._delete_snapshots([offset])
                continue
            self.map_end_offset = self._snapshot_matches = offset
            break
        self.ongoing_txns = dict(sorted(
            ((pid, entry.current_txn_first_offset) for pid, entry in self.producers.items()
             if entry.current_txn_first_offset >= 0), key=lambda item: item[1]))
        self.truncate_before(log_start_offset)
        return self.map_end_offset

    # -- snapshot helpers ------------------------------------------------------------------

    def _entries(self) -> list[SnapshotEntry]:
        return [(entry.producer_id, entry.producer_epoch, list(entry.batches),
                 entry.current_txn_first_offset, entry.coordinator_epoch, entry.last_timestamp)
                for _, entry in sorted(self.producers.items())]

    @staticmethod
    def _producers_from(entries: list[SnapshotEntry], offset: int) -> dict[int, ProducerEntry]:
        """The producers of the snapshot at ``offset``; CorruptSnapshot if a producer id
        is -1 or repeats, or a batch does not end below ``offset``."""
        producers: dict[int, ProducerEntry] = {}
        for producer_id, producer_epoch, batches, txn_first, coordinator_epoch, last_timestamp \
                in entries:
            if producer_id in producers or producer_id == NO_PRODUCER_ID:
                raise CorruptSnapshot(f"producer id {producer_id} is invalid or repeated")
            if txn_first >= offset:
                raise CorruptSnapshot(f"producer {producer_id} has a transaction opening at "
                                      f"{txn_first}, not below {offset}")
            entry = ProducerEntry(producer_id, producer_epoch,
                                  current_txn_first_offset=txn_first,
                                  coordinator_epoch=coordinator_epoch,
                                  last_timestamp=last_timestamp)
            for batch in map(BatchMetadata._make, batches):
                if batch.last_offset >= offset:
                    raise CorruptSnapshot(f"producer {producer_id} has a batch ending at "
                                          f"{batch.last_offset}, not below {offset}")
                entry.batches.append(batch)
            producers[producer_id] = entry
        return producers

    @staticmethod
    def _aborted_from(aborted: list[AbortedEntry], offset: int) -> list[AbortedTxn]:
        """The aborted transactions of the snapshot at ``offset``; CorruptSnapshot unless
        they end below it, in ascending order."""
        result = [AbortedTxn._make(txn) for txn in aborted]
        for previous, txn in zip([None, *result], result):
            if txn.last_offset >= offset or txn.first_offset > txn.last_offset or (
                    previous is not None and txn.last_offset <= previous.last_offset):
                raise CorruptSnapshot(f"aborted transaction {tuple(txn)} is out of place")
        return result

    def _delete_snapshots(self, offsets: list[int]) -> None:
        """Remove these snapshot files durably (the directory is fsynced): one that came
        back after a crash could describe a log that has changed since."""
        if self._directory is None or not offsets:
            return
        for offset in offsets:
            delete_snapshot(self._directory, offset)
            self._snapshots.remove(offset)
        fsync_directory(self._directory)

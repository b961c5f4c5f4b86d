"""SharePartition: one share group's delivery state of one topic partition (pure).

KIP-932 runs this on the partition leader.  The share-partition start offset (SPSO,
``start_offset``) is the lowest offset whose delivery is not finished; the end offset
(``end_offset``, exclusive) is one past the highest offset the group has fetched.
Between them lies the in-flight window, where every offset has one state:

    AVAILABLE --acquire--> ACQUIRED(member, lock deadline, delivery_count += 1)
    ACQUIRED --ACCEPT--> ACKNOWLEDGED
    ACQUIRED --REJECT or GAP--> ARCHIVED
    ACQUIRED --RELEASE, lock expiry, member gone--> AVAILABLE, or ARCHIVED when
        delivery_count >= the delivery count limit
    ACQUIRED --RENEW--> ACQUIRED with a new lock deadline (KIP-1222)

Invariants:
- ``start_offset <= end_offset``; every offset in ``[start_offset, end_offset)`` has a
  record in ``records`` and no other offset does.
- The record at ``start_offset`` (if any) is AVAILABLE or ACQUIRED: a finished prefix
  (ACKNOWLEDGED or ARCHIVED) is dropped at once and the SPSO moves past it.
- Only the member holding a record's lock may acknowledge it.
- New offsets are acquired only while the window holds fewer than
  ``max_in_flight_records`` offsets (``group.share.partition.max.record.locks``).

Time is passed in (``now_ms``), so tests drive lock expiry with their own clock; the
caller (broker/share/manager.py) arms one timer per partition at ``next_deadline_ms``.

Where this differs from Kafka's SharePartition.java: state is kept per offset, not per
batch with per-offset state only after a split (same answers, more memory per record);
``max_records`` is honoured at record granularity (Kafka may exceed it to finish a
batch); and ARCHIVED records of aborted transactions and control batches are never
handed out (as in Kafka) but are not listed as gaps.
"""
from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from protocol.errors import ErrorCode


class RecordState(enum.IntEnum):
    """Kafka's delivery states, with its persisted ids."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


FINISHED = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


@dataclass(slots=True)
class InFlightRecord:
    state: RecordState
    delivery_count: int = 0
    member_id: str | None = None
    deadline_ms: int = 0


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    """Offsets ``first_offset..last_offset`` (inclusive) acquired with one delivery count."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class BatchSpan:
    """One fetched batch as acquisition sees it: its offsets (inclusive) and whether its
    records are never delivered (a control batch, or an aborted transaction's batch read
    with read_committed)."""

    base_offset: int
    last_offset: int
    skip: bool = False


@dataclass(frozen=True, slots=True)
class AcknowledgementBatch:
    """Offsets ``first_offset..last_offset`` (inclusive) and their types: one type for
    the whole range, or one per offset."""

    first_offset: int
    last_offset: int
    types: Sequence[int]


@dataclass(frozen=True, slots=True)
class ShareLimits:
    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_in_flight_records: int = 2000


@dataclass(frozen=True, slots=True)
class StateBatch:
    """A run of offsets with one state and delivery count, as persisted."""

    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int


class SharePartition:
    """The in-flight window of one (group, topic-partition).  Pure; event-loop only."""

    def __init__(self, start_offset: int, limits: ShareLimits | None = None) -> None:
        self.limits = limits or ShareLimits()
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.records: dict[int, InFlightRecord] = {}

    # -- reading -------------------------------------------------------------------------

    def next_fetch_offset(self) -> int:
        """Where the next read of the log should start: the lowest AVAILABLE offset in
        the window, else ``end_offset``."""
        for offset in range(self.start_offset, self.end_offset):
            if self.records[offset].state == RecordState.AVAILABLE:
                return offset
        return self.end_offset

    def has_available(self) -> bool:
        return self.next_fetch_offset() < self.end_offset

    def can_acquire_new(self) -> bool:
        return self.end_offset - self.start_offset < self.limits.max_in_flight_records

    def count(self, state: RecordState) -> int:
        return sum(1 for r in self.records.values() if r.state == state)

    def next_deadline_ms(self) -> int | None:
        """The earliest lock deadline of an ACQUIRED record, None when none is."""
        deadlines = [r.deadline_ms for r in self.records.values()
                     if r.state == RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    # -- acquiring -----------------------------------------------------------------------

    def acquire(self, member_id: str, batches: Iterable[BatchSpan], now_ms: int,
                max_records: int) -> list[AcquiredRange]:
        """Lock for ``member_id`` the deliverable offsets of ``batches`` (read from the log
        at ``next_fetch_offset()``, in offset order), at most ``max_records`` of them.

        AVAILABLE offsets in the window are acquired again (their delivery count goes
        up); offsets past ``end_offset`` join the window while it has room.  Offsets
        between batches (removed by compaction) and skipped batches are ARCHIVED as they
        join.  Returns the acquired offsets as ranges of equal delivery count.
        """
        deadline_ms = now_ms + self.limits.record_lock_duration_ms
        acquired: list[int] = []
        for batch in batches:
            offset = max(batch.base_offset, self.start_offset)
            while offset <= batch.last_offset and len(acquired) < max_records:
                if offset < self.end_offset:
                    record = self.records[offset]
                    if record.state == RecordState.AVAILABLE and not batch.skip:
                        self._lock(record, member_id, deadline_ms)
                        acquired.append(offset)
                elif not self._extend_to(offset):
                    break
                elif batch.skip:
                    self.records[offset] = InFlightRecord(RecordState.ARCHIVED)
                else:
                    record = self.records[offset] = InFlightRecord(RecordState.AVAILABLE)
                    self._lock(record, member_id, deadline_ms)
                    acquired.append(offset)
                offset += 1
        self.maybe_advance_start()
        return self._ranges(acquired)

    def _extend_to(self, offset: int) -> bool:
        """Grow the window so ``offset`` is its next new offset (missing offsets before
        it are ARCHIVED); False when the window is full."""
        if not self.can_acquire_new():
            return False
        for missing in range(self.end_offset, offset):
            self.records[missing] = InFlightRecord(RecordState.ARCHIVED)
        self.end_offset = offset + 1
        return True

    def _lock(self, record: InFlightRecord, member_id: str, deadline_ms: int) -> None:
        record.state = RecordState.ACQUIRED
        record.member_id = member_id
        record.deadline_ms = deadline_ms
        record.delivery_count += 1

    def _ranges(self, offsets: list[int]) -> list[AcquiredRange]:
        ranges: list[AcquiredRange] = []
        for offset in offsets:
            count = self.records[offset].delivery_count
            last = ranges[-1] if ranges else None
            if last and last.last_offset + 1 == offset and last.delivery_count == count:
                ranges[-1] = AcquiredRange(last.first_offset, offset, count)
            else:
                ranges.append(AcquiredRange(offset, offset, count))
        return ranges

    # -- acknowledging -------------------------------------------------------------------

    def acknowledge(self, member_id: str, batches: Sequence[AcknowledgementBatch],
                    now_ms: int, renew_allowed: bool = False) -> ErrorCode:
        """Apply ``member_id``'s acknowledgements, all or none.

        INVALID_REQUEST for malformed batches (first > last, a types list of the wrong
        length, an unknown type, overlapping or unordered batches); INVALID_RECORD_STATE
        when any offset is not ACQUIRED by ``member_id`` (outside the window included).
        """
        error = self._validate(member_id, batches, renew_allowed)
        if error != ErrorCode.NONE:
            return error
        for batch in batches:
            for i, offset in enumerate(range(batch.first_offset, batch.last_offset + 1)):
                kind = batch.types[0] if len(batch.types) == 1 else batch.types[i]
                self._apply(self.records[offset], AcknowledgeType(kind), now_ms)
        self.maybe_advance_start()
        return ErrorCode.NONE

    def _validate(self, member_id: str, batches: Sequence[AcknowledgementBatch],
                  renew_allowed: bool) -> ErrorCode:
        highest = AcknowledgeType.RENEW if renew_allowed else AcknowledgeType.REJECT
        previous_last = -1
        for batch in batches:
            size = batch.last_offset - batch.first_offset + 1
            if size < 1 or batch.first_offset <= previous_last \
                    or len(batch.types) not in (1, size) \
                    or any(not 0 <= t <= highest for t in batch.types):
                return ErrorCode.INVALID_REQUEST
            previous_last = batch.last_offset
        for batch in batches:
            if batch.first_offset < self.start_offset or batch.last_offset >= self.end_offset:
                return ErrorCode.INVALID_RECORD_STATE
            for offset in range(batch.first_offset, batch.last_offset + 1):
                record = self.records[offset]
                if record.state != RecordState.ACQUIRED or record.member_id != member_id:
                    return ErrorCode.INVALID_RECORD_STATE
        return ErrorCode.NONE

    def _apply(self, record: InFlightRecord, kind: AcknowledgeType, now_ms: int) -> None:
        if kind == AcknowledgeType.ACCEPT:
            self._finish(record, RecordState.ACKNOWLEDGED)
        elif kind in (AcknowledgeType.REJECT, AcknowledgeType.GAP):
            self._finish(record, RecordState.ARCHIVED)
        elif kind == AcknowledgeType.RELEASE:
            self._release(record)
        else:  # RENEW
            record.deadline_ms = now_ms + self.limits.record_lock_duration_ms

    def _finish(self, record: InFlightRecord, state: RecordState) -> None:
        record.state = state
        record.member_id = None
        record.deadline_ms = 0

    def _release(self, record: InFlightRecord) -> None:
        """ACQUIRED -> AVAILABLE, or ARCHIVED once delivered the limit's number of times."""
        if record.delivery_count >= self.limits.delivery_count_limit:
            self._finish(record, RecordState.ARCHIVED)
        else:
            self._finish(record, RecordState.AVAILABLE)

    # -- locks and members ---------------------------------------------------------------

    def expire_locks(self, now_ms: int) -> int:
        """Release every ACQUIRED record whose lock deadline is at or before ``now_ms``;
        how many were released."""
        expired = [r for r in self.records.values()
                   if r.state == RecordState.ACQUIRED and r.deadline_ms <= now_ms]
        for record in expired:
            self._release(record)
        self.maybe_advance_start()
        return len(expired)

    def release_member(self, member_id: str) -> int:
        """Release every record ``member_id`` holds (its share session closed or it left
        the group); how many were released."""
        held = [r for r in self.records.values()
                if r.state == RecordState.ACQUIRED and r.member_id == member_id]
        for record in held:
            self._release(record)
        self.maybe_advance_start()
        return len(held)

    # -- the window's edges --------------------------------------------------------------

    def maybe_advance_start(self) -> bool:
        """Move the SPSO past the finished prefix of the window; True if it moved."""
        start = self.start_offset
        records = self.records
        while start < self.end_offset and records[start].state in FINISHED:
            del records[start]
            start += 1
        moved = start != self.start_offset
        self.start_offset = start
        return moved

    def maybe_follow_log_start(self, log_start_offset: int) -> bool:
        """Records below the log start offset are gone (retention, DeleteRecords): the
        SPSO moves up to it, forgetting their states; True if it moved."""
        if log_start_offset <= self.start_offset:
            return False
        for offset in range(self.start_offset, min(log_start_offset, self.end_offset)):
            del self.records[offset]
        self.start_offset = log_start_offset
        self.end_offset = max(self.end_offset, log_start_offset)
        return True

    # -- persistence ---------------------------------------------------------------------

    def state_batches(self) -> list[StateBatch]:
        """The window as runs of (state, delivery count).  ACQUIRED is written as
        AVAILABLE: locks do not survive a leader change, deliveries do."""
        batches: list[StateBatch] = []
        for offset in range(self.start_offset, self.end_offset):
            record = self.records[offset]
            state = RecordState.AVAILABLE if record.state == RecordState.ACQUIRED \
                else record.state
            last = batches[-1] if batches else None
            if last and last.state == state and last.delivery_count == record.delivery_count:
                batches[-1] = StateBatch(last.first_offset, offset, state, last.delivery_count)
            else:
                batches.append(StateBatch(offset, offset, state, record.delivery_count))
        return batches

    @classmethod
    def restore(cls, start_offset: int, batches: Iterable[StateBatch],
                limits: ShareLimits | None = None) -> SharePartition:
        """A partition as ``state_batches`` left it (batches in offset order, none
        below ``start_offset``); offsets between batches are AVAILABLE, never delivered."""
        partition = cls(start_offset, limits)
        for batch in batches:
            for offset in range(partition.end_offset, batch.first_offset):
                partition.records[offset] = InFlightRecord(RecordState.AVAILABLE)
            for offset in range(max(batch.first_offset, start_offset), batch.last_offset + 1):
                partition.records[offset] = InFlightRecord(batch.state, batch.delivery_count)
            partition.end_offset = max(partition.end_offset, batch.last_offset + 1)
        partition.maybe_advance_start()
        return partition

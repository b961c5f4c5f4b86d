"""SharePartition's transitions, one invariant per test, with an injected clock."""
from __future__ import annotations

from broker.share.partition import (
    AcknowledgementBatch,
    AcquiredRange,
    BatchSpan,
    RecordState,
    ShareLimits,
    SharePartition,
    StateBatch,
)
from protocol.errors import ErrorCode

ACCEPT, RELEASE, REJECT, RENEW, GAP = 1, 2, 3, 4, 0
LIMITS = ShareLimits(record_lock_duration_ms=1000, delivery_count_limit=3,
                     max_in_flight_records=10)


def spans(first: int, last: int) -> list[BatchSpan]:
    return [BatchSpan(first, last)]


def ack(first: int, last: int, *types: int) -> list[AcknowledgementBatch]:
    return [AcknowledgementBatch(first, last, list(types))]


def states(sp: SharePartition) -> list[RecordState]:
    return [sp.records[o].state for o in range(sp.start_offset, sp.end_offset)]


def test_acquire_locks_new_offsets_once_with_delivery_count_one():
    sp = SharePartition(0, LIMITS)
    assert sp.acquire("a", spans(0, 4), now_ms=0, max_records=100) == [AcquiredRange(0, 4, 1)]
    assert (sp.start_offset, sp.end_offset) == (0, 5)
    assert sp.next_fetch_offset() == 5
    # Another member reading the same batch gets nothing: all of it is locked.
    assert sp.acquire("b", spans(0, 4), now_ms=0, max_records=100) == []
    assert sp.records[2].member_id == "a" and sp.records[2].deadline_ms == 1000


def test_two_members_get_distinct_records():
    sp = SharePartition(0, LIMITS)
    first = sp.acquire("a", spans(0, 5), now_ms=0, max_records=3)
    second = sp.acquire("b", spans(0, 5), now_ms=0, max_records=3)
    assert first == [AcquiredRange(0, 2, 1)] and second == [AcquiredRange(3, 5, 1)]


def test_accept_moves_the_start_offset_past_the_acknowledged_prefix():
    sp = SharePartition(0, LIMITS)
    sp.acquire("a", spans(0, 4), 0, 100)
    assert sp.acknowledge("a", ack(2, 3, ACCEPT), 10) == ErrorCode.NONE
    assert sp.start_offset == 0, "an acknowledged hole does not move the SPSO"
    assert sp.acknowledge("a", ack(0, 1, ACCEPT), 10) == ErrorCode.NONE
    assert sp.start_offset == 4 and list(sp.records) == [4]


def test_release_makes_records_available_and_redelivery_raises_the_count():
    sp = SharePartition(0, LIMITS)
    sp.acquire("a", spans(0, 2), 0, 100)
    assert sp.acknowledge("a", ack(0, 2, ACCEPT, RELEASE, ACCEPT), 5) == ErrorCode.NONE
    assert sp.start_offset == 1 and sp.next_fetch_offset() == 1
    assert sp.acquire("b", spans(0, 2), 6, 100) == [AcquiredRange(1, 1, 2)]


def test_reject_archives():
    sp = SharePartition(0, LIMITS)
    sp.acquire("a", spans(0, 1), 0, 100)
    assert sp.acknowledge("a", ack(1, 1, REJECT), 1) == ErrorCode.NONE
    assert states(sp) == [RecordState.ACQUIRED, RecordState.ARCHIVED]
    assert sp.acquire("a", spans(0, 1), 2, 100) == []
    assert sp.acknowledge("a", ack(0, 0, GAP), 3) == ErrorCode.NONE
    assert (sp.start_offset, sp.records) == (2, {})


def test_lock_expiry_makes_records_available_again():
    sp = SharePartition(0, LIMITS)
    sp.acquire("a", spans(0, 1), now_ms=0, max_records=100)
    assert sp.next_deadline_ms() == 1000
    assert sp.expire_locks(999) == 0
    assert sp.expire_locks(1000) == 2
    assert sp.next_deadline_ms() is None
    assert sp.acquire("b", spans(0, 1), 1001, 100) == [AcquiredRange(0, 1, 2)]
    # The first owner's late acknowledgement is refused: it no longer holds the lock.
    assert sp.acknowledge("a", ack(0, 1, ACCEPT), 1002) == ErrorCode.INVALID_RECORD_STATE


def test_renew_extends_the_lock():
    sp = SharePartition(0, LIMITS)
    sp.acquire("a", spans(0, 0), 0, 100)
    assert sp.acknowledge("a", ack(0, 0, RENEW), 900) == ErrorCode.INVALID_REQUEST, \
        "RENEW only where the version allows it"
    assert sp.acknowledge("a", ack(0, 0, RENEW), 900, renew_allowed=True) == ErrorCode.NONE
    assert sp.expire_locks(1000) == 0 and sp.next_deadline_ms() == 1900
    assert sp.records[0].delivery_count == 1


def test_delivery_limit_archives_instead_of_releasing():
    sp = SharePartition(0, LIMITS)
    for attempt in range(1, 4):
        assert sp.acquire("a", spans(0, 0), attempt * 10, 100) == [AcquiredRange(0, 0, attempt)]
        assert sp.acknowledge("a", ack(0, 0, RELEASE), attempt * 10 + 1) == ErrorCode.NONE
    assert (sp.start_offset, sp.records) == (1, {}), "third release archived it"
    sp.acquire("a", spans(1, 1), 100, 100)
    for now in (2000, 4000):
        sp.expire_locks(now)
        sp.acquire("a", spans(1, 1), now, 100)
    assert sp.records[1].delivery_count == 3
    sp.expire_locks(10_000)
    assert sp.start_offset == 2, "the third lock expiry archived it too"


def test_only_the_lock_owner_acknowledges_and_nothing_partial_applies():
    sp = SharePartition(0, LIMITS)
    sp.acquire("a", spans(0, 1), 0, 1)
    sp.acquire("b", spans(0, 1), 0, 1)
    batches = [AcknowledgementBatch(0, 0, [ACCEPT]), AcknowledgementBatch(1, 1, [ACCEPT])]
    assert sp.acknowledge("a", batches, 1) == ErrorCode.INVALID_RECORD_STATE
    assert states(sp) == [RecordState.ACQUIRED, RecordState.ACQUIRED], "all or none"
    assert sp.acknowledge("a", ack(5, 6, ACCEPT), 1) == ErrorCode.INVALID_RECORD_STATE


def test_malformed_acknowledgements_are_invalid_requests():
    sp = SharePartition(0, LIMITS)
    sp.acquire("a", spans(0, 3), 0, 100)
    for bad in (ack(2, 1, ACCEPT), ack(0, 3, ACCEPT, ACCEPT), ack(0, 0, 9),
                [AcknowledgementBatch(0, 1, [1]), AcknowledgementBatch(1, 2, [1])]):
        assert sp.acknowledge("a", bad, 1) == ErrorCode.INVALID_REQUEST
    assert sp.count(RecordState.ACQUIRED) == 4


def test_the_window_never_grows_past_max_in_flight_records():
    sp = SharePartition(0, LIMITS)
    assert sp.acquire("a", spans(0, 99), 0, 1000) == [AcquiredRange(0, 9, 1)]
    assert sp.end_offset == 10 and not sp.can_acquire_new()
    assert sp.acquire("b", spans(10, 99), 0, 1000) == []
    sp.acknowledge("a", ack(0, 4, ACCEPT), 1)
    assert sp.acquire("b", spans(10, 99), 2, 1000) == [AcquiredRange(10, 14, 1)]


def test_skipped_batches_and_compaction_gaps_are_archived_not_delivered():
    sp = SharePartition(0, LIMITS)
    batches = [BatchSpan(0, 1), BatchSpan(2, 2, skip=True), BatchSpan(5, 6)]
    assert sp.acquire("a", batches, 0, 100) == [AcquiredRange(0, 1, 1), AcquiredRange(5, 6, 1)]
    assert states(sp)[2:5] == [RecordState.ARCHIVED] * 3
    sp.acknowledge("a", ack(0, 1, ACCEPT), 1)
    assert sp.start_offset == 5


def test_a_start_offset_below_the_log_start_follows_it():
    sp = SharePartition(0, LIMITS)
    sp.acquire("a", spans(0, 3), 0, 100)
    assert sp.maybe_follow_log_start(2)
    assert (sp.start_offset, sorted(sp.records)) == (2, [2, 3])
    assert sp.maybe_follow_log_start(7) and (sp.start_offset, sp.end_offset) == (7, 7)
    assert not sp.maybe_follow_log_start(5)


def test_release_member_frees_only_its_records():
    sp = SharePartition(0, LIMITS)
    sp.acquire("a", spans(0, 3), 0, 2)
    sp.acquire("b", spans(0, 3), 0, 2)
    assert sp.release_member("a") == 2
    assert states(sp) == [RecordState.AVAILABLE] * 2 + [RecordState.ACQUIRED] * 2


def test_state_batches_round_trip_with_locks_dropped():
    sp = SharePartition(0, LIMITS)
    sp.acquire("a", spans(0, 5), 0, 100)
    sp.acknowledge("a", ack(1, 3, ACCEPT, REJECT, RELEASE), 1)
    saved = sp.state_batches()
    assert saved[0] == StateBatch(0, 0, RecordState.AVAILABLE, 1)
    again = SharePartition.restore(sp.start_offset, saved, LIMITS)
    assert (again.start_offset, again.end_offset) == (0, 6)
    assert states(again) == [RecordState.AVAILABLE, RecordState.ACKNOWLEDGED,
                             RecordState.ARCHIVED] + [RecordState.AVAILABLE] * 3
    assert again.acquire("b", spans(0, 5), 5, 100) == [
        AcquiredRange(0, 0, 2), AcquiredRange(3, 5, 2)]

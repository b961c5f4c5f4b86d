"""Incremental fetch sessions (KIP-227): the leader's cache and the follower's handler."""
from __future__ import annotations

from broker.replication.fetch_sessions import (
    EVICTION_MS,
    FINAL_EPOCH,
    INITIAL_EPOCH,
    CachedPartition,
    FetchSessionCache,
    FollowerSession,
    PartitionParams,
    next_epoch,
)
from broker.replication.replica_manager import FetchedPartition
from protocol.errors import ErrorCode

A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


def params(offset: int, max_bytes: int = 1024) -> PartitionParams:
    return PartitionParams(offset, max_bytes, 3, -1)


def result(hw: int, records: bytes = b"", error=ErrorCode.NONE, start: int = 0):
    return FetchedPartition(error, hw, start, records, hw)


class Clock:
    def __init__(self):
        self.now = 1_000_000

    def __call__(self):
        return self.now


def cache_with_session(partitions=(A0, A1), clock=None, privileged=False):
    """A cache and the id of a session created by a full fetch of ``partitions``."""
    cache = FetchSessionCache(10, clock=clock or Clock())
    requested = {key: params(0) for key in partitions}
    context = cache.context(0, INITIAL_EPOCH, requested, [], privileged)
    error, session_id, listed = context.answer([(key, result(5)) for key in requested])
    assert (context.kind, error) == ("full", ErrorCode.NONE) and session_id > 0
    assert [key for key, _ in listed] == list(partitions), "a full answer lists them all"
    return cache, session_id


def test_epochs_count_up_from_one_and_wrap_past_the_largest_int32():
    assert next_epoch(INITIAL_EPOCH) == 1
    assert next_epoch(41) == 42
    assert next_epoch(2 ** 31 - 1) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_session_id_and_epoch_choose_the_kind_of_fetch():
    cache, session_id = cache_with_session()
    assert cache.context(0, FINAL_EPOCH, {A0: params(0)}, [], False).kind == "sessionless"
    # an incremental fetch of the session, with the epoch it expects
    assert cache.context(session_id, 1, {}, [], False).kind == "incremental"
    # (id, -1) closes the session and is answered sessionless
    assert cache.context(session_id, FINAL_EPOCH, {A0: params(0)}, [], False).kind == \
        "sessionless"
    assert cache.get(session_id) is None
    unknown = cache.context(session_id, 2, {}, [], False)
    assert (unknown.kind, unknown.error) == ("error", ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    assert unknown.answer([]) == (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0, [])


def test_a_full_fetch_naming_a_session_closes_it_and_opens_another():
    cache, session_id = cache_with_session()
    context = cache.context(session_id, INITIAL_EPOCH, {B0: params(0)}, [], False)
    assert cache.get(session_id) is None
    _, new_id, _ = context.answer([(B0, result(1))])
    assert new_id not in (0, session_id) and list(cache.get(new_id).partitions) == [B0]


def test_a_wrong_epoch_is_refused_and_leaves_the_session_as_it_was():
    cache, session_id = cache_with_session()
    context = cache.context(session_id, 2, {B0: params(0)}, [], False)
    assert (context.kind, context.error) == ("error", ErrorCode.INVALID_FETCH_SESSION_EPOCH)
    session = cache.get(session_id)
    assert (session.epoch, list(session.partitions)) == (1, [A0, A1])


def test_an_incremental_fetch_reads_every_partition_and_answers_only_the_news():
    cache, session_id = cache_with_session()
    # a1's position moved; a0 is not named, so its cached parameters stand
    context = cache.context(session_id, 1, {A1: params(7)}, [], False)
    assert context.partitions == {A0: params(0), A1: params(7)}
    error, answer_id, listed = context.answer([(A0, result(5)), (A1, result(9, b"xy"))])
    assert (error, answer_id) == (ErrorCode.NONE, session_id)
    assert [key for key, _ in listed] == [A1], "a0 has no records and the same HW"
    assert cache.get(session_id).epoch == 2
    # the high watermark moving is news, so is the log start offset moving
    context = cache.context(session_id, 2, {}, [], False)
    _, _, listed = context.answer([(A0, result(6)), (A1, result(9, start=3))])
    assert [key for key, _ in listed] == [A0, A1]
    # nothing new: an empty answer
    _, _, listed = cache.context(session_id, 3, {}, [], False).answer(
        [(A0, result(6)), (A1, result(9, start=3))])
    assert listed == []


def test_an_error_is_always_answered_and_answered_again_once_gone():
    cache, session_id = cache_with_session()
    for epoch in (1, 2):
        _, _, listed = cache.context(session_id, epoch, {}, [], False).answer(
            [(A0, result(-1, error=ErrorCode.NOT_LEADER_OR_FOLLOWER)), (A1, result(5))])
        assert [key for key, _ in listed] == [A0]
    _, _, listed = cache.context(session_id, 3, {}, [], False).answer(
        [(A0, result(5)), (A1, result(5))])
    assert [key for key, _ in listed] == [A0], "the same HW as before the error is news"


def test_answered_partitions_move_to_the_end_of_the_fetch_order():
    cache, session_id = cache_with_session((A0, A1, B0))
    _, _, listed = cache.context(session_id, 1, {}, [], False).answer(
        [(A0, result(6, b"x")), (A1, result(5)), (B0, result(5))])
    assert list(cache.context(session_id, 2, {}, [], False).partitions) == [A1, B0, A0]


def test_forgotten_partitions_leave_and_an_emptied_session_ends():
    cache, session_id = cache_with_session()
    context = cache.context(session_id, 1, {B0: params(4)}, [A0], False)
    assert list(context.partitions) == [A1, B0]
    context = cache.context(session_id, 2, {}, [A1, B0], False)
    assert context.kind == "sessionless" and context.partitions == {}
    assert cache.get(session_id) is None and len(cache) == 0


def test_a_fetch_overtaken_by_another_of_its_session_answers_invalid_epoch():
    """Two Fetches of one session in flight (a retry on another connection): the one
    answered second must not look like the session's latest state."""
    cache, session_id = cache_with_session()
    first = cache.context(session_id, 1, {}, [], False)    # long-polls
    second = cache.context(session_id, 2, {}, [], False)   # the fetcher moved on
    assert second.answer([(A0, result(5)), (A1, result(5))])[0] == ErrorCode.NONE
    assert first.answer([(A0, result(6)), (A1, result(5))]) == \
        (ErrorCode.INVALID_FETCH_SESSION_EPOCH, session_id, [])


def test_no_slots_means_every_full_fetch_is_sessionless():
    cache = FetchSessionCache(0)
    context = cache.context(0, INITIAL_EPOCH, {A0: params(0)}, [], True)
    assert context.kind == "sessionless"
    assert context.answer([(A0, result(1))])[1] == 0


def test_eviction_follows_kafkas_rules():
    clock = Clock()
    cache = FetchSessionCache(1, clock=clock)
    one = {A0: CachedPartition(params(0))}
    two = {A0: CachedPartition(params(0)), A1: CachedPartition(params(0))}
    consumer = cache.create(False, dict(one))
    assert cache.create(False, dict(two)) == 0, "a young consumer session stays"
    follower = cache.create(True, dict(one))
    assert follower and cache.get(consumer) is None, "a follower outranks a consumer"
    assert cache.create(True, dict(two)) == 0, "a young follower session stays"
    clock.now += EVICTION_MS + 1
    # old enough, but still in use: a bigger session may take its place, an equal one not
    cache.get(follower).last_used_ms = clock.now
    assert cache.create(True, dict(one)) == 0
    bigger = cache.create(True, dict(two))
    assert bigger and cache.get(follower) is None
    # unused for longer than the eviction time: anyone may take its place
    clock.now += EVICTION_MS + 1
    assert cache.create(False, {}) and cache.get(bigger) is None
    assert cache.evictions == 3


# -- the follower's side ----------------------------------------------------------------------


def test_follower_session_lists_everything_first_then_only_what_changed():
    session = FollowerSession()
    wanted = {A0: (3, 10, 0, 1024), A1: (3, 20, 0, 1024)}
    assert session.build(dict(wanted)) == ([A0, A1], []) and session.full
    session.on_answer(ErrorCode.NONE, 77)
    assert (session.session_id, session.epoch) == (77, 1)
    assert session.build(dict(wanted)) == ([], [])
    session.on_answer(ErrorCode.NONE, 77)
    moved = {A0: (3, 11, 0, 1024), B0: (3, 0, 0, 1024)}  # a0 moved, a1 gone, b0 new
    assert session.build(moved) == ([A0, B0], [A1])
    session.on_answer(ErrorCode.NONE, 77)
    assert session.epoch == 3 and session.build(dict(moved)) == ([], [])


def test_follower_session_starts_over_after_errors_and_failures():
    session = FollowerSession()
    wanted = {A0: (3, 10, 0, 1024)}
    session.build(dict(wanted))
    session.on_answer(ErrorCode.NONE, 77)
    session.build(dict(wanted))
    session.on_answer(ErrorCode.INVALID_FETCH_SESSION_EPOCH, 77)
    # the next fetch is full and closes session 77 (its id, epoch 0)
    assert (session.session_id, session.epoch) == (77, INITIAL_EPOCH)
    assert session.build(dict(wanted)) == ([A0], [])
    session.on_answer(ErrorCode.NONE, 78)
    session.build(dict(wanted))
    session.on_failure()  # no answer: the leader's epoch is unknown
    assert (session.session_id, session.epoch) == (78, INITIAL_EPOCH)
    session.build(dict(wanted))
    session.on_answer(ErrorCode.NONE, 79)
    session.build(dict(wanted))
    session.on_answer(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0)
    assert (session.session_id, session.epoch) == (0, INITIAL_EPOCH)


def test_a_leader_without_sessions_gets_full_fetches():
    session = FollowerSession()
    wanted = {A0: (3, 10, 0, 1024)}
    for _ in range(3):
        assert session.build(dict(wanted)) == ([A0], [])
        session.on_answer(ErrorCode.NONE, 0)
        assert (session.session_id, session.epoch) == (0, INITIAL_EPOCH)

"""ShareSessionCache: Kafka's share-session epochs (0 opens, n continues, -1 closes)."""
from __future__ import annotations

import uuid

from broker.share.sessions import IDLE_EVICTION_MS, ShareSessionCache
from protocol.errors import ErrorCode

T = uuid.uuid4()


def test_opening_continuing_and_closing_a_session():
    cache = ShareSessionCache()
    error, session = cache.update("g", "m", 0, [(T, 0), (T, 1)], [], False)
    assert error == ErrorCode.NONE and list(session.partitions) == [(T, 0), (T, 1)]
    assert cache.update("g", "m", 2, [], [], False)[0] == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    error, session = cache.update("g", "m", 1, [(T, 2)], [(T, 0)], True)
    assert error == ErrorCode.NONE and list(session.partitions) == [(T, 1), (T, 2)]
    assert session.epoch == 2
    assert cache.check("g", "m", -1)[0] == ErrorCode.NONE, "closing needs no epoch"
    assert cache.close("g", "m") is session
    assert cache.update("g", "m", 2, [], [], False)[0] == ErrorCode.SHARE_SESSION_NOT_FOUND


def test_an_opening_request_may_not_acknowledge_and_acknowledge_may_not_open():
    cache = ShareSessionCache()
    assert cache.update("g", "m", 0, [(T, 0)], [], True)[0] == ErrorCode.INVALID_REQUEST
    assert cache.check("g", "m", 0)[0] == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert cache.check("g", "m", 1)[0] == ErrorCode.SHARE_SESSION_NOT_FOUND


def test_epoch_zero_replaces_the_members_session_and_the_cache_is_bounded():
    cache = ShareSessionCache(max_sessions=1)
    cache.update("g", "m", 0, [(T, 0)], [], False)
    cache.update("g", "m", 1, [], [], False)
    error, session = cache.update("g", "m", 0, [(T, 1)], [], False)
    assert error == ErrorCode.NONE and list(session.partitions) == [(T, 1)]
    assert session.epoch == 1
    assert cache.update("g", "other", 0, [], [], False)[0] == \
        ErrorCode.SHARE_SESSION_LIMIT_REACHED


def test_a_full_cache_evicts_the_least_recently_used_session_once_idle():
    now = [0]
    cache = ShareSessionCache(max_sessions=2, clock_ms=lambda: now[0])
    cache.update("g", "a", 0, [], [], False)
    cache.update("g", "b", 0, [], [], False)
    now[0] = IDLE_EVICTION_MS - 1
    cache.update("g", "a", 1, [], [], False)  # a is used again: b is the oldest now
    assert cache.update("g", "c", 0, [], [], False)[0] == \
        ErrorCode.SHARE_SESSION_LIMIT_REACHED, "b has not been idle long enough"
    now[0] = IDLE_EVICTION_MS
    assert cache.update("g", "c", 0, [], [], False)[0] == ErrorCode.NONE
    assert set(cache.sessions) == {("g", "a"), ("g", "c")}, "b, the idle one, made room"

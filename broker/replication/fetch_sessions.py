"""Incremental fetch sessions (Kafka's KIP-227), the leader's side.

A fetcher with many partitions (a follower, a Java or kafka-python consumer) need not
list every partition in every Fetch, nor hear about every one in every answer.  After a
*full* Fetch that asks for a session (session id 0, epoch 0) the broker remembers the
partitions and their fetch parameters under a session id it returns.  The fetcher then
sends *incremental* Fetches (that id, epochs 1, 2, ...) naming only the partitions whose
parameters changed (its position moved, its leader epoch...) and those to drop
(``forgotten_topics_data``); the broker fetches every partition of the session and
answers only for the partitions with something new: records, a different high
watermark, last stable offset or log start offset, an error, or a preferred read
replica.  A caught-up fetcher's Fetch and its answer then carry almost nothing.

What the request's (session id, epoch) mean, as in Kafka:

====================  =========================================================
(0, -1)               sessionless full fetch; the answer's session id is 0
(0, 0)                full fetch; create a session (answer: its id, or 0 if none
                      could be made room for)
(id, 0)               close session ``id``, full fetch, create a new session
(id, -1)              close session ``id``, sessionless full fetch
(id, n > 0)           incremental fetch in session ``id``; n must be the epoch the
                      session expects (1 after creation, then +1 per fetch, wrapping
                      from 2^31-1 to 1): else INVALID_FETCH_SESSION_EPOCH, and
                      FETCH_SESSION_ID_NOT_FOUND for an unknown (or evicted) id
====================  =========================================================

The cache holds at most ``max.incremental.fetch.session.cache.slots`` sessions (0 turns
sessions off: every full fetch is then answered sessionless).  When it is full, a new
session may take the place of (Kafka's rules) a session unused for two minutes, or else
the least valuable one it outranks: followers' sessions outrank consumers', bigger
sessions outrank smaller ones, and a session is safe from eviction for two minutes after
its creation (a follower's only by another follower's).

The broker's fetch state lives only here: the handler (``broker/api/fetch.py``) asks
``FetchSessionCache.context`` for a ``FetchContext``, reads the partitions it names, and
lets the context choose what the answer lists.  Event-loop only.
"""
from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from .leader_endpoint import PartitionFetch
    from .replica_manager import FetchedPartition

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
#: a session unused this long may be evicted by any new one; a younger session only by
#: one that outranks it (Kafka's fixed 120 s)
EVICTION_MS = 120_000
_MAX_EPOCH = 2 ** 31 - 1

Key = tuple[str, int]


def next_epoch(epoch: int) -> int:
    """The epoch that follows ``epoch`` (Kafka's FetchMetadata.nextEpoch)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _MAX_EPOCH else epoch + 1


@dataclass(slots=True)
class PartitionParams:
    """What a Fetch asks of one partition (the fields a session remembers)."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int
    log_start_offset: int  # the fetcher's own (followers), -1 for consumers


@dataclass(slots=True)
class CachedPartition:
    """A partition of a session: the fetcher's last parameters, and what the fetcher
    was last told (so an unchanged partition can be left out of the answer)."""

    params: PartitionParams
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1  # the partition's, as last answered

    def must_answer(self, result: FetchedPartition) -> bool:
        """Whether ``result`` (a FetchedPartition) has news for the fetcher; remembers
        what it tells.  An error is always news, and leaves the cached high watermark
        at -1 so the partition is answered again once the error is gone."""
        news = bool(result.records) or result.preferred_read_replica >= 0
        if result.error != ErrorCode.NONE:
            self.high_watermark = -1
            return True
        if self.high_watermark != result.high_watermark:
            self.high_watermark, news = result.high_watermark, True
        if self.last_stable_offset != result.last_stable_offset:
            self.last_stable_offset, news = result.last_stable_offset, True
        if self.log_start_offset != result.log_start_offset:
            self.log_start_offset, news = result.log_start_offset, True
        return news


class FetchSession:
    """One session: its partitions in fetch order (a partition that was answered moves
    to the end, so a response's byte limit favours each partition in turn)."""

    __slots__ = ("id", "privileged", "partitions", "created_ms", "last_used_ms", "epoch")

    def __init__(self, session_id: int, privileged: bool,
                 partitions: dict[Key, CachedPartition], now_ms: int):
        self.id = session_id
        self.privileged = privileged
        self.partitions = partitions
        self.created_ms = now_ms
        self.last_used_ms = now_ms
        self.epoch = next_epoch(INITIAL_EPOCH)  # the epoch the next fetch must carry

    def __repr__(self) -> str:
        return (f"FetchSession(id={self.id}, privileged={self.privileged}, "
                f"partitions={len(self.partitions)}, epoch={self.epoch})")


class FetchContext:
    """How one Fetch is answered: ``partitions`` are what to read, in order (key →
    PartitionParams); ``answer`` picks the results the response lists and gives the
    session id and top-level error to answer with.

    Kinds: ``error`` (a session error: nothing is read, the answer is the error with
    session id 0), ``sessionless``, ``full`` (a session is created from the answer)
    and ``incremental``."""

    __slots__ = ("kind", "partitions", "error", "_cache", "_session", "_expected_epoch",
                 "_privileged")

    def __init__(self, kind: str, partitions: dict[Key, PartitionParams], *,
                 error: ErrorCode = ErrorCode.NONE, cache: FetchSessionCache | None = None,
                 session: FetchSession | None = None, privileged: bool = False):
        self.kind = kind
        self.partitions = partitions
        self.error = error
        self._cache = cache
        self._session = session
        self._expected_epoch = session.epoch if session is not None else 0
        self._privileged = privileged

    def answer(self, results: list[tuple[Key, FetchedPartition]]
               ) -> tuple[ErrorCode, int, list[tuple[Key, FetchedPartition]]]:
        """(top-level error, session id, the (key, FetchedPartition) to list) for the
        read ``results`` (one per partition of ``partitions``, in order)."""
        if self.kind == "error":
            return self.error, INVALID_SESSION_ID, []
        if self.kind == "sessionless":
            return ErrorCode.NONE, INVALID_SESSION_ID, results
        # a full or incremental context always has the cache; an incremental one its session
        assert self._cache is not None
        if self.kind == "full":
            session_id = self._cache.create(self._privileged, {
                key: CachedPartition(self.partitions[key], result.high_watermark
                                     if result.error == ErrorCode.NONE else -1,
                                     result.last_stable_offset, result.log_start_offset)
                for key, result in results})
            return ErrorCode.NONE, session_id, results
        session = self._session
        assert session is not None
        if session.epoch != self._expected_epoch or self._cache.get(session.id) is not session:
            # Another Fetch of this session (a retry on another connection) came in
            # while this one waited: its answer is the one the fetcher will follow.
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH, session.id, []
        listed = []
        cached = session.partitions
        for key, result in results:
            partition = cached.get(key)
            if partition is not None and partition.must_answer(result):
                listed.append((key, result))
                cached[key] = cached.pop(key)  # to the end of the fetch order
        return ErrorCode.NONE, session.id, listed


class FetchSessionCache:
    """The broker's sessions, at most ``max_sessions`` of them (see the module doc for
    eviction).  Counts for metrics: ``len(cache)``, ``partition_count()``,
    ``evictions``."""

    def __init__(self, max_sessions: int, eviction_ms: int = EVICTION_MS,
                 clock: Callable[[], int] | None = None):
        self.max_sessions = max_sessions
        self.eviction_ms = eviction_ms
        self._clock = clock or (lambda: int(time.monotonic() * 1000))
        self._sessions: dict[int, FetchSession] = {}
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def partition_count(self) -> int:
        return sum(len(s.partitions) for s in self._sessions.values())

    # -- the handler's entry point ---------------------------------------------------

    def context(self, session_id: int, epoch: int, requested: dict[Key, PartitionParams],
                forgotten: list[Key], privileged: bool) -> FetchContext:
        """The FetchContext of a Fetch carrying (``session_id``, ``epoch``), the
        partitions it lists (``requested``) and those it forgets."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):  # a full fetch
            if session_id != INVALID_SESSION_ID:
                self._sessions.pop(session_id, None)  # any session named is closed
            if epoch == FINAL_EPOCH or self.max_sessions <= 0:
                return FetchContext("sessionless", requested)
            return FetchContext("full", requested, cache=self, privileged=privileged)
        session = self._sessions.get(session_id)
        if session is None:
            return FetchContext("error", {}, error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return FetchContext("error", {}, error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        cached = session.partitions
        for key, params in requested.items():
            partition = cached.get(key)
            if partition is None:
                cached[key] = CachedPartition(params)
            else:
                partition.params = params
        for key in forgotten:
            cached.pop(key, None)
        if not cached:  # nothing left: the session ends, this fetch is sessionless
            del self._sessions[session.id]
            return FetchContext("sessionless", requested)
        session.last_used_ms = self._clock()
        session.epoch = next_epoch(session.epoch)
        return FetchContext("incremental", {key: p.params for key, p in cached.items()},
                            cache=self, session=session)

    # -- sessions --------------------------------------------------------------------

    def create(self, privileged: bool, partitions: dict[Key, CachedPartition]) -> int:
        """A new session holding ``partitions``: its id, or INVALID_SESSION_ID when the
        cache is full and nothing in it may be evicted for this one."""
        now = self._clock()
        if len(self._sessions) >= self.max_sessions and \
                not self._evict_for(privileged, len(partitions), now):
            return INVALID_SESSION_ID
        session_id = INVALID_SESSION_ID
        while session_id == INVALID_SESSION_ID or session_id in self._sessions:
            session_id = random.randint(1, _MAX_EPOCH)
        self._sessions[session_id] = FetchSession(session_id, privileged, partitions, now)
        return session_id

    def _evict_for(self, privileged: bool, size: int, now: int) -> bool:
        """Kafka's FetchSessionCache.tryEvict: the stalest session if unused for
        ``eviction_ms``; else the least valuable (consumer before follower, then
        fewest partitions) among those this one may evict, if it outranks it (a tie
        keeps the old one)."""
        sessions = self._sessions.values()
        stalest = min(sessions, key=lambda s: (s.last_used_ms, s.id), default=None)
        if stalest is None:
            return False
        if now - stalest.last_used_ms > self.eviction_ms:
            return self._evict(stalest)
        old_enough = [s for s in sessions if now - s.created_ms > self.eviction_ms
                      or (privileged and not s.privileged)]
        victim = min(old_enough, key=lambda s: (s.privileged, len(s.partitions), s.id),
                     default=None)
        if victim is None or (privileged, size) <= (victim.privileged, len(victim.partitions)):
            return False
        return self._evict(victim)

    def _evict(self, session: FetchSession) -> bool:
        del self._sessions[session.id]
        self.evictions += 1
        return True


class FollowerSession:
    """The follower's side of a session with one leader (Kafka's FetchSessionHandler).

    ``build(wanted)`` says what the next Fetch carries, given every partition the
    fetcher wants with its parameters (any value compared with ``==``, e.g. the
    fetcher's PartitionFetch; the very object last sent is unchanged without a
    comparison, so parameters must not be mutated once given): a full fetch asking for
    a session while there is none, else only the partitions whose parameters changed
    since they were last sent and the ones no longer wanted.  ``on_answer`` (session
    id and top-level error of the answer) and ``on_failure`` (no answer, so the
    leader's epoch is unknown) keep the state; a session error or a failure starts
    over with a full fetch that closes the old session (its id with epoch 0), or asks
    afresh when the leader no longer knows it.  A leader that answers a full fetch
    with session id 0 (cache full, or sessions turned off) gets full fetches."""

    __slots__ = ("session_id", "epoch", "_sent", "_pending")

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self._sent: dict[Key, PartitionFetch] = {}  # what the leader's session holds
        self._pending: dict[Key, PartitionFetch] = {}

    @property
    def full(self) -> bool:
        """The next Fetch lists every partition."""
        return self.epoch == INITIAL_EPOCH

    def build(self, wanted: dict[Key, PartitionFetch]) -> tuple[list[Key], list[Key]]:
        """(partitions to list, partitions to forget) in the next Fetch; it carries
        ``session_id`` and ``epoch`` as they are now."""
        self._pending = wanted
        if self.epoch == INITIAL_EPOCH:  # self.full, without the property's call
            return list(wanted), []
        sent = self._sent
        return ([key for key, params in wanted.items()
                 if (old := sent.get(key)) is not params and old != params],
                [key for key in sent if key not in wanted])

    def on_answer(self, error_code: int, session_id: int) -> None:
        if error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
            self._start_over(close=False)
        elif error_code != ErrorCode.NONE:  # INVALID_FETCH_SESSION_EPOCH, or worse
            self._start_over(close=True)
        elif self.full:
            self.session_id = session_id
            self.epoch = next_epoch(INITIAL_EPOCH) if session_id != INVALID_SESSION_ID \
                else INITIAL_EPOCH
            self._sent = self._pending
        else:
            self.epoch = next_epoch(self.epoch)
            self._sent = self._pending

    def on_failure(self) -> None:
        self._start_over(close=True)

    def _start_over(self, close: bool) -> None:
        if not close:
            self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self._sent = {}

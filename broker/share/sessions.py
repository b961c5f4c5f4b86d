"""Share sessions (KIP-932): the partitions a share consumer fetches, by (group, member).

ShareFetch works like an incremental fetch: the first request (epoch 0) opens the
member's session with the partitions it names; later requests carry the epoch the
session expects next (1, 2, ... wrapping from 2^31-1 to 1), add the partitions they
name and drop the forgotten ones; epoch -1 closes the session (its locks are released
by the caller).  What the epochs mean, as in Kafka's ShareRequestMetadata:

=========  =====================================================================
0          open a session (replacing the member's previous one); no
           acknowledgements allowed (INVALID_REQUEST)
n > 0      the session's expected epoch, else INVALID_SHARE_SESSION_EPOCH;
           SHARE_SESSION_NOT_FOUND when the member has no session
-1         close the session after the request's acknowledgements; ShareFetch
           fetches nothing then
=========  =====================================================================

At most ``max_sessions`` sessions are open (Kafka's group.share.max.share.sessions).  A
new session takes the place of the least recently used one idle for ``IDLE_EVICTION_MS``
(a consumer that died without closing its session); with none that idle it is refused
with SHARE_SESSION_LIMIT_REACHED.  Event-loop only.
"""
from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from protocol.errors import ErrorCode

from ..replication.fetch_sessions import FINAL_EPOCH, INITIAL_EPOCH, next_epoch

#: (topic id, partition index)
SharePartitionKey = tuple[uuid.UUID, int]
DEFAULT_MAX_SESSIONS = 2000
#: idle this long, a session may make room for a new one (a member's session timeout is
#: 45 s by default: by then the group has removed a silent member)
IDLE_EVICTION_MS = 60_000


def _monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int = 1  # the epoch the next request must carry
    partitions: dict[SharePartitionKey, None] = field(default_factory=dict)  # ordered set
    last_used_ms: int = 0


class ShareSessionCache:
    """Open share sessions by (group id, member id)."""

    def __init__(self, max_sessions: int = DEFAULT_MAX_SESSIONS,
                 clock_ms: Callable[[], int] = _monotonic_ms) -> None:
        self.max_sessions = max_sessions
        self.clock_ms = clock_ms
        self.sessions: dict[tuple[str, str], ShareSession] = {}  # least recently used first

    def update(self, group_id: str, member_id: str, epoch: int,
               added: Iterable[SharePartitionKey], forgotten: Iterable[SharePartitionKey],
               has_acknowledgements: bool) -> tuple[ErrorCode, ShareSession | None]:
        """Check ``epoch`` and apply the request's partition changes; (error, session).

        An epoch -1 request leaves the session in the cache (its acknowledgements are
        applied first); the caller then calls ``close``."""
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            if has_acknowledgements:
                return ErrorCode.INVALID_REQUEST, None
            self.sessions.pop(key, None)
            if len(self.sessions) >= self.max_sessions and not self._evict_idle():
                return ErrorCode.SHARE_SESSION_LIMIT_REACHED, None
            session = self.sessions[key] = ShareSession(group_id, member_id)
        else:
            found = self.sessions.get(key)
            if found is None:
                return ErrorCode.SHARE_SESSION_NOT_FOUND, None
            session = found
            del self.sessions[key]  # re-inserted last: the most recently used
            self.sessions[key] = session
            if epoch != FINAL_EPOCH:
                if epoch != session.epoch:
                    return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
                session.epoch = next_epoch(epoch)
        session.last_used_ms = self.clock_ms()
        for partition in added:
            session.partitions[partition] = None
        for partition in forgotten:
            session.partitions.pop(partition, None)
        return ErrorCode.NONE, session

    def _evict_idle(self) -> bool:
        """Drop the least recently used session if it has been idle long enough."""
        oldest_key = next(iter(self.sessions), None)
        if oldest_key is None:
            return False
        if self.clock_ms() - self.sessions[oldest_key].last_used_ms < IDLE_EVICTION_MS:
            return False
        del self.sessions[oldest_key]
        return True

    def check(self, group_id: str, member_id: str, epoch: int
              ) -> tuple[ErrorCode, ShareSession | None]:
        """ShareAcknowledge's check: the session must exist and (unless closing) expect
        ``epoch``, which it then moves past; epoch 0 is INVALID_SHARE_SESSION_EPOCH."""
        if epoch == INITIAL_EPOCH:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
        return self.update(group_id, member_id, epoch, (), (), True)

    def is_open(self, session: ShareSession) -> bool:
        """Whether ``session`` is its member's open session (not closed, evicted or
        replaced by a new one)."""
        return self.sessions.get((session.group_id, session.member_id)) is session

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id), None)

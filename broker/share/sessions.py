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

At most ``max_sessions`` sessions are open (Kafka's group.share.max.share.sessions);
one more is refused with SHARE_SESSION_LIMIT_REACHED.  Event-loop only.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from protocol.errors import ErrorCode

from ..replication.fetch_sessions import FINAL_EPOCH, INITIAL_EPOCH, next_epoch

#: (topic id, partition index)
SharePartitionKey = tuple[uuid.UUID, int]
DEFAULT_MAX_SESSIONS = 2000


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int = 1  # the epoch the next request must carry
    partitions: dict[SharePartitionKey, None] = field(default_factory=dict)  # ordered set


class ShareSessionCache:
    """Open share sessions by (group id, member id)."""

    def __init__(self, max_sessions: int = DEFAULT_MAX_SESSIONS) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}

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
            if key not in self.sessions and len(self.sessions) >= self.max_sessions:
                return ErrorCode.SHARE_SESSION_LIMIT_REACHED, None
            session = self.sessions[key] = ShareSession(group_id, member_id)
        else:
            found = self.sessions.get(key)
            if found is None:
                return ErrorCode.SHARE_SESSION_NOT_FOUND, None
            session = found
            if epoch != FINAL_EPOCH:
                if epoch != session.epoch:
                    return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
                session.epoch = next_epoch(epoch)
        for partition in added:
            session.partitions[partition] = None
        for partition in forgotten:
            session.partitions.pop(partition, None)
        return ErrorCode.NONE, session

    def check(self, group_id: str, member_id: str, epoch: int
              ) -> tuple[ErrorCode, ShareSession | None]:
        """ShareAcknowledge's check: the session must exist and (unless closing) expect
        ``epoch``, which it then moves past; epoch 0 is INVALID_SHARE_SESSION_EPOCH."""
        if epoch == INITIAL_EPOCH:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
        return self.update(group_id, member_id, epoch, (), (), True)

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id), None)

"""The replication throttle of a leader: bytes/s for replicas still joining (KIP-455).

``leader.replication.throttled.rate`` (bytes per second, Kafka's name and default:
2^63-1, i.e. unlimited; at least 1) caps what this leader sends to *adding* replicas of partitions being reassigned,
so a big move does not starve clients and in-sync followers.  A token bucket one second
deep: a fetch may take what is in the bucket (at least one batch, so progress is never
blocked by a large batch); a fetch finding it empty gets no data for those partitions,
and the replica manager holds such a fetch until the bucket refills
(``delay_s``) instead of answering at once, which would make the follower spin.

Event-loop only; ``clock`` is monotonic seconds.
"""
from __future__ import annotations

import time
from typing import Callable


UNLIMITED = 2**63 - 1


class ReplicationThrottle:
    def __init__(self, rate_bytes_per_s: int, clock: Callable[[], float] = time.monotonic):
        self.rate = rate_bytes_per_s
        self._clock = clock
        self._tokens = float(rate_bytes_per_s)
        self._updated = clock()

    @property
    def enabled(self) -> bool:
        return self.rate < UNLIMITED

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(float(self.rate), self._tokens + (now - self._updated) * self.rate)
        self._updated = now

    def allowance(self) -> int:
        """Bytes a throttled read may return now (0: none until the bucket refills)."""
        self._refill()
        return int(self._tokens) if self._tokens > 0 else 0

    def record(self, sent: int) -> None:
        """``sent`` bytes went to throttled replicas (may overdraw by one batch)."""
        self._tokens -= sent

    def delay_s(self) -> float:
        """How long until the bucket holds bytes again."""
        self._refill()
        return 0.0 if self._tokens > 0 else (1 - self._tokens) / self.rate

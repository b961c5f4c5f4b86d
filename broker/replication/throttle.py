"""Replication throttles (Kafka's replication quotas, KIP-73; reassignment, KIP-455).

Two broker settings, Kafka's names and default (2^63-1, i.e. unlimited; at least 1):
``leader.replication.throttled.rate`` caps what this broker sends, as a leader, for
throttled replicas; ``follower.replication.throttled.rate`` caps what it fetches, as a
follower, for throttled replicas.  Which replicas are throttled is per topic, as in
Kafka (``ThrottledReplicas`` below): ``leader.replication.throttled.replicas`` and
``follower.replication.throttled.replicas``, each ``*`` or ``partition:broker`` pairs.
A leader throttles a listed partition's followers that are out of the ISR; a follower
throttles its fetches of a listed partition while it is behind the leader.  On top of
Kafka's rule, Raftwood's leader also throttles the replicas joining a partition (the
adding replicas of a reassignment) with no list at all, as it did before the lists.

Each rate is a token bucket one second deep: a fetch may take what is in the bucket (at
least one batch, so progress is never blocked by a large batch); a fetch finding it
empty gets no data for those partitions.  The leader holds such a fetch until the
bucket refills (``delay_s``) instead of answering at once, which would make the
follower spin; the follower leaves the partition out of its next fetch, and waits for
the bucket when nothing else is to be fetched.

Event-loop only; ``clock`` is monotonic seconds.
"""
from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..topics import THROTTLED_REPLICA_ENTRY, throttled_replicas_problem

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


# -- Kafka's throttled-replica lists (topic configs) ---------------------------------------

# Their names and the validation of their values are topics.py's (the config layer's).


@dataclass(frozen=True)
class ThrottledReplicas:
    """A parsed ``*.replication.throttled.replicas`` value: ``*`` (every replica of the
    topic) or ``partition:broker`` pairs.  As in Kafka (ConfigHandler's
    parseThrottledPartitions), broker B throttles partition p when the list holds
    ``p:B``: in the leader list B names the broker doing the sending, so a leader on B
    throttles what it sends for p; in the follower list B names the follower that
    throttles its own fetches of p.  kafka-reassign-partitions --throttle writes the
    current replicas of a moving partition into the leader list and the replicas being
    added into the follower list."""

    everything: bool = False
    pairs: frozenset[tuple[int, int]] = frozenset()  # of (partition, broker)

    def throttles(self, partition: int, broker: int) -> bool:
        return self.everything or (partition, broker) in self.pairs

    def __bool__(self) -> bool:
        return self.everything or bool(self.pairs)


NONE = ThrottledReplicas()


@functools.lru_cache(maxsize=1024)
def parse_throttled_replicas(value: str | None) -> ThrottledReplicas:
    """The parsed list (cached: the fetch path asks on every follower fetch).  A value
    that does not validate (it cannot reach the metadata: the config APIs refuse it)
    throttles nothing."""
    if not value or throttled_replicas_problem("", value) is not None:
        return NONE
    entries = [e.strip() for e in value.split(",")]
    if "".join(entries) == "*":
        return ThrottledReplicas(everything=True)
    pairs = frozenset((int(m.group(1)), int(m.group(2)))
                      for m in map(THROTTLED_REPLICA_ENTRY.fullmatch, entries) if m)
    return ThrottledReplicas(pairs=pairs) if pairs else NONE

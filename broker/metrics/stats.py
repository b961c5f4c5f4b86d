"""Counters the hot paths update: requests, bytes per topic, ISR changes.

Each is a plain dict or int owned by one component and touched on the event loop only
(one dict lookup and an add per event, no lock, no label objects): the collector turns
them into Prometheus counters and histograms when a scrape asks (``collector.py``).
They only grow, which is what Prometheus expects of a counter; a broker restart starts
them again from zero (Prometheus' ``rate`` reads that as a counter reset).

* ``RequestStats`` (the Broker's, updated by each Connection): requests and their
  total time per API name and version, Kafka's RequestsPerSec and TotalTimeMs;
* ``ReplicaStats`` (the ReplicaManager's): bytes and records appended per topic as
  leader (BytesInPerSec, MessagesInPerSec), bytes answered to consumer fetches per topic
  (BytesOutPerSec) and to follower fetches (ReplicationBytesOutPerSec), and the leader's
  committed ISR shrinks and expansions (IsrShrinksPerSec, IsrExpandsPerSec).
"""
from __future__ import annotations

from bisect import bisect_left
from itertools import accumulate

# Upper bounds (inclusive, milliseconds) of the request-time histogram's buckets; one
# more bucket, +Inf, follows.  From well under a millisecond (ApiVersions, Metadata) to
# the long polls (Fetch waits up to its max_wait_ms, 500 ms by default; a follower's
# replica.fetch.wait.max.ms too) and acks=all produces waiting for slow followers.
TIME_BUCKETS_MS = (0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0,
                   1000.0, 2500.0, 5000.0, 10000.0, 30000.0)


def cumulative(buckets: list[int]) -> list[int]:
    """Counts at or below each bound, +Inf last (Prometheus' ``le`` buckets), from
    per-bucket counts."""
    return list(accumulate(buckets))


class RequestTiming:
    """One API name and version: bucket counts (not cumulative; the last is +Inf), the
    sum of the times and the number of requests."""

    __slots__ = ("buckets", "sum_ms", "count")

    def __init__(self) -> None:
        self.buckets = [0] * (len(TIME_BUCKETS_MS) + 1)
        self.sum_ms = 0.0
        self.count = 0

    def cumulative(self) -> list[int]:
        return cumulative(self.buckets)


class RequestStats:
    """Requests answered by this broker, per (API name, version). Event-loop only."""

    def __init__(self) -> None:
        self.timings: dict[tuple[str, int], RequestTiming] = {}

    def record(self, api_name: str, api_version: int, seconds: float) -> None:
        """One request finished (answered, closed on, or cancelled) after ``seconds``
        since its handler started."""
        timing = self.timings.get((api_name, api_version))
        if timing is None:
            timing = self.timings[(api_name, api_version)] = RequestTiming()
        ms = seconds * 1000.0  # inlined here: once per request, a call less
        timing.buckets[bisect_left(TIME_BUCKETS_MS, ms)] += 1
        timing.sum_ms += ms
        timing.count += 1


class ReplicaStats:
    """Per-topic traffic and ISR changes of one ReplicaManager. Event-loop only."""

    def __init__(self) -> None:
        self.bytes_in: dict[str, int] = {}
        self.messages_in: dict[str, int] = {}
        self.bytes_out: dict[str, int] = {}
        self.replication_bytes_out = 0
        self.isr_shrinks = 0
        self.isr_expands = 0

    def appended(self, topic: str, size: int, records: int) -> None:
        """A batch of ``size`` bytes and ``records`` records was appended as leader (a
        client's or a coordinator's; duplicates and refusals are not appends)."""
        self.bytes_in[topic] = self.bytes_in.get(topic, 0) + size
        self.messages_in[topic] = self.messages_in.get(topic, 0) + records

    def fetched(self, topic: str, size: int, follower: bool) -> None:
        """``size`` bytes of ``topic`` went into a fetch answer; a follower's count as
        replication traffic, not as the topic's bytes out (as in Kafka)."""
        if follower:
            self.replication_bytes_out += size
        else:
            self.bytes_out[topic] = self.bytes_out.get(topic, 0) + size

    def isr_changed(self, old_isr, new_isr) -> None:
        """The committed ISR of a partition this broker leads went from ``old_isr`` to
        ``new_isr``: a shrink if a replica left, an expansion if one joined (both for a
        change that swaps replicas)."""
        old, new = set(old_isr), set(new_isr)
        if old - new:
            self.isr_shrinks += 1
        if new - old:
            self.isr_expands += 1


# What a connection without metrics (a ConnectionContext's default, a test's stand-in)
# records into: nothing is kept.
DISCARD_REQUESTS = RequestStats()
DISCARD_REQUESTS.record = lambda api_name, api_version, seconds: None  # type: ignore[method-assign]

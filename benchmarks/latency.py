"""Delivery latency at a fixed produce rate (paced producer) with confluent-kafka.

Latency of one record = time from its `produce()` call to its delivery callback, both
read with `time.perf_counter()` on the one thread that calls produce and poll. Between
sends the producer sits in `poll(timeout)` until the next send is due, so callbacks run
as soon as librdkafka has the reports. The pacing is open-loop: record i is due at
start + i / rate whether or not earlier records were acked. A sender that falls behind
sends without sleeping until it is back on schedule; the achieved rate is reported next
to the asked one, so a rate the client itself cannot reach shows.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field

from confluent_kafka import Producer
from throughput import PhaseError, Progress


@dataclass
class LatencyResult:
    rate_per_s: int            # asked
    sent: int
    acked: int
    failed: int
    seconds: float             # first produce() to last delivery callback
    latencies_ms: list[float] = field(default_factory=list, repr=False)
    first_error: str | None = None
    cpu_s: float | None = None  # broker CPU seconds during the phase (set by the caller)
    busiest_share: float | None = None  # the busiest broker's CPU / wall (set by the caller)
    busiest_wait_share: float | None = None  # its main thread's run-queue wait / wall

    @property
    def achieved_per_s(self) -> float:
        return self.acked / self.seconds if self.seconds > 0 else 0.0

    def percentile_ms(self, pct: float) -> float | None:
        return percentile(self.latencies_ms, pct)

    def as_json(self) -> dict:
        def r(x):
            return None if x is None else round(x, 3)
        return {"rate_per_s": self.rate_per_s, "sent": self.sent, "acked": self.acked,
                "failed": self.failed, "seconds": round(self.seconds, 3),
                "achieved_per_s": round(self.achieved_per_s, 1),
                "p50_ms": r(self.percentile_ms(50)), "p99_ms": r(self.percentile_ms(99)),
                "max_ms": r(max(self.latencies_ms, default=None)),
                "first_error": self.first_error,
                "broker_cpu_s": r(self.cpu_s),
                "broker_cpu_us_per_msg": r(1e6 * self.cpu_s / self.acked)
                if self.cpu_s is not None and self.acked else None,
                "busiest_broker_core_share": r(self.busiest_share),
                "busiest_broker_runqueue_wait_share": r(self.busiest_wait_share)}


def percentile(values: list[float], pct: float) -> float | None:
    """Nearest-rank percentile (pct in 0..100, inclusive); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def paced_produce(bootstrap: str, topic: str, rate_per_s: int, duration_s: float,
                  value_bytes: int, acks: str, timeout_s: float,
                  progress: Progress) -> LatencyResult:
    """Send rate_per_s * duration_s records at that rate (linger.ms=0), wait for every
    report (bounded by timeout_s from the start), return the latencies."""
    total = max(1, int(rate_per_s * duration_s))
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": acks,
                         "message.timeout.ms": int(timeout_s * 1000),
                         # a broker slower than the rate leaves every record queued here
                         "queue.buffering.max.messages": max(100_000, 2 * total)})
    producer.list_topics(topic, timeout=10)
    _warm_up(producer, topic, value_bytes)
    value = os.urandom(value_bytes)
    result = LatencyResult(rate_per_s, 0, 0, 0, 0.0)
    perf = time.perf_counter

    def on_delivery(err, _msg, sent_at: float) -> None:
        if err is not None:
            result.failed += 1
            result.first_error = result.first_error or str(err)
        else:
            result.acked += 1
            result.latencies_ms.append((perf() - sent_at) * 1000.0)

    try:
        _send_paced(producer, topic, value, rate_per_s, total, timeout_s, result,
                    on_delivery, progress)
    except PhaseError:
        producer.purge()
        producer.flush(0)
        raise
    if result.failed:
        raise PhaseError(f"{result.failed} of {total} deliveries failed at {rate_per_s}/s "
                         f"(first: {result.first_error})")
    return result


def serial_produce(bootstrap: str, topic: str, count: int, value_bytes: int, acks: str,
                   timeout_s: float, progress: Progress) -> LatencyResult:
    """One record in flight at a time (produce, then wait for its report), ``count``
    times: every record is its own request and its own replication round trip, so the
    brokers' CPU per record is the cost of one round trip, whatever the machine's load
    does to batching.  ``rate_per_s`` of the result is 0 (not paced)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": acks,
                         "message.timeout.ms": int(timeout_s * 1000)})
    producer.list_topics(topic, timeout=10)
    _warm_up(producer, topic, value_bytes)
    value = os.urandom(value_bytes)
    result = LatencyResult(0, 0, 0, 0, 0.0)
    perf = time.perf_counter
    errors: list = []
    started = perf()
    deadline = started + timeout_s
    progress.restart()
    for i in range(count):
        sent_at = perf()
        producer.produce(topic, value, on_delivery=lambda e, m: errors.append(e) if e else None)
        result.sent += 1
        while len(producer) > 0:
            producer.poll(0.05)
            _check(deadline, result, count)
        if errors:
            raise PhaseError(f"a delivery failed with one record in flight: {errors[0]}")
        result.acked += 1
        result.latencies_ms.append((perf() - sent_at) * 1000.0)
        if progress.due():
            progress.say(f"latency, 1 in flight: {i + 1:,} of {count:,} acked")
    result.seconds = perf() - started
    return result


def _send_paced(producer: Producer, topic: str, value: bytes, rate_per_s: int, total: int,
                timeout_s: float, result: LatencyResult, on_delivery, progress: Progress
                ) -> None:
    perf = time.perf_counter
    started = perf()
    deadline = started + timeout_s
    interval_s = 1.0 / rate_per_s
    progress.restart()
    for i in range(total):
        due = started + i * interval_s
        while (wait_s := due - perf()) > 0:
            if wait_s >= 0.002:
                producer.poll(wait_s)  # returns early to run delivery callbacks
            else:
                time.sleep(wait_s)     # poll() counts whole ms: poll(0.0005) would spin
        sent_at = perf()
        try:
            producer.produce(topic, value,
                             on_delivery=lambda e, m, t=sent_at: on_delivery(e, m, t))
        except BufferError as exc:
            raise PhaseError(f"local queue full at {rate_per_s}/s after {i:,} records") from exc
        result.sent += 1
        producer.poll(0)
        if progress.due():
            _check(deadline, result, total)
            progress.say(f"latency {rate_per_s}/s: sent {i + 1:,} of {total:,}, "
                         f"acked {result.acked:,}, p99 so far "
                         f"{_fmt(percentile(result.latencies_ms, 99))} ms")
    while len(producer) > 0:
        producer.poll(0.05)
        _check(deadline, result, total)
    result.seconds = perf() - started


def _warm_up(producer: Producer, topic: str, value_bytes: int) -> None:
    """Connections to every leader and first batches outside the measurement."""
    for _ in range(50):
        producer.produce(topic, b"w" * value_bytes)
    if producer.flush(30) > 0:
        raise PhaseError("warm-up records not acked within 30 s")


def _check(deadline: float, result: LatencyResult, total: int) -> None:
    if time.perf_counter() >= deadline:
        raise PhaseError(f"latency run at {result.rate_per_s}/s timed out with "
                         f"{result.acked:,} of {total:,} acked")


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"

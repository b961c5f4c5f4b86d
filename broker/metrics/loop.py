"""How busy the broker's event loop is: the CPU time of its thread, how long it waited
for a CPU, and how late a timer runs.

Everything a broker does for its clients runs on one event loop, so when the loop is
busy every request waits behind the work ahead of it: at some rate a partition leader
spends most of a core, and delivery latency grows far beyond its per-request cost (a
queue).  Three figures show it:

* CPU seconds of the loop's thread (``time.pthread_getcpuclockid``): its rate over a
  minute is the loop's share of a core, 1.0 when saturated (Kafka's
  NetworkProcessorAvgIdlePercent, seen from the other side).
* Run-queue wait of the loop's thread (Linux's schedstat, ``/proc/self/task/<tid>/
  schedstat``): seconds it was ready to run while every core was busy with something
  else.  Its rate says how much of the lag is the machine's and not the broker's: on a
  host shared with other brokers or clients, a loop can use half a core and still wait
  as long again (measured in the benchmarks' README).  Where the kernel keeps no
  schedstat, the figure is absent.
* Loop lag: ``LoopProbe`` asks for a callback every ``interval_s`` and records how much
  later than asked it ran, in a histogram.  A callback waits for the callbacks and I/O
  handling ahead of it, so the lag is the queueing delay any request arriving at that
  moment would have seen.  It is a sample (ten a second), not every request's delay;
  p99 over minutes is what to read.  Timers of the event loop fire on a millisecond
  clock, so lags below about a millisecond are not resolved.

Cost: one timer callback per interval, an add to a bucket.  Event-loop only (the CPU
clock and the run-queue wait may be read from any thread).
"""
from __future__ import annotations

import asyncio
import os
import threading
import time
from bisect import bisect_left

from .stats import cumulative

# Upper bounds (inclusive, milliseconds) of the lag histogram's buckets; +Inf follows.
LAG_BUCKETS_MS = (1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 5000.0)
PROBE_INTERVAL_S = 0.1


class LoopProbe:
    """Samples the lag of the running event loop (see the module).  ``start()`` on the
    loop; ``stop()`` cancels the pending timer.  ``buckets`` (not cumulative, +Inf last),
    ``sum_ms`` and ``count`` are what the collector exports."""

    def __init__(self, interval_s: float = PROBE_INTERVAL_S):
        self.interval_s = interval_s
        self.buckets = [0] * (len(LAG_BUCKETS_MS) + 1)
        self.sum_ms = 0.0
        self.count = 0
        self._cpu_clock: int | None = None
        self._cpu_last = 0.0
        self.has_runqueue_wait = os.path.exists("/proc/thread-self/schedstat")
        self._schedstat: str | None = None  # the loop thread's, once started
        self._wait_last = 0.0
        self._handle: asyncio.TimerHandle | None = None
        self._on_loop: int | None = None  # the loop thread's ident, once started
        self._due = 0.0

    def start(self) -> None:
        if self._handle is not None:
            return
        try:
            self._cpu_clock = time.pthread_getcpuclockid(threading.get_ident())
        except (AttributeError, OSError):  # not on this platform: read on the loop itself
            self._cpu_clock = None
        self._on_loop = threading.get_ident()
        if self.has_runqueue_wait:
            self._schedstat = f"/proc/self/task/{threading.get_native_id()}/schedstat"
        self._schedule(asyncio.get_running_loop())

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def cpu_seconds(self) -> float:
        """CPU time the loop's thread has used: 0.0 before ``start``, and the last value
        read once that thread is gone.  Where a thread's CPU clock cannot be named
        (``pthread_getcpuclockid``), it is read only when called on the loop's thread,
        which is where the collector runs."""
        try:
            if self._cpu_clock is not None:
                self._cpu_last = time.clock_gettime(self._cpu_clock)
            elif self._on_loop == threading.get_ident():
                self._cpu_last = time.thread_time()
        except OSError:  # the loop's thread has exited
            pass
        return self._cpu_last

    def runqueue_wait_seconds(self) -> float | None:
        """Seconds the loop's thread has been runnable but not running (waiting on a
        run queue for a CPU): None where the kernel keeps no schedstat, 0.0 before
        ``start``, and the last value read once that thread is gone."""
        if not self.has_runqueue_wait:
            return None
        if self._schedstat is not None:
            # Three numbers: ns on a CPU, ns waiting on a run queue, timeslices run.
            try:
                with open(self._schedstat, "rb") as f:
                    self._wait_last = int(f.read().split()[1]) / 1e9
            except (OSError, ValueError, IndexError):  # the thread has exited
                pass
        return self._wait_last

    def cumulative(self) -> list[int]:
        """Counts at or below each bound, +Inf last (Prometheus' ``le`` buckets)."""
        return cumulative(self.buckets)

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        # Measured on the monotonic clock rather than loop.time(), which some loops
        # (uvloop's libuv) read once per iteration: the lag would miss the time spent
        # in the iteration before this callback.
        self._due = time.monotonic() + self.interval_s
        self._handle = loop.call_later(self.interval_s, self._tick, loop)

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        ms = max(0.0, (time.monotonic() - self._due) * 1000.0)
        self.buckets[bisect_left(LAG_BUCKETS_MS, ms)] += 1
        self.sum_ms += ms
        self.count += 1
        self._schedule(loop)

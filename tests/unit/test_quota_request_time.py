"""The request_percentage quota's stopwatch (broker/quotas/request_time.py) and its
rate (broker/quotas/rates.py) on injected clocks.

Invariants: only the time the request's own code runs is counted (a timed coroutine's
steps, not its awaits); every nanosecond is recorded once, the part up to ``charge()``
with a throttle and the rest by ``settle()`` without; the throttle is Kafka's
``(rate - quota) / quota * span``, at most one sample window; a client's quota
(None without one: it gets no stopwatch) is Kafka's precedence, looked up anew when the
quotas change; ``request_quotas_on`` answers from the mapping it was given, anew for
each new mapping; the exempt requests are Kafka's.
"""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from broker.quotas.rates import SAMPLE_MS, SAMPLES, ClientQuotas
from broker.quotas.request_time import RequestTime, exempt, timed

TINY = {(("client-id", "tiny"),): {"request_percentage": 1.0}}  # 10 ms per second
MS = 1_000_000  # ns


class Clock:
    def __init__(self) -> None:
        self.ns = 1_000 * MS

    def __call__(self) -> int:
        return self.ns


def _timer(rates: ClientQuotas, clock: Clock) -> RequestTime:
    quota = rates.request_quota(TINY, "ANONYMOUS", "tiny")
    return RequestTime(rates, quota, "ANONYMOUS", "tiny", clock(), clock=clock)


def test_charge_then_settle_record_each_nanosecond_once_and_throttle_once():
    clock, now_ms = Clock(), [0.0]
    rates = ClientQuotas(clock_ms=lambda: now_ms[0])
    # 1 % over the 10 s least span: 100 ms of loop time fit, the 101st is over.
    timer = _timer(rates, clock)
    clock.ns += 100 * MS
    assert timer.charge() == 0
    timer.settle()
    timer = _timer(rates, clock)
    clock.ns += 20 * MS  # 1.2 % over the span: (1.2 - 1) / 1 * 10 s = 2 s, over the cap
    throttle = timer.charge()
    span_ms = (SAMPLES - 1) * SAMPLE_MS
    assert int((1.2 - 1.0) / 1.0 * span_ms) > SAMPLE_MS
    assert throttle == SAMPLE_MS, "at most one window, as Kafka's request quota"
    assert timer.charge() == throttle, "charged once"
    clock.ns += 5 * MS  # the encode: recorded by settle, never throttled
    timer.settle()
    window = rates._windows[("request_percentage", "", "tiny")]
    assert abs(sum(s[1] for s in window.samples) - 12.5) < 1e-9


def test_the_request_quota_of_a_client_is_kept_until_the_quotas_change():
    rates = ClientQuotas()
    assert rates.request_quota(TINY, "ANONYMOUS", "free") is None
    assert rates.request_quota(TINY, "ANONYMOUS", "tiny") == ((("client-id", "tiny"),), 1.0)
    changed = {(("client-id", None),): {"request_percentage": 2.0}}
    assert rates.request_quota(changed, "ANONYMOUS", "free") == ((("client-id", None),), 2.0)
    assert rates.request_quota(changed, "ANONYMOUS", "tiny") == ((("client-id", None),), 2.0)


def test_a_timed_coroutine_counts_its_steps_not_its_waits():
    clock = Clock()
    rates = ClientQuotas(clock_ms=lambda: 0.0)
    timer = _timer(rates, clock)
    timer.stop()  # the handler's first step has not run yet

    async def handler(gate: asyncio.Future) -> str:
        clock.ns += 3 * MS  # work before the wait
        await gate
        clock.ns += 4 * MS  # work after it
        return "answer"

    async def run() -> str:
        gate = asyncio.get_running_loop().create_future()
        task = asyncio.ensure_future(_await(timed(handler(gate), timer)))
        await asyncio.sleep(0)
        clock.ns += 1_000 * MS  # the wait: another request's time, not this one's
        gate.set_result(None)
        return await task

    async def _await(awaitable):
        return await awaitable

    assert asyncio.run(run()) == "answer"
    assert timer.spent_ns() == 7 * MS


def test_a_cancelled_timed_coroutine_is_cancelled_inside():
    clock = Clock()
    timer = _timer(ClientQuotas(clock_ms=lambda: 0.0), clock)
    seen = []

    async def handler() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def run() -> None:
        task = asyncio.ensure_future(_await(timed(handler(), timer)))
        await asyncio.sleep(0)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            seen.append("task")

    async def _await(awaitable):
        return await awaitable

    asyncio.run(run())
    assert seen == ["cancelled", "task"]


def test_request_quotas_on_follows_the_mapping():
    rates = ClientQuotas()
    bytes_only = {(("user", "a"),): {"producer_byte_rate": 10.0}}
    assert not rates.request_quotas_on(bytes_only)
    assert rates.request_quotas_on(TINY)
    assert not rates.request_quotas_on({})


def test_kafkas_exempt_requests():
    assert exempt(1, SimpleNamespace(replica_id=2)) is True  # a follower's Fetch
    assert exempt(1, SimpleNamespace(replica_id=-1)) is False
    assert exempt(0, SimpleNamespace(acks=0)) is True
    assert exempt(0, SimpleNamespace(acks=-1)) is False
    assert exempt(17, None) is True and exempt(36, None) is True  # SASL
    assert exempt(27, None) is None  # WriteTxnMarkers: if ClusterAction is allowed
    assert exempt(18, None) is False  # ApiVersions is throttled in Kafka
    assert exempt(3, None) is False

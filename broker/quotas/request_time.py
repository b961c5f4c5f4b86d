"""The ``request_percentage`` quota (KIP-124): event-loop time per client.

Kafka measures the time its request handler and network threads spend on a client's
requests, in percent of one thread, over the quota window (``quota.window.num`` x
``quota.window.size.seconds``), and throttles the client over its quota.  Raftwood
runs one event loop per broker, so a request's time is the loop time its own code
takes: the decode, the handler's own steps (each ``send``/``throw`` of an ``async``
handler's coroutine, ``timed``; never the time it waits), building a ``Later``'s
answer, and the encode.  ``RequestTime`` is that stopwatch; ``charge()`` records what
was spent until the answer is built and gives its throttle time (Kafka's request
thread time, recorded when the response is sent), ``settle()`` records the rest (the
encode: Kafka's network thread time, recorded without throttling).  The throttle is
Kafka's ``(rate - quota) / quota * span``, at most one window (1 s by default).

Exempt, as in Kafka's KafkaApis (``sendResponseExemptThrottle``): a follower's Fetch,
WriteTxnMarkers from a principal allowed ClusterAction (a refused one is throttled),
Produce with acks=0 (no answer), and SaslHandshake / SaslAuthenticate (Kafka's
authenticator answers those before any quota applies).  ApiVersions is not exempt.

Nothing here runs without a ``request_percentage`` quota in the image: the connection
asks ``ClientQuotas.request_quotas_on`` per request, and reads no clock otherwise; and
a request of a client no such quota applies to gets no stopwatch.  Event-loop only.
"""
from __future__ import annotations

from collections.abc import Callable, Coroutine
from time import perf_counter_ns
from typing import Any

from .rates import ClientQuotas

PRODUCE, FETCH, SASL_HANDSHAKE, WRITE_TXN_MARKERS, SASL_AUTHENTICATE = 0, 1, 17, 27, 36
NS_TO_PERCENT = 100.0 / 1e9  # percent of one thread for one second, per nanosecond


def exempt(api_key: int, body: Any) -> bool | None:
    """True: never throttled nor recorded; None: exempt only if the principal may
    ClusterAction (WriteTxnMarkers); False: counted."""
    if api_key == FETCH:
        return body.replica_id >= 0
    if api_key == PRODUCE:
        return body.acks == 0
    if api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
        return True
    if api_key == WRITE_TXN_MARKERS:
        return None
    return False


class RequestTime:
    """One request's event-loop time, charged to its client's ``request_percentage``.

    Invariants: the stopwatch runs only while the request's own code does (``start`` /
    ``stop`` around each piece); every nanosecond measured is recorded once, the part
    up to ``charge()`` with a throttle, the rest by ``settle()`` without; ``charge()``
    answers the same throttle however often it is called.
    """

    __slots__ = ("_rates", "_quota", "_user", "_client_id", "_clock", "_spent_ns",
                 "_since_ns", "_recorded_ns", "_throttle_ms")

    def __init__(self, rates: ClientQuotas, quota: tuple[tuple, float], user: str,
                 client_id: str, started_ns: int, clock: Callable[[], int] = perf_counter_ns):
        self._rates = rates
        self._quota = quota  # (matched entity, percent): ClientQuotas.request_quota
        self._user = user
        self._client_id = client_id
        self._clock = clock
        self._spent_ns = 0
        self._since_ns = started_ns  # running since the decode began
        self._recorded_ns = 0
        self._throttle_ms: int | None = None

    def start(self) -> None:
        """The request's code runs again (no-op while running)."""
        if not self._since_ns:
            self._since_ns = self._clock() or 1

    def stop(self) -> None:
        """The request's code gives the loop back (no-op while stopped)."""
        if self._since_ns:
            self._spent_ns += self._clock() - self._since_ns
            self._since_ns = 0

    def spent_ns(self) -> int:
        """The time measured so far, the running piece included."""
        running = self._clock() - self._since_ns if self._since_ns else 0
        return self._spent_ns + running

    def charge(self) -> int:
        """Record the time spent so far (once); the answer's throttle time in ms."""
        if self._throttle_ms is None:
            spent = self.spent_ns()
            self._throttle_ms = self._rates.record_request_time(
                self._quota, self._user, self._client_id,
                (spent - self._recorded_ns) * NS_TO_PERCENT)
            self._recorded_ns = spent
        return self._throttle_ms

    def settle(self) -> None:
        """The request is answered: stop, and record what ``charge`` has not, without
        a throttle."""
        self.stop()
        rest = self._spent_ns - self._recorded_ns
        if rest > 0:
            self._rates.record_request_time(self._quota, self._user, self._client_id,
                                            rest * NS_TO_PERCENT, throttle=False)
            self._recorded_ns = self._spent_ns


class _TimedSteps:
    """An awaitable running ``coro`` with each of its steps timed into ``timer``: what
    ``await`` calls (``send``, ``throw``, ``close``) is passed on, between ``start`` and
    ``stop``."""

    __slots__ = ("_coro", "_timer")

    def __init__(self, coro: Coroutine, timer: RequestTime):
        self._coro = coro
        self._timer = timer

    def __await__(self):
        return self

    def __iter__(self):
        return self

    def __next__(self):
        return self.send(None)

    def send(self, value):
        timer = self._timer
        timer.start()
        try:
            return self._coro.send(value)
        finally:
            timer.stop()

    def throw(self, typ, val=None, tb=None):
        """The one-argument form of ``coroutine.throw`` (the three-argument one is
        deprecated since Python 3.12)."""
        exc = typ if val is None else val
        if tb is not None and isinstance(exc, BaseException):
            exc = exc.with_traceback(tb)
        timer = self._timer
        timer.start()
        try:
            return self._coro.throw(exc)
        finally:
            timer.stop()

    def close(self) -> None:
        self._coro.close()


def timed(coro: Coroutine, timer: RequestTime) -> Any:
    """``coro`` awaited with its own steps counted in ``timer`` (its waits are not)."""
    return _TimedSteps(coro, timer)

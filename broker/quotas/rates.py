"""Client quota enforcement: rates over a sliding window (Kafka's ClientQuotaManager).

Each Produce's record bytes and each Fetch's answered bytes (and each partition created
or deleted, for ``controller_mutation_rate``: mutations.py; each connection accepted, for
an ``ip`` entity's ``connection_creation_rate``: ``admit_connection``; each request's
event-loop time, for ``request_percentage``: request_time.py) are recorded against the
quota that applies to the client (``quota_for``: Kafka's precedence, from
``user + client-id`` down to the default client id), per broker.  A quota set on a
default entity applies to each user / client id on its own: the rate is kept per
(user, client id) as far as the matched entity names them, as Kafka's metric tags do.

The rate is Kafka's ``Rate`` over ``samples`` windows of ``sample_ms`` (a ``Windows``):
bytes in the live samples divided by their span, the span counted as at least
``samples - 1`` full windows (so a first burst is not measured over a few
milliseconds).  Kafka's settings, static as in Kafka: ``quota.window.num`` (11) and
``quota.window.size.seconds`` (1) for the byte rates and the connection creation rate,
``controller.quota.window.num`` and ``controller.quota.window.size.seconds`` (11, 1)
for ``controller_mutation_rate``.  Over the quota, the answer carries
``throttle_time_ms = (rate - quota) / quota * span`` (Kafka's QuotaUtils.throttleTime),
at most the whole window (``samples * sample_ms``), and the connection stops reading for
that time after answering (KIP-219); the client backs off too.

Event-loop only: ``record`` reads the quotas of the image it is given and changes
only this object's windows.
"""
from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from .entities import (
    CLIENT_ID,
    CONNECTION_CREATION_RATE,
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    IP,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
)

SAMPLES = 11          # quota.window.num's default
SAMPLE_MS = 1000      # quota.window.size.seconds's default, in ms
MAX_THROTTLE_MS = SAMPLES * SAMPLE_MS
MAX_TRACKED = 10_000  # rate windows kept; the least recently used go first


class Windows(NamedTuple):
    """How a rate is measured: ``samples`` windows of ``sample_ms`` each."""

    samples: int = SAMPLES
    sample_ms: int = SAMPLE_MS

    @property
    def min_span_ms(self) -> int:
        return (self.samples - 1) * self.sample_ms

    @property
    def max_throttle_ms(self) -> int:
        return self.samples * self.sample_ms


KAFKA_WINDOWS = Windows()  # Kafka's defaults: 11 windows of a second

__all__ = ["ClientQuotas", "CONSUMER_BYTE_RATE", "PRODUCER_BYTE_RATE", "quota_for"]


def quota_for(quotas: Mapping[tuple, Mapping[str, float]], user: str, client_id: str,
              key: str) -> tuple[tuple, float] | None:
    """(matched entity, quota) for ``user`` and ``client_id``, in Kafka's order:
    user+client, user+default client, user, default user+client, default user+default
    client, default user, client, default client.  None: no quota applies."""
    for entity in (((CLIENT_ID, client_id), (USER, user)), ((CLIENT_ID, None), (USER, user)),
                   ((USER, user),), ((CLIENT_ID, client_id), (USER, None)),
                   ((CLIENT_ID, None), (USER, None)), ((USER, None),),
                   ((CLIENT_ID, client_id),), ((CLIENT_ID, None),)):
        values = quotas.get(entity)
        if values and key in values:
            return entity, float(values[key])
    return None


class _Window:
    """Bytes per sample window, oldest first: [(window start ms, bytes)]."""

    __slots__ = ("samples", "shape")

    def __init__(self, shape: Windows) -> None:
        self.samples: deque[list[float]] = deque()
        self.shape = shape

    def record(self, now_ms: float, value: float) -> float:
        """Add ``value`` and return the rate (per second) over the live samples."""
        samples, shape = self.samples, self.shape
        if not samples or now_ms - samples[-1][0] >= shape.sample_ms:
            samples.append([now_ms, 0.0])
        samples[-1][1] += value
        while samples and now_ms - samples[0][0] >= shape.max_throttle_ms:
            samples.popleft()
        span_ms = max(now_ms - samples[0][0], shape.min_span_ms)
        return sum(s[1] for s in samples) * 1000.0 / span_ms


class ClientQuotas:
    """The byte rates of this broker's clients; ``record`` answers the throttle time.
    ``windows`` measures every rate but ``controller_mutation_rate``, which
    ``controller_windows`` measures."""

    def __init__(self, clock_ms: Callable[[], float] | None = None,
                 windows: Windows = KAFKA_WINDOWS,
                 controller_windows: Windows = KAFKA_WINDOWS):
        self._clock_ms = clock_ms or (lambda: time.monotonic() * 1000.0)
        self._windows: dict[tuple, _Window] = {}
        self._shapes = {CONTROLLER_MUTATION_RATE: controller_windows}
        self._default_shape = windows
        self._seen_quotas: Mapping | None = None  # the image's quotas last looked at
        self._request_quotas_on = False  # ... hold a request_percentage quota
        self._request_quotas: dict[tuple[str, str], tuple[tuple, float] | None] = {}

    @classmethod
    def for_broker(cls, config: Any) -> ClientQuotas:
        """The windows of the broker's ``quota.window.*`` and ``controller.quota.window.*``
        settings."""
        return cls(windows=Windows(config["quota.window.num"],
                                   config["quota.window.size.seconds"] * 1000),
                   controller_windows=Windows(config["controller.quota.window.num"],
                                              config["controller.quota.window.size.seconds"]
                                              * 1000))

    def record(self, quotas: Mapping[tuple, Mapping[str, float]], key: str, user: str,
               client_id: str, size_bytes: float) -> int:
        """Record ``size_bytes`` for the client; the throttle time in ms (0: within)."""
        if not quotas:
            return 0
        found = quota_for(quotas, user, client_id, key)
        if found is None:
            return 0
        entity, quota = found
        window = self._window(key, entity, user, client_id)
        rate = window.record(self._clock_ms(), size_bytes)
        if rate <= quota:
            return 0
        shape = window.shape
        span_ms = max(self._clock_ms() - window.samples[0][0], shape.min_span_ms)
        return min(int((rate - quota) / quota * span_ms), shape.max_throttle_ms)

    def request_quotas_on(self, quotas: Mapping[tuple, Mapping[str, float]]) -> bool:
        """Whether ``quotas`` (an image's, replaced whole by each change) hold some
        ``request_percentage``: cheap per request, the answer is kept per mapping."""
        if quotas is not self._seen_quotas:
            self._seen_quotas = quotas
            self._request_quotas_on = any(REQUEST_PERCENTAGE in values
                                          for values in quotas.values())
            self._request_quotas.clear()
        return self._request_quotas_on

    def request_quota(self, quotas: Mapping[tuple, Mapping[str, float]], user: str,
                      client_id: str) -> tuple[tuple, float] | None:
        """``quota_for(..., request_percentage)``, kept per client until ``quotas``
        changes (one lookup per request)."""
        self.request_quotas_on(quotas)
        key = (user, client_id)
        cache = self._request_quotas
        if key not in cache:
            if len(cache) >= MAX_TRACKED:
                cache.clear()
            cache[key] = quota_for(quotas, user, client_id, REQUEST_PERCENTAGE)
        return cache[key]

    def record_request_time(self, found: tuple[tuple, float], user: str, client_id: str,
                            percent: float, throttle: bool = True) -> int:
        """Record ``percent`` (time spent on a request, in percent of a second) against
        the client's ``request_percentage`` (``found``: ``request_quota``'s answer); the
        throttle time in ms, at most one sample window as Kafka's
        ClientRequestQuotaManager caps it (0: within, or ``throttle`` False: Kafka's
        network-thread time, recorded without throttling)."""
        entity, quota = found
        window = self._window(REQUEST_PERCENTAGE, entity, user, client_id)
        now_ms = self._clock_ms()
        rate = window.record(now_ms, percent)
        if not throttle or rate <= quota:
            return 0
        span_ms = max(now_ms - window.samples[0][0], window.shape.min_span_ms)
        return min(int((rate - quota) / quota * span_ms), window.shape.sample_ms)

    def exceeded(self, quotas: Mapping[tuple, Mapping[str, float]], key: str, user: str,
                 client_id: str) -> bool:
        """Whether the client's ``key`` rate is over its quota now, before anything more
        is recorded (Kafka's strict controller mutation quota)."""
        return self.record(quotas, key, user, client_id, 0.0) > 0

    def admit_connection(self, quotas: Mapping[tuple, Mapping[str, float]],
                         host: str) -> str | None:
        """A connection accepted from ``host``: None when its IP's
        ``connection_creation_rate`` (the ``ip`` entity named ``host``, else the default
        ip entity) allows it, counted; else why it must be closed, and not counted (a
        client that backs off gets in again)."""
        if not quotas:
            return None
        quota = None
        for entity in (((IP, host),), ((IP, None),)):
            values = quotas.get(entity)
            if values and CONNECTION_CREATION_RATE in values:
                quota = float(values[CONNECTION_CREATION_RATE])
                break
        if quota is None:
            return None
        window = self._window(CONNECTION_CREATION_RATE, ((IP, host),), host, "")
        if window.record(self._clock_ms(), 1.0) <= quota:
            return None
        window.samples[-1][1] -= 1.0
        return f"connection_creation_rate quota ({quota:g}/s) of ip {host} exceeded"

    def _window(self, key: str, entity: tuple, user: str, client_id: str) -> _Window:
        types = {t for t, _ in entity}
        rate_key = (key, user if USER in types or IP in types else "",
                    client_id if CLIENT_ID in types else "")
        window = self._windows.pop(rate_key, None) or \
            _Window(self._shapes.get(key, self._default_shape))
        self._windows[rate_key] = window  # most recently used last
        if len(self._windows) > MAX_TRACKED:
            del self._windows[next(iter(self._windows))]
        return window

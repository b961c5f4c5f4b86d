"""KIP-714 client telemetry on one broker: client instances, their subscription, the
pushes they are allowed, and their last pushed metrics as Prometheus families.

An instance's subscription (its ``Plan``: metric-name prefixes and push interval) is
what the client-metrics resources matching it ask for (client_metrics_resources.py), with
the broker setting ``raftwood.client.metrics.subscription`` (prefixes, ``*`` for all,
empty for none; ``raftwood.client.metrics.push.interval.ms``) as one more resource
matching every client.  The handlers compute the plan from the image at every request;
when it changed the instance's subscription id changes, so a push under the old id gets
UNKNOWN_SUBSCRIPTION_ID and the client asks again, as with Kafka.  A subscription id is a
CRC32 of the prefixes, the interval and the client instance id, so every broker (and this
one after a restart) computes the same id for an instance.

Rate (as Kafka's ClientMetricsManager): a GetTelemetrySubscriptions is allowed once per
push interval (the instance's) since the instance's last request, or at once after a
push refused with UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE; a push is
allowed as the first after a Get, or a push interval after the previous push, or when
``Terminating``.
Else THROTTLING_QUOTA_EXCEEDED.  After a terminating push, further pushes of that
instance are INVALID_REQUEST.

Exposition: the samples of an instance's last accepted push, labelled
``client_instance_id`` and ``client_id`` (the broker's words win over the client's
attributes), until ``EXPIRY_INTERVALS`` push intervals pass without a push; instances
are forgotten after the same time without a request, and at most ``MAX_INSTANCES`` are
kept (the least recently seen goes), each with the data points of its last push that
fit in ``MAX_SAMPLES_PER_INSTANCE`` exposition lines (a histogram or summary takes one
per bucket or quantile, and two more).  Event-loop only.
"""
from __future__ import annotations

import logging
import time
import uuid
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from kafka import codec
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeHistogramMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector

from protocol.errors import ErrorCode, RecordError
from protocol.record_validation import DEFAULT_MAX_DECOMPRESSED_BYTES, decompress

from .client_metrics_resources import Plan
from .otlp import COUNTER, GAUGE_HISTOGRAM, HISTOGRAM, SUMMARY, OtlpError, Sample, decode

log = logging.getLogger(__name__)

ZERO_UUID = uuid.UUID(int=0)
NO_COMPRESSION = 0
EXPIRY_INTERVALS = 3
MAX_INSTANCES = 16_384
# Bounds on what one push may cost: its payload decompressed (Kafka's clients push a few
# KiB) and the data points kept of it (librdkafka's producer pushes about fifteen).
DECOMPRESSED_PER_MAX_BYTE = 32
MAX_SAMPLES_PER_INSTANCE = 2_000
BROKER_LABELS = ("client_instance_id", "client_id")


def accepted_compression_types() -> list[int]:
    """Kafka's codec ids this broker decompresses, in Kafka's order of preference."""
    available = {4: codec.has_zstd(), 3: codec.has_lz4(), 1: True, 2: codec.has_snappy()}
    return [ctype for ctype, ok in available.items() if ok]


@dataclass
class ClientInstance:
    instance_id: uuid.UUID
    client_id: str
    plan: Plan
    subscription_id: int
    last_get_ms: float | None = None
    last_push_ms: float | None = None
    last_seen_ms: float = 0.0
    terminating: bool = False
    last_error: ErrorCode = ErrorCode.NONE
    samples: list[Sample] = field(default_factory=list)


@dataclass(frozen=True)
class Subscription:
    """What GetTelemetrySubscriptions answers (``error`` NONE) or its error."""

    error: ErrorCode
    instance_id: uuid.UUID
    subscription_id: int = 0
    push_interval_ms: int = 0
    requested_metrics: tuple[str, ...] = ()


class ClientTelemetry(Collector):
    """This broker's client instances; a prometheus_client Collector of their metrics."""

    def __init__(self, prefixes: str, push_interval_ms: int, max_bytes: int,
                 clock: Callable[[], float] = time.monotonic):
        names = [p.strip() for p in prefixes.split(",") if p.strip()]
        # Kafka's wire form: no element, no subscription; one empty string, everything.
        self.requested_metrics = ("",) if "*" in names else tuple(names)
        self.prefixes = prefixes
        self.push_interval_ms = push_interval_ms
        self.default_plan = Plan(self.requested_metrics, push_interval_ms)
        self.max_bytes = max_bytes
        self.compression_types = accepted_compression_types()
        self._clock = clock
        self._max_decompressed = min(DEFAULT_MAX_DECOMPRESSED_BYTES,
                                     DECOMPRESSED_PER_MAX_BYTE * max_bytes)
        self._instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()

    @classmethod
    def for_broker(cls, config) -> ClientTelemetry:
        return cls(config["raftwood.client.metrics.subscription"],
                   config["raftwood.client.metrics.push.interval.ms"],
                   config["telemetry.max.bytes"])

    def subscription_id(self, instance_id: uuid.UUID, plan: Plan | None = None) -> int:
        """Signed int32, the same on every broker for the same plan and instance."""
        plan = plan or self.default_plan
        text = f"{','.join(plan.requested_metrics)}|{plan.push_interval_ms}|{instance_id}"
        crc = zlib.crc32(text.encode())
        return crc - (1 << 32) if crc >= 1 << 31 else crc

    def get_subscription(self, instance_id: uuid.UUID | None, client_id: str | None,
                         plan: Callable[[uuid.UUID], Plan] | None = None) -> Subscription:
        """GetTelemetrySubscriptions: ZERO_UUID (None as kafka-python decodes it) gets a
        new instance id.  ``plan(instance_id)``: the instance's plan now (None: the
        broker setting's)."""
        now = self._now_ms()
        if instance_id is None or instance_id == ZERO_UUID:
            instance_id = uuid.uuid4()
        instance = self._instance(instance_id, client_id, now, plan)
        interval_ms = instance.plan.push_interval_ms
        last = max(instance.last_get_ms or 0.0, instance.last_push_ms or 0.0)
        waited = instance.last_get_ms is None and instance.last_push_ms is None
        if not (waited or now - last >= interval_ms or instance.last_error in (
                ErrorCode.UNKNOWN_SUBSCRIPTION_ID, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)):
            return Subscription(ErrorCode.THROTTLING_QUOTA_EXCEEDED, instance_id)
        instance.last_get_ms = now
        instance.last_error = ErrorCode.NONE
        return Subscription(ErrorCode.NONE, instance_id, instance.subscription_id,
                            interval_ms, instance.plan.requested_metrics)

    def push(self, instance_id: uuid.UUID | None, client_id: str | None, subscription_id: int,
             terminating: bool, compression: int, payload: bytes,
             plan: Callable[[uuid.UUID], Plan] | None = None) -> tuple[ErrorCode, str]:
        """PushTelemetry's error code and, for the log, why (``plan`` as for
        get_subscription: a changed plan makes the old subscription id unknown)."""
        if instance_id is None or instance_id == ZERO_UUID:
            return ErrorCode.INVALID_REQUEST, "the zero client instance id"
        now = self._now_ms()
        instance = self._instance(instance_id, client_id, now, plan)
        error, why = self._refusal(instance, subscription_id, terminating, compression,
                                   len(payload), now)
        instance.last_error = error
        if error != ErrorCode.NONE:
            return error, why
        instance.last_push_ms = now
        instance.terminating = terminating
        try:
            raw = payload if compression == NO_COMPRESSION else decompress(
                compression, payload, self._max_decompressed)
            instance.samples = _bounded(decode(bytes(raw)))
        except (RecordError, OtlpError) as exc:
            instance.last_error = ErrorCode.INVALID_RECORD
            return ErrorCode.INVALID_RECORD, str(exc)
        return ErrorCode.NONE, ""

    def _refusal(self, instance: ClientInstance, subscription_id: int, terminating: bool,
                 compression: int, size: int, now: float) -> tuple[ErrorCode, str]:
        if instance.terminating:
            return ErrorCode.INVALID_REQUEST, "the client instance already terminated"
        if subscription_id != instance.subscription_id:
            return ErrorCode.UNKNOWN_SUBSCRIPTION_ID, f"subscription id {subscription_id}"
        if compression != NO_COMPRESSION and compression not in self.compression_types:
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"compression type {compression}"
        after_get = instance.last_get_ms is not None and (
            instance.last_push_ms is None or instance.last_get_ms > instance.last_push_ms)
        on_time = (instance.last_push_ms is None
                   or now - instance.last_push_ms >= instance.plan.push_interval_ms)
        if not (terminating or after_get or on_time):
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED, "pushed before the push interval"
        if size > self.max_bytes:
            return ErrorCode.TELEMETRY_TOO_LARGE, f"{size} bytes > telemetry.max.bytes"
        return ErrorCode.NONE, ""

    def _instance(self, instance_id: uuid.UUID, client_id: str | None, now: float,
                  plan: Callable[[uuid.UUID], Plan] | None) -> ClientInstance:
        """The instance, made or updated: its client id, and its plan (and subscription
        id) when the plan changed."""
        self._expire(now)
        current = plan(instance_id) if plan is not None else self.default_plan
        instance = self._instances.get(instance_id)
        if instance is None:
            instance = ClientInstance(instance_id, client_id or "", current,
                                      self.subscription_id(instance_id, current))
            self._instances[instance_id] = instance
            while len(self._instances) > MAX_INSTANCES:
                self._instances.popitem(last=False)
        elif instance.plan != current:
            instance.plan = current
            instance.subscription_id = self.subscription_id(instance_id, current)
        self._instances.move_to_end(instance_id)
        instance.last_seen_ms = now
        if client_id:
            instance.client_id = client_id
        return instance

    def _expire(self, now: float) -> None:
        """Forgets the instances unseen for EXPIRY_INTERVALS of their push intervals,
        least recently seen first (stopping at the first one still live: one with a
        shorter interval behind it waits, within MAX_INSTANCES)."""
        while self._instances:
            oldest = next(iter(self._instances.values()))
            if oldest.last_seen_ms >= now - EXPIRY_INTERVALS * oldest.plan.push_interval_ms:
                return
            self._instances.popitem(last=False)

    def _now_ms(self) -> float:
        return self._clock() * 1000.0

    def collect(self) -> Iterator[Metric]:
        """One family per metric name over every instance's live samples (the first kind
        seen for a name wins)."""
        now = self._now_ms()
        self._expire(now)
        families: dict[str, tuple[str, list[tuple[dict[str, str], Sample]]]] = {}
        for instance in self._instances.values():
            horizon = now - EXPIRY_INTERVALS * instance.plan.push_interval_ms
            if instance.last_push_ms is None or instance.last_push_ms < horizon:
                continue
            own = {"client_instance_id": str(instance.instance_id),
                   "client_id": instance.client_id}
            for sample in instance.samples:
                kind, points = families.setdefault(sample.name, (sample.kind, []))
                if kind == sample.kind:
                    labels = {k: v for k, v in sample.labels if k not in own}
                    labels.update(own)
                    points.append((labels, sample))
        for name, (kind, points) in families.items():
            yield _family(name, kind, points)

    def describe(self) -> Iterator[Metric]:
        return iter(())


FAMILIES = {COUNTER: CounterMetricFamily, HISTOGRAM: HistogramMetricFamily,
            GAUGE_HISTOGRAM: GaugeHistogramMetricFamily, SUMMARY: SummaryMetricFamily}
# A histogram's or summary's count and sum: Prometheus's sample names for each kind.
TOTALS = {HISTOGRAM: ("_count", "_sum"), GAUGE_HISTOGRAM: ("_gcount", "_gsum"),
          SUMMARY: ("_count", "_sum")}


def _bounded(samples: list[Sample]) -> list[Sample]:
    """The first samples that fit in MAX_SAMPLES_PER_INSTANCE exposition lines."""
    kept, lines = [], 0
    for sample in samples:
        lines += 1 if sample.kind not in TOTALS else len(sample.buckets) + 2
        if lines > MAX_SAMPLES_PER_INSTANCE:
            break
        kept.append(sample)
    return kept


def _family(name: str, kind: str, points: list[tuple[dict[str, str], Sample]]) -> Metric:
    """A family whose samples may have different label names (one per data point)."""
    family = FAMILIES.get(kind, GaugeMetricFamily)(name, f"client metric {name} (KIP-714)")
    for labels, sample in points:
        if kind not in TOTALS:
            suffix = "_total" if kind == COUNTER else ""
            family.add_sample(family.name + suffix, labels, sample.value)
            continue
        bucket_name, key = (family.name, "quantile") if kind == SUMMARY else \
            (family.name + "_bucket", "le")
        for bound, value in sample.buckets:
            family.add_sample(bucket_name, {**labels, key: bound}, value)
        count_suffix, sum_suffix = TOTALS[kind]
        family.add_sample(family.name + count_suffix, labels, sample.count)
        family.add_sample(family.name + sum_suffix, labels, sample.value)
    return family

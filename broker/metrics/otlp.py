"""OpenTelemetry metrics (OTLP ``MetricsData`` protobuf, KIP-714's PushTelemetry payload)
as Prometheus samples (pure).

The protobuf classes are ``opentelemetry-proto``'s.  Each gauge and sum data point becomes
one ``Sample``: its name is the OTLP metric name with every character Prometheus refuses
turned into ``_`` (``org.apache.kafka.producer.record.queue.time.avg`` becomes
``org_apache_kafka_producer_record_queue_time_avg``), its labels the resource's attributes
and then the data point's (a data point's attribute wins over a resource's of the same
name).  A sum that is monotonic and cumulative is a counter, every other sum and every
gauge a gauge.  A histogram data point becomes one Prometheus histogram sample set:
cumulative bucket counts by upper bound (``le``, the last ``+Inf``), its count and sum
(a cumulative histogram is a ``histogram``, a delta one a ``gaugehistogram``: its
counts are of the last interval only); a summary data point its quantiles, count and
sum.  A histogram point whose bucket counts do not fit its bounds, or with more than
``MAX_BUCKETS`` buckets, is skipped; exponential histograms are skipped (Kafka's
clients push none).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from google.protobuf.message import DecodeError
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality, MetricsData
from prometheus_client.utils import floatToGoString

GAUGE = "gauge"
COUNTER = "counter"
HISTOGRAM = "histogram"
GAUGE_HISTOGRAM = "gaugehistogram"
SUMMARY = "summary"
MAX_BUCKETS = 256
_NOT_NAME = re.compile(r"[^a-zA-Z0-9_:]")
_NOT_LABEL = re.compile(r"[^a-zA-Z0-9_]")


class OtlpError(ValueError):
    """A payload that is not an OTLP ``MetricsData`` protobuf."""


@dataclass(frozen=True)
class Sample:
    """One data point: ``kind`` (GAUGE, COUNTER, HISTOGRAM, GAUGE_HISTOGRAM, SUMMARY), a
    valid Prometheus ``name`` and labels.  ``value`` is a gauge's or counter's value, a
    histogram's or summary's sum; ``count`` their count; ``buckets`` a histogram's
    (``le``, cumulative count) pairs, the last ``+Inf``, or a summary's (quantile,
    value) pairs, as exposition strings and numbers."""

    kind: str
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float
    count: float = 0.0
    buckets: tuple[tuple[str, float], ...] = ()


def metric_name(name: str) -> str:
    """``name`` as a valid Prometheus metric name."""
    cleaned = _NOT_NAME.sub("_", name) or "_"
    return "_" + cleaned if cleaned[0].isdigit() else cleaned


def label_name(name: str) -> str:
    """``name`` as a valid Prometheus label name (never ``__``-prefixed: reserved)."""
    cleaned = _NOT_LABEL.sub("_", name).lstrip("_") or "attribute"
    return "_" + cleaned if cleaned[0].isdigit() else cleaned


def decode(payload: bytes) -> list[Sample]:
    """The gauge and sum data points of an uncompressed ``MetricsData``; OtlpError if
    ``payload`` does not parse."""
    data = MetricsData()
    try:
        data.ParseFromString(payload)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise OtlpError(f"not an OTLP MetricsData: {exc}") from exc
    samples: list[Sample] = []
    for resource_metrics in data.resource_metrics:
        resource = _attributes(resource_metrics.resource.attributes)
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                samples.extend(_samples(metric, resource))
    return samples


def _samples(metric, resource: dict[str, str]) -> list[Sample]:
    which = metric.WhichOneof("data")
    name = metric_name(metric.name)
    if which == "histogram":
        kind = HISTOGRAM if _cumulative(metric.histogram) else GAUGE_HISTOGRAM
        return [sample for point in metric.histogram.data_points
                if (sample := _histogram(kind, name, _labels(resource, point), point))]
    if which == "summary":
        return [Sample(SUMMARY, name, _labels(resource, point), float(point.sum),
                       float(point.count), tuple((_number(q.quantile), float(q.value))
                                                 for q in point.quantile_values))
                for point in metric.summary.data_points]
    if which == "gauge":
        kind, points = GAUGE, metric.gauge.data_points
    elif which == "sum":
        kind = COUNTER if metric.sum.is_monotonic and _cumulative(metric.sum) else GAUGE
        points = metric.sum.data_points
    else:
        return []
    samples = []
    for point in points:
        value = point.as_double if point.WhichOneof("value") == "as_double" else point.as_int
        samples.append(Sample(kind, name, _labels(resource, point), float(value)))
    return samples


def _cumulative(aggregate) -> bool:
    return aggregate.aggregation_temporality == \
        AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE


def _labels(resource: dict[str, str], point) -> tuple[tuple[str, str], ...]:
    """The resource's attributes and then the data point's (which win)."""
    labels = dict(resource)
    labels.update(_attributes(point.attributes))
    return tuple(sorted(labels.items()))


def _histogram(kind: str, name: str, labels, point) -> Sample | None:
    """OTLP's per-bucket counts (bucket i up to ``explicit_bounds[i]``, the last one
    unbounded) as Prometheus's cumulative ``le`` buckets; None when they do not fit."""
    bounds, counts = list(point.explicit_bounds), list(point.bucket_counts)
    if len(counts) > MAX_BUCKETS or (counts and len(counts) != len(bounds) + 1):
        return None
    buckets, total = [], 0.0
    for bound, count in zip([*bounds, float("inf")], counts):
        total += count
        buckets.append((_number(bound), total))
    if not buckets:
        buckets = [("+Inf", float(point.count))]
    return Sample(kind, name, labels, float(point.sum), float(point.count), tuple(buckets))


def _number(value: float) -> str:
    """A bound or quantile as Prometheus writes it: ``10.0``, ``0.99``, ``+Inf``."""
    return floatToGoString(value)


def _attributes(attributes) -> dict[str, str]:
    """OTLP key-values as label names and string values (lists and maps skipped)."""
    labels = {}
    for attribute in attributes:
        which = attribute.value.WhichOneof("value")
        if which in ("string_value", "bool_value", "int_value", "double_value"):
            labels[label_name(attribute.key)] = str(getattr(attribute.value, which))
    return labels

"""OpenTelemetry metrics (OTLP ``MetricsData`` protobuf, KIP-714's PushTelemetry payload)
as Prometheus samples (pure).

The protobuf classes are ``opentelemetry-proto``'s.  Each gauge and sum data point becomes
one ``Sample``: its name is the OTLP metric name with every character Prometheus refuses
turned into ``_`` (``org.apache.kafka.producer.record.queue.time.avg`` becomes
``org_apache_kafka_producer_record_queue_time_avg``), its labels the resource's attributes
and then the data point's (a data point's attribute wins over a resource's of the same
name).  A sum that is monotonic and cumulative is a counter, every other sum and every
gauge a gauge.  Histograms, exponential histograms and summaries are skipped: clients of
Kafka 4.x push none of the metrics KIP-714 names as such.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from google.protobuf.message import DecodeError
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality, MetricsData

GAUGE = "gauge"
COUNTER = "counter"
_NOT_NAME = re.compile(r"[^a-zA-Z0-9_:]")
_NOT_LABEL = re.compile(r"[^a-zA-Z0-9_]")


class OtlpError(ValueError):
    """A payload that is not an OTLP ``MetricsData`` protobuf."""


@dataclass(frozen=True)
class Sample:
    """One data point: ``kind`` GAUGE or COUNTER, a valid Prometheus ``name`` and labels."""

    kind: str
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float


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
    if which == "gauge":
        kind, points = GAUGE, metric.gauge.data_points
    elif which == "sum":
        cumulative = (metric.sum.aggregation_temporality
                      == AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE)
        kind = COUNTER if metric.sum.is_monotonic and cumulative else GAUGE
        points = metric.sum.data_points
    else:
        return []
    name = metric_name(metric.name)
    samples = []
    for point in points:
        labels = dict(resource)
        labels.update(_attributes(point.attributes))
        value = point.as_double if point.WhichOneof("value") == "as_double" else point.as_int
        samples.append(Sample(kind, name, tuple(sorted(labels.items())), float(value)))
    return samples


def _attributes(attributes) -> dict[str, str]:
    """OTLP key-values as label names and string values (lists and maps skipped)."""
    labels = {}
    for attribute in attributes:
        which = attribute.value.WhichOneof("value")
        if which in ("string_value", "bool_value", "int_value", "double_value"):
            labels[label_name(attribute.key)] = str(getattr(attribute.value, which))
    return labels

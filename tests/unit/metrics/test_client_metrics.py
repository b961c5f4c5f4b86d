"""ClientTelemetry (broker/metrics/client_metrics.py) with a hand-driven clock: the
subscription forms Kafka sends, stable subscription ids, the rate rules of Kafka's
ClientMetricsManager, and expiry of pushed metrics; OTLP sums as counters."""
from __future__ import annotations

import uuid

from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AggregationTemporality,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)

from broker.metrics.client_metrics import EXPIRY_INTERVALS, ClientTelemetry
from protocol.errors import ErrorCode

INTERVAL_MS = 1000
ZERO = uuid.UUID(int=0)


class Clock:
    def __init__(self):
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


def telemetry(prefixes: str = "org.apache.kafka.", clock=None) -> ClientTelemetry:
    return ClientTelemetry(prefixes, INTERVAL_MS, 4096, clock or Clock())


def counter_payload(value: int) -> bytes:
    metric = Metric(name="org.apache.kafka.producer.connection.creation.total", sum=Sum(
        is_monotonic=True,
        aggregation_temporality=AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE,
        data_points=[NumberDataPoint(as_int=value)]))
    return MetricsData(resource_metrics=[ResourceMetrics(scope_metrics=[
        ScopeMetrics(metrics=[metric])])]).SerializeToString()


def test_subscription_forms_empty_all_and_prefixes():
    assert telemetry("").get_subscription(ZERO, "c").requested_metrics == ()
    assert telemetry(" * ").get_subscription(ZERO, "c").requested_metrics == ("",)
    assert telemetry("a., b.").get_subscription(ZERO, "c").requested_metrics == ("a.", "b.")


def test_subscription_id_is_the_same_on_every_broker_and_changes_with_the_settings():
    instance = uuid.uuid4()
    one, other = telemetry(), telemetry()
    assert one.subscription_id(instance) == other.subscription_id(instance)
    assert one.subscription_id(instance) != telemetry("x.").subscription_id(instance)
    # So a push to a broker that never saw the instance is accepted.
    got = one.get_subscription(instance, "c")
    assert other.push(instance, "c", got.subscription_id, False, 0, b"")[0] == ErrorCode.NONE


def test_rate_rules():
    clock = Clock()
    t = telemetry(clock=clock)
    got = t.get_subscription(None, "c")
    instance = got.instance_id
    assert instance not in (None, ZERO)
    assert t.get_subscription(instance, "c").error == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert t.push(instance, "c", got.subscription_id, False, 0, b"")[0] == ErrorCode.NONE
    assert t.push(instance, "c", got.subscription_id, False, 0, b"")[0] == \
        ErrorCode.THROTTLING_QUOTA_EXCEEDED
    clock.now_s += INTERVAL_MS / 1000
    assert t.push(instance, "c", got.subscription_id, False, 0, b"")[0] == ErrorCode.NONE
    # A push refused for its subscription id lets the client ask again at once.
    assert t.push(instance, "c", got.subscription_id + 1, False, 0, b"")[0] == \
        ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    assert t.get_subscription(instance, "c").error == ErrorCode.NONE


def test_cumulative_monotonic_sums_are_counters_and_expire_after_a_few_intervals():
    clock = Clock()
    t = telemetry(clock=clock)
    got = t.get_subscription(ZERO, "producer-1")
    assert t.push(got.instance_id, "producer-1", got.subscription_id, False, 0,
                  counter_payload(3))[0] == ErrorCode.NONE
    [family] = list(t.collect())
    assert family.type == "counter"
    [sample] = family.samples
    assert sample.name == "org_apache_kafka_producer_connection_creation_total"
    assert sample.labels == {"client_instance_id": str(got.instance_id),
                             "client_id": "producer-1"}
    assert sample.value == 3
    clock.now_s += EXPIRY_INTERVALS * INTERVAL_MS / 1000 + 1
    assert list(t.collect()) == []

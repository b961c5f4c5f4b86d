"""KIP-714 client telemetry against one broker with a subscription and a short push
interval: a confluent-kafka producer (librdkafka pushes when offered a subscription)
gets its metrics onto the broker's /metrics with its client id, and raw
GetTelemetrySubscriptions / PushTelemetry requests get Kafka's answers and error codes.
Histograms and summaries (librdkafka pushes none; a hand-built OTLP payload through the
real PushTelemetry API) appear as Prometheus histograms (cumulative buckets, ``_count``,
``_sum``; a delta histogram as a gauge histogram, ``_gcount`` and ``_gsum``) and
summaries with the client labels.
"""
from __future__ import annotations

import gzip
import time
import urllib.request
import uuid

import pytest
from confluent_kafka import Producer
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AggregationTemporality,
    Gauge,
    Histogram,
    HistogramDataPoint,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Summary,
    SummaryDataPoint,
)

from broker.testing import BrokerProcess, KafkaConnection, free_port
from protocol.errors import ErrorCode
from protocol.telemetry_messages import GetTelemetrySubscriptionsRequest, PushTelemetryRequest

WAIT_S = 30.0
PUSH_INTERVAL_MS = 1000
MAX_BYTES = 65_536
PREFIXES = "org.apache.kafka.producer.,raftwood.test."
GZIP = 1


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    home = tmp_path_factory.mktemp("telemetry")
    metrics_port = free_port()
    broker = BrokerProcess(home / "data", log_path=home / "broker.log", extra_settings={
        "metrics.port": metrics_port,
        "raftwood.client.metrics.subscription": PREFIXES,
        "raftwood.client.metrics.push.interval.ms": PUSH_INTERVAL_MS,
        "telemetry.max.bytes": MAX_BYTES})
    broker.start(timeout_s=60)
    broker.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
    yield broker
    assert broker.stop() == 0, broker.log_tail()


def scrape(broker) -> str:
    with urllib.request.urlopen(broker.metrics_url, timeout=WAIT_S) as response:
        return response.read().decode()


def wait_for_scrape(broker, accept) -> str:
    """The first scrape ``accept`` takes (bounded); the last one otherwise."""
    deadline = time.monotonic() + WAIT_S
    text = scrape(broker)
    while not accept(text) and time.monotonic() < deadline:
        time.sleep(0.3)
        text = scrape(broker)
    return text


ZERO_UUID = uuid.UUID(int=0)


def subscribe(conn, instance_id: uuid.UUID = ZERO_UUID):
    return conn.request(GetTelemetrySubscriptionsRequest[0](client_instance_id=instance_id))


def push(conn, got, payload: bytes, *, compression: int = GZIP, terminating: bool = False,
         subscription_id: int | None = None, instance_id: uuid.UUID | None = None) -> int:
    response = conn.request(PushTelemetryRequest[0](
        client_instance_id=got.client_instance_id if instance_id is None else instance_id,
        subscription_id=got.subscription_id if subscription_id is None else subscription_id,
        terminating=terminating, compression_type=compression, metrics=payload))
    return response.error_code


def otlp_gauge(name: str, value: float, **attributes: str) -> bytes:
    point = NumberDataPoint(as_double=value, time_unix_nano=time.time_ns(), attributes=[
        KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in attributes.items()])
    metric = Metric(name=name, gauge=Gauge(data_points=[point]))
    return MetricsData(resource_metrics=[ResourceMetrics(
        scope_metrics=[ScopeMetrics(metrics=[metric])])]).SerializeToString()


def otlp_payload(*metrics: Metric) -> bytes:
    return MetricsData(resource_metrics=[ResourceMetrics(
        scope_metrics=[ScopeMetrics(metrics=list(metrics))])]).SerializeToString()


def otlp_histogram(name: str, temporality: int) -> Metric:
    """Buckets (-inf, 10], (10, 100], (100, +inf) holding 3, 2 and 1 values, sum 420.5."""
    point = HistogramDataPoint(
        time_unix_nano=time.time_ns(), count=6, sum=420.5, bucket_counts=[3, 2, 1],
        explicit_bounds=[10.0, 100.0],
        attributes=[KeyValue(key="node_id", value=AnyValue(string_value="1"))])
    return Metric(name=name, histogram=Histogram(data_points=[point],
                                                 aggregation_temporality=temporality))


def test_pushed_histograms_and_summaries_are_exposed_with_the_client_labels(broker):
    summary = Metric(name="raftwood.test.latency.summary", summary=Summary(data_points=[
        SummaryDataPoint(time_unix_nano=time.time_ns(), count=6, sum=420.5, quantile_values=[
            SummaryDataPoint.ValueAtQuantile(quantile=0.5, value=12.0),
            SummaryDataPoint.ValueAtQuantile(quantile=0.99, value=80.0)])]))
    payload = otlp_payload(
        otlp_histogram("raftwood.test.latency",
                       AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE),
        otlp_histogram("raftwood.test.window.latency",
                       AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA), summary)
    with KafkaConnection(broker.bootstrap, client_id="hist-pusher") as conn:
        got = subscribe(conn)
        assert push(conn, got, gzip.compress(payload)) == ErrorCode.NONE
    instance = str(got.client_instance_id)
    text = wait_for_scrape(broker, lambda t: instance in t)
    own = f'client_id="hist-pusher",client_instance_id="{instance}"'
    lines = set(text.splitlines())
    for want in (
            "# TYPE raftwood_test_latency histogram",
            f'raftwood_test_latency_bucket{{{own},le="10.0",node_id="1"}} 3.0',
            f'raftwood_test_latency_bucket{{{own},le="100.0",node_id="1"}} 5.0',
            f'raftwood_test_latency_bucket{{{own},le="+Inf",node_id="1"}} 6.0',
            f'raftwood_test_latency_count{{{own},node_id="1"}} 6.0',
            f'raftwood_test_latency_sum{{{own},node_id="1"}} 420.5',
            # A gauge histogram in the classic text format: buckets, _gcount, _gsum.
            f'raftwood_test_window_latency_bucket{{{own},le="+Inf",node_id="1"}} 6.0',
            f'raftwood_test_window_latency_gcount{{{own},node_id="1"}} 6.0',
            f'raftwood_test_window_latency_gsum{{{own},node_id="1"}} 420.5',
            "# TYPE raftwood_test_latency_summary summary",
            f'raftwood_test_latency_summary{{{own},quantile="0.5"}} 12.0',
            f'raftwood_test_latency_summary{{{own},quantile="0.99"}} 80.0',
            f'raftwood_test_latency_summary_count{{{own}}} 6.0',
            f'raftwood_test_latency_summary_sum{{{own}}} 420.5'):
        assert want in lines, (want, [line for line in lines if "latency" in line])


def test_a_librdkafka_producer_s_metrics_appear_with_its_client_id(broker):
    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "telemetry-producer",
                         "enable.metrics.push": True})
    try:
        for i in range(10):
            producer.produce("telemetry-topic", value=b"v%d" % i)
        assert producer.flush(WAIT_S) == 0
        deadline = time.monotonic() + WAIT_S
        text = ""
        while time.monotonic() < deadline:
            producer.poll(0.2)
            text = scrape(broker)
            if any(line.startswith("org_apache_kafka_producer_")
                   and 'client_id="telemetry-producer"' in line for line in text.splitlines()):
                break
    finally:
        producer.flush(WAIT_S)
    lines = [line for line in text.splitlines() if line.startswith("org_apache_kafka_producer_")]
    assert any('client_id="telemetry-producer"' in line and "client_instance_id=" in line
               for line in lines), text[-3000:]
    # Only the subscribed prefixes were requested, so only they were pushed.
    assert not any(line.startswith("org_apache_kafka_consumer_") for line in text.splitlines())


def test_get_telemetry_subscriptions_assigns_an_instance_and_offers_the_subscription(broker):
    with KafkaConnection(broker.bootstrap) as conn:
        got = subscribe(conn)
        assert got.error_code == ErrorCode.NONE
        assert got.client_instance_id not in (None, ZERO_UUID)
        assert got.requested_metrics == PREFIXES.split(",")
        assert got.push_interval_ms == PUSH_INTERVAL_MS
        assert got.telemetry_max_bytes == MAX_BYTES
        assert GZIP in got.accepted_compression_types
        # An instance asking again within the push interval is throttled, unless the
        # request came late (a loaded machine): asked again at once, bounded.
        for _ in range(5):
            start = time.monotonic()
            again = subscribe(conn, got.client_instance_id)
            if time.monotonic() - start < PUSH_INTERVAL_MS / 1000 / 2:
                break
        assert again.error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        assert subscribe(conn).client_instance_id != got.client_instance_id


def test_pushed_gauge_is_exposed_then_throttled_terminated_and_expired(broker):
    with KafkaConnection(broker.bootstrap, client_id="raw-pusher") as conn:
        got = subscribe(conn)
        payload = gzip.compress(otlp_gauge("raftwood.test.queue.depth", 42.0, topic="t1"))
        assert push(conn, got, payload) == ErrorCode.NONE
        instance = str(got.client_instance_id)
        text = wait_for_scrape(broker, lambda t: instance in t)
        assert (f'raftwood_test_queue_depth{{client_id="raw-pusher",'
                f'client_instance_id="{instance}",topic="t1"}} 42.0') in text
        # A second push within the interval: throttled.  One accepted instead came a
        # push interval or more after the one before (a slow machine, or the scrape
        # wait above): the next one, sent at once, is within the interval of it.
        for _ in range(5):
            error = push(conn, got, payload)
            if error != ErrorCode.NONE:
                break
        assert error == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        # Terminating pushes are never throttled; nothing is accepted after one.
        last = gzip.compress(otlp_gauge("raftwood.test.queue.depth", 7.0, topic="t1"))
        assert push(conn, got, last, terminating=True) == ErrorCode.NONE
        assert push(conn, got, last) == ErrorCode.INVALID_REQUEST
    # Gone from /metrics a few push intervals after its last push.
    text = wait_for_scrape(broker, lambda t: instance not in t)
    assert instance not in text


def test_push_errors(broker):
    with KafkaConnection(broker.bootstrap) as conn:
        good = gzip.compress(otlp_gauge("raftwood.test.x", 1.0))
        got = subscribe(conn)
        assert push(conn, got, good, subscription_id=got.subscription_id + 1) == \
            ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        assert push(conn, got, good, compression=9) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        assert push(conn, got, good, instance_id=ZERO_UUID) == ErrorCode.INVALID_REQUEST
        assert push(conn, subscribe(conn), b"\x00" * (MAX_BYTES + 1), compression=0) == \
            ErrorCode.TELEMETRY_TOO_LARGE
        assert push(conn, subscribe(conn), b"not gzip at all") == ErrorCode.INVALID_RECORD
        assert push(conn, subscribe(conn), gzip.compress(b"\xff\xff\xff garbage")) == \
            ErrorCode.INVALID_RECORD
        # The broker goes on serving.
        assert conn.api_versions().error_code == 0
    assert "Traceback" not in broker.log_tail()

"""KIP-714 client-metrics resources (ConfigResource type CLIENT_METRICS, 16) on a real
broker process.

Invariants: a subscription set with IncrementalAlterConfigs (``metrics``, ``interval.ms``,
``match``) is what DescribeConfigs shows (source CLIENT_METRICS_CONFIG, the keys set
only) and what ListConfigResources lists (v0: client-metrics only; v1: the types asked
for); a bad value or match is INVALID_CONFIG and changes nothing.  GetTelemetrySubscriptions
answers a client the subscriptions whose ``match`` takes it (client id, software name
from ApiVersions v3, address), with the smallest interval, and nothing to one no
subscription matches; a changed subscription makes a push under the old subscription id
UNKNOWN_SUBSCRIPTION_ID.  A librdkafka producer the subscription matches pushes its
metrics onto /metrics.  ``raftwood configs --entity-type client-metrics`` sets and
describes them.  Every wait is bounded.
"""
from __future__ import annotations

import time
import urllib.request
import uuid

import pytest
from confluent_kafka import Producer
from kafka.protocol.admin import (
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
    ListConfigResourcesRequest,
)
from kafka.protocol.metadata import ApiVersionsRequest

from broker.cli.main import main as cli_main
from broker.testing import BrokerProcess, KafkaConnection, free_port
from protocol.errors import ErrorCode
from protocol.telemetry_messages import GetTelemetrySubscriptionsRequest, PushTelemetryRequest

WAIT_S = 30.0
CLIENT_METRICS, GROUP = 16, 32
CLIENT_METRICS_CONFIG = 7
SET, DELETE = 0, 1
ZERO_UUID = uuid.UUID(int=0)
BROKER_INTERVAL_MS = 60_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    home = tmp_path_factory.mktemp("client-metrics-resources")
    metrics_port = free_port()
    broker = BrokerProcess(home / "data", log_path=home / "broker.log", extra_settings={
        "metrics.port": metrics_port,
        "raftwood.client.metrics.push.interval.ms": BROKER_INTERVAL_MS}).start()
    broker.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
    yield broker
    assert broker.stop() == 0, broker.log_tail()


def alter(conn, name: str, changes: dict, kind: int = CLIENT_METRICS) -> tuple[int, str]:
    resource_class = IncrementalAlterConfigsRequest.AlterConfigsResource
    response = conn.request(IncrementalAlterConfigsRequest[1](validate_only=False, resources=[
        resource_class(resource_type=kind, resource_name=name, configs=[
            resource_class.AlterableConfig(name=k, config_operation=DELETE if v is None
                                           else SET, value=v) for k, v in changes.items()])]))
    [answer] = response.responses
    return answer.error_code, answer.error_message


def describe(conn, name: str) -> tuple[int, dict]:
    resource = DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=CLIENT_METRICS, resource_name=name, configuration_keys=None)
    response = conn.request(DescribeConfigsRequest[4](
        resources=[resource], include_synonyms=False, include_documentation=False))
    [result] = response.results
    return result.error_code, {c.name: (c.value, c.config_source) for c in result.configs}


def wait_described(conn, name: str, want: dict) -> dict:
    """The resource as described once it shows ``want`` ({key: value}); bounded (the
    change is applied from the metadata log)."""
    deadline = time.monotonic() + WAIT_S
    got: dict = {}
    while time.monotonic() < deadline:
        code, got = describe(conn, name)
        assert code == ErrorCode.NONE
        if {k: v for k, (v, _) in got.items()} == want:
            return got
        time.sleep(0.1)
    raise AssertionError(f"{name}: described {got}, wanted {want}")


def subscribe(conn, instance_id=ZERO_UUID):
    return conn.request(GetTelemetrySubscriptionsRequest[0](client_instance_id=instance_id))


def test_a_subscription_is_stored_described_and_listed(broker):
    name = f"sub-{uuid.uuid4().hex[:6]}"
    with KafkaConnection(broker.bootstrap) as conn:
        assert alter(conn, name, {"metrics": "org.apache.kafka.producer.",
                                  "interval.ms": "5000",
                                  "match": "client_id=app-.*"}) == (ErrorCode.NONE, None)
        got = wait_described(conn, name, {"metrics": "org.apache.kafka.producer.",
                                          "interval.ms": "5000", "match": "client_id=app-.*"})
        assert {source for _, source in got.values()} == {CLIENT_METRICS_CONFIG}
        v0 = conn.request(ListConfigResourcesRequest[0]())
        assert v0.error_code == ErrorCode.NONE
        assert name in [r.resource_name for r in v0.config_resources]
        v1 = conn.request(ListConfigResourcesRequest[1](resource_types=[CLIENT_METRICS, GROUP]))
        assert (name, CLIENT_METRICS) in [(r.resource_name, r.resource_type)
                                          for r in v1.config_resources]
        every = conn.request(ListConfigResourcesRequest[1](resource_types=[]))
        assert (name, CLIENT_METRICS) in [(r.resource_name, r.resource_type)
                                          for r in every.config_resources]
        assert conn.request(ListConfigResourcesRequest[1](resource_types=[99])).error_code \
            == ErrorCode.UNSUPPORTED_VERSION
        assert alter(conn, name, {"match": None}) == (ErrorCode.NONE, None)
        wait_described(conn, name, {"metrics": "org.apache.kafka.producer.",
                                    "interval.ms": "5000"})
        for key in ("metrics", "interval.ms"):
            assert alter(conn, name, {key: None})[0] == ErrorCode.NONE
        wait_described(conn, name, {})
        listed = conn.request(ListConfigResourcesRequest[0]()).config_resources
        assert name not in [r.resource_name for r in listed]


@pytest.mark.parametrize("changes", [
    {"interval.ms": "50"}, {"interval.ms": "soon"}, {"match": "client_colour=red"},
    {"match": "client_id=["}, {"metricz": "x"}])
def test_a_bad_subscription_is_invalid_config_and_changes_nothing(broker, changes):
    name = f"bad-{uuid.uuid4().hex[:6]}"
    with KafkaConnection(broker.bootstrap) as conn:
        code, message = alter(conn, name, {"metrics": "x.", **changes})
        assert code == ErrorCode.INVALID_CONFIG and message
        assert describe(conn, name) == (ErrorCode.NONE, {})


def test_get_telemetry_subscriptions_answers_the_matching_subscriptions(broker):
    tag = uuid.uuid4().hex[:6]
    with KafkaConnection(broker.bootstrap) as admin:
        assert alter(admin, f"{tag}-a", {"metrics": "org.apache.kafka.producer.",
                                         "interval.ms": "7000",
                                         "match": f"client_id=app-{tag}-.*"})[0] == 0
        assert alter(admin, f"{tag}-b", {"metrics": "org.apache.kafka.consumer.",
                                         "interval.ms": "9000",
                                         "match": f"client_software_name=raftwood-{tag},"
                                                  f"client_source_address=127\\.0\\.0\\.1"
                                         })[0] == 0
        wait_described(admin, f"{tag}-b", {"metrics": "org.apache.kafka.consumer.",
                                           "interval.ms": "9000",
                                           "match": f"client_software_name=raftwood-{tag},"
                                                    f"client_source_address=127\\.0\\.0\\.1"})
    with KafkaConnection(broker.bootstrap, client_id=f"app-{tag}-1") as conn:
        conn.request(ApiVersionsRequest[3](client_software_name=f"raftwood-{tag}",
                                           client_software_version="1.0"))
        both = subscribe(conn)
        assert both.error_code == ErrorCode.NONE
        assert both.requested_metrics == ["org.apache.kafka.consumer.",
                                          "org.apache.kafka.producer."]
        assert both.push_interval_ms == 7000
    with KafkaConnection(broker.bootstrap, client_id=f"app-{tag}-2") as conn:
        one = subscribe(conn)
        assert (one.requested_metrics, one.push_interval_ms) == \
            (["org.apache.kafka.producer."], 7000)
        # The subscription changes: the old id is unknown at the next push.
        with KafkaConnection(broker.bootstrap) as admin:
            assert alter(admin, f"{tag}-a", {"metrics": "org.apache.kafka.producer.,x."})[0] \
                == 0
            wait_described(admin, f"{tag}-a", {"metrics": "org.apache.kafka.producer.,x.",
                                               "interval.ms": "7000",
                                               "match": f"client_id=app-{tag}-.*"})
        pushed = conn.request(PushTelemetryRequest[0](
            client_instance_id=one.client_instance_id, subscription_id=one.subscription_id,
            terminating=False, compression_type=0, metrics=b""))
        assert pushed.error_code == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    with KafkaConnection(broker.bootstrap, client_id=f"other-{tag}") as conn:
        none = subscribe(conn)
        assert (none.error_code, none.requested_metrics, none.push_interval_ms) == \
            (ErrorCode.NONE, [], BROKER_INTERVAL_MS)


def test_a_librdkafka_producer_pushes_what_its_subscription_asks(broker):
    tag = uuid.uuid4().hex[:6]
    with KafkaConnection(broker.bootstrap) as admin:
        assert alter(admin, f"{tag}-producers", {
            "metrics": "org.apache.kafka.producer.", "interval.ms": "1000",
            "match": f"client_id=rdk-{tag},client_software_name=confluent-kafka-python"})[0] == 0
    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": f"rdk-{tag}",
                         "enable.metrics.push": True})
    text = ""
    try:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            producer.poll(0.3)
            with urllib.request.urlopen(broker.metrics_url, timeout=WAIT_S) as response:
                text = response.read().decode()
            if any(line.startswith("org_apache_kafka_producer_")
                   and f'client_id="rdk-{tag}"' in line for line in text.splitlines()):
                break
    finally:
        producer.flush(WAIT_S)
    assert any(line.startswith("org_apache_kafka_producer_") and f'client_id="rdk-{tag}"'
               in line for line in text.splitlines()), text[-3000:]


def test_raftwood_configs_sets_and_describes_client_metrics(broker, capsys):
    name = f"cli-{uuid.uuid4().hex[:6]}"
    base = ["configs", "--bootstrap-server", broker.bootstrap,
            "--entity-type", "client-metrics"]
    assert cli_main(base + ["--entity-name", name, "--alter", "--add-config",
                            "metrics=[a.,b.],interval.ms=2000,match=[client_id=x.*]"]) == 0
    assert f"client-metrics {name}" in capsys.readouterr().out
    with KafkaConnection(broker.bootstrap) as conn:
        wait_described(conn, name, {"metrics": "a.,b.", "interval.ms": "2000",
                                    "match": "client_id=x.*"})
    assert cli_main(base + ["--describe"]) == 0
    out = capsys.readouterr().out
    assert name in out and "a.,b." in out and "CLIENT_METRICS_CONFIG" in out
    assert cli_main(base + ["--entity-name", name, "--alter", "--add-config",
                            "interval.ms=1"]) != 0
    assert "INVALID_CONFIG" in capsys.readouterr().err

"""Dynamic broker configs, BROKER_LOGGER and GROUP resources on a real 3-broker cluster
(broker/dynamic_config.py, broker/api/resource_configs.py), over the wire as Kafka's
admin clients send them, and with kafka-python's admin client.

One cluster for the module; each test changes configs of its own and puts them back.
No timing is asserted: effects are waited for with bounds (a throttled replica is
checked to be behind only while the rate holds it, loosely)."""
from __future__ import annotations

import shutil
import ssl
import subprocess
import time
import uuid

import pytest
from kafka.protocol.admin import (
    AlterConfigsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest

from broker.cli.main import build_parser
from broker.testing import BrokerProcess, KafkaConnection, build_batch, free_port
from protocol.consumer_group_messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from tests.security_certs import with_listeners

TOPIC_R, BROKER_R, LOGGER_R, GROUP_R = 2, 4, 8, 32
DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT, LOGGER_SOURCE, GROUP_SOURCE = 2, 3, 4, 5, 6, 8
SET, DELETE = 0, 1
NONE, INVALID_REQUEST, INVALID_CONFIG, UNKNOWN_MEMBER_ID = 0, 42, 40, 25
REQUEST_TIMED_OUT = 7

pytestmark = pytest.mark.slow  # clusters, a TLS broker and a JVM
RETENTION_CHECK_MS = "300"


@pytest.fixture(scope="module")
def shared_cluster(module_cluster_factory):
    """The module's cluster (conftest's ``cluster`` heals it after each test)."""
    return module_cluster_factory(**{
        "log.retention.check.interval.ms": RETENTION_CHECK_MS,
        "group.consumer.min.session.timeout.ms": "1000",
        "group.consumer.heartbeat.interval.ms": "500"})


def describe(cluster, node: int, kind: int, name: str, keys=None) -> tuple[int, dict]:
    resource = DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=kind, resource_name=name, configuration_keys=keys)
    with cluster.connect(node) as conn:
        response = conn.request(DescribeConfigsRequest[4](
            resources=[resource], include_synonyms=True, include_documentation=False))
    [result] = response.results
    return result.error_code, {c.name: c for c in result.configs}


def _incremental(kind: int, name: str, changes: dict, validate_only: bool = False):
    """An IncrementalAlterConfigs request: value None is DELETE, else SET."""
    resource_class = IncrementalAlterConfigsRequest.AlterConfigsResource
    return IncrementalAlterConfigsRequest[1](validate_only=validate_only, resources=[
        resource_class(resource_type=kind, resource_name=name, configs=[
            resource_class.AlterableConfig(name=k, config_operation=DELETE if v is None
                                           else SET, value=v) for k, v in changes.items()])])


def alter(cluster, node: int, kind: int, name: str, changes: dict,
          validate_only: bool = False) -> tuple[int, str | None]:
    """IncrementalAlterConfigs sent to ``node``: (error code, message)."""
    with cluster.connect(node) as conn:
        response = conn.request(_incremental(kind, name, changes, validate_only))
    [answer] = response.responses
    return answer.error_code, answer.error_message


def alter_retrying(cluster, node: int, kind: int, name: str, changes: dict,
                   attempts: int = 20) -> tuple[int, str | None]:
    """``alter``, again while the answer is REQUEST_TIMED_OUT (the metadata quorum moving
    after a broker stopped), as admin clients retry it."""
    for _ in range(attempts):
        answer = alter(cluster, node, kind, name, changes)
        if answer[0] != REQUEST_TIMED_OUT:
            return answer
        time.sleep(0.5)
    return answer


def wait_value(cluster, key: str, value: str, nodes=(1, 2, 3), timeout_s: float = 30.0):
    """Every node in ``nodes`` describes its BROKER resource with ``key`` = ``value``."""
    def known(_statuses):
        return all(describe(cluster, n, BROKER_R, str(n), [key])[1][key].value == value
                   for n in nodes)
    cluster.wait_for(known, timeout_s, f"{key}={value} on brokers {nodes}")


def wait_group_value(cluster, group: str, key: str, value: str, source: int,
                     nodes=(1, 2, 3), timeout_s: float = 30.0):
    """Every node in ``nodes`` describes ``group``'s ``key`` as (``value``, ``source``):
    a GROUP config lives in the cluster metadata, which each broker applies when the
    quorum tells it (the broker that took the change has it when it answers)."""
    def seen(node: int) -> tuple[str, int]:
        entry = describe(cluster, node, GROUP_R, group, [key])[1][key]
        return entry.value, entry.config_source

    def known(_statuses):
        return all(seen(n) == (value, source) for n in nodes)
    cluster.wait_for(known, timeout_s, f"group {group} {key}={value} on brokers {nodes}")


def test_broker_config_sources_synonyms_and_refusals(cluster):
    key = "log.cleaner.backoff.ms"
    code, entries = describe(cluster, 1, BROKER_R, "1")
    assert code == NONE
    assert entries[key].config_source == DEFAULT and not entries[key].read_only
    assert entries["log.retention.check.interval.ms"].config_source == STATIC
    assert entries["node.id"].read_only
    try:
        assert alter(cluster, 1, BROKER_R, "", {key: "20000"}) == (NONE, None)
        wait_value(cluster, key, "20000")
        assert alter(cluster, 2, BROKER_R, "2", {key: "30000"}) == (NONE, None)
        wait_value(cluster, key, "30000", nodes=(2,))
        _, entries = describe(cluster, 2, BROKER_R, "2", [key])
        assert [(s.value, s.source) for s in entries[key].synonyms] == [
            ("30000", DYNAMIC_BROKER), ("20000", DYNAMIC_DEFAULT), ("15000", DEFAULT)]
        _, entries = describe(cluster, 3, BROKER_R, "3", [key])
        assert (entries[key].value, entries[key].config_source) == ("20000", DYNAMIC_DEFAULT)
        _, defaults = describe(cluster, 3, BROKER_R, "")
        assert {n: (e.value, e.config_source) for n, e in defaults.items()} == {
            key: ("20000", DYNAMIC_DEFAULT)}
    finally:
        alter(cluster, 2, BROKER_R, "2", {key: None})
        alter(cluster, 1, BROKER_R, "", {key: None})
    wait_value(cluster, key, "15000")
    code, message = alter(cluster, 1, BROKER_R, "1", {"node.id": "7"})
    assert code == INVALID_REQUEST and "dynamically" in message
    assert alter(cluster, 1, BROKER_R, "1", {"no.such.setting": "1"})[0] == INVALID_CONFIG
    assert alter(cluster, 1, BROKER_R, "2", {key: "1"})[0] == INVALID_REQUEST
    assert alter(cluster, 1, BROKER_R, "1", {"log.cleaner.threads": "2"})[0] == INVALID_REQUEST
    assert alter(cluster, 1, BROKER_R, "", {"listener.name.plaintext.ssl.keystore.location":
                                            "/x.pem"})[0] == INVALID_REQUEST
    assert alter(cluster, 1, BROKER_R, "1", {key: "60000"}, validate_only=True)[0] == NONE
    assert describe(cluster, 1, BROKER_R, "1", [key])[1][key].value == "15000"


def test_legacy_alter_configs_replaces_the_dynamic_set(cluster):
    resource_class = AlterConfigsRequest.AlterConfigsResource
    keys = ["max.connections.per.ip", "max.connections"]

    def legacy(configs: dict) -> int:
        resource = resource_class(resource_type=BROKER_R, resource_name="3", configs=[
            resource_class.AlterableConfig(name=k, value=v) for k, v in configs.items()])
        with cluster.connect(3) as conn:
            response = conn.request(AlterConfigsRequest[1](resources=[resource],
                                                           validate_only=False))
        return response.responses[0].error_code

    try:
        assert legacy({"max.connections.per.ip": "1000"}) == NONE
        assert legacy({"max.connections": "1000"}) == NONE  # replaces: per.ip is removed
        wait_value(cluster, "max.connections", "1000", nodes=(3,))
        _, entries = describe(cluster, 3, BROKER_R, "3", keys)
        assert entries["max.connections.per.ip"].config_source == DEFAULT
    finally:
        legacy({})
    wait_value(cluster, "max.connections", str(2 ** 31 - 1), nodes=(3,))


def test_log_retention_default_applies_to_topics_without_an_override(cluster):
    plain, own = f"ret-plain-{uuid.uuid4().hex[:6]}", f"ret-own-{uuid.uuid4().hex[:6]}"
    for name, configs in ((plain, {}), (own, {"retention.ms": "604800000"})):
        cluster.create_topic(name, partitions=1, replication_factor=1,
                             configs={"segment.bytes": "1048576", **configs})
    leaders = {name: cluster.leader_of(name, 0) for name in (plain, own)}
    value = b"v" * 700_000
    for name in (plain, own):
        with cluster.connect(leaders[name]) as conn:
            for _ in range(3):  # each batch over half a segment: two segments roll
                batch = build_batch([(None, value, int(time.time() * 1000), [])])
                assert conn.produce(name, 0, batch).error_code == NONE
    try:
        assert alter(cluster, 1, BROKER_R, "", {"log.retention.ms": "1000"}) == (NONE, None)

        def trimmed(_statuses):
            return cluster.hosted(leaders[plain], plain, 0)["log_start_offset"] > 0
        cluster.wait_for(trimmed, 30.0, f"{plain} trimmed by the dynamic retention default")
        assert cluster.hosted(leaders[own], own, 0)["log_start_offset"] == 0
        _, entries = describe(cluster, 1, TOPIC_R, plain, ["retention.ms"])
        assert entries["retention.ms"].value == "1000"
    finally:
        alter(cluster, 1, BROKER_R, "", {"log.retention.ms": None})


def test_a_follower_throttle_set_at_run_time_holds_a_replica_back_until_removed(
        cluster, heal_cluster):
    """As Kafka, a follower throttles only while it is out of sync: it is stopped while
    2 MB are written, and comes back behind."""
    name = f"throttled-{uuid.uuid4().hex[:6]}"
    cluster.create_topic(name, partitions=1, replication_factor=2,
                         configs={"follower.replication.throttled.replicas": "*"})
    state = cluster.partition_state(name, 0)
    leader = state["leader"]
    follower = next(r for r in state["replicas"] if r != leader)
    rate = "follower.replication.throttled.rate"
    try:
        assert alter(cluster, leader, BROKER_R, "", {rate: "2000"}) == (NONE, None)
        wait_value(cluster, rate, "2000", nodes=(follower,))
        cluster.stop(follower)
        with cluster.connect(leader) as conn:
            for _ in range(20):
                batch = build_batch([(None, b"r" * 100_000, int(time.time() * 1000), [])])
                assert conn.produce(name, 0, batch, acks=1).error_code == NONE
        cluster.start(follower)
        target = cluster.hosted(leader, name, 0)["log_end_offset"]

        def fetching(_statuses):
            hosted = cluster.hosted(follower, name, 0)
            return hosted is not None and hosted["log_end_offset"] > 0
        cluster.wait_for(fetching, 30.0, "the follower fetching again")
        time.sleep(2.0)  # 2 kB/s: a batch or two of the 2 MB in this while, loosely
        assert cluster.hosted(follower, name, 0)["log_end_offset"] < target
        assert alter_retrying(cluster, leader, BROKER_R, "", {rate: None}) == (NONE, None)

        def caught_up(_statuses):
            return cluster.hosted(follower, name, 0)["log_end_offset"] >= target
        cluster.wait_for(caught_up, 60.0, "the follower caught up once the rate was removed")
    finally:
        heal_cluster(cluster)
        alter_retrying(cluster, leader, BROKER_R, "", {rate: None})


def test_logger_levels_are_described_and_changed_at_run_time(cluster):
    code, loggers = describe(cluster, 3, LOGGER_R, "3")
    assert code == NONE
    assert loggers["root"].value == "INFO" and loggers["root"].config_source == LOGGER_SOURCE
    target = "broker.api"  # the package: its modules' loggers inherit the level
    assert target in loggers and "broker.api.resource_configs" in loggers
    debug_line = "DEBUG broker.api.resource_configs DescribeConfigs of resource type 8 '3'"

    def debug_lines() -> int:
        return cluster.broker(3).log_path.read_text(errors="replace").count(debug_line)
    try:
        assert alter(cluster, 3, LOGGER_R, "3", {target: "DEBUG"}) == (NONE, None)
        assert describe(cluster, 3, LOGGER_R, "3", [target])[1][target].value == "DEBUG"
        assert describe(cluster, 2, LOGGER_R, "2", [target])[1][target].value == "INFO"
        cluster.wait_for(lambda _s: debug_lines() >= 1, 10.0, "the DEBUG line in the log")
    finally:
        assert alter(cluster, 3, LOGGER_R, "3", {target: None}) == (NONE, None)
    seen = debug_lines()
    assert describe(cluster, 3, LOGGER_R, "3", [target])[1][target].value == "INFO"
    assert debug_lines() == seen  # inherited INFO again: that describe logged nothing
    assert alter(cluster, 3, LOGGER_R, "3", {target: "LOUD"})[0] == INVALID_CONFIG
    assert alter(cluster, 3, LOGGER_R, "3", {"no.such.logger": "INFO"})[0] == INVALID_CONFIG
    assert alter(cluster, 3, LOGGER_R, "3", {"root": None})[0] == INVALID_REQUEST
    assert alter(cluster, 3, LOGGER_R, "1", {target: "INFO"})[0] == INVALID_REQUEST


def _coordinator(cluster, group: str) -> int:
    for _ in range(100):
        with cluster.connect(1) as conn:
            answer = conn.request(FindCoordinatorRequest[3](key=group, key_type=0))
        if answer.error_code == NONE:
            return answer.node_id
        time.sleep(0.2)
    raise AssertionError("no coordinator")


def _heartbeat(conn, group: str, member_id: str, epoch: int, topics=None):
    request = ConsumerGroupHeartbeatRequest[0](
        group_id=group, member_id=member_id, member_epoch=epoch, instance_id=None,
        rack_id=None, rebalance_timeout_ms=-1 if epoch else 30_000,
        subscribed_topic_names=topics, server_assignor=None,
        topic_partitions=None if epoch else [])
    request.response_type = ConsumerGroupHeartbeatResponse
    return conn.request(request)


def test_group_configs_change_what_a_kip848_member_gets(cluster):
    group = f"g-{uuid.uuid4().hex[:6]}"
    code, entries = describe(cluster, 1, GROUP_R, group)
    assert code == NONE
    assert entries["consumer.session.timeout.ms"].config_source == DEFAULT
    assert entries["consumer.heartbeat.interval.ms"].config_source == STATIC
    assert entries["share.delivery.count.limit"].value == "5"
    assert alter(cluster, 1, GROUP_R, group, {"consumer.session.timeout.ms": "500"})[0] \
        == INVALID_CONFIG  # under group.consumer.min.session.timeout.ms
    assert alter(cluster, 1, GROUP_R, group, {"share.isolation.level": "x"})[0] == INVALID_CONFIG
    assert alter(cluster, 1, GROUP_R, group, {"consumer.session.timeout.ms": "2000",
                                              "consumer.heartbeat.interval.ms": "6000"})[0] \
        == INVALID_CONFIG  # the interval must be under the session timeout
    assert alter(cluster, 2, GROUP_R, group, {"consumer.session.timeout.ms": "2000"}) \
        == (NONE, None)
    _, entries = describe(cluster, 2, GROUP_R, group)  # the broker that took the change
    assert (entries["consumer.session.timeout.ms"].value,
            entries["consumer.session.timeout.ms"].config_source) == ("2000", GROUP_SOURCE)
    wait_group_value(cluster, group, "consumer.session.timeout.ms", "2000", GROUP_SOURCE)
    node = _coordinator(cluster, group)
    with cluster.connect(node) as conn:
        joined = _heartbeat(conn, group, "", 0, topics=["none-such"])
        assert joined.error_code == NONE and joined.heartbeat_interval_ms == 500
        member = joined.member_id
        # Silent past 2 s (the group's session timeout, not the broker's 45 s): removed.
        answer = None
        for _ in range(10):
            time.sleep(3.0)  # the silence itself, more than the 2 s session
            answer = _heartbeat(conn, group, member, joined.member_epoch)
            if answer.error_code == UNKNOWN_MEMBER_ID:
                break
        assert answer is not None and answer.error_code == UNKNOWN_MEMBER_ID
    assert alter(cluster, 1, GROUP_R, group, {"consumer.session.timeout.ms": None,
                                              "consumer.heartbeat.interval.ms": "6000"}) \
        == (NONE, None)
    wait_group_value(cluster, group, "consumer.heartbeat.interval.ms", "6000", GROUP_SOURCE,
                     nodes=(node,))
    with cluster.connect(node) as conn:
        assert _heartbeat(conn, group, "", 0, topics=["none-such"]).heartbeat_interval_ms \
            == 6000


def _cli(cluster, capsys, *args: str) -> tuple[int, str, str]:
    """``raftwood configs ...`` run in this process (the real command against the real
    cluster, without an interpreter start per call): (exit code, stdout, stderr)."""
    parsed = build_parser().parse_args(
        ["configs", "--bootstrap-server", cluster.bootstrap.split(",")[0], *args])
    code = parsed.func(parsed)  # main() without its logging set-up (pytest's stays)
    out, err = capsys.readouterr()
    return code, out, err


def test_raftwood_configs_cli_like_kafka_configs(cluster, capsys):
    key = "log.cleaner.backoff.ms"
    code, out, err = _cli(cluster, capsys, "--entity-type", "brokers", "--entity-default",
                          "--alter", "--add-config", f"{key}=25000")
    assert code == 0, err
    assert "Completed updating config for default broker" in out
    try:
        wait_value(cluster, key, "25000", nodes=(2,))
        code, out, err = _cli(cluster, capsys, "--entity-type", "brokers", "--entity-name", "2",
                              "--describe")
        assert code == 0, err
        assert any(line.split() == [key, "25000", "DYNAMIC_DEFAULT_BROKER_CONFIG"]
                   for line in out.splitlines()), out
    finally:
        code, _, err = _cli(cluster, capsys, "--entity-type", "brokers", "--entity-default",
                            "--alter", "--delete-config", key)
        assert code == 0, err
    code, out, err = _cli(cluster, capsys, "--entity-type", "broker-loggers", "--entity-name",
                          "3", "--describe")
    assert any(line.split() == ["root", "INFO", "DYNAMIC_BROKER_LOGGER_CONFIG"]
               for line in out.splitlines()), out
    code, _, err = _cli(cluster, capsys, "--entity-type", "brokers", "--entity-name", "1",
                        "--alter", "--add-config", "node.id=9")
    assert code == 1 and "INVALID_REQUEST" in err, err


def _served_certificate(port: int) -> bytes:
    """The DER certificate a TLS handshake on ``port`` gets (not verified)."""
    return ssl.PEM_cert_to_DER_cert(ssl.get_server_certificate(("127.0.0.1", port),
                                                               timeout=10))


def _self_signed_keystore(directory, name: str) -> tuple[str, bytes]:
    """(PEM keystore path, DER certificate) of a new self-signed EC certificate."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make test certificates")
    key, cert = directory / f"{name}.key", directory / f"{name}.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", f"/CN={name}"],
                   check=True, capture_output=True, timeout=30)
    keystore = directory / f"{name}-keystore.pem"
    keystore.write_text(key.read_text() + cert.read_text())
    return str(keystore), ssl.PEM_cert_to_DER_cert(cert.read_text())


def test_a_new_keystore_serves_new_connections_without_a_restart(tmp_path):
    first, first_cert = _self_signed_keystore(tmp_path, "first")
    second, second_cert = _self_signed_keystore(tmp_path, "second")
    ssl_port = free_port()
    broker = with_listeners(BrokerProcess(
        tmp_path / "data", log_path=tmp_path / "broker.log",
        extra_settings={"ssl.keystore.location": first}),
        f"SSL://127.0.0.1:{ssl_port}").start()
    key = "listener.name.ssl.ssl.keystore.location"
    try:
        assert _served_certificate(ssl_port) == first_cert
        with KafkaConnection(broker.bootstrap) as conn:
            answer = conn.request(_incremental(BROKER_R, "1", {key: "/no/such/keystore.pem"}))
            assert answer.responses[0].error_code == INVALID_REQUEST
            answer = conn.request(_incremental(BROKER_R, "1", {key: second}))
            assert answer.responses[0].error_code == NONE
        deadline = time.monotonic() + 30
        while _served_certificate(ssl_port) != second_cert:
            assert time.monotonic() < deadline, "the new keystore was never served"
            time.sleep(0.2)
        with KafkaConnection(broker.bootstrap) as conn:
            response = conn.request(DescribeConfigsRequest[1](
                include_synonyms=False, resources=[DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=BROKER_R, resource_name="1", configuration_keys=[key])]))
        [entry] = response.results[0].configs
        assert (entry.value, entry.config_source) == (second, DYNAMIC_BROKER)
    finally:
        assert broker.stop() == 0, broker.log_tail()


@pytest.fixture(scope="module")
def java43(tmp_path_factory):
    from compat.java.probe import Probe, ProbeUnavailable
    try:
        return Probe.prepare(build_dir=tmp_path_factory.mktemp("java43-dynamic-configs"))
    except ProbeUnavailable as exc:
        pytest.skip(f"Java 4.3 probe unavailable: {exc}")


JAVA_PROBE = """
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.config.ConfigResource;

public class DynamicConfigsProbe {
    static Config describe(Admin admin, ConfigResource r) throws Exception {
        return admin.describeConfigs(List.of(r)).all().get().get(r);
    }
    static void set(Admin admin, ConfigResource r, String key, String value) throws Exception {
        AlterConfigOp op = value == null
            ? new AlterConfigOp(new ConfigEntry(key, ""), AlterConfigOp.OpType.DELETE)
            : new AlterConfigOp(new ConfigEntry(key, value), AlterConfigOp.OpType.SET);
        admin.incrementalAlterConfigs(Map.of(r, List.of(op))).all().get();
    }
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        try (Admin admin = Admin.create(p)) {
            ConfigResource logger = new ConfigResource(ConfigResource.Type.BROKER_LOGGER, "1");
            System.out.println("root=" + describe(admin, logger).get("root").value());
            set(admin, logger, "broker.api", "WARN");
            System.out.println("api=" + describe(admin, logger).get("broker.api").value());
            set(admin, logger, "broker.api", null);
            ConfigResource group = new ConfigResource(ConfigResource.Type.GROUP, args[1]);
            set(admin, group, "consumer.session.timeout.ms", "50000");
            ConfigEntry session = describe(admin, group).get("consumer.session.timeout.ms");
            // The describe may reach a broker that applies the change a moment later.
            for (int i = 0; i < 150 && !"50000".equals(session.value()); i++) {
                Thread.sleep(200);
                session = describe(admin, group).get("consumer.session.timeout.ms");
            }
            System.out.println("group=" + session.value() + "/" + session.source());
            ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, "1");
            set(admin, broker, "log.cleaner.backoff.ms", "16000");
            ConfigEntry backoff = describe(admin, broker).get("log.cleaner.backoff.ms");
            System.out.println("broker=" + backoff.value() + "/" + backoff.source()
                               + "/" + backoff.isReadOnly());
            set(admin, broker, "log.cleaner.backoff.ms", null);
            try {
                set(admin, broker, "node.id", "5");
                System.out.println("static=accepted");
            } catch (Exception e) {
                System.out.println("static=" + e.getCause().getClass().getSimpleName());
            }
        }
    }
}
"""


def test_java43_admin_describes_and_alters_loggers_groups_and_brokers(cluster, java43):
    group = f"java-{uuid.uuid4().hex[:6]}"
    run = java43.run(JAVA_PROBE, cluster.bootstrap, group, timeout_s=120)
    assert run.passed, run.report()
    assert run.facts() == {
        "root": "INFO", "api": "WARN", "group": "50000/DYNAMIC_GROUP_CONFIG",
        "broker": "16000/DYNAMIC_BROKER_CONFIG/false", "static": "InvalidRequestException"}


def test_kafka_python_admin_alters_and_describes_broker_and_group_configs(cluster):
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    group = f"kp-{uuid.uuid4().hex[:6]}"
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=20_000)
    try:
        answer = admin.alter_configs([
            ConfigResource(ConfigResourceType.BROKER, "1",
                           configs={"log.cleaner.backoff.ms": "17000"}),
            ConfigResource(ConfigResourceType.GROUP, group,
                           configs={"consumer.heartbeat.interval.ms": "7000"})])
        assert answer == {"broker": {"1": "OK"}, "group": {group: "OK"}}, answer
        with pytest.raises(ValueError):  # the client checks the key is dynamic first
            admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "1",
                                                configs={"node.id": "5"})])
        wait_value(cluster, "log.cleaner.backoff.ms", "17000", nodes=(1,))
        wait_group_value(cluster, group, "consumer.heartbeat.interval.ms", "7000",
                         GROUP_SOURCE)
        described = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1"),
                                            ConfigResource(ConfigResourceType.GROUP, group)])
        backoff = described["broker"]["1"]["log.cleaner.backoff.ms"]
        assert (backoff["value"], backoff["config_source"]) == ("17000",
                                                                "DYNAMIC_BROKER_CONFIG")
        interval = described["group"][group]["consumer.heartbeat.interval.ms"]
        assert interval["value"] == "7000"
    finally:
        admin.reset_configs([ConfigResource(ConfigResourceType.BROKER, "1",
                                            configs=["log.cleaner.backoff.ms"])])
        admin.close()

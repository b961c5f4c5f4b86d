"""The authorizer with real clients: confluent-kafka over SASL_PLAINTEXT with SCRAM-SHA-512.

One broker with ``authorizer.class.name`` set to Kafka's StandardAuthorizer: its PLAINTEXT
listener (the harness's, and ``raftwood acls``/``users``') is ``User:ANONYMOUS``, a super
user beside ``User:admin``; alice and bob are plain users on SASL_PLAINTEXT.  Each refusal
is asserted with Kafka's exact error, and after it the broker keeps serving the others
and no stored byte of the topic changed.  A 3-broker cluster with the authorizer on
replicates when its inter-broker principal is a super user.
"""
from __future__ import annotations

import hashlib
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourcePatternType,
    ResourceType,
)

from broker.cli.main import build_parser
from broker.client.kafka_client import BlockingConnection
from broker.security.client import ClientSecurity
from broker.testing import BrokerProcess, KafkaConnection, free_port
from protocol.share_group_messages import ShareGroupDescribeRequest
from tests.conftest import create_topic
from tests.security_certs import with_listeners

WAIT_S = 30.0
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
TOPIC_AUTHORIZATION_FAILED = KafkaError.TOPIC_AUTHORIZATION_FAILED        # 29
GROUP_AUTHORIZATION_FAILED = KafkaError.GROUP_AUTHORIZATION_FAILED        # 30
CLUSTER_AUTHORIZATION_FAILED = KafkaError.CLUSTER_AUTHORIZATION_FAILED    # 31
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}


def raftwood(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "broker.cli", *args], capture_output=True,
                          text=True, timeout=60)


def acls(broker, *args: str) -> str:
    done = raftwood("acls", *args, "--bootstrap-server", broker.bootstrap)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def authorized(tmp_path_factory):
    home = tmp_path_factory.mktemp("acls")
    sasl_port = free_port()
    broker = with_listeners(BrokerProcess(home / "data", log_path=home / "broker.log",
                                          extra_settings={
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:ANONYMOUS;User:admin",
        "group.initial.rebalance.delay.ms": "100"}),
        f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}")
    broker.start()
    for user, password in PASSWORDS.items():
        added = raftwood("users", "add", user, "--password", password, "--mechanism",
                         "SCRAM-SHA-512", "--bootstrap-server", broker.bootstrap)
        assert added.returncode == 0, added.stderr
    yield broker, sasl_port
    assert broker.stop() == 0, broker.log_tail()


def settings(port: int, user: str) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": user,
            "sasl.password": PASSWORDS[user]}


def produce(port: int, user: str, topic: str, value: bytes = b"v"):
    """One message; the delivery error (None when acknowledged)."""
    reports = []
    producer = Producer({**settings(port, user), "acks": "all", "message.timeout.ms": 10_000})
    producer.produce(topic, value=value, on_delivery=lambda err, msg: reports.append(err))
    producer.flush(WAIT_S)
    assert len(reports) == 1, "no delivery report"
    return reports[0]


def stored_bytes(broker: BrokerProcess, topic: str) -> dict[str, str]:
    """Digest of every log segment of ``topic``'s partitions on disk."""
    return {str(p.relative_to(broker.data_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(Path(broker.data_dir).glob(f"{topic}-*/*.log"))}


def test_a_user_with_only_read_producing_gets_topic_authorization_failed(authorized):
    broker, port = authorized
    topic = create_topic(broker.bootstrap, "acl-read-only")
    acls(broker, "add", "--allow-principal", "User:alice", "--operation", "read",
         "--topic", topic)
    before = stored_bytes(broker, topic)
    error = produce(port, "alice", topic)
    assert error is not None and error.code() == TOPIC_AUTHORIZATION_FAILED
    assert stored_bytes(broker, topic) == before, "a refused produce changed stored bytes"
    assert produce(port, "admin", topic) is None, "the broker keeps serving others"
    with KafkaConnection(broker.bootstrap) as conn:
        assert [r[2] for r in conn.read_partition(topic, 0)] == [b"v"]


def test_a_user_without_describe_does_not_see_the_topic_in_metadata(authorized):
    broker, port = authorized
    visible = create_topic(broker.bootstrap, "acl-visible")
    hidden = create_topic(broker.bootstrap, "acl-hidden")
    acls(broker, "add", "--allow-principal", "User:bob", "--operation", "write",
         "--topic", visible)   # Write implies Describe
    admin = AdminClient(settings(port, "bob"))
    topics = admin.list_topics(timeout=10).topics
    assert visible in topics and hidden not in topics
    asked = admin.list_topics(topic=hidden, timeout=10).topics[hidden]
    assert asked.error is not None and asked.error.code() == TOPIC_AUTHORIZATION_FAILED
    assert hidden in AdminClient(settings(port, "admin")).list_topics(timeout=10).topics


def consume_error(port: int, user: str, topic: str, group: str) -> KafkaError | None:
    """Subscribe and poll until a message (None) or an error event (returned)."""
    consumer = Consumer({**settings(port, user), "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            return msg.error()
        pytest.fail("neither a message nor an error")
    finally:
        consumer.close()


def test_a_consumer_without_group_read_cannot_join(authorized):
    broker, port = authorized
    topic = create_topic(broker.bootstrap, "acl-group-topic")
    assert produce(port, "admin", topic) is None
    acls(broker, "add", "--allow-principal", "User:alice", "--operation", "read",
         "--topic", topic)
    # Describe on the group lets FindCoordinator answer; JoinGroup needs Read.
    acls(broker, "add", "--allow-principal", "User:alice", "--operation", "describe",
         "--group", "acl-denied-group")
    error = consume_error(port, "alice", topic, "acl-denied-group")
    assert error is not None and error.code() == GROUP_AUTHORIZATION_FAILED
    error = consume_error(port, "alice", topic, "acl-unknown-group")  # not even Describe
    assert error is not None and error.code() == GROUP_AUTHORIZATION_FAILED
    acls(broker, "add", "--allow-principal", "User:alice", "--operation", "read",
         "--group", "acl-reading-", "--resource-pattern-type", "prefixed")
    assert consume_error(port, "alice", topic, "acl-reading-1") is None, \
        "with Read on the group the same consumer joins and reads"
    unreadable = create_topic(broker.bootstrap, "acl-unreadable")
    assert commit_error(port, "alice", "acl-reading-2", topic) is None
    assert commit_error(port, "alice", "acl-reading-2", unreadable) == TOPIC_AUTHORIZATION_FAILED


def share_heartbeat_error(broker, port: int, user: str, topic: str,
                          group: str) -> KafkaError | None:
    """A ShareConsumer joins ``group``: the error its poll reports (None once it is a
    member, seen through ShareGroupDescribe by the super user)."""
    consumer = ShareConsumer({**settings(port, user), "group.id": group})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            try:
                for message in consumer.poll(0.5):
                    if message.error() is not None:
                        return message.error()
            except KafkaException as exc:
                return exc.args[0]
            if _share_members(broker, group):
                return None
        pytest.fail("neither an error nor a membership")
    finally:
        consumer.close()


def _share_members(broker, group: str) -> list[str]:
    with KafkaConnection(broker.bootstrap) as conn:  # PLAINTEXT: ANONYMOUS, a super user
        [described] = conn.request(ShareGroupDescribeRequest[1](
            group_ids=[group], include_authorized_operations=False)).groups
    return [m.member_id for m in described.members] if described.error_code == 0 else []


def acls_here(broker, *args: str) -> None:
    """``raftwood acls ARGS`` in this process (no interpreter start per call)."""
    parsed = build_parser().parse_args(["acls", *args, "--bootstrap-server",
                                        broker.bootstrap])
    assert parsed.func(parsed) == 0


def test_a_share_consumer_without_group_read_cannot_join_a_share_group(authorized):
    broker, port = authorized
    topic = create_topic(broker.bootstrap, "acl-share-topic")
    # Describe on the topic and the groups (FindCoordinator answers); joining needs Read.
    acls_here(broker, "add", "--allow-principal", "User:alice", "--operation", "describe",
              "--topic", "acl-share-", "--group", "acl-share-", "--resource-pattern-type",
              "prefixed")
    error = share_heartbeat_error(broker, port, "alice", topic, "acl-share-denied")
    assert error is not None and error.code() == GROUP_AUTHORIZATION_FAILED
    acls_here(broker, "add", "--allow-principal", "User:alice", "--operation", "read",
              "--group", "acl-share-allowed")
    assert share_heartbeat_error(broker, port, "alice", topic, "acl-share-allowed") is None, \
        "with Read on the group the same share consumer joins"


def commit_error(port: int, user: str, group: str, topic: str):
    """Commit offset 1 of ``topic``-0 for ``group`` (no subscription) and read it back:
    None when stored, else the error code of the commit (nothing is then stored)."""
    from confluent_kafka import TopicPartition

    consumer = Consumer({**settings(port, user), "group.id": group,
                         "enable.auto.commit": False})
    try:
        try:
            consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
        except KafkaException as exc:
            [committed] = consumer.committed([TopicPartition(topic, 0)], timeout=10)
            assert committed.offset != 1, "a refused commit was stored"
            return exc.args[0].code()
        [committed] = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        assert committed.offset == 1 and committed.error is None
        return None
    finally:
        consumer.close()


def test_a_non_super_user_creating_acls_gets_cluster_authorization_failed(authorized):
    broker, port = authorized
    binding = AclBinding(ResourceType.TOPIC, "acl-anything", ResourcePatternType.LITERAL,
                         "User:bob", "*", AclOperation.ALL, AclPermissionType.ALLOW)
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    admin = AdminClient(settings(port, "admin"))
    before = sorted(map(str, admin.describe_acls(everything).result(timeout=10)))
    alice = AdminClient(settings(port, "alice"))
    for future in alice.create_acls([binding]).values():
        with pytest.raises(KafkaException) as refused:
            future.result(timeout=10)
        assert refused.value.args[0].code() == CLUSTER_AUTHORIZATION_FAILED
    # librdkafka drops DescribeAcls' top-level error (an empty list comes back); kafka-python
    # raises it.
    assert kafka_python_describe_acls_error(port, "alice") == "ClusterAuthorizationFailedError"
    assert sorted(map(str, admin.describe_acls(everything).result(timeout=10))) == before

    # The super user creates, finds and deletes it with the same client's calls.
    for future in admin.create_acls([binding]).values():
        assert future.result(timeout=10) is None
    mine = AclBindingFilter(ResourceType.TOPIC, "acl-anything", ResourcePatternType.MATCH,
                            "User:bob", None, AclOperation.ANY, AclPermissionType.ANY)
    assert admin.describe_acls(mine).result(timeout=10) == [binding]
    deleted = [f.result(timeout=10) for f in admin.delete_acls([mine]).values()]
    assert deleted == [[binding]]
    assert sorted(map(str, admin.describe_acls(everything).result(timeout=10))) == before


def kafka_python_describe_acls_error(port: int, user: str) -> str | None:
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KafkaPythonResourceType

    admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}",
                             security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512",
                             sasl_plain_username=user, sasl_plain_password=PASSWORDS[user])
    try:
        admin.describe_acls(ACLFilter(
            principal=None, host="*", operation=ACLOperation.ANY,
            permission_type=ACLPermissionType.ANY, resource_pattern=ResourcePatternFilter(
                KafkaPythonResourceType.ANY, None, ACLResourcePatternType.ANY)))
        return None
    except Exception as exc:
        return type(exc).__name__
    finally:
        admin.close()


def test_a_non_super_user_changing_broker_configs_gets_cluster_authorization_failed(
        authorized):
    """Dynamic broker configs (a keystore path, throttles, connection limits) change how the
    whole broker runs: AlterConfigs on the cluster only, as Kafka."""
    broker, port = authorized
    change = [ConfigEntry("log.retention.ms", "1000",
                          incremental_operation=AlterConfigOpType.SET)]
    alice = AdminClient(settings(port, "alice"))
    for name in (str(broker.node_id),):
        resource = ConfigResource(ResourceType.BROKER, name, incremental_configs=change)
        for future in alice.incremental_alter_configs([resource]).values():
            with pytest.raises(KafkaException) as refused:
                future.result(timeout=10)
            assert refused.value.args[0].code() == CLUSTER_AUTHORIZATION_FAILED
    admin = AdminClient(settings(port, "admin"))
    mine = ConfigResource(ResourceType.BROKER, str(broker.node_id))
    described = admin.describe_configs([mine])[mine].result(timeout=10)
    assert "log.retention.ms" not in described or described["log.retention.ms"].value != "1000"


def test_prefixed_acls_cover_every_topic_with_the_prefix(authorized):
    broker, port = authorized
    inside = create_topic(broker.bootstrap, "acl-pay-eu")
    outside = create_topic(broker.bootstrap, "acl-payroll")
    acls(broker, "add", "--allow-principal", "User:bob", "--operation", "write",
         "--topic", "acl-pay-", "--resource-pattern-type", "prefixed")
    assert produce(port, "bob", inside) is None
    before = stored_bytes(broker, outside)
    error = produce(port, "bob", outside)
    assert error is not None and error.code() == TOPIC_AUTHORIZATION_FAILED
    assert stored_bytes(broker, outside) == before


def test_deny_beats_allow(authorized):
    broker, port = authorized
    topic = create_topic(broker.bootstrap, "acl-denied-write")
    acls(broker, "add", "--allow-principal", "User:*", "--operation", "all", "--topic", topic)
    acls(broker, "add", "--deny-principal", "User:bob", "--operation", "write", "--topic", topic)
    listed = acls(broker, "list", "--topic", topic)
    assert "principal=User:bob, host=*, operation=WRITE, permissionType=DENY" in listed
    before = stored_bytes(broker, topic)
    error = produce(port, "bob", topic)
    assert error is not None and error.code() == TOPIC_AUTHORIZATION_FAILED
    assert stored_bytes(broker, topic) == before
    assert produce(port, "alice", topic) is None, "User:* still allows everyone else"
    removed = acls(broker, "remove", "--deny-principal", "User:bob", "--topic", topic)
    assert "removed (principal=User:bob" in removed
    assert produce(port, "bob", topic) is None


def test_the_status_request_needs_authentication_on_a_sasl_listener(authorized):
    broker, port = authorized
    with KafkaConnection(("127.0.0.1", port)) as conn:
        with pytest.raises(Exception):  # noqa: B017  (any failure: the next line says which)
            conn.status()
        assert conn.closed_by_peer()
    with KafkaConnection(broker.bootstrap) as conn:
        assert conn.status()["broker_id"] == 1


def test_the_status_request_needs_describe_on_the_cluster(authorized):
    """The status answer names every topic, its configs and every group: an authenticated
    user without Describe on the cluster gets CLUSTER_AUTHORIZATION_FAILED and no names,
    as Kafka's Metadata hides topics a principal may not describe."""
    broker, port = authorized
    hidden = create_topic(broker.bootstrap, "acl-status-hidden")

    def status_as(user: str) -> dict:
        security = ClientSecurity("SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512",
                                  username=user, password=PASSWORDS[user])
        with BlockingConnection(("127.0.0.1", port), security=security) as conn:
            return conn.status()

    refused = status_as("alice")
    assert refused.get("error") == "CLUSTER_AUTHORIZATION_FAILED", refused
    assert hidden not in str(refused) and "topics" not in refused
    assert hidden in {t["name"] for t in status_as("admin")["topics"]}
    acls(broker, "add", "--allow-principal", "User:alice", "--operation", "describe",
         "--cluster")
    try:
        assert hidden in {t["name"] for t in status_as("alice")["topics"]}
    finally:
        acls(broker, "remove", "--allow-principal", "User:alice", "--operation", "describe",
             "--cluster")


def test_three_brokers_replicate_with_the_authorizer_and_a_super_inter_broker_user(
        tmp_path, raftwood_cluster_factory):
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            'username="broker" password="broker-secret";')
    cluster = raftwood_cluster_factory(3, start=False, **{
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": jaas,
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:broker;User:ANONYMOUS"})
    for broker in cluster.brokers:
        with_listeners(broker, f"SASL_PLAINTEXT://127.0.0.1:{free_port()}")
    cluster.start_all()
    added = raftwood("users", "add", "broker", "--password", "broker-secret", "--mechanism",
                     "SCRAM-SHA-512", "--bootstrap-server", cluster.bootstrap.split(",")[0])
    assert added.returncode == 0, added.stderr
    cluster.create_topic("acl-replicated", partitions=1, replication_factor=3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(20):
        producer.produce("acl-replicated", value=f"r-{i}".encode())
    assert producer.flush(WAIT_S) == 0
    cluster.wait_for_isr("acl-replicated", 0, [1, 2, 3])

    def every_replica_has_20(statuses):
        return all((cluster.find_hosted(s, "acl-replicated", 0) or {}).get("log_end_offset")
                   == 20 for s in statuses.values())

    cluster.wait_for(every_replica_has_20, WAIT_S, "all three replicas at offset 20")
    logs = "".join(b.log_path.read_text(errors="replace") for b in cluster.brokers)
    assert "authenticated User:broker with SCRAM-SHA-512 on listener SASL_PLAINTEXT" in logs

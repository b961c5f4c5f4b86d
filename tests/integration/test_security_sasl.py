"""SASL (KIP-152): PLAIN and SCRAM-SHA-256/512 with real clients, SCRAM users in the
cluster metadata (KIP-554, ``raftwood users``), and a cluster replicating over SASL_SSL.

Refusals asserted exactly: a wrong password gets SASL_AUTHENTICATION_FAILED and the
connection closes (the broker logs the user and the address); a mechanism not enabled
gets UNSUPPORTED_SASL_MECHANISM; Metadata before authentication closes the connection.
"""
from __future__ import annotations

import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from kafka.protocol.admin import AlterUserScramCredentialsRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from broker.testing import BrokerProcess, KafkaConnection, free_port
from tests.conftest import create_topic
from tests.security_certs import make_pki, with_listeners

WAIT_S = 30.0
SASL_AUTHENTICATION_FAILED = 58
UNSUPPORTED_SASL_MECHANISM = 33
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_jaasuser="jaas-secret";')


def raftwood(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "broker.cli", *args], capture_output=True,
                          text=True, timeout=60)


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    """One broker: PLAINTEXT (its harness listener), SASL_PLAINTEXT and SASL_SSL; users
    alice (SCRAM, both mechanisms, added with the CLI) and jaasuser (PLAIN, JAAS file)."""
    home = tmp_path_factory.mktemp("sasl")
    pki = make_pki(home / "pki")
    sasl_port, sasl_ssl_port = free_port(), free_port()
    broker = with_listeners(BrokerProcess(home / "data", log_path=home / "broker.log",
                                          extra_settings={
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "ssl.keystore.location": str(pki.broker_keystore),
        "group.initial.rebalance.delay.ms": "100"}),
        f"SASL_PLAINTEXT://127.0.0.1:{sasl_port},SASL_SSL://127.0.0.1:{sasl_ssl_port}")
    broker.start()
    added = raftwood("users", "add", "alice", "--password", "alice-secret",
                     "--bootstrap-server", broker.bootstrap)
    assert added.returncode == 0, added.stderr
    yield broker, sasl_port, sasl_ssl_port, pki
    assert broker.stop() == 0, broker.log_tail()


def client_settings(port: int, mechanism: str, user: str, password: str,
                    protocol: str = "SASL_PLAINTEXT", pki=None) -> dict:
    settings = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": protocol,
                "sasl.mechanisms": mechanism, "sasl.username": user, "sasl.password": password}
    if pki is not None:
        settings["ssl.ca.location"] = str(pki.ca)
    return settings


def roundtrip(settings: dict, topic: str, count: int = 5) -> list[bytes]:
    producer = Producer({**settings, "acks": "all"})
    for i in range(count):
        producer.produce(topic, value=f"{topic}-{i}".encode())
    assert producer.flush(WAIT_S) == 0, "messages left unsent"
    consumer = Consumer({**settings, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        while len(values) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
        return sorted(values)
    finally:
        consumer.close()


@pytest.mark.slow
def test_users_cli_lists_scram_users_and_refuses_weak_credentials(secure):
    broker, *_ = secure
    listed = raftwood("users", "list", "--bootstrap-server", broker.bootstrap)
    assert listed.returncode == 0, listed.stderr
    assert ("alice\tSCRAM-SHA-256 (iterations 8192), SCRAM-SHA-512 (iterations 8192)"
            in listed.stdout)
    R = AlterUserScramCredentialsRequest
    with KafkaConnection(broker.bootstrap) as conn:
        answer = conn.request(R[0](deletions=[], upsertions=[R.ScramCredentialUpsertion(
            name="weak", mechanism=1, iterations=100, salt=b"s", salted_password=b"x" * 32)]))
        assert [(r.user, r.error_code) for r in answer.results] == [("weak", 93)]
        answer = conn.request(R[0](upsertions=[], deletions=[R.ScramCredentialDeletion(
            name="nobody", mechanism=2)]))
        assert [(r.user, r.error_code) for r in answer.results] == [("nobody", 91)]
    log_text = broker.log_path.read_text(errors="replace")
    assert "alice-secret" not in log_text


@pytest.mark.parametrize("mechanism, user, password", [
    ("SCRAM-SHA-256", "alice", "alice-secret"),
    ("SCRAM-SHA-512", "alice", "alice-secret"),
    ("PLAIN", "alice", "alice-secret"),        # PLAIN checked against the SCRAM store
    ("PLAIN", "jaasuser", "jaas-secret"),      # PLAIN checked against the JAAS users
])
def test_confluent_kafka_produces_and_consumes_over_sasl_plaintext(secure, mechanism, user,
                                                                   password):
    broker, sasl_port, _, _ = secure
    topic = create_topic(broker.bootstrap, f"sasl-{mechanism.lower()}-{user}")
    values = roundtrip(client_settings(sasl_port, mechanism, user, password), topic)
    assert values == sorted(f"{topic}-{i}".encode() for i in range(5))


def test_confluent_kafka_over_sasl_ssl_with_scram_sha_512(secure):
    broker, _, sasl_ssl_port, pki = secure
    topic = create_topic(broker.bootstrap, "sasl-ssl-scram-512")
    values = roundtrip(client_settings(sasl_ssl_port, "SCRAM-SHA-512", "alice", "alice-secret",
                                       "SASL_SSL", pki), topic)
    assert len(values) == 5


def test_kafka_python_produces_with_scram_sha_256(secure):
    from kafka import KafkaProducer

    broker, sasl_port, _, _ = secure
    topic = create_topic(broker.bootstrap, "sasl-kafka-python")
    producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{sasl_port}",
                             security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
                             sasl_plain_username="alice", sasl_plain_password="alice-secret",
                             acks="all")
    try:
        metadata = producer.send(topic, b"from-kafka-python").get(timeout=WAIT_S)
    finally:
        producer.close()
    assert metadata.offset == 0
    with KafkaConnection(broker.bootstrap) as conn:
        assert conn.read_partition(topic, 0)[0][2] == b"from-kafka-python"


def test_a_wrong_password_is_refused_with_58_then_closed_and_logged(secure):
    broker, sasl_port, _, _ = secure
    with KafkaConnection(("127.0.0.1", sasl_port)) as conn:
        assert conn.request(SaslHandshakeRequest[1](mechanism="PLAIN")).error_code == 0
        answer = conn.request(SaslAuthenticateRequest[2](auth_bytes=b"\0alice\0wrong"))
        assert answer.error_code == SASL_AUTHENTICATION_FAILED
        assert conn.closed_by_peer()
    admin = AdminClient({**client_settings(sasl_port, "SCRAM-SHA-512", "alice", "nope"),
                         "socket.timeout.ms": 3000})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        log_text = broker.log_path.read_text(errors="replace")
        if "authentication of User:alice with SCRAM-SHA-512" in log_text:
            break
        time.sleep(0.1)
    assert "authentication of User:alice with PLAIN on listener SASL_PLAINTEXT failed" in log_text
    assert "[SASL /127.0.0.1" in log_text
    assert "authentication of User:alice with SCRAM-SHA-512" in log_text


def test_a_mechanism_not_enabled_is_refused_with_33_then_closed(secure):
    _, sasl_port, _, _ = secure
    with KafkaConnection(("127.0.0.1", sasl_port)) as conn:
        answer = conn.request(SaslHandshakeRequest[1](mechanism="GSSAPI"))
        assert answer.error_code == UNSUPPORTED_SASL_MECHANISM
        assert "SCRAM-SHA-512" in answer.mechanisms
        assert conn.closed_by_peer()


def test_metadata_before_authentication_closes_the_connection_and_others_are_served(secure):
    broker, sasl_port, _, _ = secure
    with KafkaConnection(("127.0.0.1", sasl_port)) as conn:
        assert conn.api_versions(version=3).error_code == 0  # allowed before authenticating
        with pytest.raises((EOFError, OSError, ValueError)):
            conn.metadata([])
    with KafkaConnection(broker.bootstrap) as conn:  # PLAINTEXT keeps serving
        assert conn.metadata([]).brokers


def test_three_brokers_replicate_over_a_sasl_ssl_inter_broker_listener(tmp_path,
                                                                       raftwood_cluster_factory):
    pki = make_pki(tmp_path / "pki")
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            'username="broker" password="broker-secret";')
    cluster = raftwood_cluster_factory(3, start=False, **{
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": jaas,
        "ssl.keystore.location": str(pki.broker_keystore),
        "ssl.truststore.location": str(pki.ca)})
    for broker in cluster.brokers:
        with_listeners(broker, f"SASL_SSL://127.0.0.1:{free_port()}")
    cluster.start_all()
    added = raftwood("users", "add", "broker", "--password", "broker-secret",
                     "--mechanism", "SCRAM-SHA-512",
                     "--bootstrap-server", cluster.bootstrap.split(",")[0])
    assert added.returncode == 0, added.stderr
    cluster.create_topic("replicated", partitions=1, replication_factor=3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(20):
        producer.produce("replicated", value=f"r-{i}".encode())
    assert producer.flush(WAIT_S) == 0
    cluster.wait_for_isr("replicated", 0, [1, 2, 3])

    def every_replica_has_20(statuses):
        return all((cluster.find_hosted(s, "replicated", 0) or {}).get("log_end_offset") == 20
                   for s in statuses.values())

    cluster.wait_for(every_replica_has_20, WAIT_S, "all three replicas at offset 20")
    logs = "".join(b.log_path.read_text(errors="replace") for b in cluster.brokers)
    assert "authenticated User:broker with SCRAM-SHA-512 on listener SASL_SSL" in logs


def test_aiokafka_over_sasl_ssl_with_scram_sha_512(secure):
    import asyncio
    import ssl

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    broker, _, sasl_ssl_port, pki = secure
    topic = create_topic(broker.bootstrap, "sasl-aiokafka")
    options = dict(bootstrap_servers=f"127.0.0.1:{sasl_ssl_port}", security_protocol="SASL_SSL",
                   sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="alice",
                   sasl_plain_password="alice-secret",
                   ssl_context=ssl.create_default_context(cafile=str(pki.ca)))

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(acks="all", **options)
        await producer.start()
        try:
            for i in range(3):
                await producer.send_and_wait(topic, f"aio-{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **options)
        await consumer.start()
        try:
            batches = await consumer.getmany(timeout_ms=10_000, max_records=3)
            return [m.value for messages in batches.values() for m in messages]
        finally:
            await consumer.stop()

    assert asyncio.run(asyncio.wait_for(run(), WAIT_S)) == [b"aio-0", b"aio-1", b"aio-2"]

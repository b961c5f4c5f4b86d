"""kcat, the Java kafka-clients 3.9 harness, kafka-python and aiokafka, unchanged, over
SASL_SSL with SCRAM-SHA-512 and over mutual TLS: each produces and reads its records back
(confluent-kafka's are in test_security_tls.py and test_security_sasl.py).

One broker: PLAINTEXT (the harness's own, and ``raftwood users``), SASL_SSL with
SCRAM-SHA-512 (alice, added with the CLI), SSL with ``ssl.client.auth=required`` (the
client certificate of ``tests/security_certs.py``).  kcat takes librdkafka's settings
with ``-X``; the Java harness takes Kafka's client properties from ``--client-config``,
the file a Java user would write (PEM truststore and keystore).  Each test skips, naming
the missing tool, only when kcat or a JDK is absent.
"""
from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys

import pytest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.sasl import SaslHandshakeRequest

from broker.client.kafka_client import BlockingConnection, ConnectionFailed
from broker.security import scram, tls
from broker.security.client import ClientSecurity
from broker.testing import BrokerProcess, free_port
from tests.conftest import create_topic
from tests.security_certs import make_pki, with_listeners

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
WAIT_S = 30.0
HARNESS_TIMEOUT_S = 180.0
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="alice" password="alice-secret";')


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    home = tmp_path_factory.mktemp("secure-clients")
    pki = make_pki(home / "pki")
    sasl_ssl_port, ssl_port = free_port(), free_port()
    broker = with_listeners(BrokerProcess(home / "data", log_path=home / "broker.log",
                                          extra_settings={
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.location": str(pki.broker_keystore),
        "listener.name.ssl.ssl.truststore.location": str(pki.ca),
        "listener.name.ssl.ssl.client.auth": "required",
        "group.initial.rebalance.delay.ms": "100"}),
        f"SASL_SSL://127.0.0.1:{sasl_ssl_port},SSL://127.0.0.1:{ssl_port}")
    broker.start()
    added = subprocess.run([sys.executable, "-m", "broker.cli", "users", "add", "alice",
                            "--password", "alice-secret", "--mechanism", "SCRAM-SHA-512",
                            "--bootstrap-server", broker.bootstrap],
                           capture_output=True, text=True, timeout=60)
    assert added.returncode == 0, added.stderr
    yield broker, {"SASL_SSL": sasl_ssl_port, "SSL": ssl_port}, pki, home
    assert broker.stop() == 0, broker.log_tail()


# -- kcat -------------------------------------------------------------------------------------

def kcat_settings(protocol: str, pki) -> list[str]:
    settings = {"security.protocol": protocol, "ssl.ca.location": str(pki.ca)}
    if protocol == "SASL_SSL":
        settings.update({"sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "alice",
                         "sasl.password": "alice-secret"})
    else:
        settings.update({"ssl.certificate.location": str(pki.client_cert),
                         "ssl.key.location": str(pki.client_key)})
    return [arg for key, value in settings.items() for arg in ("-X", f"{key}={value}")]


def kcat(*args: str, stdin: bytes | None = None) -> str:
    done = subprocess.run([KCAT, *args], input=stdin, capture_output=True,
                          timeout=WAIT_S + 10)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    return done.stdout.decode()


# librdkafka 2.0 (kcat 1.7.1's) enables SASL only when ApiVersions lists SaslHandshake
# with v0 in its range (its feature map), then speaks v1.
@pytest.mark.skipif(KCAT is None, reason="kcat is not installed (make system-deps)")
@pytest.mark.parametrize("protocol", ["SASL_SSL", "SSL"])
def test_kcat_produces_and_consumes_over(secure, protocol):
    broker, ports, pki, _ = secure
    topic = create_topic(broker.bootstrap, f"kcat-{protocol.lower().replace('_', '-')}", 1)
    bootstrap = f"127.0.0.1:{ports[protocol]}"
    security = kcat_settings(protocol, pki)
    values = [f"{protocol}-{i}" for i in range(5)]
    kcat("-P", "-b", bootstrap, "-t", topic, "-p", "0", "-X", "acks=all", *security,
         stdin="".join(v + "\n" for v in values).encode())
    out = kcat("-C", "-b", bootstrap, "-t", topic, "-p", "0", "-o", "beginning", "-e", "-J",
               "-c", str(len(values)), *security)
    assert [json.loads(line)["payload"] for line in out.splitlines()] == values
    listing = kcat("-L", "-b", bootstrap, "-J", *security)
    assert [b["name"] for b in json.loads(listing)["brokers"]] == [bootstrap], \
        "Metadata names the endpoint of the listener the client came in on"


# -- SaslHandshake v0 (KIP-43): bare tokens ---------------------------------------------------

def legacy_scram(broker_security, port: int, password: str):
    """A SaslHandshake v0 then SCRAM-SHA-512 in bare frames; the open connection and
    whether the server's final message proved it knows the password (None: closed)."""
    conn = BlockingConnection(("127.0.0.1", port), security=broker_security, timeout_s=10)
    handshake = conn.request(SaslHandshakeRequest[0](mechanism="SCRAM-SHA-512"))
    assert handshake.error_code == 0
    client = scram.ScramClient("SCRAM-SHA-512", "alice", password)

    def token(data: bytes) -> bytes | None:
        conn.send_raw(struct.pack(">i", len(data)) + data)
        try:
            return conn.read_frame()
        except ConnectionFailed:
            return None

    server_first = token(client.first())
    server_final = token(client.final(server_first))
    if server_final is None:
        return conn, None
    client.verify(server_final)
    return conn, True


def test_saslhandshake_v0_then_bare_tokens_authenticates(secure):
    broker, ports, pki, _ = secure
    tls_only = ClientSecurity("SASL_SSL", tls.client_context(
        lambda k: str(pki.ca) if k == "ssl.truststore.location" else tls.TLS_SETTINGS.get(k, ""),
        "test"))
    conn, proven = legacy_scram(tls_only, ports["SASL_SSL"], "alice-secret")
    with conn:
        assert proven
        metadata = conn.request(MetadataRequest[1](topics=None))
        assert [b.port for b in metadata.brokers] == [ports["SASL_SSL"]]
    conn, proven = legacy_scram(tls_only, ports["SASL_SSL"], "wrong")
    with conn:
        assert proven is None, "a wrong password must close the connection"
    assert "SaslHandshake v0" in broker.log_tail(), "the failure is logged"


# -- the Java harness -------------------------------------------------------------------------

def java_client_config(home, protocol: str, pki) -> str:
    lines = [f"security.protocol={protocol}", "ssl.truststore.type=PEM",
             f"ssl.truststore.location={pki.ca}"]
    if protocol == "SASL_SSL":
        lines += ["sasl.mechanism=SCRAM-SHA-512", f"sasl.jaas.config={SCRAM_JAAS}"]
    else:
        lines += ["ssl.keystore.type=PEM", f"ssl.keystore.location={pki.client_keystore}"]
    path = home / f"java-{protocol}.properties"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.parametrize("protocol", ["SASL_SSL", "SSL"])
def test_java_harness_passes_over(secure, java_harness, protocol):
    """The Spark-path suite (Admin, an idempotent producer per codec, a group consumer
    reading every record back at its offset) with only the security settings added."""
    broker, ports, pki, home = secure
    run = java_harness.run("suite", bootstrap=f"127.0.0.1:{ports[protocol]}",
                           prefix=f"java-{protocol.lower().replace('_', '-')}", partitions=2,
                           replication_factor=1, brokers=1,
                           client_config=java_client_config(home, protocol, pki),
                           timeout_s=HARNESS_TIMEOUT_S)
    assert run.passed, run.report()
    verdicts = run.steps()
    assert verdicts and set(verdicts.values()) == {"PASS"}, run.report()


# -- kafka-python and aiokafka ----------------------------------------------------------------

def python_client_settings(protocol: str, pki) -> dict:
    """kafka-python's names (aiokafka takes the same, with an ssl_context)."""
    if protocol == "SASL_SSL":
        return {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
                "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret",
                "ssl_cafile": str(pki.ca)}
    return {"security_protocol": "SSL", "ssl_cafile": str(pki.ca),
            "ssl_certfile": str(pki.client_cert), "ssl_keyfile": str(pki.client_key)}


@pytest.mark.parametrize("protocol", ["SASL_SSL", "SSL"])
def test_kafka_python_produces_and_consumes_over(secure, protocol):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    broker, ports, pki, _ = secure
    topic = create_topic(broker.bootstrap, f"kp-{protocol.lower().replace('_', '-')}", 1)
    settings = {"bootstrap_servers": f"127.0.0.1:{ports[protocol]}",
                **python_client_settings(protocol, pki)}
    producer = KafkaProducer(acks="all", **settings)
    for i in range(5):
        producer.send(topic, f"v{i}".encode()).get(timeout=WAIT_S)
    producer.close()
    consumer = KafkaConsumer(consumer_timeout_ms=10_000, **settings)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    values = [m.value for _, m in zip(range(5), consumer)]
    consumer.close()
    assert values == [f"v{i}".encode() for i in range(5)]


@pytest.mark.parametrize("protocol", ["SASL_SSL", "SSL"])
def test_aiokafka_produces_and_consumes_over(secure, protocol):
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    broker, ports, pki, _ = secure
    topic = create_topic(broker.bootstrap, f"aio-{protocol.lower().replace('_', '-')}", 1)
    plain = python_client_settings(protocol, pki)
    context = create_ssl_context(cafile=plain.pop("ssl_cafile"),
                                 certfile=plain.pop("ssl_certfile", None),
                                 keyfile=plain.pop("ssl_keyfile", None))
    settings = {"bootstrap_servers": f"127.0.0.1:{ports[protocol]}", "ssl_context": context,
                **plain}

    async def roundtrip() -> list[bytes]:
        producer = AIOKafkaProducer(acks="all", **settings)
        await producer.start()
        try:
            for i in range(5):
                await producer.send_and_wait(topic, f"v{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **settings)
        await consumer.start()
        try:
            return [(await asyncio.wait_for(consumer.getone(), WAIT_S)).value
                    for _ in range(5)]
        finally:
            await consumer.stop()

    assert asyncio.run(roundtrip()) == [f"v{i}".encode() for i in range(5)]

"""TLS listeners (SSL) with Kafka's PEM settings, driven by confluent-kafka (librdkafka).

A broker listens on PLAINTEXT and SSL at once; Metadata answers each client with the
endpoints of the listener it connected on, so an SSL client never gets sent to the
plaintext port.  With ``ssl.client.auth=required`` a client without a certificate is
refused in the handshake.
"""
from __future__ import annotations

import socket
import ssl
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from broker.testing import BrokerProcess, KafkaConnection, free_port
from tests.conftest import create_topic
from tests.security_certs import make_pki, with_listeners

WAIT_S = 30.0


@pytest.fixture
def pki(tmp_path):
    return make_pki(tmp_path / "pki")


def start_broker(tmp_path, settings: dict, extra_listeners: str) -> BrokerProcess:
    broker = with_listeners(BrokerProcess(tmp_path / "data", log_path=tmp_path / "broker.log",
                                          extra_settings=settings), extra_listeners)
    return broker.start()


@pytest.fixture
def brokers():
    started: list[BrokerProcess] = []
    yield started
    for broker in started:
        assert broker.stop() == 0, broker.log_tail()


def produce_and_consume(client_settings: dict, topic: str, count: int = 10) -> list[bytes]:
    producer = Producer({**client_settings, "acks": "all"})
    for i in range(count):
        producer.produce(topic, value=f"tls-{i}".encode())
    assert producer.flush(WAIT_S) == 0, "messages left unsent"
    consumer = Consumer({**client_settings, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        while len(values) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
        return values
    finally:
        consumer.close()


def metadata_over_tls(port: int, ca: str):
    """A raw Metadata request over TLS: the broker list it answers."""
    context = ssl.create_default_context(cafile=ca)
    conn = KafkaConnection(("127.0.0.1", port))
    try:
        conn.sock = context.wrap_socket(conn.sock, server_hostname="127.0.0.1")
        return [(b.host, b.port) for b in conn.metadata([]).brokers]
    finally:
        conn.close()


def test_confluent_kafka_produces_and_consumes_over_ssl_and_metadata_names_the_ssl_port(
        tmp_path, pki, brokers):
    ssl_port = free_port()
    broker = start_broker(tmp_path, {"ssl.keystore.type": "PEM",
                                     "ssl.keystore.location": str(pki.broker_keystore)},
                          f"SSL://127.0.0.1:{ssl_port}")
    brokers.append(broker)
    topic = create_topic(broker.bootstrap, "over-tls")
    assert metadata_over_tls(ssl_port, str(pki.ca)) == [("127.0.0.1", ssl_port)]
    with KafkaConnection(broker.bootstrap) as conn:
        assert [(b.host, b.port) for b in conn.metadata([]).brokers] == \
            [("127.0.0.1", broker.port)]
    values = produce_and_consume({"bootstrap.servers": f"127.0.0.1:{ssl_port}",
                                  "security.protocol": "SSL", "ssl.ca.location": str(pki.ca)},
                                 topic)
    assert sorted(values) == sorted(f"tls-{i}".encode() for i in range(10))


def test_a_plaintext_request_on_the_tls_port_gets_no_kafka_answer(tmp_path, pki, brokers):
    ssl_port = free_port()
    brokers.append(start_broker(tmp_path, {"ssl.keystore.location": str(pki.broker_keystore)},
                                f"SSL://127.0.0.1:{ssl_port}"))
    with KafkaConnection(("127.0.0.1", ssl_port), timeout_s=5) as conn:
        with pytest.raises((EOFError, OSError, ValueError)):
            conn.api_versions(version=0)


@pytest.mark.slow
def test_mutual_tls_required_accepts_a_client_certificate_and_refuses_a_client_without(
        tmp_path, pki, brokers):
    ssl_port = free_port()
    broker = start_broker(tmp_path, {
        "listener.name.ssl.ssl.keystore.location": str(pki.broker_encrypted_keystore),
        "listener.name.ssl.ssl.key.password": "keystore-secret",
        "listener.name.ssl.ssl.truststore.location": str(pki.ca),
        "listener.name.ssl.ssl.client.auth": "required"}, f"SSL://127.0.0.1:{ssl_port}")
    brokers.append(broker)
    topic = create_topic(broker.bootstrap, "over-mtls")
    common = {"bootstrap.servers": f"127.0.0.1:{ssl_port}", "security.protocol": "SSL",
              "ssl.ca.location": str(pki.ca)}
    values = produce_and_consume({**common, "ssl.certificate.location": str(pki.client_cert),
                                  "ssl.key.location": str(pki.client_key)}, topic, count=3)
    assert len(values) == 3
    admin = AdminClient({**common, "socket.timeout.ms": 3000})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)
    # Refused in the handshake: nothing reached the Kafka layer.
    context = ssl.create_default_context(cafile=str(pki.ca))
    with socket.create_connection(("127.0.0.1", ssl_port), timeout=5) as raw:
        with pytest.raises((ssl.SSLError, OSError)):
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls_sock:
                tls_sock.sendall(b"\x00\x00\x00\x0a" + b"\x00" * 10)
                assert tls_sock.recv(4) == b""  # TLS 1.3: the refusal arrives on first read
                raise OSError("closed")


def test_a_jks_keystore_is_refused_at_start_with_a_clear_message(tmp_path):
    broker = with_listeners(BrokerProcess(tmp_path / "data", log_path=tmp_path / "b.log",
                                          extra_settings={"ssl.keystore.type": "JKS"}),
                            f"SSL://127.0.0.1:{free_port()}")
    # the bound only catches a broker that would serve: the refusal comes at start-up
    with pytest.raises(Exception, match="JKS is not supported"):
        broker.start(timeout_s=60)

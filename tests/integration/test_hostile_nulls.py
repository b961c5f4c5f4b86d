"""Null where Kafka's schema forbids it: the connection closes, the log keeps no traceback,
and the broker goes on serving everyone else.

The issue's fuzzer frames first (SaslHandshake v0 with a null mechanism, FindCoordinator v0
with a null key), then the sweep: every served API and version kafka-python has a schema
for, with a null in each string, bytes, array, array item or nested struct in turn
(tests/hostile_frames.py).  A null the schema allows is answered like any request; one
it forbids closes the connection unanswered, as Kafka's readers refuse it
("non-nullable field ... was serialized as null").
"""
from __future__ import annotations

import socket
import struct
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer

from broker.testing import BrokerProcess, KafkaConnection
from tests.hostile_frames import null_cases

ISSUE_FRAMES = {
    "SaslHandshake v0, null mechanism":
        "0000001a00110000000000010009667a2d636c69656e748000504c41494e",
    "FindCoordinator v0, null key": "0000000e000a0000000000050002667affff",
}
# Kafka-python writes a null Metadata v0 topic list as an empty one (v0 has no null):
# that case is a valid "no topics" request on the wire.
ENCODER_REWRITES = {("Metadata", 0, ("topics",))}
READ_TIMEOUT_S = 20.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    home = tmp_path_factory.mktemp("hostile-nulls")
    broker = BrokerProcess(home / "data", log_path=home / "broker.log",
                           extra_settings={"auto.create.topics.enable": "false"})
    broker.start()
    yield broker
    code = broker.stop()
    assert code == 0, f"broker exited {code} after SIGTERM\n{broker.log_tail()}"


def _exchange(broker: BrokerProcess, frame: bytes) -> str:
    """Send one request on a new connection: "answered" (a whole response came back) or
    "closed" (the broker closed first).  Bounded by READ_TIMEOUT_S."""
    with socket.create_connection((broker.host, broker.port), timeout=READ_TIMEOUT_S) as sock:
        sock.sendall(frame)
        data = b""
        deadline = time.monotonic() + READ_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                return "closed"
            if not chunk:
                return "closed"
            data += chunk
            if len(data) >= 4 and len(data) >= 4 + struct.unpack(">i", data[:4])[0]:
                return "answered"
        raise AssertionError(f"no answer and no close within {READ_TIMEOUT_S} s")


def _tracebacks(broker: BrokerProcess) -> list[str]:
    text = broker.log_path.read_text(errors="replace")
    return [line for line in text.splitlines() if "Traceback" in line]


def _serves_normal_clients(broker: BrokerProcess, topic: str) -> None:
    with KafkaConnection(broker.bootstrap) as conn:
        assert conn.create_topic(topic, 1) == 0
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    try:
        producer.send(topic, b"still-serving").get(timeout=30)
    finally:
        producer.close(timeout=10)
    consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap,
                             auto_offset_reset="earliest", consumer_timeout_ms=15_000)
    try:
        assert [m.value for m in consumer] == [b"still-serving"]
    finally:
        consumer.close()


@pytest.mark.parametrize("label", sorted(ISSUE_FRAMES))
def test_issue_frames_close_the_connection_without_a_traceback(broker, label):
    assert _exchange(broker, bytes.fromhex(ISSUE_FRAMES[label])) == "closed"
    assert _tracebacks(broker) == []


def test_every_forbidden_null_closes_and_every_allowed_one_is_handled(broker):
    cases = null_cases()
    assert len(cases) > 500  # the sweep covers the served APIs, not a handful
    wrong = []
    for case in cases:
        outcome = _exchange(broker, case.frame)
        forbidden = not case.nullable and (case.api, case.version, case.path) \
            not in ENCODER_REWRITES
        if forbidden and outcome != "closed":
            wrong.append(f"{case.label}: {outcome}, expected a close")
        elif not forbidden and outcome != "answered":
            wrong.append(f"{case.label}: {outcome}, expected an answer (the null is allowed)")
    assert wrong == []
    assert _tracebacks(broker) == []
    _serves_normal_clients(broker, "after-null-sweep")


def test_repeated_nulls_are_logged_rate_limited(broker):
    """A flood of the same bad request writes a line or two, not one per request."""
    frame = bytes.fromhex(ISSUE_FRAMES["FindCoordinator v0, null key"])
    before = broker.log_path.read_text(errors="replace").count("non-nullable field key")
    for _ in range(50):
        assert _exchange(broker, frame) == "closed"
    after = broker.log_path.read_text(errors="replace").count("non-nullable field key")
    assert after - before <= 2
    assert _tracebacks(broker) == []

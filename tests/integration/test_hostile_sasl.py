"""sasl.server.max.receive.size: on a SASL listener, before authentication, a frame larger
than the limit closes the connection (Kafka's InvalidReceiveException); once the client
has authenticated, frames up to socket.request.max.bytes are read again.

The oversized request is a valid SaslHandshake padded with trailing bytes (which the
broker ignores): under the limit it is answered, over it the connection closes, so the
size alone decides.
"""
from __future__ import annotations

import pytest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from broker.testing import BrokerProcess, KafkaConnection, free_port
from tests.security_certs import with_listeners

PRE_AUTH_MAX = 64 * 1024
WAIT_S = 20.0
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_alice="alice-secret";')


@pytest.fixture(scope="module")
def sasl_port(tmp_path_factory):
    home = tmp_path_factory.mktemp("hostile-sasl")
    port = free_port()
    broker = with_listeners(BrokerProcess(home / "data", log_path=home / "broker.log",
                                          extra_settings={
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "sasl.server.max.receive.size": PRE_AUTH_MAX,
        "auto.create.topics.enable": "false"}), f"SASL_PLAINTEXT://127.0.0.1:{port}")
    broker.start()
    yield port
    assert broker.stop() == 0, broker.log_tail()


def padded_handshake(frame_size: int) -> bytes:
    """A SaslHandshake v1 (PLAIN) request frame whose size field is ``frame_size``."""
    request = SaslHandshakeRequest[1](mechanism="PLAIN")
    request.with_header(correlation_id=1, client_id="padded")
    frame = bytes(request.encode(header=True, framed=True))
    padding = frame_size - (len(frame) - 4)
    return frame_size.to_bytes(4, "big") + frame[4:] + bytes(padding)


def authenticate(conn: KafkaConnection) -> None:
    assert conn.request(SaslHandshakeRequest[1](mechanism="PLAIN")).error_code == 0
    answer = conn.request(SaslAuthenticateRequest[1](auth_bytes=b"\0alice\0alice-secret"))
    assert answer.error_code == 0


@pytest.mark.parametrize("frame_size, closed", [(PRE_AUTH_MAX, False), (PRE_AUTH_MAX + 1, True)])
def test_before_authentication_frames_are_capped(sasl_port, frame_size, closed):
    with KafkaConnection(("127.0.0.1", sasl_port), timeout_s=WAIT_S) as conn:
        conn.send_raw(padded_handshake(frame_size))
        if closed:
            assert conn.closed_by_peer(WAIT_S)
        else:
            assert len(conn.read_frame()) > 4  # answered


def test_after_authentication_the_socket_request_limit_applies(sasl_port):
    names = [f"no-such-topic-{i:08d}" for i in range(2 * PRE_AUTH_MAX // 20)]
    with KafkaConnection(("127.0.0.1", sasl_port), timeout_s=WAIT_S) as conn:
        authenticate(conn)
        answer = conn.request(MetadataRequest[4](
            topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in names],
            allow_auto_topic_creation=False))
        assert len(answer.topics) == len(names)

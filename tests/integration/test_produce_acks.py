"""The acks rules (broker/replication/acks.py) as a client sees them, over raw Produce
requests to one real broker: acks other than 0, 1 and -1 are refused with
INVALID_REQUIRED_ACKS and append nothing; acks=-1 below min.insync.replicas is refused
with NOT_ENOUGH_REPLICAS and appends nothing while acks=1 goes through; a failed acks=0
produce closes its connection (the broker serves on) and a good one keeps it open."""
from __future__ import annotations

import socket

import pytest

from broker.testing import KafkaConnection, build_batch
from tests.conftest import create_topic

NONE, UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS, INVALID_REQUIRED_ACKS = 0, 3, 19, 21
TOPIC = "acks"              # min.insync.replicas=1 (the default)
STRICT = "acks-min-isr-2"   # min.insync.replicas=2 with one replica: acks=-1 never fits


@pytest.fixture(scope="module")
def broker(module_broker):
    create_topic(module_broker.bootstrap, TOPIC)
    create_topic(module_broker.bootstrap, STRICT, configs={"min.insync.replicas": 2})
    return module_broker


def _batch(value: bytes) -> bytes:
    return bytes(build_batch([(None, value, 1_700_000_000_000, [])]))


def _latest(conn: KafkaConnection, topic: str) -> int:
    answer = conn.list_offsets(topic, 0, -1)
    assert answer.error_code == NONE, answer
    return answer.offset


@pytest.mark.parametrize("required_acks", [2, -2, 32767])
def test_acks_other_than_0_1_all_are_refused_and_append_nothing(broker, required_acks):
    with KafkaConnection(broker.bootstrap) as conn:
        before = _latest(conn, TOPIC)
        answer = conn.produce(TOPIC, 0, _batch(b"bad-acks"), acks=required_acks)
        assert answer.error_code == INVALID_REQUIRED_ACKS, answer
        assert _latest(conn, TOPIC) == before, "a refused batch was appended"
        assert conn.api_versions().error_code == NONE, "the connection is unusable"


def test_acks_all_below_min_insync_replicas_is_refused_and_acks_1_is_not(broker):
    with KafkaConnection(broker.bootstrap) as conn:
        before = _latest(conn, STRICT)
        refused = conn.produce(STRICT, 0, _batch(b"refused"), acks=-1)
        assert refused.error_code == NOT_ENOUGH_REPLICAS, refused
        assert _latest(conn, STRICT) == before, "a refused acks=all batch was appended"
        accepted = conn.produce(STRICT, 0, _batch(b"acks-1"), acks=1)
        assert (accepted.error_code, accepted.base_offset) == (NONE, before), accepted
        assert _latest(conn, STRICT) == before + 1


def test_acks_all_with_an_isr_of_one_is_answered_at_its_offset(broker):
    with KafkaConnection(broker.bootstrap) as conn:
        before = _latest(conn, TOPIC)
        answer = conn.produce(TOPIC, 0, _batch(b"all"), acks=-1)
        assert (answer.error_code, answer.base_offset) == (NONE, before), answer
        assert _latest(conn, TOPIC) == before + 1, "acknowledged but not below the HW"


def _closed_by_broker(sock: socket.socket, timeout_s: float = 30.0) -> bool:
    sock.settimeout(timeout_s)
    try:
        while True:
            if not sock.recv(65536):
                return True
    except TimeoutError:
        return False
    except OSError:
        return True


def test_a_failed_acks_0_produce_closes_only_its_connection(broker):
    with KafkaConnection(broker.bootstrap) as good, KafkaConnection(broker.bootstrap) as bad:
        before = _latest(good, TOPIC)
        assert good.produce(TOPIC, 0, _batch(b"fire-and-forget"), acks=0) is None
        assert good.api_versions().error_code == NONE, "a good acks=0 produce closed"
        assert bad.produce(TOPIC, 7, _batch(b"no-such-partition"), acks=0) is None
        assert _closed_by_broker(bad.sock), "a failed acks=0 produce left the connection open"
        assert good.api_versions().error_code == NONE
        assert _latest(good, TOPIC) == before + 1
        missing = good.produce(TOPIC, 7, _batch(b"asked"), acks=1)
        assert missing.error_code == UNKNOWN_TOPIC_OR_PARTITION, missing

"""Internal topics belong to the broker: clients may not write or delete them.

Kafka refuses a client Produce to ``__consumer_offsets`` with INVALID_TOPIC_EXCEPTION per
partition, and DeleteTopics of it likewise; only the group coordinator appends there.  A
record a client slipped in would be unreadable to the group loader after a restart.
"""
from __future__ import annotations

import time

from broker.testing import KafkaConnection, build_batch
from tests.conftest import create_topic

INVALID_TOPIC_EXCEPTION = 17
OFFSETS_TOPIC = "__consumer_offsets"
WAIT_S = 30.0


def _commit_with_confluent(bootstrap: str, group: str, topic: str, offset: int) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def _committed_with_confluent(bootstrap: str, group: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    try:
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                return consumer.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
            except Exception:  # the coordinator may still be loading after a restart
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        consumer.close()


def _offsets_topic_end(conn: KafkaConnection) -> dict[int, int]:
    metadata = conn.metadata([OFFSETS_TOPIC])
    partitions = metadata.topics[0].partitions
    return {p.partition_index: conn.list_offsets(OFFSETS_TOPIC, p.partition_index, -1).offset
            for p in partitions}


def test_client_cannot_produce_to_or_delete_consumer_offsets_and_groups_survive_restart(
        raftwood_broker_factory):
    broker = raftwood_broker_factory(offsets_topic_num_partitions=2)
    topic = create_topic(broker.bootstrap, "internal-guard")
    _commit_with_confluent(broker.bootstrap, "g-internal", topic, 42)

    garbage = build_batch([(b"\x00\x07junk-key", b"junk-value", 1_000, [])])
    with KafkaConnection(broker.bootstrap) as conn:
        before = _offsets_topic_end(conn)
        assert len(before) == 2
        for acks in (1, -1):
            for index in before:
                answer = conn.produce(OFFSETS_TOPIC, index, garbage, acks=acks)
                assert answer.error_code == INVALID_TOPIC_EXCEPTION, answer
                assert answer.base_offset == -1
        # Not a single byte reached the log.
        assert _offsets_topic_end(conn) == before

    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    future = admin.delete_topics([OFFSETS_TOPIC], operation_timeout=10)[OFFSETS_TOPIC]
    try:
        future.result(15)
        raise AssertionError("deleting __consumer_offsets succeeded")
    except Exception as exc:  # confluent_kafka.KafkaException carrying a KafkaError
        error = exc.args[0]
        assert error.code() == INVALID_TOPIC_EXCEPTION, error
    with KafkaConnection(broker.bootstrap) as conn:
        assert conn.metadata([OFFSETS_TOPIC]).topics[0].is_internal

    broker.restart()
    assert _committed_with_confluent(broker.bootstrap, "g-internal", topic) == 42
    log_text = broker.log_path.read_text(errors="replace")
    assert "skipping unreadable record" not in log_text

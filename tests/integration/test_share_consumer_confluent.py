"""confluent-kafka's ShareConsumer (librdkafka's KIP-932 client) against one real broker.

Share groups end to end with a real client: two consumers of one group on one
partition together get every record exactly once (implicit acknowledgement; which
member gets how many is the fetch timing's, and is printed); explicit RELEASE
redelivers a record with its delivery count raised and REJECT archives one.  A null
record set in a ShareFetch answer made librdkafka drop the whole response (it reads
the size as -1): these tests caught it.  The group side (ShareGroupHeartbeat) assigns
the partition to both members; the leader's share partition hands each record to one.
"""
from __future__ import annotations

import time

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer

from broker.testing import BrokerProcess, KafkaConnection

pytestmark = pytest.mark.slow
EXPLICIT: dict[int, bool] = {}  # id(consumer) -> explicit acknowledgement mode


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    home = tmp_path_factory.mktemp("share-consumer")
    broker = BrokerProcess(home / "data", log_path=home / "broker.log")
    broker.start()
    yield broker
    code = broker.stop()
    assert code == 0, f"broker exited {code} after SIGTERM\n{broker.log_tail()}"


def produce(broker, topic: str, count: int, tag: bytes = b"") -> list[bytes]:
    values = [b"%s%s-%d" % (tag, topic.encode(), i) for i in range(count)]
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0, "every record delivered"
    return values


def consumer(broker, group: str, topic: str, explicit: bool = False) -> ShareConsumer:
    config = {"bootstrap.servers": broker.bootstrap, "group.id": group}
    if explicit:
        config["share.acknowledgement.mode"] = "explicit"
    share = ShareConsumer(config)
    share.subscribe([topic])
    EXPLICIT[id(share)] = explicit
    return share


def is_probe(message) -> bool:
    return message.value().startswith(b"probe")


def poll_until(consumers, want, seconds: float = 60.0, on_message=None) -> list:
    """Poll every consumer in turn until ``want(messages so far)``; bounded in time."""
    seen: list = []
    deadline = time.monotonic() + seconds
    while not want(seen):
        assert time.monotonic() < deadline, f"gave up with {len(seen)} messages"
        for share in consumers:
            for message in share.poll(0.5):
                assert message.error() is None, message.error()
                seen.append((share, message))
                if on_message is not None:
                    on_message(share, message)
    return seen


def warm_up(broker, topic: str, consumers, seconds: float = 60.0) -> None:
    """Produce probe records until a consumer receives one: the group's share partition
    then exists (a group starts at the end of the log, Kafka's default, on its first
    fetch), so every record produced after this is delivered."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        produce(broker, topic, 1, tag=b"probe")
        for share in consumers:
            for message in share.poll(1.0):
                assert message.error() is None, message.error()
                share.acknowledge(message, AcknowledgeType.ACCEPT) if EXPLICIT.get(id(share)) \
                    else None
                if message.value().startswith(b"probe"):
                    return
    raise AssertionError("no probe record reached a share consumer")


def test_two_share_consumers_of_a_group_get_every_record_exactly_once(broker):
    with KafkaConnection(broker.bootstrap) as conn:
        assert conn.create_topic("work", 1) == 0
    first, second = consumer(broker, "workers", "work"), consumer(broker, "workers", "work")
    try:
        warm_up(broker, "work", [first, second])
        values = produce(broker, "work", 200)
        seen = poll_until([first, second],
                          lambda s: len([m for _, m in s if not is_probe(m)]) >= len(values))
        got = [m.value() for _, m in seen if not is_probe(m)]
        assert sorted(got) == sorted(values), "every record exactly once"
        counts = [sum(1 for s, m in seen if s is c and not is_probe(m)) for c in (first, second)]
        print(f"records per consumer: {counts}")
        assert all(m.delivery_count() == 1 for _, m in seen)
    finally:
        first.close()
        second.close()


def test_release_redelivers_with_a_higher_count_and_reject_archives(broker):
    with KafkaConnection(broker.bootstrap) as conn:
        assert conn.create_topic("explicit", 1) == 0
    share = consumer(broker, "explicit-group", "explicit", explicit=True)
    try:
        warm_up(broker, "explicit", [share])
        produce(broker, "explicit", 2)
        decided: dict[bytes, list[int]] = {}

        def acknowledge(_, message) -> None:
            if is_probe(message):
                share.acknowledge(message, AcknowledgeType.ACCEPT)
                return
            counts = decided.setdefault(message.value(), [])
            counts.append(message.delivery_count())
            if message.value().endswith(b"-0") and len(counts) == 1:
                share.acknowledge(message, AcknowledgeType.RELEASE)
            elif message.value().endswith(b"-1"):
                share.acknowledge(message, AcknowledgeType.REJECT)
            else:
                share.acknowledge(message, AcknowledgeType.ACCEPT)
            share.commit_sync()

        poll_until([share], lambda s: sum(not is_probe(m) for _, m in s) >= 3,
                   on_message=acknowledge)
        assert decided == {b"explicit-0": [1, 2], b"explicit-1": [1]}
        assert not list(share.poll(2.0)), "nothing left: accepted and archived"
    finally:
        share.close()

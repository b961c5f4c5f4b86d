"""confluent-kafka's ShareConsumer (librdkafka's KIP-932 client) against one real broker.

Share groups end to end with a real client: two consumers of one group on one
partition together get every record exactly once (implicit acknowledgement; which
member gets how many is the fetch timing's, and is printed); explicit RELEASE
redelivers a record with its delivery count raised and REJECT archives one; a record
released up to the group's delivery limit is archived; a read_committed group never
gets an aborted transaction's records; a consumer killed while holding records gives
them back at once (its connection closes) with their delivery count raised.  A null
record set in a ShareFetch answer made librdkafka drop the whole response (it reads
the size as -1): these tests caught it.  The group side (ShareGroupHeartbeat) assigns
the partition to both members; the leader's share partition hands each record to one.
"""
from __future__ import annotations

import subprocess
import sys
import time

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer

from broker.testing import BrokerProcess, KafkaConnection
from tests.integration.test_share_fetch_wire import set_group_configs

pytestmark = pytest.mark.slow
EXPLICIT: dict[int, bool] = {}  # id(consumer) -> explicit acknowledgement mode


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    home = tmp_path_factory.mktemp("share-consumer")
    broker = BrokerProcess(home / "data", log_path=home / "broker.log", start_timeout_s=60)
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


def test_the_delivery_limit_archives_and_read_committed_skips_aborted_records(broker):
    """Group configs: a delivery limit of 2 (RELEASE twice: archived, never a third
    delivery) and share.isolation.level=read_committed (an aborted transaction's records
    are never delivered), both from the log start (earliest)."""
    with KafkaConnection(broker.bootstrap) as conn:
        assert conn.create_topic("limited", 1) == 0
        set_group_configs(conn, "limited-group", {
            "share.delivery.count.limit": "2", "share.isolation.level": "read_committed",
            "share.auto.offset.reset": "earliest"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "limited"})
    producer.init_transactions(30)
    for values, commit in (([b"poison", b"kept"], True), ([b"aborted"], False)):
        producer.begin_transaction()
        for value in values:
            producer.produce("limited", value)
        assert producer.flush(30) == 0
        producer.commit_transaction(30) if commit else producer.abort_transaction(30)
    share = consumer(broker, "limited-group", "limited", explicit=True)
    try:
        counts: dict[bytes, list[int]] = {}

        def decide(_, message) -> None:
            counts.setdefault(message.value(), []).append(message.delivery_count())
            kind = AcknowledgeType.RELEASE if message.value() == b"poison" \
                else AcknowledgeType.ACCEPT
            share.acknowledge(message, kind)
            share.commit_sync()

        poll_until([share], lambda s: len(s) >= 3, on_message=decide)
        assert not list(share.poll(2.0)), "poison archived at the limit"
        assert counts == {b"poison": [1, 2], b"kept": [1]}, counts
    finally:
        share.close()


HOLDER = """
import sys, time
from confluent_kafka import ShareConsumer
share = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                       "share.acknowledgement.mode": "explicit"})
share.subscribe([sys.argv[3]])
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    got = share.poll(0.5)
    if got:
        print("holding", len(got), flush=True)
        time.sleep(120)  # killed here, holding its records
"""


def test_a_consumer_killed_holding_records_gives_them_back_at_once(broker):
    """A share consumer process killed with SIGKILL while it holds records (60 s lock):
    its connection closes, the leader releases them at once (as Kafka's does on the
    member's disconnect) and another consumer gets them, delivered a second time."""
    with KafkaConnection(broker.bootstrap) as conn:
        assert conn.create_topic("held", 1) == 0
        set_group_configs(conn, "held-group", {"share.record.lock.duration.ms": "60000",
                                               "share.auto.offset.reset": "earliest"})
    values = produce(broker, "held", 3)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, broker.bootstrap, "held-group",
                               "held"], stdout=subprocess.PIPE, text=True)
    try:
        line = holder.stdout.readline()
        assert line.startswith("holding"), f"the holder got nothing: {line!r}"
    finally:
        holder.kill()
        holder.wait(30)
    held = int(line.split()[1])
    share = consumer(broker, "held-group", "held")
    try:
        seen = poll_until([share], lambda s: len(s) >= len(values), seconds=30)
        assert sorted(m.value() for _, m in seen) == sorted(values)
        counts = [m.delivery_count() for _, m in seen]
        assert counts.count(2) >= held and set(counts) <= {1, 2}, \
            f"the {held} held records released at once, their count kept: {counts}"
    finally:
        share.close()

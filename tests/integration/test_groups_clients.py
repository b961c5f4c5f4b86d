"""Consumer groups driven by real clients against one real broker process.

aiokafka, kafka-python, confluent-kafka (librdkafka) and kcat each subscribe with a group
id, consume, commit, and a later member of the same group resumes after the commits.
Every wait is bounded; each test uses its own topic and group on a broker shared by the
module (its initial rebalance delay is short so groups form quickly).
"""
from __future__ import annotations

import asyncio
import itertools
import shutil
import subprocess
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from broker.testing import BrokerProcess
from tests.conftest import create_topic

WAIT_S = 30.0
INITIAL_DELAY_MS = 300
_names = itertools.count(1)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    home = tmp_path_factory.mktemp("groups-clients")
    process = BrokerProcess(home / "data", log_path=home / "broker.log", extra_settings={
        "group.initial.rebalance.delay.ms": str(INITIAL_DELAY_MS),
        "group.min.session.timeout.ms": "1000"}).start()
    yield process
    assert process.stop() == 0, process.log_tail()


def names(prefix: str) -> tuple[str, str]:
    n = next(_names)
    return f"{prefix}-topic-{n}", f"{prefix}-group-{n}"


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int,
            tag: str = "") -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for p in range(partitions):
            for i in range(per_partition):
                producer.send(topic, value=f"{tag}{p}-{i}".encode(), partition=p)
        producer.flush(timeout=WAIT_S)
    finally:
        producer.close()


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """OffsetFetch through kafka-python (what a restarted consumer would read)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                             enable_auto_commit=False)
    try:
        return {p: consumer.committed(TopicPartition(topic, p)) for p in range(partitions)}
    finally:
        consumer.close(autocommit=False)


# -- aiokafka -----------------------------------------------------------------------------------

async def _wait_assignments(consumers, expected_sizes: list[int], total: int) -> list[set]:
    """Wait (aiokafka joins, syncs and heartbeats in the background) until the assignments
    have the expected sizes and cover ``total`` partitions between them; returns them."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        assigned = [set(c.assignment()) for c in consumers]
        union = set().union(*assigned)
        if sorted(len(a) for a in assigned) == sorted(expected_sizes) and len(union) == total:
            return assigned
    raise AssertionError(f"assignments never became {expected_sizes}: "
                         f"{[sorted(c.assignment()) for c in consumers]}")


async def _consume(consumers, want: int) -> dict[int, list]:
    """Records consumed by each consumer (index → [(partition, offset)]) until ``want``."""
    got: dict[int, list] = {i: [] for i in range(len(consumers))}
    deadline = time.monotonic() + WAIT_S
    while sum(map(len, got.values())) < want and time.monotonic() < deadline:
        batches = await asyncio.gather(*(c.getmany(timeout_ms=200) for c in consumers))
        for i, batch in enumerate(batches):
            for tp, records in batch.items():
                got[i] += [(tp.partition, r.offset) for r in records]
    assert sum(map(len, got.values())) == want, got
    return got


def test_aiokafka_three_members_split_six_partitions_rebalance_on_leave_and_resume(broker):
    from aiokafka import AIOKafkaConsumer

    topic, group = names("aiokafka")
    create_topic(broker.bootstrap, topic, partitions=6)
    produce(broker.bootstrap, topic, 6, 10)

    def consumer():
        return AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                                enable_auto_commit=False, auto_offset_reset="earliest",
                                session_timeout_ms=6000, heartbeat_interval_ms=300,
                                request_timeout_ms=20000)

    async def scenario():
        members = [consumer() for _ in range(3)]
        for member in members:
            await member.start()
        try:
            assigned = await _wait_assignments(members, [2, 2, 2], 6)
            got = await _consume(members, 60)
            for i, records in got.items():  # each member read only its own partitions
                assert {p for p, _ in records} <= {tp.partition for tp in assigned[i]}
            assert len({r for records in got.values() for r in records}) == 60
            for member in members:
                await member.commit()

            leaving = members.pop()
            await leaving.stop()  # LeaveGroup: the other two take over its partitions
            await _wait_assignments(members, [3, 3], 6)
            produce(broker.bootstrap, topic, 6, 5, tag="second-")
            got = await _consume(members, 30)  # only the new records: commits were honoured
            assert sorted(o for records in got.values() for _, o in records) \
                == sorted(list(range(10, 15)) * 6)
            for member in members:
                await member.commit()
        finally:
            for member in members:
                await member.stop()

        late = consumer()
        await late.start()
        try:
            await _wait_assignments([late], [6], 6)
            for p in range(6):
                from aiokafka import TopicPartition as ATP
                assert await late.committed(ATP(topic, p)) == 15
            produce(broker.bootstrap, topic, 6, 1, tag="third-")
            got = await _consume([late], 6)
            assert sorted(got[0]) == [(p, 15) for p in range(6)]
        finally:
            await late.stop()

    asyncio.run(asyncio.wait_for(scenario(), 120))


# -- kafka-python ----------------------------------------------------------------------------------

def test_kafka_python_group_consumer_commits_and_a_new_member_resumes(broker):
    topic, group = names("kafka-python")
    create_topic(broker.bootstrap, topic, partitions=3)
    produce(broker.bootstrap, topic, 3, 4)

    def consume(want: int) -> list:
        consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                                 enable_auto_commit=False, auto_offset_reset="earliest",
                                 session_timeout_ms=6000, heartbeat_interval_ms=500)
        records = []
        try:
            deadline = time.monotonic() + WAIT_S
            while len(records) < want and time.monotonic() < deadline:
                for batch in consumer.poll(timeout_ms=500).values():
                    records += [(r.partition, r.offset, r.value) for r in batch]
            consumer.commit()
        finally:
            consumer.close(autocommit=False)
        return records

    first = consume(12)
    assert len(first) == 12 and len(set(first)) == 12
    assert committed_offsets(broker.bootstrap, group, topic, 3) == {0: 4, 1: 4, 2: 4}
    produce(broker.bootstrap, topic, 3, 1, tag="more-")
    second = consume(3)
    assert sorted((p, o) for p, o, _ in second) == [(0, 4), (1, 4), (2, 4)]
    assert committed_offsets(broker.bootstrap, group, topic, 3) == {0: 5, 1: 5, 2: 5}


# -- confluent-kafka -------------------------------------------------------------------------------

def test_confluent_kafka_subscribe_and_commit(broker):
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTP

    topic, group = names("confluent")
    create_topic(broker.bootstrap, topic, partitions=4)
    produce(broker.bootstrap, topic, 4, 5)

    def consumer():
        return Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})

    c = consumer()
    try:
        c.subscribe([topic])
        seen = set()
        deadline = time.monotonic() + WAIT_S
        while len(seen) < 20 and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.add((msg.partition(), msg.offset()))
        assert len(seen) == 20
        c.commit(asynchronous=False)
        committed = c.committed([CTP(topic, p) for p in range(4)], timeout=10)
        assert [tp.offset for tp in committed] == [5, 5, 5, 5]
    finally:
        c.close()

    produce(broker.bootstrap, topic, 4, 1, tag="more-")
    c = consumer()
    try:
        c.subscribe([topic])
        seen = set()
        deadline = time.monotonic() + WAIT_S
        while len(seen) < 4 and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.add((msg.partition(), msg.offset()))
        assert seen == {(p, 5) for p in range(4)}
    finally:
        c.close()


# -- kcat ------------------------------------------------------------------------------------------

@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")
def test_kcat_balanced_consumer_reads_the_topic_and_commits(broker):
    topic, group = names("kcat")
    create_topic(broker.bootstrap, topic, partitions=2)
    produce(broker.bootstrap, topic, 2, 3)
    result = subprocess.run(
        ["kcat", "-b", broker.bootstrap, "-G", group, "-o", "beginning", "-e", "-q",
         "-f", "%p:%o\\n", "-X", "session.timeout.ms=6000", topic],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    lines = sorted(result.stdout.split())
    assert lines == sorted(f"{p}:{o}" for p in range(2) for o in range(3)), result.stderr
    # librdkafka commits what it consumed when the balanced consumer closes.
    assert committed_offsets(broker.bootstrap, group, topic, 2) == {0: 3, 1: 3}


# -- admin clients -------------------------------------------------------------------------------

def test_admin_clients_list_describe_fetch_offsets_and_delete_groups(broker):
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaAdminClient

    topic, group = names("admin")
    create_topic(broker.bootstrap, topic, partitions=2)
    produce(broker.bootstrap, topic, 2, 2)
    member = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                           auto_offset_reset="earliest", enable_auto_commit=False)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    confluent = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        got, deadline = 0, time.monotonic() + WAIT_S
        while got < 4 and time.monotonic() < deadline:
            got += sum(len(v) for v in member.poll(timeout_ms=500).values())
        member.commit()

        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert (listed[group]["group_state"], listed[group]["protocol_type"]) == \
            ("Stable", "consumer")
        described = admin.describe_groups([group])[group]
        (desc_member,) = described["members"]
        assert desc_member["client_host"] == "/127.0.0.1"
        assert desc_member["member_assignment"]["assigned_partitions"] == \
            [{"topic": topic, "partitions": [0, 1]}]
        offsets = admin.list_group_offsets(group)[group]
        assert {tp.partition: o.offset for tp, o in offsets.items()} == {0: 2, 1: 2}

        listed = confluent.list_consumer_groups().result(10)
        assert group in {g.group_id for g in listed.valid} and not listed.errors
        described = confluent.describe_consumer_groups([group])[group].result(10)
        assert [sorted(tp.partition for tp in m.assignment.topic_partitions)
                for m in described.members] == [[0, 1]]
        fetched = confluent.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)])[group].result(10)
        assert sorted((tp.partition, tp.offset) for tp in fetched.topic_partitions) == \
            [(0, 2), (1, 2)]

        assert admin.delete_groups([group])[group] != "OK"  # NON_EMPTY_GROUP while it lives
        member.close(autocommit=False)
        assert admin.delete_groups([group, "no-such-group"]) == \
            {group: "OK", "no-such-group": "GroupIdNotFoundError"}
        assert group not in {g["group_id"] for g in admin.list_groups()}
        assert committed_offsets(broker.bootstrap, group, topic, 2) == {0: None, 1: None}
    finally:
        member.close(autocommit=False)
        admin.close()

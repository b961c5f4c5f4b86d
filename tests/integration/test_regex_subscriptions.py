"""KIP-848 regex subscriptions (``SubscribedTopicRegex``) against a real broker process.

Invariants: a ``group.protocol=consumer`` member that subscribes with a pattern is
assigned every partition of every topic whose whole name matches it and nothing else; a
matching topic created after the subscription is assigned at a later heartbeat (the
coordinator resolves the pattern against the current metadata and moves the group epoch),
and its records reach the member.  A pattern that does not compile, or that RE2 refuses
(backreferences, lookaround), is answered INVALID_REGULAR_EXPRESSION with a message, and
no group is made.  The member's pattern, as the client sent it, is what
ConsumerGroupDescribe shows.  The Java 4.3 consumer's ``subscribe(SubscriptionPattern)``
(the pattern evaluated by the broker) gets the same.  Every wait is bounded.
"""
from __future__ import annotations

import time
import uuid

import pytest

from broker.harness.process import BrokerProcess
from broker.testing import KafkaConnection
from protocol.consumer_group_messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from protocol.errors import ErrorCode

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

WAIT_S = 60.0


@pytest.fixture(scope="module")
def regex_broker(tmp_path_factory):
    home = tmp_path_factory.mktemp("regex-subscriptions")
    broker = BrokerProcess(home / "data", log_path=home / "broker.log", extra_settings={
        "group_consumer_heartbeat_interval_ms": 500,
        "group_consumer_min_session_timeout_ms": 1000,
        "group_consumer_session_timeout_ms": 10000}).start()
    yield broker
    code = broker.stop()
    assert code == 0, f"broker exited with {code}\n{broker.log_tail()}"


def create_topics(bootstrap: str, names: list[str], partitions: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1) for name in names])
    for future in futures.values():
        future.result(timeout=WAIT_S)


def wait_assigned(member: Consumer, want: set, what: str) -> None:
    """Poll until ``member`` owns exactly ``want`` ({(topic, partition)}); bounded."""
    deadline = time.monotonic() + WAIT_S
    owned: set = set()
    while time.monotonic() < deadline:
        member.poll(0.2)
        owned = {(tp.topic, tp.partition) for tp in member.assignment()}
        if owned == want:
            return
    raise AssertionError(f"{what}: owns {sorted(owned)}, wanted {sorted(want)}")


def heartbeat(regex: str, group: str) -> ConsumerGroupHeartbeatRequest:
    request = ConsumerGroupHeartbeatRequest[1](
        group_id=group, member_id=str(uuid.uuid4()), member_epoch=0, instance_id=None,
        rack_id=None, rebalance_timeout_ms=30_000, subscribed_topic_names=[],
        subscribed_topic_regex=regex, server_assignor=None, topic_partitions=[])
    request.response_type = ConsumerGroupHeartbeatResponse
    return request


def describe(conn: KafkaConnection, group: str):
    request = ConsumerGroupDescribeRequest[0](group_ids=[group],
                                              include_authorized_operations=False)
    request.response_type = ConsumerGroupDescribeResponse
    return conn.request(request).groups[0]


def test_a_pattern_subscribes_to_matching_topics_also_those_created_later(regex_broker):
    prefix = f"orders{uuid.uuid4().hex[:6]}"
    bootstrap = regex_broker.bootstrap
    create_topics(bootstrap, [f"{prefix}-eu", f"{prefix}-us", f"payments{prefix}"])
    member = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{prefix}",
                       "group.protocol": "consumer", "auto.offset.reset": "earliest",
                       "topic.metadata.refresh.interval.ms": 1000})
    try:
        member.subscribe([f"^{prefix}-.*"])
        wait_assigned(member, {(f"{prefix}-{r}", p) for r in ("eu", "us") for p in (0, 1)},
                      "the matching topics")
        create_topics(bootstrap, [f"{prefix}-apac"])
        wait_assigned(member, {(f"{prefix}-{r}", p) for r in ("eu", "us", "apac")
                               for p in (0, 1)}, "a matching topic created later")
        producer = Producer({"bootstrap.servers": bootstrap})
        producer.produce(f"{prefix}-apac", b"late", partition=1)
        assert producer.flush(WAIT_S) == 0
        deadline = time.monotonic() + WAIT_S
        got = None
        while got is None and time.monotonic() < deadline:
            message = member.poll(0.5)
            if message is not None and not message.error():
                got = (message.topic(), message.value())
        assert got == (f"{prefix}-apac", b"late")
        with KafkaConnection(bootstrap) as conn:
            described = describe(conn, f"g-{prefix}")
        assert described.error_code == ErrorCode.NONE
        # librdkafka sends its patterns joined, each in parentheses: "(^orders-.*)"
        assert [m.subscribed_topic_regex for m in described.members] == [f"(^{prefix}-.*)"]
    finally:
        member.close()


@pytest.mark.parametrize("pattern", ["orders-[", "(a)\\1-.*", "(?=orders).*", "a++"])
def test_a_pattern_kafka_refuses_gets_invalid_regular_expression(regex_broker, pattern):
    group = f"bad-{uuid.uuid4().hex[:8]}"
    with KafkaConnection(regex_broker.bootstrap) as conn:
        answer = conn.request(heartbeat(pattern, group))
        assert answer.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION, answer
        assert pattern in answer.error_message
        assert describe(conn, group).error_code == ErrorCode.GROUP_ID_NOT_FOUND


JAVA_REGEX_PROBE = """
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.TopicPartition;

public class RegexProbe {
    static Set<String> topics(KafkaConsumer<byte[], byte[]> c, Set<String> want) {
        long deadline = System.currentTimeMillis() + 60_000;
        Set<String> got = new TreeSet<>();
        while (System.currentTimeMillis() < deadline) {
            c.poll(Duration.ofMillis(200));
            got = new TreeSet<>();
            for (TopicPartition tp : c.assignment()) got.add(tp.topic());
            if (got.equals(want)) break;
        }
        return got;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], prefix = args[1];
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", "java-" + prefix);
        p.put("group.protocol", "consumer");
        p.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        p.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        Properties a = new Properties();
        a.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(a);
             KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            c.subscribe(new SubscriptionPattern(prefix + "-.*"));
            System.out.println("before=" + topics(c, Set.of(prefix + "-a")));
            admin.createTopics(List.of(new NewTopic(prefix + "-b", 1, (short) 1))).all().get();
            System.out.println("after=" + topics(c, Set.of(prefix + "-a", prefix + "-b")));
        }
    }
}
"""


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    from compat.java.probe import Probe, ProbeUnavailable
    try:
        return Probe.prepare(build_dir=tmp_path_factory.mktemp("java43-regex"))
    except ProbeUnavailable as exc:
        pytest.skip(f"Java 4.3 probe unavailable: {exc}")


def test_the_java_consumer_s_subscription_pattern_is_resolved_by_the_broker(regex_broker,
                                                                          probe):
    prefix = f"jre{uuid.uuid4().hex[:6]}"
    create_topics(regex_broker.bootstrap, [f"{prefix}-a", f"x{prefix}-c"], partitions=1)
    run = probe.run(JAVA_REGEX_PROBE, regex_broker.bootstrap, prefix, timeout_s=150)
    facts = run.facts()
    assert facts.get("before") == f"[{prefix}-a]", run.report()
    assert facts.get("after") == f"[{prefix}-a, {prefix}-b]", run.report()

"""KIP-848 regex subscriptions under the authorizer: a pattern subscribes a member only to
the matching topics its principal may Describe (Kafka's GroupMetadataManager filters
every resolved regex by DESCRIBE on each topic, ``filterTopicDescribeAuthorizedTopics``).

One broker with Kafka's StandardAuthorizer; its PLAINTEXT listener is ``User:ANONYMOUS``,
a super user (the harness, the ACL commands and the describes use it); alice is a plain
SCRAM user on SASL_PLAINTEXT with Read on her groups.  Invariants, with confluent-kafka
(``group.protocol=consumer``): a topic alice may not Describe is never in her target
assignment although the pattern matches it; an ACL granted later adds it at a later
heartbeat, and an ACL removed takes it away again.  Every wait is bounded.
"""
from __future__ import annotations

import time
import uuid

import pytest

from broker.cli.main import build_parser
from broker.testing import BrokerProcess, KafkaConnection, free_port
from protocol.consumer_group_messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from protocol.errors import ErrorCode
from tests.security_certs import with_listeners

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

WAIT_S = 60.0
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ALICE_PASSWORD = "alice-secret"


@pytest.fixture(scope="module")
def authorized(tmp_path_factory):
    home = tmp_path_factory.mktemp("regex-acls")
    sasl_port = free_port()
    broker = with_listeners(BrokerProcess(home / "data", log_path=home / "broker.log",
                                          extra_settings={
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:ANONYMOUS",
        "group.consumer.heartbeat.interval.ms": "500",
        "group.consumer.min.session.timeout.ms": "1000",
        "group.consumer.session.timeout.ms": "10000"}),
        f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}")
    broker.start(timeout_s=60)
    try:
        raftwood(broker, "users", "add", "alice", "--password", ALICE_PASSWORD,
                 "--mechanism", "SCRAM-SHA-512")
        raftwood(broker, "acls", "add", "--allow-principal", "User:alice", "--operation", "read",
                 "--group", "regex-acl-", "--resource-pattern-type", "prefixed")
        yield broker, sasl_port
    finally:
        assert broker.stop() == 0, broker.log_tail()


def raftwood(broker, *args: str) -> None:
    """``raftwood ARGS`` in this process (no interpreter start per call)."""
    parsed = build_parser().parse_args([*args, "--bootstrap-server", broker.bootstrap])
    assert parsed.func(parsed) == 0


def alice_acl(broker, action: str, operation: str, topic: str) -> None:
    raftwood(broker, "acls", action, "--allow-principal", "User:alice", "--operation",
             operation, "--topic", topic)


def alice_consumer(port: int, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": f"127.0.0.1:{port}",
                     "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "SCRAM-SHA-512",
                     "sasl.username": "alice", "sasl.password": ALICE_PASSWORD,
                     "group.id": group, "group.protocol": "consumer",
                     "auto.offset.reset": "earliest",
                     "topic.metadata.refresh.interval.ms": 1000})


def target_topics(broker, group: str) -> set[str] | None:
    """The topics of the group's members' target assignments (ConsumerGroupDescribe as
    the super user); None before the group has a member."""
    request = ConsumerGroupDescribeRequest[0](group_ids=[group],
                                              include_authorized_operations=False)
    request.response_type = ConsumerGroupDescribeResponse
    with KafkaConnection(broker.bootstrap) as conn:
        [described] = conn.request(request).groups
    if described.error_code != ErrorCode.NONE or not described.members:
        return None
    return {t.topic_name for m in described.members for t in m.target_assignment}


def wait_targets(broker, member: Consumer, group: str, want: set[str], what: str) -> None:
    """Poll ``member`` until the group's target assignment is exactly ``want`` and the
    member owns exactly those topics' partitions; bounded."""
    deadline = time.monotonic() + WAIT_S
    targets: set[str] | None = None
    owned: set[str] = set()
    while time.monotonic() < deadline:
        member.poll(0.2)
        targets = target_topics(broker, group)
        owned = {tp.topic for tp in member.assignment()}
        if targets == want and owned == want:
            return
    raise AssertionError(f"{what}: target {targets}, owned {owned}, wanted {want}")


def test_a_regex_subscribes_only_to_topics_the_principal_may_describe(authorized):
    broker, port = authorized
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    allowed, hidden = f"{prefix}-eu", f"{prefix}-us"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(t, 2, 1) for t in (allowed, hidden)]
                                      ).values():
        future.result(timeout=WAIT_S)
    alice_acl(broker, "add", "read", allowed)
    group = f"regex-acl-{prefix}"
    member = alice_consumer(port, group)
    try:
        member.subscribe([f"^{prefix}-.*"])
        wait_targets(broker, member, group, {allowed},
                     "a matching topic alice may not Describe is left out")
        alice_acl(broker, "add", "describe", hidden)
        wait_targets(broker, member, group, {allowed, hidden},
                     "Describe granted: the topic joins at a later heartbeat")
        alice_acl(broker, "remove", "describe", hidden)
        wait_targets(broker, member, group, {allowed},
                     "Describe removed: the topic leaves at a later heartbeat")
    finally:
        member.close()

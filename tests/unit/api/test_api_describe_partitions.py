"""DescribeTopicPartitions (broker/api/describe_partitions.py) against an image: paging
with a small limit visits every partition exactly once, in name order, with Kafka's
cursors; refused and unknown topics are answered as Kafka answers them."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from kafka.protocol.admin import DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse

from broker.api.describe_partitions import handle_describe_topic_partitions
from broker.controller.state import ClusterState
from broker.security.acls import AclBinding, PatternType
from broker.security.acls import AclOperation as Op
from broker.security.acls import AclPermissionType as Perm
from broker.security.acls import ResourceType as Res
from broker.security.authorizer import ALLOW_ALL, Authorizer
from protocol.errors import ErrorCode
from protocol.messages import decode_request

ACLS = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin", "allow.everyone.if.no.acl.found": False}
TopicRequest = DescribeTopicPartitionsRequest.TopicRequest
RequestCursor = DescribeTopicPartitionsRequest.Cursor


def context(authorizer=ALLOW_ALL):
    """Topics c, a, b (created out of order) of 5 partitions on brokers 1-3; 3 fenced."""
    image = ClusterState()
    for broker_id in (1, 2, 3):
        image.apply_register_broker(broker_id, "h", 9090 + broker_id, f"i-{broker_id}")
    for n, name in enumerate(("c", "a", "b")):
        image.apply_create_topic(name, f"00000000-0000-0000-0000-00000000000{n}",
                                 [[1 + (p + n) % 3, 1 + (p + n + 1) % 3] for p in range(5)], {})
    image.apply_fence_brokers([3], {})
    return SimpleNamespace(image=image, authorizer=authorizer)


def call(ctx, names=(), limit=4, cursor=None, principal="User:alice"):
    message = DescribeTopicPartitionsRequest[0](
        topics=[TopicRequest(name=n) for n in names], response_partition_limit=limit,
        cursor=None if cursor is None else RequestCursor(topic_name=cursor[0],
                                                         partition_index=cursor[1]))
    message.with_header(correlation_id=3, client_id="unit")
    request = decode_request(bytes(message.encode(header=True, framed=False)))
    request.client_host = "/127.0.0.1"
    request.session = SimpleNamespace(principal=principal,
                                      listener=SimpleNamespace(name="PLAINTEXT"))
    response = asyncio.run(handle_describe_topic_partitions(ctx, request))
    return DescribeTopicPartitionsResponse.decode(response.encode(version=0), version=0)


def cursor_of(response):
    c = response.next_cursor
    return None if c is None else (c.topic_name, c.partition_index)


@pytest.mark.parametrize("names", [(), ("c", "b", "a")], ids=["all-topics", "named"])
def test_paging_with_a_limit_of_four_returns_every_partition_exactly_once(names):
    ctx = context()
    seen, cursors, cursor = [], [], None
    for _ in range(10):
        response = call(ctx, names, limit=4, cursor=cursor)
        assert sum(len(t.partitions) for t in response.topics) <= 4
        seen += [(t.name, p.partition_index) for t in response.topics for p in t.partitions]
        cursor = cursor_of(response)
        cursors.append(cursor)
        if cursor is None:
            break
    assert seen == [(n, p) for n in "abc" for p in range(5)]      # once each, in order
    assert cursors == [("a", 4), ("b", 3), ("c", 2), None]


def test_a_page_full_at_a_topic_end_points_at_the_next_topic():
    response = call(context(), limit=5)
    assert [t.name for t in response.topics] == ["a"] and cursor_of(response) == ("b", 0)
    assert cursor_of(call(context(), limit=15)) is None


def test_partitions_carry_leader_epoch_replicas_isr_and_offline_replicas():
    ctx = context()
    [topic] = call(ctx, ["a"], limit=100).topics
    assert topic.error_code == ErrorCode.NONE and str(topic.topic_id).endswith("1")
    for p in topic.partitions:
        state = ctx.image.topics["a"].partitions[p.partition_index]
        assert (p.leader_id, p.leader_epoch) == (state.leader, state.leader_epoch)
        assert (p.replica_nodes, p.isr_nodes) == (state.replicas, state.isr)
        assert p.offline_replicas == [r for r in state.replicas if r == 3]
        assert p.eligible_leader_replicas == [] and p.last_known_elr == []


def test_unknown_named_topics_and_bad_cursors():
    ctx = context()
    topics = call(ctx, ["nope", "a", "bad/name"], limit=100).topics
    assert [(t.name, t.error_code) for t in topics] == [
        ("a", ErrorCode.NONE), ("bad/name", ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    for cursor in (("b", 0), ("a", -1)):                          # b not named; negative
        refused = call(ctx, ["a", "c"], cursor=cursor)
        assert [(t.name, t.error_code) for t in refused.topics] == [
            ("a", ErrorCode.INVALID_REQUEST), ("c", ErrorCode.INVALID_REQUEST)]


def test_topics_without_describe_are_refused_by_name_or_left_out_of_all_topics():
    allow_b = AclBinding(Res.TOPIC, "b", PatternType.LITERAL, "User:alice", "*", Op.DESCRIBE,
                         Perm.ALLOW)
    ctx = context(Authorizer(ACLS, lambda: (allow_b,)))
    named = call(ctx, ["a", "b"], limit=100)
    assert [(t.name, t.error_code, len(t.partitions)) for t in named.topics] == [
        ("b", ErrorCode.NONE, 5), ("a", ErrorCode.TOPIC_AUTHORIZATION_FAILED, 0)]
    assert named.topics[0].topic_authorized_operations == 1 << int(Op.DESCRIBE)
    everything = call(ctx, limit=100)
    assert [t.name for t in everything.topics] == ["b"]

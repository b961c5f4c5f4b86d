"""Handlers refuse with Kafka's per-resource errors before touching anything (fake context).

Each test drives one handler with an ApiContext stand-in whose replica manager records
every call: a refused request must leave it untouched (no append, no read).
"""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import (InitProducerIdRequest, ProduceRequest,
                                     ProduceResponse)

from broker.api.fetch import handle_fetch
from broker.api.metadata import handle_metadata
from broker.api.produce import handle_produce
from broker.api.producer_ids import handle_init_producer_id
from broker.controller.state import ClusterState
from broker.security.acls import (AclBinding, AclOperation as Op, AclPermissionType as Perm,
                                  PatternType, ResourceType as Res)
from broker.security.authorizer import Authorizer
from broker.testing import build_batch
from protocol.errors import ErrorCode
from protocol.messages import Framed, decode_request

SETTINGS = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin", "allow.everyone.if.no.acl.found": False,
            "message.max.bytes": 1 << 20, "auto.create.topics.enable": True}


class RecordingReplicaManager:
    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        def record(*args, **kwargs):
            self.calls.append(name)
            raise AssertionError(f"{name} called for a refused request")
        return record


def context(*bindings: AclBinding):
    image = ClusterState()
    image.apply_register_broker(1, "127.0.0.1", 9092, "i-1")
    for name in ("orders", "secret"):
        image.apply_create_topic(name, f"00000000-0000-0000-0000-00000000000{len(name)}",
                                 [[1]], {})
    return SimpleNamespace(
        config=SETTINGS, node_id=1, image=image, replica_manager=RecordingReplicaManager(),
        metadata=SimpleNamespace(image=image, controller_id=1),
        authorizer=Authorizer(SETTINGS, lambda: bindings))


def allow(name, op, principal="User:alice", rtype=Res.TOPIC):
    return AclBinding(rtype, name, PatternType.LITERAL, principal, "*", op, Perm.ALLOW)


def request(message, principal="User:alice"):
    message.with_header(correlation_id=7, client_id="unit")
    decoded = decode_request(bytes(message.encode(header=True, framed=False)))
    decoded.client_host = "/127.0.0.1"
    decoded.session = SimpleNamespace(principal=principal,
                                      listener=SimpleNamespace(name="SASL_PLAINTEXT"))
    return decoded


def answer(result, response_class, version):
    if isinstance(result, Framed):
        return response_class.decode(b"".join(bytes(b) for b in result)[4:], version=version,
                                     header=True)
    return result


def test_produce_without_write_is_refused_per_partition_and_appends_nothing():
    ctx = context(allow("orders", Op.READ))
    produce = ProduceRequest[9](transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name="orders", partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(
                index=0, records=build_batch([(None, b"v", 1, [])]))])])
    response = answer(asyncio.run(handle_produce(ctx, request(produce))), ProduceResponse, 9)
    [[partition]] = [t.partition_responses for t in response.responses]
    assert partition.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert ctx.replica_manager.calls == []


def test_a_follower_fetch_without_cluster_action_reads_nothing():
    ctx = context(allow("orders", Op.READ), allow("orders", Op.ALL, "User:broker"))
    fetch = FetchRequest[11](
        replica_id=2, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
        session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(
            topic="orders", partitions=[FetchRequest.FetchTopic.FetchPartition(
                partition=0, current_leader_epoch=0, fetch_offset=0, log_start_offset=-1,
                partition_max_bytes=1 << 20)])],
        forgotten_topics_data=[], rack_id="")
    for principal in ("User:alice", "User:broker"):   # Read or All on the topic: not enough
        response = answer(asyncio.run(handle_fetch(ctx, request(fetch, principal))),
                          FetchResponse, 11)
        assert [p.error_code for t in response.responses for p in t.partitions] == \
            [ErrorCode.TOPIC_AUTHORIZATION_FAILED]
    assert ctx.replica_manager.calls == []


def test_metadata_lists_only_described_topics_and_refuses_the_others_by_name():
    ctx = context(allow("orders", Op.WRITE))
    everything = asyncio.run(handle_metadata(ctx, request(MetadataRequest[8](
        topics=None, allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False))))
    assert [t.name for t in everything.topics] == ["orders"]
    asked = asyncio.run(handle_metadata(ctx, request(MetadataRequest[8](
        topics=[MetadataRequest.MetadataRequestTopic(name="secret"),
                MetadataRequest.MetadataRequestTopic(name="not-yet")],
        allow_auto_topic_creation=True, include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False))))
    assert [(t.name, t.error_code) for t in asked.topics] == [
        ("secret", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        ("not-yet", ErrorCode.TOPIC_AUTHORIZATION_FAILED)]


def test_init_producer_id_needs_idempotent_write_or_write_on_some_topic():
    def init(ctx, principal):
        return asyncio.run(handle_init_producer_id(ctx, request(InitProducerIdRequest[4](
            transactional_id=None, transaction_timeout_ms=60000, producer_id=5,
            producer_epoch=0), principal))).error_code

    assert init(context(allow("orders", Op.WRITE)), "User:alice") == ErrorCode.NONE
    assert init(context(allow("kafka-cluster", Op.IDEMPOTENT_WRITE, rtype=Res.CLUSTER)),
                "User:alice") == ErrorCode.NONE
    assert init(context(allow("orders", Op.READ)), "User:alice") == \
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED

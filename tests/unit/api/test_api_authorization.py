"""Handlers refuse with Kafka's per-resource errors before touching anything (fake context).

Each test drives one handler with an ApiContext stand-in whose replica manager records
every call: a refused request must leave it untouched (no append, no read).
"""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest, ProduceResponse

from broker.api import answer_of
from broker.api.fetch import handle_fetch
from broker.api.metadata import handle_metadata
from broker.api.produce import handle_produce
from broker.api.producer_ids import handle_init_producer_id
from broker.controller.state import ClusterState
from broker.replication.fetch_sessions import FetchSessionCache
from broker.security.acls import AclBinding, PatternType
from broker.security.acls import AclOperation as Op
from broker.security.acls import AclPermissionType as Perm
from broker.security.acls import ResourceType as Res
from broker.security.authorizer import Authorizer, image_bindings
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
        fetch_sessions=FetchSessionCache(10),
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
    response = answer(asyncio.run(answer_of(handle_produce(ctx, request(produce)))),
                      ProduceResponse, 9)
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
        response = answer(asyncio.run(answer_of(handle_fetch(ctx, request(fetch, principal)))),
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


# -- the ACL APIs ----------------------------------------------------------------------------------

class AppliedMetadata:
    """Applies ACL commands to an image at once, as a one-node store would."""

    def __init__(self, image: ClusterState):
        self.image, self.controller_id = image, 1

    async def create_acls(self, bindings):
        return self.image.apply_create_acls(bindings)

    async def delete_acls(self, bindings):
        return self.image.apply_delete_acls(bindings)


def test_acl_apis_create_describe_and_delete_through_the_metadata():
    from kafka.protocol.admin import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest

    from broker.api.acls import handle_create_acls, handle_delete_acls, handle_describe_acls

    ctx = context()
    ctx.metadata = AppliedMetadata(ctx.image)
    ctx.authorizer = Authorizer(SETTINGS, image_bindings(lambda: ctx.image))
    C = CreateAclsRequest.AclCreation
    created = asyncio.run(handle_create_acls(ctx, request(CreateAclsRequest[3](creations=[
        C(resource_type=2, resource_name="pay-", resource_pattern_type=4, principal="User:bob",
          host="*", operation=4, permission_type=3),
        C(resource_type=4, resource_name="my-cluster", resource_pattern_type=3,
          principal="User:bob", host="*", operation=7, permission_type=3)]), "User:admin")))
    assert [r.error_code for r in created.results] == [ErrorCode.NONE, ErrorCode.INVALID_REQUEST]
    assert ctx.image.acls == [[2, "pay-", 4, "User:bob", "*", 4, 3]]

    def describe(principal, name):
        return asyncio.run(handle_describe_acls(ctx, request(DescribeAclsRequest[3](
            resource_type_filter=2, resource_name_filter=name, pattern_type_filter=2,
            principal_filter=None, host_filter=None, operation=1, permission_type=1),
            principal)))

    found = describe("User:admin", "pay-eu")
    assert [(r.resource_name, r.pattern_type, [a.principal for a in r.acls])
            for r in found.resources] == [("pay-", 4, ["User:bob"])]
    assert describe("User:bob", "pay-eu").error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    bob = request(CreateAclsRequest[3](creations=[]), "User:bob")
    assert ctx.authorizer.allows(bob, Op.WRITE, Res.TOPIC, "pay-eu"), "the image's ACLs apply"

    F = DeleteAclsRequest.DeleteAclsFilter
    deleted = asyncio.run(handle_delete_acls(ctx, request(DeleteAclsRequest[3](filters=[
        F(resource_type_filter=2, resource_name_filter="pay-eu", pattern_type_filter=2,
          principal_filter="User:bob", host_filter=None, operation=1, permission_type=1)]),
        "User:admin")))
    [result] = deleted.filter_results
    assert [(m.resource_name, m.operation) for m in result.matching_acls] == [("pay-", 4)]
    assert ctx.image.acls == []


def test_acl_apis_answer_security_disabled_without_an_authorizer():
    from kafka.protocol.admin import CreateAclsRequest

    from broker.api.acls import handle_create_acls
    from broker.security.authorizer import ALLOW_ALL

    ctx = context()
    ctx.authorizer = ALLOW_ALL
    answer_ = asyncio.run(handle_create_acls(ctx, request(CreateAclsRequest[1](creations=[
        CreateAclsRequest.AclCreation(resource_type=2, resource_name="t",
                                      resource_pattern_type=3, principal="User:a", host="*",
                                      operation=3, permission_type=3)]), "User:a")))
    assert [r.error_code for r in answer_.results] == [ErrorCode.SECURITY_DISABLED]
    assert ctx.image.acls == []

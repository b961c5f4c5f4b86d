"""ElectLeaders' handler (broker/api/elections.py) over a real MetadataClient and
LocalStore: what it answers per partition, that refused requests change nothing, and
that a null request answers only the partitions that needed an election."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from kafka.protocol.admin import ElectLeadersRequest, ElectLeadersResponse

from broker.api.elections import handle_elect_leaders
from broker.controller.metadata_client import MetadataClient
from broker.controller.store import LocalStore
from broker.security.authorizer import ALLOW_ALL, Authorizer
from protocol.errors import ErrorCode
from protocol.messages import decode_request

TopicPartitions = ElectLeadersRequest.TopicPartitions


class Context:
    node_id = 1
    authorizer = ALLOW_ALL

    def __init__(self, client):
        self.metadata = client

    @property
    def image(self):
        return self.metadata.image


@pytest.fixture
def loop():
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield loop
    loop.close()
    asyncio.set_event_loop(None)


async def started(tmp_path):
    """t-0 assigned [1, 2], led by 2 with 1 back in the ISR; t-1 led by its preferred 2."""
    client = MetadataClient(LocalStore(str(tmp_path), 1))
    await client.store.start()
    await client.init_cluster("c")
    for broker_id in (1, 2):
        await client.register_broker(broker_id, "h", 9090 + broker_id, f"i-{broker_id}")
    await client.create_topic("t", [[1, 2], [2, 1]], {})
    await client.fence_self(1, False)
    await client.register_broker(1, "h", 9091, "i-1-again")
    p = client.image.topics["t"].partitions[0]
    await client.alter_partition("t", 0, 2, p.leader_epoch, p.partition_epoch, [1, 2])
    return Context(client)


def call(loop, ctx, topic_partitions, version=2, election_type=0, principal=None):
    args = dict(topic_partitions=topic_partitions, timeout_ms=0)
    if version >= 1:
        args["election_type"] = election_type
    message = ElectLeadersRequest[version](**args)
    message.with_header(correlation_id=1, client_id="unit")
    request = decode_request(bytes(message.encode(header=True, framed=False)))
    request.client_host = "/127.0.0.1"
    request.session = SimpleNamespace(principal=principal or "User:admin",
                                      listener=SimpleNamespace(name="PLAINTEXT"))
    response = loop.run_until_complete(handle_elect_leaders(ctx, request))
    encoded = response.encode(version=version)        # what the wire would carry
    response = ElectLeadersResponse.decode(encoded, version=version)
    return (getattr(response, "error_code", None),
            {(t.topic, p.partition_id): p.error_code
             for t in response.replica_election_results for p in t.partition_result})


@pytest.mark.parametrize("version", [0, 1, 2])
def test_preferred_election_moves_leadership_and_answers_per_partition(tmp_path, loop, version):
    ctx = loop.run_until_complete(started(tmp_path))
    epoch = ctx.image.topics["t"].partitions[0].leader_epoch
    top, results = call(loop, ctx, [TopicPartitions(topic="t", partitions=[0, 1, 9])], version)
    assert version == 0 or top == ErrorCode.NONE       # v0 has no top-level code
    assert results == {("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.ELECTION_NOT_NEEDED,
                       ("t", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    partition = ctx.image.topics["t"].partitions[0]
    assert (partition.leader, partition.leader_epoch) == (1, epoch + 1)


def test_null_partitions_elect_everywhere_and_leave_out_the_partitions_not_needing_it(
        tmp_path, loop):
    ctx = loop.run_until_complete(started(tmp_path))
    assert call(loop, ctx, None) == (ErrorCode.NONE, {("t", 0): ErrorCode.NONE})
    assert ctx.image.topics["t"].partitions[0].leader == 1


def test_unclean_election_is_not_needed_while_the_partition_has_a_leader(tmp_path, loop):
    ctx = loop.run_until_complete(started(tmp_path))
    version = ctx.image.version
    _, results = call(loop, ctx, [TopicPartitions(topic="t", partitions=[0])], election_type=1)
    assert results == {("t", 0): ErrorCode.ELECTION_NOT_NEEDED}
    assert ctx.image.version == version


def test_without_alter_on_the_cluster_nothing_is_elected(tmp_path, loop):
    ctx = loop.run_until_complete(started(tmp_path))
    ctx.authorizer = Authorizer({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                                 "super.users": "User:admin",
                                 "allow.everyone.if.no.acl.found": False}, lambda: ())
    version = ctx.image.version
    top, results = call(loop, ctx, [TopicPartitions(topic="t", partitions=[0])],
                        principal="User:alice")
    assert top == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert results == {("t", 0): ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
    assert ctx.image.version == version


def test_a_broker_that_is_not_the_controller_answers_not_controller(tmp_path, loop):
    ctx = loop.run_until_complete(started(tmp_path))
    ctx.metadata = SimpleNamespace(is_controller=False, controller_term=None,
                                   image=ctx.image)
    top, results = call(loop, ctx, [TopicPartitions(topic="t", partitions=[0])])
    assert top == ErrorCode.NOT_CONTROLLER and results == {("t", 0): ErrorCode.NOT_CONTROLLER}

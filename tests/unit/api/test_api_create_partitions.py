"""CreatePartitions (broker/api/partitions.py, ClusterState.apply_create_partitions).

The handler runs against a real MetadataClient over a LocalStore (three registered
brokers) and a stand-in context: what it commits is read back from the image; a refused
topic changes nothing.
"""
from __future__ import annotations

import asyncio
import types

import pytest
from kafka.protocol.admin import CreatePartitionsRequest

from broker.api.partitions import handle_create_partitions
from broker.controller.metadata_client import MetadataClient
from broker.controller.state import ApplyError, ClusterState
from broker.controller.store import LocalStore
from broker.quotas.rates import ClientQuotas
from broker.security.authorizer import ALLOW_ALL
from broker.tasks import TaskSupervisor
from protocol.errors import ErrorCode
from protocol.messages import decode_request

Topic = CreatePartitionsRequest.CreatePartitionsTopic
Assignment = Topic.CreatePartitionsAssignment


def three_brokers_state() -> ClusterState:
    state = ClusterState()
    for broker_id in (1, 2, 3):
        state.apply_register_broker(broker_id, "h", 9090 + broker_id, f"i-{broker_id}")
    state.apply_create_topic("t", "id-t", [[1, 2], [2, 3]], {})
    return state


def test_new_partitions_start_led_by_their_first_live_replica_with_every_replica_in_sync():
    state = three_brokers_state()
    state.apply_fence_brokers([3], {})
    version = state.version
    assert state.apply_create_partitions("t", "id-t", 4, [[3, 1], [1, 2]]) == 4
    assert state.version == version + 1
    added = state.topics["t"].partitions
    assert (added[2].replicas, added[2].leader, added[2].isr) == ([3, 1], 1, [3, 1])
    assert (added[3].leader, added[3].leader_epoch, added[3].partition_epoch) == (1, 0, 0)
    assert added[2].replica_states == {3: "OfflineReplica", 1: "OnlineReplica"}


@pytest.mark.parametrize("args,code", [
    (("t", "id-other", 3, [[1, 2]]), "UNKNOWN_TOPIC_OR_PARTITION"),   # recreated meanwhile
    (("gone", "id-t", 3, [[1, 2]]), "UNKNOWN_TOPIC_OR_PARTITION"),
    (("t", "id-t", 4, [[1, 2]]), "INVALID_PARTITIONS"),               # grown by another
    (("t", "id-t", 2, []), "INVALID_PARTITIONS"),
    (("t", "id-t", 3, [[1, 1]]), "INVALID_REPLICA_ASSIGNMENT"),
    (("t", "id-t", 3, [[1, 9]]), "INVALID_REPLICA_ASSIGNMENT"),
    (("t", "id-t", 3, [[]]), "INVALID_REPLICA_ASSIGNMENT"),
])
def test_a_stale_or_bad_create_partitions_is_refused_whole(args, code):
    state = three_brokers_state()
    before = state.to_dict()
    with pytest.raises(ApplyError) as refused:
        state.apply_create_partitions(*args)
    assert refused.value.code == code
    assert state.to_dict() == before


class Context:
    """What the handler uses of an ApiContext; ``image`` read from the client at every
    access, as ApiContext's."""

    node_id = 1
    authorizer = ALLOW_ALL

    def __init__(self, client: MetadataClient):
        self.metadata = client
        self.quotas = ClientQuotas()  # controller_mutation_rate (none set here)
        # Handlers run their work on the replica manager's supervisor (outlive).
        self.replica_manager = types.SimpleNamespace(tasks=TaskSupervisor("[unit]"))

    @property
    def image(self):
        return self.metadata.image


async def started(tmp_path):
    store = LocalStore(str(tmp_path), 1)
    await store.start()
    client = MetadataClient(store)
    await client.init_cluster("c")
    for broker_id in (1, 2, 3):
        await client.register_broker(broker_id, "h", 9090 + broker_id, f"i-{broker_id}")
    await client.create_topic("t", [[1, 2], [2, 3]], {})
    await client.create_topic("__consumer_offsets", [[1, 2, 3]], {})
    return Context(client), client


def call(ctx, client, topics, validate_only=False, version=3):
    """timeout_ms 0: answer without waiting for brokers 2 and 3 (which never heartbeat
    here) to report the new image (Kafka's rule for a zero timeout)."""
    message = CreatePartitionsRequest[version](topics=topics, timeout_ms=0,
                                               validate_only=validate_only)
    message.with_header(correlation_id=1, client_id="unit")
    request = decode_request(bytes(message.encode(header=True, framed=False)))
    response = asyncio.get_event_loop().run_until_complete(handle_create_partitions(ctx, request))
    return {r.name: (r.error_code, r.error_message) for r in response.results}


@pytest.fixture
def loop():
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield loop
    loop.close()
    asyncio.set_event_loop(None)


def test_partitions_are_added_with_given_or_computed_assignments(tmp_path, loop):
    ctx, client = loop.run_until_complete(started(tmp_path))
    answers = call(ctx, client,
                   [Topic(name="t", count=3, assignments=[Assignment(broker_ids=[3, 1])])])
    assert answers == {"t": (ErrorCode.NONE, None)}
    assert client.image.topics["t"].partitions[2].replicas == [3, 1]
    answers = call(ctx, client, [Topic(name="t", count=6, assignments=None)])
    assert answers["t"][0] == ErrorCode.NONE
    added = [client.image.topics["t"].partitions[i].replicas for i in range(3, 6)]
    assert all(len(r) == 2 and len(set(r)) == 2 for r in added)       # the topic's factor
    assert sorted(r[0] for r in added) == [1, 2, 3]                   # leaders spread


def test_validate_only_changes_nothing(tmp_path, loop):
    ctx, client = loop.run_until_complete(started(tmp_path))
    version = client.image.version
    assert call(ctx, client, [Topic(name="t", count=5, assignments=None)],
                validate_only=True) == {"t": (ErrorCode.NONE, None)}
    assert client.image.version == version and len(client.image.topics["t"].partitions) == 2


@pytest.mark.parametrize("topic,code", [
    (Topic(name="t", count=2, assignments=None), ErrorCode.INVALID_PARTITIONS),
    (Topic(name="t", count=1, assignments=None), ErrorCode.INVALID_PARTITIONS),
    (Topic(name="nope", count=3, assignments=None), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (Topic(name="__consumer_offsets", count=3, assignments=None),
     ErrorCode.INVALID_TOPIC_EXCEPTION),
    (Topic(name="t", count=4, assignments=[Assignment(broker_ids=[1, 2])]),
     ErrorCode.INVALID_REPLICA_ASSIGNMENT),                          # one list for two
    (Topic(name="t", count=3, assignments=[Assignment(broker_ids=[1, 2, 3])]),
     ErrorCode.INVALID_REPLICA_ASSIGNMENT),                          # factor 3, topic has 2
    (Topic(name="t", count=3, assignments=[Assignment(broker_ids=[1, 7])]),
     ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    (Topic(name="t", count=3, assignments=[Assignment(broker_ids=[2, 2])]),
     ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    (Topic(name="t", count=3, assignments=[Assignment(broker_ids=[])]),
     ErrorCode.INVALID_REPLICA_ASSIGNMENT),
])
def test_kafkas_error_codes_and_nothing_changes(tmp_path, loop, topic, code):
    ctx, client = loop.run_until_complete(started(tmp_path))
    version = client.image.version
    for version_asked in (0, 3):
        answers = call(ctx, client, [topic], version=version_asked)
        assert answers[topic.name][0] == code, answers
    assert client.image.version == version


def test_a_topic_named_twice_is_an_invalid_request_for_both(tmp_path, loop):
    ctx, client = loop.run_until_complete(started(tmp_path))
    response = call(ctx, client, [Topic(name="t", count=3, assignments=None),
                                  Topic(name="t", count=4, assignments=None)])
    assert response["t"][0] == ErrorCode.INVALID_REQUEST
    assert len(client.image.topics["t"].partitions) == 2


def test_the_answer_waits_for_the_other_live_brokers_to_report_the_new_partitions(
        tmp_path, loop):
    ctx, client = loop.run_until_complete(started(tmp_path))

    async def scenario():
        message = CreatePartitionsRequest[3](topics=[Topic(name="t", count=3, assignments=None)],
                                             timeout_ms=5000, validate_only=False)
        message.with_header(correlation_id=1, client_id="unit")
        request = decode_request(bytes(message.encode(header=True, framed=False)))
        answer = asyncio.ensure_future(handle_create_partitions(ctx, request))
        while len(client.image.topics["t"].partitions) < 3:
            await asyncio.sleep(0.001)
        for broker_id in (2, 3):
            await asyncio.sleep(0.02)
            assert not answer.done()
            epoch = client.image.brokers[broker_id].broker_epoch
            await client.heartbeat(broker_id, epoch, False, {},
                                   metadata_position=client.image.position())
        response = await asyncio.wait_for(answer, 1.0)
        return response.results[0].error_code

    assert loop.run_until_complete(scenario()) == ErrorCode.NONE

"""MetadataClient (broker/controller/metadata_client.py): one method per operation.

Against a LocalStore in tmp_path: each operation applies, ``image`` shows it as soon
as the call returns, refusals are ApplyError with Kafka's error code names, membership
observers receive typed commands, and a new store over the same directory reads back
what was written.  Against a RaftStore with a stand-in consumer: what reaches pysyncobj
is the wire form, controller decisions with their term.
"""
from __future__ import annotations

import asyncio

import pytest

from broker import config as broker_config
from broker.controller.commands import Heartbeat, RegisterBroker
from broker.controller.controller import Controller
from broker.controller.metadata_client import ApplyError, MetadataClient
from broker.controller.store import LocalStore, RaftStore


def run(coroutine):
    return asyncio.run(coroutine)


async def started(tmp_path) -> MetadataClient:
    store = LocalStore(str(tmp_path), 1)
    await store.start()
    return MetadataClient(store)


async def three_brokers(client: MetadataClient) -> None:
    await client.init_cluster("cluster-a")
    for broker_id in (1, 2, 3):
        await client.register_broker(broker_id, "127.0.0.1", 9090 + broker_id, f"inc-{broker_id}")


def test_every_operation_applies_through_a_local_store(tmp_path):
    async def scenario():
        client = await started(tmp_path)
        assert client.controller_id == 1 and client.is_controller
        assert client.controller_term is None
        await three_brokers(client)
        assert await client.init_cluster("other") == "cluster-a"
        epoch = client.image.brokers[3].broker_epoch
        assert await client.heartbeat(3, epoch, False, {"t:0": 4}) is True
        assert await client.heartbeat(3, epoch - 1, False, {}) is False
        topic_id = await client.create_topic("t", [[1, 2, 3]], {"retention.ms": "100"})
        assert client.image.topics["t"].topic_id == topic_id and len(topic_id) == 36
        await client.alter_topic_configs("t", {"retention.ms": None, "min.insync.replicas": "2"})
        assert client.image.topics["t"].configs == {"min.insync.replicas": "2"}
        assert await client.alter_partition("t", 0, 1, 0, 0, [1, 2]) == 1
        assert client.image.topics["t"].partitions[0].isr == [1, 2]
        assert await client.allocate_producer_ids(1000) == 0
        assert await client.allocate_producer_ids(10) == 1000
        elections = await client.fence_brokers([1], {"t:0": {2: 9}}, False, controller_term=None)
        assert [(e.partition, e.leader) for e in elections] == [(0, 2)]
        await client.register_broker(1, "127.0.0.1", 9091, "inc-1b")
        p = client.image.topics["t"].partitions[0]
        await client.alter_partition("t", 0, 2, p.leader_epoch, p.partition_epoch, [1, 2])
        elections = await client.elect_preferred([("t", 0)], controller_term=None)
        assert [e.leader for e in elections] == [1]
        await client.fence_self(1, False)
        assert client.image.brokers[1].fenced and client.image.topics["t"].partitions[0].leader == 2
        assert await client.delete_topic("t") == topic_id
        assert "t" not in client.image.topics
        return client.image

    image = run(scenario())
    reopened = LocalStore(str(tmp_path), 1).image
    assert reopened.to_dict() == image.to_dict() and reopened.next_producer_id == 1010


def test_refusals_keep_their_kafka_error_code_and_change_nothing(tmp_path):
    async def scenario():
        client = await started(tmp_path)
        await three_brokers(client)
        await client.create_topic("t", [[1, 2]], {}, topic_id="id-t")
        version = client.image.version
        codes = []
        for attempt in (client.create_topic("t", [[1]], {}),
                        client.delete_topic("nope"),
                        client.alter_topic_configs("nope", {"a": "b"}),
                        client.alter_partition("t", 0, 2, 0, 0, [2])):
            with pytest.raises(ApplyError) as refused:
                await attempt
            codes.append(refused.value.code)
        return codes, version, client.image.version

    codes, before, after = run(scenario())
    assert codes == ["TOPIC_ALREADY_EXISTS", "UNKNOWN_TOPIC_OR_PARTITION",
                     "UNKNOWN_TOPIC_OR_PARTITION", "FENCED_LEADER_EPOCH"]
    assert before == after


def test_membership_observers_and_the_controller_get_typed_commands(tmp_path):
    async def scenario():
        client = await started(tmp_path)
        seen = []
        client.add_membership_observer(seen.append)
        controller = Controller(client, broker_config.build({"node.id": "1"}))
        await three_brokers(client)
        await client.heartbeat(2, client.image.brokers[2].broker_epoch, False, {"t:0": 42})
        await client.allocate_producer_ids(1)
        return seen, controller

    seen, controller = run(scenario())
    assert [type(c) for c in seen] == [RegisterBroker] * 3 + [Heartbeat]
    assert set(controller.last_seen) == {1, 2, 3}
    assert controller.leo_hints == {"t:0": {2: 42}}


def test_a_listener_sees_each_change_once_and_no_op_commands_not_at_all(tmp_path):
    async def scenario():
        client = await started(tmp_path)
        images = []
        client.add_listener(images.append)
        await three_brokers(client)
        await client.heartbeat(1, client.image.brokers[1].broker_epoch, False, {})
        return images

    images = run(scenario())
    assert [i.version for i in images] == [1, 2, 3, 4]


def test_the_store_takes_commands_only(tmp_path):
    async def scenario():
        store = LocalStore(str(tmp_path), 1)
        with pytest.raises(TypeError):
            await store.submit("init_cluster", "c")
        return store.image.version

    assert run(scenario()) == 0


def test_wrap_keeps_a_client_and_wraps_a_store(tmp_path):
    store = LocalStore(str(tmp_path), 1)
    client = MetadataClient.wrap(store)
    assert client.store is store and MetadataClient.wrap(client) is client


# -- what reaches pysyncobj ------------------------------------------------------------------

class _RecordingConsumer:
    def __init__(self):
        self.sent = []

    def command(self, method, args, controller_term, callback):
        self.sent.append((method, args, controller_term))
        callback(("ok", []), 0)


def test_the_raft_store_sends_the_wire_form_with_the_decisions_term(tmp_path):
    async def scenario():
        store = RaftStore(str(tmp_path), 1, {1: "127.0.0.1:1"})
        consumer = _RecordingConsumer()
        store._syncobj, store._consumer = object(), consumer
        client = MetadataClient(store)
        await client.fence_brokers([2], {"t:0": {1: 3}}, True, controller_term=6)
        await client.elect_preferred([("t", 0)], controller_term=6)
        await client.fence_self(1, False)
        await client.alter_partition("t", 0, 1, 2, 3, [1])
        return consumer.sent

    assert run(scenario()) == [
        ("fence_brokers", ([2], {"t:0": {1: 3}}, True), 6),
        ("elect_preferred", ([("t", 0)],), 6),
        ("fence_brokers", ([1], {}, False), None),
        ("alter_partition", ("t", 0, 1, 2, 3, [1]), None),
    ]


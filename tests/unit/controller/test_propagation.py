"""MetadataPropagation (broker/controller/propagation.py): a metadata write is answered once
every live broker reported, in a heartbeat, an image at least as new as the one holding it.

Driven through a LocalStore with three registered brokers: heartbeats carry the positions
the test chooses, as the other brokers' would.
"""
from __future__ import annotations

import asyncio

from broker import config as broker_config
from broker.controller.lifecycle import BrokerLifecycle
from broker.controller.metadata_client import MetadataClient
from broker.controller.store import LocalStore


def run(coroutine):
    return asyncio.run(coroutine)


async def three_brokers(tmp_path) -> MetadataClient:
    store = LocalStore(str(tmp_path), 1)
    await store.start()
    client = MetadataClient(store)
    await client.init_cluster("c")
    for broker_id in (1, 2, 3):
        await client.register_broker(broker_id, "127.0.0.1", 9090 + broker_id, f"inc-{broker_id}")
    return client


async def report(client: MetadataClient, broker_id: int, position) -> None:
    epoch = client.image.brokers[broker_id].broker_epoch
    await client.heartbeat(broker_id, epoch, False, {}, metadata_position=position)


def test_a_wait_ends_when_the_last_live_broker_reports_the_new_image(tmp_path):
    async def scenario():
        client = await three_brokers(tmp_path)
        await client.create_topic("t", [[1, 2, 3]], {})
        position = client.image.position()
        waiting = asyncio.ensure_future(client.wait_until_brokers_know(position, 1, 5.0))
        await report(client, 2, position)
        await asyncio.sleep(0.01)
        assert not waiting.done()                       # broker 3 has not reported it
        await report(client, 3, (0, 0, position[2] - 1))
        await asyncio.sleep(0.01)
        assert not waiting.done()                       # an older image is not enough
        await report(client, 3, position)
        assert await asyncio.wait_for(waiting, 1.0) == []

    run(scenario())


def test_a_timed_out_wait_names_the_lagging_brokers_and_the_own_broker_is_never_waited_for(
        tmp_path):
    async def scenario():
        client = await three_brokers(tmp_path)
        await client.create_topic("t", [[1]], {})
        position = client.image.position()
        await report(client, 2, position)
        assert await client.wait_until_brokers_know(position, 1, 0.05) == [3]
        assert client.brokers_lacking(position, 3) == [1]   # 1 never reported
        assert client.brokers_lacking(position, 1) == [3]

    run(scenario())


def test_fencing_a_lagging_broker_ends_the_wait(tmp_path):
    async def scenario():
        client = await three_brokers(tmp_path)
        await client.create_topic("t", [[1]], {})
        position = client.image.position()
        await report(client, 2, position)
        waiting = asyncio.ensure_future(client.wait_until_brokers_know(position, 1, 5.0))
        await asyncio.sleep(0.01)
        await client.fence_brokers([3], {}, False, controller_term=None)
        assert await asyncio.wait_for(waiting, 1.0) == []

    run(scenario())


def test_a_new_incarnation_is_lagging_until_its_own_first_report(tmp_path):
    async def scenario():
        client = await three_brokers(tmp_path)
        await client.create_topic("t", [[1]], {})
        position = client.image.position()
        await report(client, 2, position)
        await report(client, 3, position)
        assert client.brokers_lacking(position, 1) == []
        await client.register_broker(3, "127.0.0.1", 9093, "inc-3b")   # restarted
        assert client.brokers_lacking(position, 1) == [3]
        await report(client, 3, client.image.position())
        assert client.brokers_lacking(position, 1) == []

    run(scenario())


def test_an_image_with_new_partitions_wakes_the_heartbeat_at_once(tmp_path):
    async def scenario():
        client = await three_brokers(tmp_path)
        config = broker_config.build({"node.id": "2", "broker.heartbeat.interval.ms": "60000"})
        lifecycle = BrokerLifecycle(client, config, replica_manager=None)
        await client.create_topic("t", [[1]], {})
        assert lifecycle._new_partitions.is_set()
        await asyncio.wait_for(lifecycle._until_next_heartbeat(), 1.0)   # not 60 s
        await client.alter_topic_configs("t", {"retention.ms": "1000"})
        assert not lifecycle._new_partitions.is_set()                    # nothing new

    run(scenario())

"""The coordinator core (broker/coordinator/): which partition coordinates a key, and
FindCoordinator's answer, for both internal topics alike.

FindCoordinator runs against a real MetadataClient over a LocalStore (three registered
brokers), which creates the topic exactly as a broker does on first use.
"""
from __future__ import annotations

import asyncio

import pytest

from broker import config as config_module
from broker.controller.metadata_client import ApplyError, MetadataClient, MetadataUnavailable
from broker.controller.store import LocalStore
from broker.coordinator import CoordinatorLookup, InternalTopic, partition_for
from broker.groups.manager import offsets_topic
from broker.groups.placement import OFFSETS_TOPIC
from broker.tasks import TaskSupervisor
from broker.transactions.manager import TRANSACTION_STATE_TOPIC, transaction_state_topic
from protocol.errors import ErrorCode

NOT_AVAILABLE = ErrorCode.COORDINATOR_NOT_AVAILABLE
# "polygenelubricants".hashCode() is Integer.MIN_VALUE in Java: Kafka's Utils.abs makes it
# 0, where Math.abs would leave it negative.
MIN_VALUE_KEY = "polygenelubricants"


def settings(**values) -> config_module.BrokerConfig:
    base = {"node.id": "1", "offsets.topic.num.partitions": "7",
            "offsets.topic.replication.factor": "3",
            "transaction.state.log.num.partitions": "5",
            "transaction.state.log.replication.factor": "3",
            "transaction.state.log.min.isr": "2"}
    base.update(values)
    return config_module.build(base)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 20))


async def metadata_with_brokers(tmp_path, count: int = 3) -> MetadataClient:
    store = LocalStore(str(tmp_path), 1)
    await store.start()
    client = MetadataClient(store)
    await client.init_cluster("c")
    for broker_id in range(1, count + 1):
        await client.register_broker(broker_id, "127.0.0.1", 9090 + broker_id, f"i-{broker_id}")
    return client


# -- partition_for ----------------------------------------------------------------------------

@pytest.mark.parametrize("key,partitions,expected", [
    ("hello", 50, 99162322 % 50),        # Java: "hello".hashCode() == 99162322
    ("", 50, 0),
    (MIN_VALUE_KEY, 50, 0),
    (MIN_VALUE_KEY, 7, 0),
])
def test_a_key_maps_to_abs_of_its_java_hash_modulo_the_partitions(key, partitions, expected):
    assert partition_for(key, partitions) == expected


def test_both_internal_topics_place_a_key_by_the_same_hash():
    config = settings(**{"transaction.state.log.num.partitions": "7"})
    image = type("Image", (), {"topics": {}})()
    groups, transactions = offsets_topic(config), transaction_state_topic(config)
    for key in ("g", "txn-1", "группа", MIN_VALUE_KEY, "a" * 300):
        assert groups.partition_for(image, key) == transactions.partition_for(image, key) \
            == partition_for(key, 7)


def test_the_existing_topic_partition_count_wins_over_the_configured_one(tmp_path):
    async def scenario():
        client = await metadata_with_brokers(tmp_path)
        topic = offsets_topic(settings())
        assert topic.num_partitions(client.image) == 7  # before the topic exists
        await client.create_topic(OFFSETS_TOPIC, [[1], [2], [3]], {})
        assert topic.num_partitions(client.image) == 3
        assert {topic.partition_for(client.image, k) for k in map(str, range(100))} \
            == {0, 1, 2}
    run(scenario())


def test_a_partition_count_below_one_is_refused():
    with pytest.raises(ValueError):
        partition_for("g", 0)


# -- FindCoordinator --------------------------------------------------------------------------

def lookup_for(topic: InternalTopic, client: MetadataClient,
               create: bool = True) -> CoordinatorLookup:
    """The lookup as node.py wires it: creation through the metadata client."""
    create_topic = client.create_topic_on_live_brokers if create else None
    return CoordinatorLookup(topic, lambda: client.image, create_topic, TaskSupervisor("[unit]"),
                             "[unit]")


@pytest.mark.parametrize("make_topic,name", [(offsets_topic, OFFSETS_TOPIC),
                                             (transaction_state_topic, TRANSACTION_STATE_TOPIC)])
def test_the_first_lookup_creates_the_topic_and_answers_the_key_partition_leader(
        tmp_path, make_topic, name):
    async def scenario():
        client = await metadata_with_brokers(tmp_path)
        topic = make_topic(settings())
        lookup = lookup_for(topic, client)
        answers = await asyncio.gather(*(lookup.find_coordinator("key") for _ in range(5)))
        created = client.image.topics[name]
        assert len(created.partitions) == topic.configured_partitions
        assert all(len(p.replicas) == 3 for p in created.partitions.values())
        leader = created.partitions[partition_for("key", topic.configured_partitions)].leader
        assert {(a.error, a.node_id, a.host, a.port) for a in answers} \
            == {(ErrorCode.NONE, leader, "127.0.0.1", 9090 + leader)}
        return created.configs
    configs = run(scenario())
    assert configs["cleanup.policy"] == "compact"
    if name == TRANSACTION_STATE_TOPIC:
        assert configs["min.insync.replicas"] == "2"


def test_the_topic_is_created_with_no_more_replicas_than_live_brokers(tmp_path):
    async def scenario():
        client = await metadata_with_brokers(tmp_path, count=2)
        answer = await lookup_for(offsets_topic(settings()), client).find_coordinator("g")
        assert answer.error == ErrorCode.NONE
        return client.image.topics[OFFSETS_TOPIC]
    created = run(scenario())
    assert {len(p.replicas) for p in created.partitions.values()} == {2}


def test_without_a_creator_a_missing_topic_is_coordinator_not_available(tmp_path):
    async def scenario():
        client = await metadata_with_brokers(tmp_path)
        answer = await lookup_for(offsets_topic(settings()), client,
                                  create=False).find_coordinator("g")
        assert answer.error == NOT_AVAILABLE and "creates no topics" in answer.message
        assert OFFSETS_TOPIC not in client.image.topics
    run(scenario())


def test_a_fenced_leader_is_coordinator_not_available(tmp_path):
    async def scenario():
        client = await metadata_with_brokers(tmp_path)
        await client.create_topic(OFFSETS_TOPIC, [[2]], {})
        await client.fence_self(2, unclean_default=False)
        answer = await lookup_for(offsets_topic(settings()), client).find_coordinator("g")
        assert answer.error == NOT_AVAILABLE and f"{OFFSETS_TOPIC}-0" in answer.message
        assert (answer.node_id, answer.host, answer.port) == (-1, "", -1)
    run(scenario())


@pytest.mark.parametrize("failure,answered", [
    (ApplyError("TOPIC_ALREADY_EXISTS", "raced"), ErrorCode.NONE),
    (ApplyError("POLICY_VIOLATION", "no"), NOT_AVAILABLE),
    (MetadataUnavailable("no quorum"), NOT_AVAILABLE),
])
def test_a_refused_creation_is_answered_and_a_raced_one_is_not_an_error(tmp_path, failure,
                                                                         answered):
    async def scenario():
        client = await metadata_with_brokers(tmp_path)

        async def create(name, partitions, replication, configs):
            if isinstance(failure, ApplyError) and failure.code == "TOPIC_ALREADY_EXISTS":
                await client.create_topic_on_live_brokers(name, partitions, replication,
                                                          configs)
            raise failure
        lookup = CoordinatorLookup(offsets_topic(settings()), lambda: client.image, create,
                                   TaskSupervisor("[unit]"), "[unit]")
        answer = await lookup.find_coordinator("g")
        assert answer.error == answered
        if answered != ErrorCode.NONE:
            assert str(failure) in answer.message
    run(scenario())

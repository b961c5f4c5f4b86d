"""Published images share what did not change and name what did; the replica manager
acts on that delta, and opens many new logs in slices without holding the loop."""
from __future__ import annotations

import asyncio

from broker import config as config_module
from broker.controller.commands import AlterPartition, AlterTopicConfigs
from broker.controller.image import publish, touched
from broker.controller.metadata_client import MetadataClient
from broker.controller.state import ClusterState
from broker.replication import image_applier
from broker.replication.replica_manager import ReplicaManager


def three_brokers() -> ClusterState:
    state = ClusterState()
    for node in (1, 2, 3):
        state.apply_register_broker(node, "127.0.0.1", 19090 + node, f"i-{node}")
    return state


def test_a_published_image_shares_unchanged_partitions_and_names_the_changed_ones():
    state = three_brokers()
    state.apply_create_topic("a", "id-a", [[1, 2, 3], [2, 3, 1]], {})
    state.apply_create_topic("b", "id-b", [[3, 1, 2]], {})
    first = publish(state, None)
    second = publish(state, first)
    assert second.topics["a"] is first.topics["a"] and second.topics["b"] is first.topics["b"]
    assert second.delta.partitions == frozenset() and second.delta.topics == frozenset()
    assert second.delta.base == first.position()

    command = AlterPartition("a", 1, 2, 0, 0, [2, 3])
    command.apply(state)
    assert touched(command) == {"a": {1}}
    third = publish(state, second, touched(command))  # only a-1 is compared
    assert publish(state, second).to_dict() == third.to_dict()
    assert third.delta.partitions == {("a", 1)} and third.delta.topics == frozenset()
    assert third.topics["a"].partitions[0] is second.topics["a"].partitions[0]
    assert third.topics["a"].partitions[1] is not second.topics["a"].partitions[1]
    assert third.topics["b"] is second.topics["b"]
    assert third.to_dict() == state.to_dict(), "sharing never changes what the image says"
    assert second.topics["a"].partitions[1].isr == [2, 3, 1], "a published image stays as it was"

    configs = AlterTopicConfigs("b", {"retention.ms": "1000"})
    configs.apply(state)
    assert touched(configs) == {"b": None}
    only_b = publish(state, third, touched(configs))
    assert only_b.delta.topics == {"b"} and only_b.topics["a"] is third.topics["a"]
    assert only_b.to_dict() == state.to_dict()
    state.apply_delete_topic("a")
    state.apply_create_topic("a", "id-a2", [[1, 2, 3]], {})
    fourth = publish(state, third)
    assert fourth.delta.topics == {"a", "b"}          # re-created; configs changed
    assert fourth.delta.partitions == {("a", 0)}      # every partition of the new topic
    assert fourth.to_dict() == state.to_dict()
    assert state.snapshot().delta is None, "a private copy carries no delta"


def replica_manager(tmp_path) -> ReplicaManager:
    return ReplicaManager(config_module.build({"node.id": 1, "log.dirs": str(tmp_path)}))


def test_the_replica_manager_follows_a_chain_of_deltas_and_falls_back_to_the_whole_image(
        tmp_path):
    async def main():
        state = three_brokers()
        state.apply_create_topic("t", "id-t", [[1, 2, 3], [2, 1, 3]], {})
        rm = replica_manager(tmp_path)
        image = publish(state, None)
        rm.apply_image(image)
        leader, follower = rm.partitions[("t", 0)], rm.partitions[("t", 1)]
        assert leader.is_leader and follower.leader_id == 2

        state.apply_alter_partition("t", 0, 1, 0, 0, [1, 2])
        image = publish(state, image)
        assert image.delta.partitions == {("t", 0)}
        rm.apply_image(image)
        assert (leader.isr, leader.partition_epoch) == ([1, 2], 1)

        state.apply_alter_partition("t", 1, 2, 0, 0, [2, 1])
        skipped = publish(state, image)
        state.apply_alter_topic_configs("t", {"min.insync.replicas": "2"})
        image = publish(state, skipped)   # its delta follows an image never seen
        assert image.delta.partitions == frozenset()
        rm.apply_image(image)
        assert (follower.isr, follower.partition_epoch) == ([2, 1], 1), "whole-image fallback"
        assert leader.settings.min_insync_replicas == 2 == follower.settings.min_insync_replicas
        assert rm.applied_position == image.position()
        await rm.shutdown()

    asyncio.run(main())


def test_many_new_logs_open_in_slices_and_lead_only_once_open(tmp_path, monkeypatch):
    monkeypatch.setattr(image_applier, "OPEN_SLICE", 4)
    count = 15

    async def main():
        state = three_brokers()
        state.apply_create_topic("t", "id-t", [[1, 2, 3]] * count, {})
        rm = replica_manager(tmp_path)
        store = MetadataClient(_StandIn(state))
        rm.metadata = store
        store.propagation.follow_local(rm.applier)
        image = publish(state, None)
        ticks = 0
        rm.apply_image(image)
        assert not rm.partitions, "more than a slice: every log opens in the task"
        assert rm.applied_position < image.position()
        assert 1 in store.brokers_lacking(image.position(), 1)   # our own logs lag
        while rm.applier.pending and ticks < 1000:
            opened = len(rm.partitions)
            await asyncio.sleep(0)
            ticks += 1
            assert len(rm.partitions) - opened <= 4, "at most one slice per loop pass"
            assert all(p.is_leader for p in rm.partitions.values())
        assert len(rm.partitions) == count and ticks >= 3
        await asyncio.sleep(0)
        assert rm.applied_position == image.position()
        assert 1 not in store.brokers_lacking(image.position(), 1)
        await rm.shutdown()

    asyncio.run(main())


def test_a_pending_log_takes_the_newest_state_and_a_deleted_topic_is_never_opened(
        tmp_path, monkeypatch):
    monkeypatch.setattr(image_applier, "OPEN_SLICE", 2)

    async def main():
        state = three_brokers()
        state.apply_create_topic("gone", "id-g", [[1, 2, 3]] * 6, {})
        state.apply_create_topic("kept", "id-k", [[2, 1, 3]] * 6, {})
        rm = replica_manager(tmp_path)
        image = publish(state, None)
        rm.apply_image(image)
        await asyncio.sleep(0)
        opened = set(rm.partitions)  # one slice: its count, or fewer on a slow disk
        assert opened and opened <= {("gone", 0), ("gone", 1)}, opened
        state.apply_delete_topic("gone")
        state.apply_alter_partition("kept", 5, 2, 0, 0, [2, 1])
        image = publish(state, image)
        rm.apply_image(image)
        for _ in range(100):
            if not rm.applier.pending:
                break
            await asyncio.sleep(0)
        assert set(rm.partitions) == {("kept", i) for i in range(6)}
        assert not any((tmp_path / f"gone-{i}").exists() for i in range(6))
        assert rm.partitions[("kept", 5)].isr == [2, 1]
        assert rm.partitions[("kept", 5)].partition_epoch == 1
        await rm.shutdown()

    asyncio.run(main())


class _StandIn:
    """A store with only an image: no observers, so no other broker ever reports."""

    def __init__(self, image: ClusterState):
        self.image = image

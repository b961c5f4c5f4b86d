"""A broker acts only on metadata images that show this process registered (found by
``raftwood verify``: a broker restarted within its session timeout led its old
partitions in their old epochs with a stale high watermark — ListOffsets latest went
back to 0 — and, after a torn log tail, overwrote acknowledged records that its
followers then truncated; the journal replayed at start-up did the same with every
historical epoch)."""
from __future__ import annotations

from broker import config as config_module
from broker.controller.state import ClusterState
from broker.replication.replica_manager import ReplicaManager


def image_with(incarnation: str) -> ClusterState:
    state = ClusterState()
    for node in (1, 2, 3):
        state.apply_register_broker(node, "127.0.0.1", 9090 + node,
                                    incarnation if node == 1 else f"other-{node}")
    state.apply_create_topic("t", "topic-id", [[1, 2, 3]], {})
    return state


def manager(tmp_path) -> ReplicaManager:
    config = config_module.build({"node.id": 1, "log.dirs": str(tmp_path)})
    rm = ReplicaManager(config)
    rm.incarnation = "this-process"
    return rm


def test_an_image_of_the_previous_process_is_not_acted_on(tmp_path):
    rm = manager(tmp_path)
    old = image_with("previous-process")        # leader of t-0 in epoch 0: not us any more
    rm.apply_image(old)
    assert rm.image is old, "the image is still known"
    assert rm.partitions == {}, "no log opened, no leadership taken"


def test_an_image_without_this_broker_is_not_acted_on(tmp_path):
    rm = manager(tmp_path)
    state = ClusterState()
    state.apply_register_broker(2, "127.0.0.1", 9092, "other")
    state.apply_create_topic("t", "topic-id", [[1, 2]], {})
    rm.apply_image(state)
    assert rm.partitions == {}


def test_once_registered_the_image_is_applied(tmp_path):
    rm = manager(tmp_path)
    rm.apply_image(image_with("this-process"))
    partition = rm.partitions[("t", 0)]
    assert partition.is_leader and partition.leader_epoch == 0


def test_without_an_incarnation_every_image_applies(tmp_path):
    config = config_module.build({"node.id": 1, "log.dirs": str(tmp_path)})
    rm = ReplicaManager(config)                 # driven alone, as unit tests do
    rm.apply_image(image_with("anything"))
    assert ("t", 0) in rm.partitions

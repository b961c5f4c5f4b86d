"""The lone broker's metadata file (broker/controller/metadata_file.py): versioned JSON.

Rules protected: a state with brokers (one fenced), topics, ISR changes, leader and
partition epochs and replica states survives ``to_dict``/JSON/``from_dict`` unchanged,
dict order included (elections iterate in it); the file is plain JSON with a
``format_version``, written atomically; a file pickled by an older Raftwood is read
once and rewritten as JSON on the next change (not before); an unknown
``format_version`` or an unreadable file is an error naming the file.
"""
from __future__ import annotations

import asyncio
import json
import os
import pickle

import pytest

from broker.controller.commands import AllocateProducerIds, Heartbeat
from broker.controller.metadata_file import (
    FORMAT_VERSION,
    MetadataFileError,
    metadata_path,
    read_state,
    write_state,
)
from broker.controller.state import ClusterState
from broker.controller.store import LocalStore


def busy_state() -> ClusterState:
    state = ClusterState()
    state.apply_init_cluster("cluster-x")
    for broker_id in (3, 1, 2):  # registration order, not id order
        state.apply_register_broker(broker_id, f"10.0.0.{broker_id}", 9090 + broker_id,
                                    f"inc-{broker_id}")
    state.apply_create_topic("zeta", "id-z", [[1, 2, 3], [2, 3, 1], [3, 1, 2]],
                             {"min.insync.replicas": "2"})
    state.apply_create_topic("alpha", "id-a", [[2, 1]], {})
    state.apply_alter_partition("zeta", 1, 2, 0, 0, [2, 3])
    state.apply_fence_brokers([1], {"zeta:0": {3: 10, 2: 5}})
    state.apply_allocate_producer_ids(2000)
    return state


def test_a_state_round_trips_through_plain_dicts_and_json():
    state = busy_state()
    again = ClusterState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert vars(again) == vars(state)
    assert list(again.topics) == ["zeta", "alpha"] and list(again.brokers) == [3, 1, 2]
    p = again.topics["zeta"].partitions[0]
    assert (p.leader, p.leader_epoch, p.partition_epoch, p.isr) == (3, 1, 1, [2, 3])
    assert p.replica_states == {1: "OfflineReplica", 2: "OnlineReplica", 3: "OnlineReplica"}
    assert again.topics["zeta"].partitions[1].isr == [2, 3]
    assert again.brokers[1].fenced and again.next_producer_id == 2000
    assert again.position() == state.position()


def test_raft_positions_survive_too():
    state = busy_state()
    state.applied_term, state.applied_index = 4, 77
    assert ClusterState.from_dict(state.to_dict()).position() == (4, 77, state.version)


def test_the_file_is_versioned_json_written_atomically(tmp_path):
    path = metadata_path(str(tmp_path))
    write_state(path, busy_state())
    with open(path, encoding="utf-8") as f:
        document = json.load(f)
    assert document["format_version"] == FORMAT_VERSION == 1
    assert document["cluster_id"] == "cluster-x"
    assert [t["name"] for t in document["topics"]] == ["zeta", "alpha"]
    assert os.listdir(tmp_path) == ["metadata.state"], "no temporary file left behind"
    state, legacy = read_state(path)
    assert not legacy and vars(state) == vars(busy_state())


@pytest.mark.parametrize("content,expected", [
    (b'{"format_version": 2, "cluster_id": "c"}', "format_version 2"),
    (b'{"cluster_id": "c"}', "format_version None"),
    (b'{"format_version": 1, "cluster_id": "c"}', "bad metadata"),
    (b'{"format_version": 1,', "not valid JSON"),
    (b"\x80\x04garbage", "neither JSON nor"),
])
def test_an_unreadable_file_is_an_error_naming_the_file(tmp_path, content, expected):
    path = metadata_path(str(tmp_path))
    with open(path, "wb") as f:
        f.write(content)
    with pytest.raises(MetadataFileError) as error:
        LocalStore(str(tmp_path), 1)
    assert path in str(error.value) and expected in str(error.value)


def test_an_older_raftwoods_pickle_is_read_once_and_rewritten_as_json_on_the_next_change(
        tmp_path):
    path = metadata_path(str(tmp_path))
    old = busy_state()
    with open(path, "wb") as f:
        f.write(pickle.dumps(old))  # what LocalStore wrote before the JSON format

    async def scenario():
        store = LocalStore(str(tmp_path), 1)
        assert store.upgrade_pending and vars(store.image) == vars(old)
        await store.start()
        epoch = store.image.brokers[2].broker_epoch
        assert await store.submit(Heartbeat(2, epoch)) is True   # a no-op: no write
        with open(path, "rb") as f:
            assert f.read(1) == b"\x80", "nothing changed, nothing rewritten yet"
        assert await store.submit(AllocateProducerIds(5)) == 2000
        assert not store.upgrade_pending
        return store.image

    image = asyncio.run(scenario())
    with open(path, encoding="utf-8") as f:
        assert json.load(f)["format_version"] == FORMAT_VERSION
    reopened = LocalStore(str(tmp_path), 1)
    assert not reopened.upgrade_pending and vars(reopened.image) == vars(image)
    assert reopened.image.next_producer_id == 2005


def test_a_pickled_state_from_before_raft_positions_existed_still_reads(tmp_path):
    """States pickled before applied_term/applied_index existed lack them; the class
    defaults (0) stand in."""
    state = busy_state()
    assert "applied_term" not in vars(state)
    path = metadata_path(str(tmp_path))
    with open(path, "wb") as f:
        pickle.dump(state, f)
    loaded, legacy = read_state(path)
    assert legacy and loaded.position() == (0, 0, state.version)

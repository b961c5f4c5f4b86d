"""The lone broker's metadata file: an older Raftwood's pickled file still migrates to
JSON, but a pickle naming anything beyond the metadata's own classes runs nothing: the
broker refuses to start on it and says which file.
"""
from __future__ import annotations

import builtins
import pickle
import uuid

import pytest

from broker.controller.state import ClusterState
from broker.harness.process import BrokerError
from broker.testing import BrokerProcess, KafkaConnection


def metadata_file(data_dir):
    directory = data_dir / "__cluster_metadata"
    directory.mkdir(parents=True)
    return directory / "metadata.state"


class PlantedPickle:
    """Unpickling this opens (creates) ``marker``: code run by loading a file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return builtins.open, (self.marker, "w")


def test_a_planted_pickle_runs_nothing_and_the_broker_does_not_start(tmp_path):
    marker = tmp_path / "pickle-ran"
    metadata_file(tmp_path / "data").write_bytes(pickle.dumps(PlantedPickle(marker)))
    broker = BrokerProcess(tmp_path / "data", log_path=tmp_path / "broker.log",
                           start_timeout_s=60)
    with pytest.raises(BrokerError):
        broker.start()
    broker.stop()
    assert not marker.exists()
    log = (tmp_path / "broker.log").read_text(errors="replace")
    assert "io.open is not part of Raftwood's metadata" in log
    assert "metadata.state" in log


def test_an_older_raftwoods_pickled_metadata_still_migrates_to_json(tmp_path):
    state = ClusterState()
    state.apply_init_cluster("legacy-cluster")
    state.apply_create_topic("legacy", uuid.uuid4().hex, [[1]], {})
    path = metadata_file(tmp_path / "data")
    path.write_bytes(pickle.dumps(state))
    broker = BrokerProcess(tmp_path / "data", log_path=tmp_path / "broker.log")
    broker.start()
    try:
        with KafkaConnection(broker.bootstrap) as conn:
            (topic,) = conn.metadata(["legacy"]).topics
            assert topic.error_code == 0 and len(topic.partitions) == 1
        assert path.read_bytes().lstrip().startswith(b"{")  # registration rewrote it
    finally:
        assert broker.stop() == 0, broker.log_tail()

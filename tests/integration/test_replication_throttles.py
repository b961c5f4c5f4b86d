"""Kafka's replication throttles on a real cluster (broker/replication/throttle.py).

Three brokers with ``follower.replication.throttled.rate=500`` (bytes/s); a partition on
brokers 1 (leader) and 2 whose topic lists ``0:2`` in
``follower.replication.throttled.replicas``.  Broker 2 is stopped, 2 MB are written,
and broker 2 comes back behind the leader's high watermark:

* throttled, it is still far behind after 5 s (500 B/s: at most a few batches);
* once the list is removed (IncrementalAlterConfigs DELETE) it catches up and rejoins
  the ISR, with the replicas identical.

No timing is asserted beyond "not caught up after 5 s at 500 B/s", which a slow machine
only makes more true.  DescribeConfigs shows the lists (topic) and the rate (broker); a
malformed list is refused with INVALID_CONFIG by CreateTopics and by the config APIs.

``raftwood reassign --execute --throttle`` writes the lists for a move as
kafka-reassign-partitions --throttle does (the replica being added stays behind at the
brokers' follower rate), ``--cancel`` removes them, and so does ``--status`` once the
move is over.
"""
from __future__ import annotations

import subprocess
import sys
import time

import pytest
from kafka.protocol.admin import DescribeConfigsRequest, IncrementalAlterConfigsRequest

from broker.testing import build_batch
from tests.faults.checker import assert_replicas_identical_below

TOPIC = "throttled"
LEADER_LIST = "leader.replication.throttled.replicas"
FOLLOWER_LIST = "follower.replication.throttled.replicas"
FOLLOWER_RATE = "follower.replication.throttled.rate"
INVALID_CONFIG = 40
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
BACKLOG_BYTES = 2 << 20
RECORD = b"r" * 1000


@pytest.fixture(scope="module")
def shared_cluster(module_cluster_factory):
    """Three brokers at a follower rate of 500 B/s, shared by the module's two tests (a
    topic of their own each)."""
    return module_cluster_factory(3, **{FOLLOWER_RATE: "500"})


def describe(cluster, node: int, resource_type: int, name: str) -> dict:
    """{config name: (value, config_source)} from DescribeConfigs sent to ``node``."""
    resource = DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=resource_type, resource_name=name, configuration_keys=None)
    with cluster.connect(node) as conn:
        response = conn.request(DescribeConfigsRequest[1](
            resources=[resource], include_synonyms=False))
    [result] = response.results
    assert result.error_code == 0, result
    return {c.name: (c.value, c.config_source) for c in result.configs}


def alter(cluster, node: int, changes: dict, operation: int = SET, topic: str = TOPIC) -> int:
    """IncrementalAlterConfigs on the topic (value None: DELETE); its error code."""
    resource_class = IncrementalAlterConfigsRequest.AlterConfigsResource
    resource = resource_class(
        resource_type=TOPIC_RESOURCE, resource_name=topic, configs=[
            resource_class.AlterableConfig(name=name, config_operation=DELETE
                                           if value is None else operation, value=value)
            for name, value in changes.items()])
    with cluster.connect(node) as conn:
        response = conn.request(IncrementalAlterConfigsRequest[0](
            resources=[resource], validate_only=False))
    [answer] = response.responses
    return answer.error_code


def log_end_offset(cluster, node: int) -> int:
    return cluster.hosted(node, TOPIC, 0)["log_end_offset"]


def test_a_follower_throttle_holds_a_catching_up_replica_back_until_removed(cluster):
    try:
        cluster.create_topic("malformed", configs={FOLLOWER_LIST: "0-2"})
        raise AssertionError("a malformed list was accepted")
    except AssertionError as exc:
        assert f"error {INVALID_CONFIG}" in str(exc), exc
    cluster.create_topic(TOPIC, assignments=[[1, 2]],
                         configs={FOLLOWER_LIST: "0:2", LEADER_LIST: "0:1"})

    topic_configs = describe(cluster, 3, TOPIC_RESOURCE, TOPIC)
    assert topic_configs[FOLLOWER_LIST] == ("0:2", 1) and topic_configs[LEADER_LIST] == ("0:1", 1)
    assert describe(cluster, 2, BROKER_RESOURCE, "2")[FOLLOWER_RATE][0] == "500"
    assert alter(cluster, 3, {FOLLOWER_LIST: "0:2,x"}) == INVALID_CONFIG
    assert describe(cluster, 1, TOPIC_RESOURCE, TOPIC)[FOLLOWER_LIST] == ("0:2", 1)
    # Kafka's list configs take APPEND and SUBTRACT (items, not text)
    assert alter(cluster, 3, {LEADER_LIST: "0:2,0:1"}, APPEND) == 0
    cluster.wait_for(lambda s: describe(cluster, 3, TOPIC_RESOURCE, TOPIC)[LEADER_LIST][0]
                     == "0:1,0:2", 10, "the appended leader list")
    assert alter(cluster, 3, {LEADER_LIST: "0:1"}, SUBTRACT) == 0
    cluster.wait_for(lambda s: describe(cluster, 3, TOPIC_RESOURCE, TOPIC)[LEADER_LIST][0]
                     == "0:2", 10, "the subtracted leader list")

    cluster.stop(2)
    cluster.wait_for_isr(TOPIC, 0, [1])
    per_batch = 16
    batches = BACKLOG_BYTES // (per_batch * len(RECORD))
    with cluster.connect(1) as conn:
        for _ in range(batches):
            answer = conn.produce(TOPIC, 0, build_batch(
                [(None, RECORD, 0, [])] * per_batch), acks=1)
            assert answer.error_code == 0, answer
    end = log_end_offset(cluster, 1)
    assert end == batches * per_batch

    cluster.start(2)
    cluster.wait_for(lambda s: cluster.find_hosted(s[2], TOPIC, 0), 30, "broker 2 to host it",
                     nodes=[2])
    time.sleep(5)
    behind = log_end_offset(cluster, 2)
    assert behind < end // 4, f"broker 2 at {behind} of {end} after 5 s at 500 B/s"
    assert sorted(cluster.partition_state(TOPIC, 0)["isr"]) == [1]

    assert alter(cluster, 1, {FOLLOWER_LIST: None}) == 0
    cluster.wait_for(lambda s: log_end_offset(cluster, 2) == end, 60,
                     "broker 2 to catch up once the throttle is removed")
    assert describe(cluster, 2, TOPIC_RESOURCE, TOPIC)[FOLLOWER_LIST] == ("", 5), \
        "back to Kafka's default (empty, DEFAULT_CONFIG)"
    cluster.wait_for_isr(TOPIC, 0, [1, 2], timeout_s=60)
    assert_replicas_identical_below(cluster, TOPIC, 0, end, [1, 2])


def raftwood(cluster, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "broker.cli", *args, "--bootstrap-server",
                           cluster.bootstrap.split(",")[0]], capture_output=True, text=True,
                          timeout=60)


def fill(cluster, topic: str, batches: int = 64, per_batch: int = 16) -> int:
    """About 1 MB written to the leader (acks=1); the log end offset."""
    with cluster.connect(cluster.leader_of(topic, 0)) as conn:
        for _ in range(batches):
            answer = conn.produce(topic, 0, build_batch([(None, RECORD, 0, [])] * per_batch),
                                  acks=1)
            assert answer.error_code == 0, answer
    return batches * per_batch


def replicas_become(cluster, topic: str, expected: list[int]) -> None:
    def done(statuses):
        state = cluster.find_partition(cluster.freshest(statuses), topic, 0)
        return sorted(state["replicas"]) == expected and not state["adding_replicas"] \
            and sorted(state["isr"]) == expected
    cluster.wait_for(done, 60, f"{topic}-0 on {expected}")


def lists_of(cluster, node: int, topic: str) -> tuple[str, str]:
    described = describe(cluster, node, TOPIC_RESOURCE, topic)
    return described[LEADER_LIST][0], described[FOLLOWER_LIST][0]


def test_reassign_throttle_writes_the_lists_and_cancel_or_status_removes_them(cluster):
    topic = "throttled-move"
    cluster.create_topic(topic, assignments=[[1, 2]])
    end = fill(cluster, topic)
    replicas_become(cluster, topic, [1, 2])
    args = ("reassign", "--topics", topic, "--brokers", "1,3")

    started = raftwood(cluster, *args, "--execute", "--throttle")
    assert started.returncode == 0, started.stdout + started.stderr
    assert "throttled" in started.stdout, started.stdout
    assert lists_of(cluster, 1, topic) == ("0:1,0:2", "0:3"), "Kafka's: current replicas / added"
    time.sleep(5)
    status = raftwood(cluster, *args[:3], "--status")
    assert status.returncode == 0 and "0/1" in status.stdout, status.stdout
    assert cluster.hosted(3, topic, 0)["log_end_offset"] < end // 4, "held back at 500 B/s"

    cancelled = raftwood(cluster, *args[:3], "--cancel")
    assert cancelled.returncode == 0 and "removed the throttled-replica lists" in \
        cancelled.stdout, cancelled.stdout + cancelled.stderr
    assert lists_of(cluster, 1, topic) == ("", "")
    replicas_become(cluster, topic, [1, 2])

    started = raftwood(cluster, *args, "--execute", "--throttle")
    assert started.returncode == 0, started.stdout + started.stderr
    assert lists_of(cluster, 1, topic) == ("0:1,0:2", "0:3")
    # the operator lifts the throttle
    assert alter(cluster, 1, {FOLLOWER_LIST: None}, topic=topic) == 0
    replicas_become(cluster, topic, [1, 3])
    done = raftwood(cluster, *args[:3], "--status")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no partition of these topics is moving" in done.stdout
    assert "removed the throttled-replica lists" in done.stdout, done.stdout
    assert lists_of(cluster, 1, topic) == ("", "")

"""Which followers a leader throttles (ReplicaManager.leader_throttles and its fetch
path): Kafka's leader.replication.throttled.replicas rule (p:thisBroker or '*', follower
out of the ISR), and Raftwood's joining replicas, which need no list."""
from __future__ import annotations

from broker import config as config_module
from broker.replication.delayed import FetchPartitionStatus
from broker.replication.replica_manager import ReplicaManager
from broker.topics import FOLLOWER_THROTTLED_REPLICAS, LEADER_THROTTLED_REPLICAS
from tests.unit.replication.test_log_dir_offline import produce, single_broker_image


def leader_of(tmp_path, configs: dict, rate: int = 2**63 - 1):
    """Broker 1 leads t-0 and t-1 with replicas [1, 2, 3]; broker 2 has left the ISR."""
    config = config_module.build({"node.id": 1, "log.dirs": str(tmp_path),
                                  "leader.replication.throttled.rate": str(rate)})
    rm = ReplicaManager(config, on_fatal=lambda reason: None)
    rm.apply_image(single_broker_image(configs=configs, replicas=[1, 2, 3]))
    for partition in rm.partitions.values():
        assert partition.is_leader
        partition.update_isr_from_metadata([1, 3], partition.partition_epoch + 1)
    return rm


def test_the_leader_list_names_the_partition_on_the_leaders_broker(tmp_path):
    rm = leader_of(tmp_path, {LEADER_THROTTLED_REPLICAS: "0:1,1:2"})
    t0, t1 = rm.partitions[("t", 0)], rm.partitions[("t", 1)]
    assert rm.leader_throttles(t0, 2), "0:1: broker 1 throttles partition 0's followers"
    assert not rm.leader_throttles(t0, 3), "a follower in the ISR is never throttled"
    assert not rm.leader_throttles(t1, 2), "1:2 names broker 2, which does not lead t-1"


def test_the_wildcard_and_the_follower_list(tmp_path):
    rm = leader_of(tmp_path, {LEADER_THROTTLED_REPLICAS: "*"})
    assert all(rm.leader_throttles(p, 2) for p in rm.partitions.values())
    rm = leader_of(tmp_path / "f", {FOLLOWER_THROTTLED_REPLICAS: "*"})
    t0 = rm.partitions[("t", 0)]
    assert not rm.leader_throttles(t0, 2), "the follower list is for followers"
    assert rm.follower_throttles(t0)  # (this broker leads; its fetcher does not fetch t-0)


def test_joining_replicas_are_throttled_without_a_list(tmp_path):
    rm = leader_of(tmp_path, {})
    t0 = rm.partitions[("t", 0)]
    assert not rm.leader_throttles(t0, 2)
    assert rm.leader_throttles(t0, 4), "a replica the image does not list yet is joining"
    t0.update_replicas([1, 2, 3, 4], adding=(4,))
    assert rm.leader_throttles(t0, 4)


def test_a_throttled_follower_gets_at_most_the_bucket(tmp_path):
    rm = leader_of(tmp_path, {LEADER_THROTTLED_REPLICAS: "0:1"}, rate=300)
    for _ in range(20):
        produce(rm, 0, b"x" * 100)
        produce(rm, 1, b"x" * 100)
    statuses = [FetchPartitionStatus(("t", index), rm.partitions[("t", index)], 0, 1 << 20, 0)
                for index in (0, 1)]
    t0, t1 = rm.read_partitions(statuses, 2, 10 << 20)
    assert 0 < len(t0.records) <= 300 and not t0.throttled
    assert len(t1.records) > 2000, "t-1 is not listed for broker 1"
    sent = len(t0.records)
    for _ in range(5):  # the rest of the bucket, then nothing until it refills
        again = rm.read_partitions(statuses[:1], 2, 10 << 20)[0]
        if again.throttled:
            break
        sent += len(again.records)
    assert again.throttled and not again.records, "the bucket ran dry"
    assert sent < 300 + 200, "the rate plus at most one batch"

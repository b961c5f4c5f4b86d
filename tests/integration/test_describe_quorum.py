"""DescribeQuorum (API 55) on a real cluster: four brokers, three voters and one observer.

Raw requests (v0 and v1) to the quorum leader, to a follower voter and to the observer:
the two that do not lead forward the request to the leader (as Kafka's brokers forward
it to the active controller), so all three answers describe the same quorum — the
leader's id, the Raft term as leader epoch (the status request's term, no election in
between), a high watermark at least the commit index the leader reported before, voters
1-3 with the leader's log end at or above the high watermark, observer 4.  A request
naming another partition is UNKNOWN_TOPIC_OR_PARTITION, and so is every request to a
lone broker, whose metadata is not in a Raft log.
"""
from __future__ import annotations

from kafka.protocol.admin import DescribeQuorumRequest

from broker.harness import KafkaConnection
from protocol.errors import ErrorCode
from tests.integration.test_quorum_membership import wait_roles

Topic = DescribeQuorumRequest.TopicData
Partition = Topic.PartitionData


def describe(version: int = 1, topic: str = "__cluster_metadata", partition: int = 0):
    return DescribeQuorumRequest[version](topics=[Topic(
        topic_name=topic, partitions=[Partition(partition_index=partition)])])


def test_every_broker_answers_with_the_leaders_view_of_the_quorum(raftwood_cluster_factory):
    cluster = raftwood_cluster_factory(4, voters=3)
    wait_roles(cluster, [1, 2, 3], [4])
    cluster.wait_for(lambda s: all(any(b["id"] == 4 and not b["fenced"] for b in st["brokers"])
                                   for st in s.values()), 30, "broker 4 registered everywhere")
    leader = cluster.controller_id()
    assert leader in (1, 2, 3)
    before = cluster.status(leader)["quorum"]
    follower = next(n for n in (1, 2, 3) if n != leader)

    for node in (leader, follower, 4):
        for version in (0, 1):
            with cluster.connect(node, timeout_s=20) as conn:
                answer = conn.request(describe(version))
            assert answer.error_code == ErrorCode.NONE, (node, answer)
            [topic] = answer.topics
            [partition] = topic.partitions
            assert (topic.topic_name, partition.partition_index, partition.error_code) \
                == ("__cluster_metadata", 0, ErrorCode.NONE), (node, answer)
            assert partition.leader_id == leader, (node, answer)
            assert partition.leader_epoch == before["term"], (node, answer)
            assert partition.high_watermark >= before["commit_index"] > 0, (node, answer)
            voters = {v.replica_id: v for v in partition.current_voters}
            assert sorted(voters) == [1, 2, 3], (node, answer)
            assert [o.replica_id for o in partition.observers] == [4], (node, answer)
            assert partition.observers[0].log_end_offset == -1
            assert voters[leader].log_end_offset >= partition.high_watermark, (node, answer)
            assert all(v.log_end_offset <= voters[leader].log_end_offset
                       for v in voters.values()), (node, answer)
            if version >= 1:
                assert voters[leader].last_caught_up_timestamp > 0, (node, answer)

    with cluster.connect(4) as conn:
        other = conn.request(describe(topic="__consumer_offsets"))
        wrong_partition = conn.request(describe(partition=1))
    assert other.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert wrong_partition.topics[0].partitions[0].error_code \
        == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_lone_broker_has_no_raft_partition_to_describe(raftwood_broker):
    with KafkaConnection(raftwood_broker.bootstrap) as conn:
        answer = conn.request(describe())
    assert answer.error_code == ErrorCode.NONE
    [partition] = answer.topics[0].partitions
    assert (partition.partition_index, partition.error_code) \
        == (0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

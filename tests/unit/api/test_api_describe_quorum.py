"""DescribeQuorum (API 55) on one broker, its metadata client faked: the leader's answer
from ``quorum_status()``, Kafka's errors (authorization at the top level, a partition
that is not the Raft log's per partition), and a forwarded request on a broker that no
longer leads.  Forwarding itself runs in tests/integration/test_describe_quorum.py."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from kafka.protocol.admin import DescribeQuorumRequest

from broker.api.quorum import handle_describe_quorum
from broker.controller.state import ClusterState
from broker.security.authorizer import ALLOW_ALL
from protocol.errors import ErrorCode
from protocol.messages import decode_request

Topic = DescribeQuorumRequest.TopicData
Partition = Topic.PartitionData


class DenyAll:
    def allows_cluster(self, request, operation, log_denial=True):
        return False


def leader_status(leading=True):
    return {"role": "voter", "running": True, "leader_id": 2 if leading else 1,
            "leading": leading, "term": 7, "commit_index": 41, "last_applied": 41,
            "voters": [{"id": 1, "address": "h:1", "connected": True,
                        "match_index": 40 if leading else None},
                       {"id": 2, "address": "h:2", "connected": True,
                        "match_index": 42 if leading else None},
                       {"id": 3, "address": "h:3", "connected": False,
                        "match_index": None}],
            "observers_connected": 1 if leading else None}


def context(status, authorizer=ALLOW_ALL):
    image = ClusterState()
    image.apply_init_cluster("cluster-x")
    for broker_id in (1, 2, 3, 4, 5):
        image.apply_register_broker(broker_id, "h", 9090 + broker_id, f"i-{broker_id}")
    image.apply_fence_brokers([5], {})
    metadata = SimpleNamespace(has_quorum=status is not None, quorum_status=lambda: status,
                               controller_id=(status or {}).get("leader_id", -1))
    return SimpleNamespace(image=image, metadata=metadata, authorizer=authorizer, node_id=2)


def call(ctx, message, client_id="unit"):
    message.with_header(correlation_id=1, client_id=client_id)
    request = decode_request(bytes(message.encode(header=True, framed=False)))
    return asyncio.run(handle_describe_quorum(ctx, request))


def describe(version=1, topic="__cluster_metadata", partitions=(0,)):
    return DescribeQuorumRequest[version](topics=[Topic(
        topic_name=topic, partitions=[Partition(partition_index=p) for p in partitions])])


def test_the_leader_answers_from_its_raft_node():
    for version in (0, 1):
        answer = call(context(leader_status()), describe(version))
        assert answer.error_code == 0
        [topic] = answer.topics
        [partition] = topic.partitions
        assert (topic.topic_name, partition.partition_index, partition.error_code) \
            == ("__cluster_metadata", 0, 0)
        assert (partition.leader_id, partition.leader_epoch, partition.high_watermark) \
            == (2, 7, 41)
        assert [(v.replica_id, v.log_end_offset) for v in partition.current_voters] \
            == [(1, 40), (2, 42), (3, -1)]
        # Live registered brokers outside the voters; fenced 5 is not fetching.
        assert [(o.replica_id, o.log_end_offset) for o in partition.observers] == [(4, -1)]
        if version >= 1:
            leader = partition.current_voters[1]
            assert leader.last_fetch_timestamp > 0 and leader.last_caught_up_timestamp > 0
            assert partition.current_voters[0].last_fetch_timestamp == -1


def test_describe_on_the_cluster_is_required():
    answer = call(context(leader_status(), DenyAll()), describe())
    assert (answer.error_code, answer.topics) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])


def test_a_partition_other_than_the_raft_log_is_unknown():
    for request in (describe(topic="orders"), describe(partitions=(1,)),
                    describe(partitions=(0, 1))):
        answer = call(context(leader_status()), request)
        assert answer.error_code == 0
        assert {p.error_code for t in answer.topics for p in t.partitions} \
            == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def test_a_lone_broker_has_no_raft_partition():
    answer = call(context(None), describe())
    [partition] = answer.topics[0].partitions
    assert (answer.error_code, partition.partition_index, partition.error_code) \
        == (0, 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


def test_a_forwarded_request_to_a_broker_that_no_longer_leads_is_not_forwarded_again():
    answer = call(context(leader_status(leading=False)), describe(), client_id="raftwood-quorum-3")
    [partition] = answer.topics[0].partitions
    assert (answer.error_code, partition.error_code) == (0, ErrorCode.NOT_LEADER_OR_FOLLOWER)

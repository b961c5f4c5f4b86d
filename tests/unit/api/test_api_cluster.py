"""DescribeCluster and DescribeLogDirs (broker/api/cluster.py) on a stand-in context."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from kafka.protocol.admin import DescribeClusterRequest, DescribeLogDirsRequest

from broker.api.cluster import handle_describe_cluster, handle_describe_log_dirs
from broker.controller.state import ClusterState
from broker.security.authorizer import ALLOW_ALL
from protocol.errors import ErrorCode
from protocol.messages import decode_request


class DenyAll:
    def allows_cluster(self, request, operation, log_denial=True):
        return False


def context(tmp_path, authorizer=ALLOW_ALL):
    image = ClusterState()
    image.apply_init_cluster("cluster-x")
    for broker_id in (1, 2, 3):
        image.apply_register_broker(broker_id, "h", 9090 + broker_id, f"i-{broker_id}")
    image.apply_fence_brokers([3], {})
    partition = SimpleNamespace(offline=False, high_watermark=7, log_end_offset=9,
                                log=SimpleNamespace(size_bytes=1234))
    rm = SimpleNamespace(log_dir=str(tmp_path), log_dir_failure=None,
                         partitions={("t", 0): partition, ("t", 1): partition,
                                     ("u", 0): partition})
    return SimpleNamespace(image=image, metadata=SimpleNamespace(controller_id=2),
                           authorizer=authorizer, replica_manager=rm)


def call(handler, ctx, message):
    message.with_header(correlation_id=1, client_id="unit")
    request = decode_request(bytes(message.encode(header=True, framed=False)))
    return asyncio.run(handler(ctx, request))


def test_describe_cluster_lists_unfenced_brokers_unless_v2_asks_for_fenced_ones(tmp_path):
    ctx = context(tmp_path)
    answer = call(handle_describe_cluster, ctx,
                  DescribeClusterRequest[1](include_cluster_authorized_operations=False))
    assert (answer.error_code, answer.cluster_id, answer.controller_id) == (0, "cluster-x", 2)
    assert [(b.broker_id, b.port) for b in answer.brokers] == [(1, 9091), (2, 9092)]
    assert answer.authorized_operations is None
    answer = call(handle_describe_cluster, ctx, DescribeClusterRequest[2](
        include_cluster_authorized_operations=True, include_fenced_brokers=True))
    assert [(b.broker_id, b.is_fenced) for b in answer.brokers] == [(1, False), (2, False),
                                                                     (3, True)]
    assert answer.authorized_operations == {5, 7, 8, 9, 10, 11, 12}


def test_describe_cluster_of_the_controller_endpoints_is_unsupported_on_a_broker(tmp_path):
    answer = call(handle_describe_cluster, context(tmp_path), DescribeClusterRequest[1](
        include_cluster_authorized_operations=False, endpoint_type=2))
    assert answer.error_code == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE == 115 and answer.brokers == []


def test_describe_log_dirs_answers_the_asked_partitions_with_their_sizes(tmp_path):
    ctx = context(tmp_path)
    Topic = DescribeLogDirsRequest.DescribableLogDirTopic
    answer = call(handle_describe_log_dirs, ctx, DescribeLogDirsRequest[4](
        topics=[Topic(topic="t", partitions=[1, 5])]))
    [result] = answer.results
    assert result.error_code == 0 and result.log_dir == str(tmp_path)
    assert [(t.name, [(p.partition_index, p.partition_size, p.offset_lag)
                      for p in t.partitions]) for t in result.topics] == [("t", [(1, 1234, 0)])]
    everything = call(handle_describe_log_dirs, ctx, DescribeLogDirsRequest[1](topics=None))
    assert sorted(t.name for t in everything.results[0].topics) == ["t", "u"]


def test_describe_log_dirs_needs_describe_on_the_cluster(tmp_path):
    ctx = context(tmp_path, DenyAll())
    v3 = call(handle_describe_log_dirs, ctx, DescribeLogDirsRequest[3](topics=None))
    assert (v3.error_code, v3.results) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
    v1 = call(handle_describe_log_dirs, ctx, DescribeLogDirsRequest[1](topics=None))
    assert v1.results == []


def test_an_offline_log_dir_answers_kafka_storage_error(tmp_path):
    ctx = context(tmp_path)
    ctx.replica_manager.log_dir_failure = "EIO"
    answer = call(handle_describe_log_dirs, ctx, DescribeLogDirsRequest[2](topics=None))
    assert answer.results[0].error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert answer.results[0].topics == []

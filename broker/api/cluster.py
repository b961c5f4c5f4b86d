"""DescribeCluster (KIP-700, v0-2) and DescribeLogDirs (v1-4): what the cluster and this
broker's log directory hold, as Kafka's brokers answer them.

DescribeCluster lists the registered brokers with their endpoint on the listener the
request came in on (brokers without it left out, as Metadata does), unfenced ones only
unless v2's ``include_fenced_brokers`` asks; the controller is the Raft leader here
(every broker is a voter).  Only the broker endpoint type is served: endpoint type 2
(controllers) is UNSUPPORTED_ENDPOINT_TYPE, as on a Kafka broker.  The cluster's
authorized operations are computed when asked (the operations Kafka defines on a
cluster resource that the principal may do).

DescribeLogDirs needs Describe on the cluster (v3+: CLUSTER_AUTHORIZATION_FAILED at
the top, earlier versions an empty list).  ``log.dirs`` is one directory: it is
answered with every hosted partition asked for (all when ``topics`` is null) — its size
on disk and the offset lag (HW - LEO, never negative) — and, from v4, the volume's total
and usable bytes; an offline directory answers KAFKA_STORAGE_ERROR and no partitions.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from kafka.protocol.admin import DescribeClusterResponse, DescribeLogDirsResponse

from protocol.errors import ErrorCode

from ..security.acls import AclOperation

if TYPE_CHECKING:
    from protocol.messages import Request

    from .context import ApiContext

BROKER_ENDPOINTS = 1
# Kafka's AclEntry.supportedOperations(CLUSTER).
CLUSTER_OPERATIONS = (AclOperation.CREATE, AclOperation.CLUSTER_ACTION,
                      AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                      AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER, AclOperation.DESCRIBE)

ClusterBroker = DescribeClusterResponse.DescribeClusterBroker
LogDirResult = DescribeLogDirsResponse.DescribeLogDirsResult
LogDirTopic = LogDirResult.DescribeLogDirsTopic
LogDirPartition = LogDirTopic.DescribeLogDirsPartition


async def handle_describe_cluster(ctx: ApiContext, request: Request) -> DescribeClusterResponse:
    body = request.body
    image = ctx.image
    endpoint_type = body.endpoint_type if request.api_version >= 1 else BROKER_ENDPOINTS
    if endpoint_type != BROKER_ENDPOINTS:
        return DescribeClusterResponse(
            throttle_time_ms=0, error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
            error_message="The broker only supports the BROKER endpoint type.",
            endpoint_type=endpoint_type, cluster_id=image.cluster_id, controller_id=-1,
            brokers=[], authorized_operations=None)
    include_fenced = request.api_version >= 2 and body.include_fenced_brokers
    listener_name = request.session.listener.name if request.session is not None else None
    brokers = []
    for info in sorted(image.brokers.values(), key=lambda b: b.broker_id):
        address = info.endpoint(listener_name) if listener_name else (info.host, info.port)
        if address is None or (info.fenced and not include_fenced):
            continue
        brokers.append(ClusterBroker(broker_id=info.broker_id, host=address[0], port=address[1],
                                     rack=info.rack, is_fenced=info.fenced))
    operations = None
    if body.include_cluster_authorized_operations:
        operations = {int(op) for op in CLUSTER_OPERATIONS
                      if ctx.authorizer.allows_cluster(request, op, log_denial=False)}
    return DescribeClusterResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
        endpoint_type=BROKER_ENDPOINTS, cluster_id=image.cluster_id,
        controller_id=ctx.metadata.controller_id, brokers=brokers,
        authorized_operations=operations)


async def handle_describe_log_dirs(ctx: ApiContext, request: Request) -> DescribeLogDirsResponse:
    if not ctx.authorizer.allows_cluster(request, AclOperation.DESCRIBE):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED if request.api_version >= 3 \
            else ErrorCode.NONE
        return DescribeLogDirsResponse(throttle_time_ms=0, error_code=code, results=[])
    rm = ctx.replica_manager
    log_dir = os.path.abspath(rm.log_dir)  # noqa: ASYNC240  (string work and one getcwd)
    total_bytes = usable_bytes = -1
    try:
        volume = os.statvfs(log_dir)
        total_bytes, usable_bytes = volume.f_blocks * volume.f_frsize, \
            volume.f_bavail * volume.f_frsize
    except OSError:
        pass
    if rm.log_dir_failure is not None:
        result = LogDirResult(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=log_dir,
                              topics=[], total_bytes=total_bytes, usable_bytes=usable_bytes)
        return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                       results=[result])
    wanted = None
    if request.body.topics is not None:
        wanted = {(t.topic, index) for t in request.body.topics for index in t.partitions}
    by_topic: dict[str, list] = {}
    for (topic, index), partition in sorted(rm.partitions.items()):
        if partition.offline or (wanted is not None and (topic, index) not in wanted):
            continue
        by_topic.setdefault(topic, []).append(LogDirPartition(
            partition_index=index, partition_size=partition.log.size_bytes,
            offset_lag=max(0, partition.high_watermark - partition.log_end_offset),
            is_future_key=False))
    result = LogDirResult(error_code=ErrorCode.NONE, log_dir=log_dir,
                          topics=[LogDirTopic(name=name, partitions=partitions)
                                  for name, partitions in by_topic.items()],
                          total_bytes=total_bytes, usable_bytes=usable_bytes)
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                   results=[result])

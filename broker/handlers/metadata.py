"""ApiVersions and Metadata (with auto.create.topics.enable)."""
from __future__ import annotations

from kafka.protocol.metadata import MetadataResponse

from protocol.errors import ErrorCode
from protocol.messages import api_versions_body

from ..local_metadata import topic_name_problem

# Metadata v8+ asks whether to include authorized operations; we have no ACLs.
AUTHORIZED_OPERATIONS_OMITTED = None  # kafka-python encodes None as INT32_MIN ("not requested")

Topic = MetadataResponse.MetadataResponseTopic
PartitionMeta = Topic.MetadataResponsePartition


async def handle_api_versions(broker, request):
    return api_versions_body(version=request.api_version)


async def handle_metadata(broker, request):
    body = request.body
    requested = body.topics
    if requested is None or (request.api_version == 0 and not requested):
        names = sorted(broker.metadata.topics)
        topics = [_describe_topic(broker, name) for name in names]
    else:
        allow_create = body.allow_auto_topic_creation if request.api_version >= 4 else True
        topics = [_requested_topic(broker, t, allow_create) for t in requested]
    host, port = broker.config.advertised_listener
    brokers = [MetadataResponse.MetadataResponseBroker(
        node_id=broker.node_id, host=host, port=port, rack=None)]
    return MetadataResponse(
        throttle_time_ms=0, brokers=brokers, cluster_id=broker.metadata.cluster_id,
        controller_id=broker.node_id, topics=topics, error_code=ErrorCode.NONE,
        authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


def _requested_topic(broker, requested, allow_create: bool):
    name = requested.name
    if name is None and requested.topic_id is not None:
        record = broker.metadata.topic_by_id(requested.topic_id)
        if record is None:
            return Topic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None,
                         topic_id=requested.topic_id, is_internal=False, partitions=[],
                         authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
        name = record.name
    if name not in broker.metadata.topics:
        if topic_name_problem(name) is not None:
            return _error_topic(name, ErrorCode.INVALID_TOPIC_EXCEPTION)
        if not (allow_create and broker.config["auto.create.topics.enable"]):
            return _error_topic(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        broker.replica_manager.create_topic(name, broker.config["num.partitions"], {})
    return _describe_topic(broker, name)


def _error_topic(name, code: ErrorCode):
    return Topic(error_code=code, name=name, topic_id=None, is_internal=False,
                 partitions=[], authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


def _describe_topic(broker, name: str):
    record = broker.metadata.topics[name]
    partitions = []
    for index in range(record.partitions):
        partition = broker.replica_manager.get_partition(name, index)
        if partition is None or partition.leader_id < 0:
            partitions.append(PartitionMeta(
                error_code=ErrorCode.LEADER_NOT_AVAILABLE, partition_index=index,
                leader_id=-1, leader_epoch=-1, replica_nodes=[], isr_nodes=[],
                offline_replicas=[]))
            continue
        partitions.append(PartitionMeta(
            error_code=ErrorCode.NONE, partition_index=index, leader_id=partition.leader_id,
            leader_epoch=partition.leader_epoch, replica_nodes=list(partition.replicas),
            isr_nodes=list(partition.isr), offline_replicas=[]))
    return Topic(error_code=ErrorCode.NONE, name=name, topic_id=record.uuid,
                 is_internal=name.startswith("__"), partitions=partitions,
                 authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)

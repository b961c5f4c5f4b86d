"""DescribeProducers (KIP-664): the active producers of partitions this broker leads.

What ``kafka-transactions.sh describe-producers`` and the AdminClients' describeProducers
show, from the partition log's producer state: per producer its id and epoch, the last
sequence and timestamp of its newest batch, the coordinator epoch of its last
transaction marker, and the first offset of its open transaction (-1: none) -- the
producer that holds a partition's last stable offset back is the one whose
``current_txn_start_offset`` equals it.

Authorization (Kafka's): Read on each topic, else TOPIC_AUTHORIZATION_FAILED.  A
partition this broker does not lead answers NOT_LEADER_OR_FOLLOWER (the admin client
asks the leader), one it does not know UNKNOWN_TOPIC_OR_PARTITION.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from kafka.protocol.admin import DescribeProducersResponse

from protocol.errors import ErrorCode

from ..replication.partition import PartitionError
from ..security.acls import AclOperation

if TYPE_CHECKING:
    from protocol.messages import Request

    from .context import ApiContext

TopicResponse = DescribeProducersResponse.TopicResponse
PartitionResponse = TopicResponse.PartitionResponse
ProducerState = PartitionResponse.ProducerState


async def handle_describe_producers(ctx: ApiContext, request: Request) -> DescribeProducersResponse:
    rm = ctx.replica_manager
    denied = ctx.authorizer.refused(request, AclOperation.READ,
                                    (t.name for t in request.body.topics))
    topics = []
    for topic in request.body.topics:
        answers = []
        for index in topic.partition_indexes:
            partition = rm.get_partition(topic.name, index)
            try:
                if topic.name in denied:
                    raise PartitionError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                if partition is None:
                    raise PartitionError(rm.missing_partition_error(topic.name, index))
                partition.check_online()
                if not partition.is_leader:
                    raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            except PartitionError as exc:
                answers.append(PartitionResponse(partition_index=index, error_code=exc.code,
                                                 error_message=None, active_producers=[]))
                continue
            producers = partition.log.producer_state.producers
            answers.append(PartitionResponse(
                partition_index=index, error_code=ErrorCode.NONE, error_message=None,
                active_producers=[ProducerState(
                    producer_id=entry.producer_id, producer_epoch=entry.producer_epoch,
                    last_sequence=entry.last_sequence, last_timestamp=entry.last_timestamp,
                    coordinator_epoch=entry.coordinator_epoch,
                    current_txn_start_offset=entry.current_txn_first_offset)
                    for _, entry in sorted(producers.items())]))
        topics.append(TopicResponse(name=topic.name, partitions=answers))
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)

"""Fetch: long poll through the fetch purgatory, below the HW for consumers.

No fetch sessions (KIP-227): every response carries session_id 0, which tells
clients that no session was created, so they keep sending full fetches.
"""
from __future__ import annotations

from kafka.protocol.consumer import FetchResponse

from protocol.errors import ErrorCode

from ..replication.delayed import FetchPartitionStatus

TopicResponse = FetchResponse.FetchableTopicResponse
PartitionData = TopicResponse.PartitionData


async def handle_fetch(broker, request):
    body = request.body
    if body.session_id != 0:
        return FetchResponse(throttle_time_ms=0, error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                             session_id=0, responses=[])
    replica_id = body.replica_id
    rm = broker.replica_manager
    statuses, order = [], []
    for topic in body.topics:
        for p in topic.partitions:
            statuses.append(FetchPartitionStatus(
                (topic.topic, p.partition), rm.get_partition(topic.topic, p.partition),
                p.fetch_offset,
                p.partition_max_bytes, p.current_leader_epoch))
            order.append((topic.topic, p.partition))
    max_bytes = body.max_bytes if request.api_version >= 3 else 2 ** 31 - 1
    results = await rm.fetch(statuses, replica_id, body.max_wait_ms, body.min_bytes, max_bytes)
    by_topic: dict[str, list] = {}
    for (topic, index), result in zip(order, results):
        by_topic.setdefault(topic, []).append(PartitionData(
            partition_index=index, error_code=result.error,
            high_watermark=result.high_watermark, last_stable_offset=result.high_watermark,
            log_start_offset=result.log_start_offset, aborted_transactions=[],
            preferred_read_replica=-1, records=result.records))
    return FetchResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=0,
        responses=[TopicResponse(topic=name, partitions=parts)
                   for name, parts in by_topic.items()])

"""Fetch: long poll through the fetch purgatory, below the HW for consumers.

isolation_level 1 (read_committed) reads below the last stable offset and lists the
aborted transactions (producer id, first offset) whose records the answer may hold, so
the client can drop them; the last_stable_offset field is always the partition's LSO.

Fetch from follower (KIP-392), v11+: a consumer may fetch from a follower, which answers
below its own high watermark; a leader with ``replica.selector.class`` set to Kafka's
RackAwareReplicaSelector answers a consumer whose ``rack_id`` (``client.rack``) differs
from its own ``broker.rack`` with the ``preferred_read_replica`` of that rack, and no data.

No fetch sessions (KIP-227): every response carries session_id 0, which tells
clients that no session was created, so they keep sending full fetches.
"""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.fetch_response import AbortedTransaction, FetchPartitionResult, \
    encode_fetch_response
from protocol.messages import Framed

from ..replication.delayed import FetchPartitionStatus
from ..replication.replica_manager import FetchedPartition
from ..security.acls import AclOperation

DENIED = FetchedPartition(ErrorCode.TOPIC_AUTHORIZATION_FAILED)


async def handle_fetch(ctx, request):
    body = request.body
    if body.session_id != 0:
        return Framed(encode_fetch_response(
            request.api_version, request.correlation_id,
            error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND))
    replica_id = body.replica_id
    rm = ctx.replica_manager
    statuses, order = [], []
    denied = _denied_topics(ctx, request, replica_id)
    for topic in body.topics:
        for p in topic.partitions:
            if topic.topic in denied:
                order.append((topic.topic, p.partition))
                continue
            statuses.append(FetchPartitionStatus(
                (topic.topic, p.partition), rm.get_partition(topic.topic, p.partition),
                p.fetch_offset,
                p.partition_max_bytes, p.current_leader_epoch, p.log_start_offset))
            order.append((topic.topic, p.partition))
    max_bytes = body.max_bytes if request.api_version >= 3 else 2 ** 31 - 1
    client_rack = body.rack_id if request.api_version >= 11 else None
    results = iter(await rm.fetch(statuses, replica_id, body.max_wait_ms, body.min_bytes,
                                  max_bytes, body.isolation_level, client_rack)
                   if statuses else ())
    by_topic: dict[str, list[FetchPartitionResult]] = {}
    for topic, index in order:
        result = DENIED if topic in denied else next(results)
        if result.records:
            rm.stats.fetched(topic, len(result.records), replica_id >= 0)
        by_topic.setdefault(topic, []).append(FetchPartitionResult(
            index, result.error, result.high_watermark, result.last_stable_offset,
            result.log_start_offset, result.records,
            [AbortedTransaction(t.producer_id, t.first_offset)
             for t in result.aborted_transactions], result.preferred_read_replica))
    # Encoded here rather than through kafka-python: the records are not copied.
    return Framed(encode_fetch_response(request.api_version, request.correlation_id,
                                        topics=list(by_topic.items())))


def _denied_topics(ctx, request, replica_id: int) -> set[str]:
    """Topics answered TOPIC_AUTHORIZATION_FAILED without reading: a follower (replica
    id set) needs ClusterAction on the cluster, a consumer Read on each topic."""
    names = (t.topic for t in request.body.topics)
    if replica_id >= 0:
        return set() if ctx.authorizer.allows_cluster(request, AclOperation.CLUSTER_ACTION) \
            else set(names)
    return ctx.authorizer.refused(request, AclOperation.READ, names)

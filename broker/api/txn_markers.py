"""WriteTxnMarkers: a transaction coordinator ends a transaction on the partitions this
broker leads (Kafka's inter-broker API 27).

For each marker (producer id and epoch, COMMIT or ABORT, coordinator epoch) and each of
its partitions, the leader appends the control batch (``ReplicaManager.append_txn_marker``)
and waits for it as acks=all would; each partition is answered with its own error.
Appends happen before the first ``await``, in request order.  Errors the coordinator acts
on, as in Kafka: NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION / NOT_ENOUGH_REPLICAS /
REQUEST_TIMED_OUT (retry, at the new leader if it moved), INVALID_PRODUCER_EPOCH and
TRANSACTION_COORDINATOR_FENCED (a newer producer or coordinator has moved on: stop).

A marker acknowledged on a ``__consumer_offsets`` partition also completes the producer's
transactional offset commits there (``GroupCoordinator.complete_txn_offsets``): committed
offsets become visible, aborted ones are dropped.

Authorization: ClusterAction on the cluster (only brokers send it); otherwise every
partition answers CLUSTER_AUTHORIZATION_FAILED.

v2 names each marker's transaction version (KIP-890 part 2).  Under version 2 the marker
carries the epoch the coordinator bumped, one above the transaction's writes, so it
fences them; the marker is checked as any other (its epoch not below the producer's),
which also accepts a retried marker of that epoch (Kafka 4.1+ refuses an equal epoch
for a version 2 marker; a retry there ends the coordinator's sending).
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kafka.protocol.producer import WriteTxnMarkersResponse

from protocol.errors import ErrorCode

from ..groups.placement import OFFSETS_TOPIC
from ..security.acls import AclOperation

if TYPE_CHECKING:
    from protocol.messages import Request

    from .context import ApiContext

# Kafka waits request.timeout.ms (30 s by default) for the markers' replication.
MARKER_ACKS_TIMEOUT_MS = 30_000

MarkerResult = WriteTxnMarkersResponse.WritableTxnMarkerResult
TopicResult = MarkerResult.WritableTxnMarkerTopicResult
PartitionResult = TopicResult.WritableTxnMarkerPartitionResult


async def handle_write_txn_markers(ctx: ApiContext,
                                   request: Request) -> WriteTxnMarkersResponse:
    """Runs to its end when the coordinator's connection is lost meanwhile (its request
    timed out): markers acknowledged then still complete the transactional offset
    commits they end."""
    return await ctx.groups.tasks.outlive("WriteTxnMarkers", _write_txn_markers(ctx, request))


async def _write_txn_markers(ctx: ApiContext, request: Request) -> WriteTxnMarkersResponse:
    markers = request.body.markers
    if not ctx.authorizer.allows_cluster(request, AclOperation.CLUSTER_ACTION):
        return _response({(i, t.name, p): ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                          for i, m in enumerate(markers) for t in m.topics
                          for p in t.partition_indexes}, markers)
    rm = ctx.replica_manager
    # One dict per marker, keyed (topic, partition): the key the produce purgatory is
    # triggered under (two markers of one request may name the same partition).
    appended: list[dict] = []
    for marker in markers:
        statuses = {}
        for topic in marker.topics:
            for index in topic.partition_indexes:
                statuses[(topic.name, index)] = rm.append_txn_marker(
                    topic.name, index, marker.producer_id, marker.producer_epoch,
                    marker.coordinator_epoch, marker.transaction_result)
        appended.append(statuses)
    acked = await asyncio.gather(*(rm.wait_for_acks(statuses, MARKER_ACKS_TIMEOUT_MS)
                                   for statuses in appended if statuses))
    done = iter(acked)
    errors = {(i, topic, index): status.error
              for i, statuses in enumerate(appended) if statuses
              for (topic, index), status in next(done).items()}
    for i, marker in enumerate(markers):
        offsets_partitions = {index for (m, topic, index), error in errors.items()
                              if m == i and topic == OFFSETS_TOPIC and error == ErrorCode.NONE}
        if offsets_partitions:
            ctx.groups.complete_txn_offsets(marker.producer_id, offsets_partitions,
                                            marker.transaction_result)
    return _response(errors, markers)


def _response(errors: dict[tuple[int, str, int], ErrorCode],
              markers: list) -> WriteTxnMarkersResponse:
    results = []
    for i, marker in enumerate(markers):
        topics = [TopicResult(name=topic.name, partitions=[
            PartitionResult(partition_index=index, error_code=errors[(i, topic.name, index)])
            for index in topic.partition_indexes]) for topic in marker.topics]
        results.append(MarkerResult(producer_id=marker.producer_id, topics=topics))
    return WriteTxnMarkersResponse(markers=results)

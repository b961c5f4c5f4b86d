"""Fetch: long poll through the fetch purgatory, below the HW for consumers.

isolation_level 1 (read_committed) reads below the last stable offset and lists the
aborted transactions (producer id, first offset) whose records the answer may hold, so
the client can drop them; the last_stable_offset field is always the partition's LSO.

Fetch from follower (KIP-392), v11+: a consumer may fetch from a follower, which answers
below its own high watermark; a leader with ``replica.selector.class`` set to Kafka's
RackAwareReplicaSelector answers a consumer whose ``rack_id`` (``client.rack``) differs
from its own ``broker.rack`` with the ``preferred_read_replica`` of that rack, and no data.

Incremental fetch sessions (KIP-227, v7+): ``ctx.fetch_sessions`` turns the request
into a FetchContext naming the partitions to read (for an incremental fetch, every
partition of the session) and choosing which results the answer lists (see
broker/replication/fetch_sessions.py).

Client quotas (KIP-546): a consumer's answered bytes count against its
consumer_byte_rate; over it, the answer carries throttle_time_ms and the connection
stops reading for that time.  Kafka answers a throttled fetch with no records (and
un-records them); Raftwood sends what was read, so an incremental fetch session never
skips what it listed.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.errors import ErrorCode
from protocol.fetch_response import AbortedTransaction, FetchPartitionResult, encode_fetch_response
from protocol.messages import Framed, FramedFiles, Request
from storage import FileRecords

from ..quotas.rates import CONSUMER_BYTE_RATE
from ..replication.delayed import FetchPartitionStatus
from ..replication.fetch_sessions import FetchContext, PartitionParams
from ..replication.replica_manager import FetchedPartition
from ..security.acls import AclOperation
from .client_quotas import charge_request_time, throttle
from .outcome import Later

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from .context import ApiContext

DENIED = FetchedPartition(ErrorCode.TOPIC_AUTHORIZATION_FAILED)


def handle_fetch(ctx: ApiContext, request: Request) -> Later:
    """A ``Later`` resolved when the fetch is answerable (at once, or after its long
    poll).  A plain ``def``: the hot path runs without a task."""
    body = request.body
    version = request.api_version
    replica_id = body.replica_id
    rm = ctx.replica_manager
    requested = {(topic.topic, p.partition): PartitionParams(
                     p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch,
                     p.log_start_offset)
                 for topic in body.topics for p in topic.partitions}
    if version >= 7:
        forgotten = [(f.topic, index) for f in body.forgotten_topics_data
                     for index in f.partitions]
        context = ctx.fetch_sessions.context(body.session_id, body.session_epoch, requested,
                                             forgotten, privileged=replica_id >= 0)
    else:
        context = FetchContext("sessionless", requested)
    partitions = context.partitions
    denied = _denied_topics(ctx, request, replica_id, {topic for topic, _ in partitions})
    statuses = [FetchPartitionStatus(key, rm.get_partition(*key), p.fetch_offset, p.max_bytes,
                                     p.current_leader_epoch, p.log_start_offset)
                for key, p in partitions.items() if key[0] not in denied]
    later = Later()

    def answered(read: Callable[[], Iterable[FetchedPartition]]) -> None:
        later.resolve(lambda: _response(ctx, request, context, partitions, denied, read()))

    if not statuses:  # every partition denied: nothing to read or wait for
        answered(tuple)
        return later
    later.on_cancel = rm.fetch(statuses, replica_id, body.max_wait_ms, body.min_bytes,
                               body.max_bytes if version >= 3 else 2 ** 31 - 1, answered,
                               body.isolation_level,
                               body.rack_id if version >= 11 else None, zero_copy=True)
    return later


def _response(ctx: ApiContext, request: Request, context: FetchContext,
              partitions: dict[tuple[str, int], PartitionParams], denied: set[str],
              read: Iterable[FetchedPartition]) -> Framed:
    """The encoded answer: ``read`` are the results of the partitions not denied, in
    order; the session (``context``) picks what it lists."""
    fetched = iter(read)
    replica_id = request.body.replica_id
    stats = ctx.replica_manager.stats
    error, session_id, listed = context.answer(
        [(key, DENIED if key[0] in denied else next(fetched)) for key in partitions])
    by_topic: dict[str, list[FetchPartitionResult]] = {}
    framed = Framed  # FramedFiles once a partition's records are file regions
    size_bytes = 0
    for (topic, index), result in listed:
        if result.records:
            size_bytes += len(result.records)
            stats.fetched(topic, len(result.records), replica_id >= 0)
            if result.records.__class__ is FileRecords:
                framed = FramedFiles
        by_topic.setdefault(topic, []).append(FetchPartitionResult(
            index, result.error, result.high_watermark, result.last_stable_offset,
            result.log_start_offset, result.records,
            [AbortedTransaction(t.producer_id, t.first_offset)
             for t in result.aborted_transactions], result.preferred_read_replica))
    if replica_id < 0 and size_bytes:
        throttle(ctx, request, CONSUMER_BYTE_RATE, size_bytes)
    charge_request_time(request)  # KIP-124, before the throttle time is encoded
    # Encoded here rather than through kafka-python: the records are not copied.
    return framed(encode_fetch_response(request.api_version, request.correlation_id,
                                        throttle_time_ms=request.throttle_ms,
                                        error_code=error, session_id=session_id,
                                        topics=list(by_topic.items())))


def _denied_topics(ctx: ApiContext, request: Request, replica_id: int, names: set[str]) -> set[str]:
    """Of the topics ``names``, those answered TOPIC_AUTHORIZATION_FAILED without
    reading: a follower (replica id set) needs ClusterAction on the cluster, a consumer
    Read on each topic."""
    if replica_id >= 0:
        return set() if ctx.authorizer.allows_cluster(request, AclOperation.CLUSTER_ACTION) \
            else set(names)
    return ctx.authorizer.refused(request, AclOperation.READ, names)

"""ReadShareGroupState (84) and WriteShareGroupState (85): a share-partition leader reads
and writes share state at the share coordinator of its key (KIP-932's inter-broker APIs);
ReadShareGroupStateSummary (87): a group coordinator reads a share partition's start
offset there (DescribeShareGroupOffsets), with v1's DeliveryCompleteCount (KIP-1226).

Each partition named is answered by this broker's share coordinator
(broker/share/coordinator.py) for the key ``"group:topicId:partition"``: NOT_COORDINATOR
when another broker leads its ``__share_group_state`` partition,
COORDINATOR_LOAD_IN_PROGRESS while it loads, FENCED_STATE_EPOCH for a write a newer
leader has overtaken.  A read of a key never written answers StartOffset -1.  A write is
answered once replicated (acks=all) and runs to its end if the caller's connection goes.
StateEpoch carries Raftwood's snapshot sequence (broker/share/records.py).

Authorization: ClusterAction on the cluster (only brokers send these); otherwise every
partition answers CLUSTER_AUTHORIZATION_FAILED.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from protocol.errors import ErrorCode
from protocol.share_state_messages import (
    ReadShareGroupStateResponse,
    ReadShareGroupStateSummaryResponse,
    WriteShareGroupStateResponse,
)

from ..security.acls import AclOperation
from ..share.partition import RecordState, StateBatch
from ..share.records import ShareSnapshot, ShareSummary, share_key

if TYPE_CHECKING:
    from protocol.messages import Request

    from .context import ApiContext

ReadResult = ReadShareGroupStateResponse.ReadStateResult
ReadPartition = ReadResult.PartitionResult
SummaryResult = ReadShareGroupStateSummaryResponse.ReadStateSummaryResult
SummaryPartition = SummaryResult.PartitionResult
WriteResult = WriteShareGroupStateResponse.WriteStateResult
WritePartition = WriteResult.PartitionResult
#: the widest in-flight window a write may describe (a leader's is at most
#: group.share.partition.max.record.locks wide, plus finished records it has not passed)
MAX_WINDOW = 1_000_000


async def handle_read_share_group_state(
        ctx: ApiContext, request: Request) -> ReadShareGroupStateResponse:
    return ReadShareGroupStateResponse(results=[
        ReadResult(topic_id=topic_id, partitions=partitions)
        for topic_id, partitions in _read_each(ctx, request, _read_partition)])


def _read_partition(index: int, error: ErrorCode,
                    snapshot: ShareSnapshot | None) -> ReadPartition:
    batches = snapshot.batches if snapshot is not None else ()
    return ReadPartition(
        partition=index, error_code=error, error_message=None,
        state_epoch=snapshot.seq if snapshot is not None else 0,
        start_offset=snapshot.start_offset if snapshot is not None else -1,
        state_batches=[ReadPartition.StateBatch(
            first_offset=b.first_offset, last_offset=b.last_offset,
            delivery_state=int(b.state), delivery_count=b.delivery_count) for b in batches])


async def handle_read_share_group_state_summary(
        ctx: ApiContext, request: Request) -> ReadShareGroupStateSummaryResponse:
    """Each partition's start offset, state epoch (the snapshot sequence), leader epoch
    and delivery-complete count; StartOffset -1 for a key never written."""
    return ReadShareGroupStateSummaryResponse(results=[
        SummaryResult(topic_id=topic_id, partitions=partitions)
        for topic_id, partitions in _read_each(ctx, request, _summary_partition)])


def _summary_partition(index: int, error: ErrorCode,
                       snapshot: ShareSnapshot | None) -> SummaryPartition:
    summary = ShareSummary.of(snapshot) if snapshot is not None else None
    return SummaryPartition(
        partition=index, error_code=error, error_message=None,
        state_epoch=snapshot.seq if snapshot is not None else 0,
        leader_epoch=summary.leader_epoch if summary is not None else -1,
        start_offset=summary.start_offset if summary is not None else -1,
        delivery_complete_count=summary.delivery_complete_count if summary is not None else 0)


def _read_each(ctx: ApiContext, request: Request,
               answer: Callable[[int, ErrorCode, ShareSnapshot | None], Any]
               ) -> list[tuple[Any, list]]:
    """(topic id, [answer per partition]) for each topic of a read or summary request, in
    request order: ``answer(partition, error, snapshot)`` with this broker's share
    coordinator's snapshot of the key, or CLUSTER_AUTHORIZATION_FAILED without a snapshot
    for a caller without ClusterAction."""
    body = request.body
    allowed = ctx.authorizer.allows_cluster(request, AclOperation.CLUSTER_ACTION)
    coordinator = ctx.share.coordinator
    results = []
    for topic in body.topics:
        partitions = []
        for p in topic.partitions:
            error, snapshot = (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None) if not allowed \
                else coordinator.read(share_key(body.group_id, str(topic.topic_id), p.partition))
            partitions.append(answer(p.partition, error, snapshot))
        results.append((topic.topic_id, partitions))
    return results


async def handle_write_share_group_state(
        ctx: ApiContext, request: Request) -> WriteShareGroupStateResponse:
    return await asyncio.shield(_write(ctx, request))


async def _write(ctx: ApiContext, request: Request) -> WriteShareGroupStateResponse:
    body = request.body
    allowed = ctx.authorizer.allows_cluster(request, AclOperation.CLUSTER_ACTION)
    coordinator = ctx.share.coordinator
    writes = []  # (topic id, partition, awaitable or error), appended in request order
    for topic in body.topics:
        for p in topic.partitions:
            if not allowed:
                writes.append((topic.topic_id, p.partition,
                               ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
                continue
            snapshot = _snapshot(p)
            if snapshot is None:
                writes.append((topic.topic_id, p.partition, ErrorCode.INVALID_REQUEST))
                continue
            key = share_key(body.group_id, str(topic.topic_id), p.partition)
            writes.append((topic.topic_id, p.partition,
                           asyncio.ensure_future(coordinator.write(key, snapshot))))
    by_topic: dict = {}
    for topic_id, index, outcome in writes:
        error = outcome if isinstance(outcome, ErrorCode) else await outcome
        by_topic.setdefault(topic_id, []).append(
            WritePartition(partition=index, error_code=error, error_message=None))
    return WriteShareGroupStateResponse(results=[
        WriteResult(topic_id=topic_id, partitions=partitions)
        for topic_id, partitions in by_topic.items()])


def _snapshot(p: Any) -> ShareSnapshot | None:
    """The snapshot a write carries; None when its states or offsets are not valid."""
    try:
        batches = tuple(StateBatch(b.first_offset, b.last_offset, RecordState(b.delivery_state),
                                   b.delivery_count) for b in p.state_batches)
    except ValueError:
        return None
    previous = p.start_offset - 1
    for b in batches:  # ordered, disjoint, at or past the start, a bounded window
        if b.first_offset <= previous or b.first_offset > b.last_offset \
                or b.last_offset - p.start_offset >= MAX_WINDOW:
            return None
        previous = b.last_offset
    if p.start_offset < 0:
        return None
    return ShareSnapshot(p.leader_epoch, p.state_epoch, p.start_offset, batches)

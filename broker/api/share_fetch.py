"""ShareFetch (API 78) and ShareAcknowledge (API 79): share consumers read and acknowledge.

A ShareFetch names its share session (group, member, epoch: broker/share/sessions.py),
the partitions to add to it (with piggy-backed acknowledgements) and those to forget.
The leader applies the acknowledgements first, then reads every partition of the
session from its share partition's next fetch offset (broker/share/partition.py),
acquires the deliverable records for the member and answers with the batches read and
the acquired ranges (first offset, last offset, delivery count).  A fetch waits up to
``max_wait_ms`` for new records through the fetch purgatory, as Fetch does, unless
some partition already has AVAILABLE records; records handed back meanwhile (a RELEASE,
a lock expiry, a closed session) end the wait too.  A v2 fetch with IsRenewAck only
applies its acknowledgements (RENEW extends locks) and acquires nothing.

Errors, as in Kafka: session errors (SHARE_SESSION_NOT_FOUND,
INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_LIMIT_REACHED, INVALID_REQUEST for
acknowledgements in an opening request) are top-level; per partition UNKNOWN_TOPIC_ID,
UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER (with the current leader and its
endpoint in NodeEndpoints); an acknowledgement refused is INVALID_RECORD_STATE or
INVALID_REQUEST in AcknowledgeErrorCode (ShareFetch) or ErrorCode (ShareAcknowledge).
Durability: a share partition is loaded from its last snapshot on ``__share_group_state``
(broker/share/coordinator.py, through persister.py) before this leader's first read of
it, and an acknowledgement is answered only once the snapshot it made is written
(acks=all on the state topic); a failed write answers COORDINATOR_NOT_AVAILABLE.
Authorization: Read on the group (else GROUP_AUTHORIZATION_FAILED, top level) and Read
on each topic (else its partitions TOPIC_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from protocol.errors import ErrorCode
from protocol.share_fetch_messages import ShareAcknowledgeResponse, ShareFetchResponse

from ..replication.delayed import FetchPartitionStatus
from ..replication.fetch_sessions import FINAL_EPOCH, INITIAL_EPOCH
from ..replication.partition import READ_COMMITTED, READ_UNCOMMITTED
from ..security.acls import AclOperation, ResourceType
from ..share.partition import AcknowledgementBatch
from ..share.spans import batch_spans

if TYPE_CHECKING:
    from protocol.messages import Request

    from .context import ApiContext

Key = tuple[uuid.UUID, int]
DEFAULT_MAX_RECORDS = 500
MAX_WAKES = 8  # long-poll wakes of one ShareFetch by records handed back
FetchPartitionData = ShareFetchResponse.ShareFetchableTopicResponse.PartitionData
AckPartitionData = ShareAcknowledgeResponse.ShareAcknowledgeTopicResponse.PartitionData


@dataclass
class PartitionOutcome:
    """What the answer says of one partition."""

    error: ErrorCode = ErrorCode.NONE
    acknowledge_error: ErrorCode | None = None  # None: nothing was acknowledged
    leader: tuple[int, int] = (-1, -1)  # (leader id, leader epoch)
    records: Any = b""  # never null: librdkafka refuses a null record set
    acquired: list = field(default_factory=list)


@dataclass
class Target:
    """A session partition resolved on this broker: its name and led Partition."""

    key: Key
    topic: str = ""
    partition: Any = None
    error: ErrorCode = ErrorCode.NONE


# -- ShareFetch ------------------------------------------------------------------------------

async def handle_share_fetch(ctx: ApiContext, request: Request) -> ShareFetchResponse:
    body = request.body
    group_id, member_id, epoch = body.group_id, body.member_id, body.share_session_epoch
    error = _check_request(ctx, request, group_id, member_id)
    if error == ErrorCode.NONE and _renew_only(request) and (
            body.max_wait_ms or body.min_bytes or body.max_bytes or body.max_records):
        error = ErrorCode.INVALID_REQUEST  # Kafka's rule: a renew-only fetch asks for none
    if error != ErrorCode.NONE:
        return _fetch_answer(ctx, request, error, {})
    acks = {(t.topic_id, p.partition_index): _batches(p.acknowledgement_batches)
            for t in body.topics for p in t.partitions if p.acknowledgement_batches}
    added = [(t.topic_id, p.partition_index) for t in body.topics for p in t.partitions]
    forgotten = [(f.topic_id, index) for f in body.forgotten_topics_data
                 for index in f.partitions]
    error, session = ctx.share.sessions.update(group_id, member_id, epoch, added, forgotten,
                                               bool(acks))
    if error != ErrorCode.NONE or session is None:
        return _fetch_answer(ctx, request, error, {})
    if epoch == INITIAL_EPOCH:
        _close_with_connection(ctx, request, session)
    outcomes = await _acknowledge(ctx, request, group_id, member_id, acks)
    if epoch == FINAL_EPOCH:
        _close(ctx, group_id, member_id)
        return _fetch_answer(ctx, request, ErrorCode.NONE, outcomes)
    if _renew_only(request):  # the locks renewed above; nothing new is acquired
        return _fetch_answer(ctx, request, ErrorCode.NONE, outcomes)
    targets = [_resolve(ctx, request, key) for key in session.partitions]
    await _fetch(ctx, request, targets, outcomes)
    return _fetch_answer(ctx, request, ErrorCode.NONE, outcomes)


def _renew_only(request: Request) -> bool:
    """A ShareFetch v2+ with IsRenewAck (KIP-1222, Java 4.3's renew-only fetch): it
    carries RENEW acknowledgements (others too) and acquires nothing; its MaxWaitMs,
    MinBytes, MaxBytes and MaxRecords must be 0."""
    return request.api_version >= 2 and bool(getattr(request.body, "is_renew_ack", False))


def _check_request(ctx: ApiContext, request: Request, group_id: str | None,
                   member_id: str | None) -> ErrorCode:
    """The checks before the session: ids present, Read on the group."""
    if not group_id or not member_id:
        return ErrorCode.INVALID_REQUEST
    if not ctx.authorizer.allows(request, AclOperation.READ, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    return ErrorCode.NONE


def _batches(batches: list) -> list[AcknowledgementBatch]:
    return [AcknowledgementBatch(b.first_offset, b.last_offset, list(b.acknowledge_types))
            for b in batches]


def _resolve(ctx: ApiContext, request: Request, key: Key) -> Target:
    """The session partition ``key`` on this broker, or the error the answer gives."""
    info = ctx.image.topic_by_id(str(key[0]))
    if info is None:
        return Target(key, error=ErrorCode.UNKNOWN_TOPIC_ID)
    target = Target(key, info.name)
    if ctx.authorizer.refused(request, AclOperation.READ, {info.name}):
        target.error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    elif key[1] not in info.partitions:
        target.error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    else:
        partition = ctx.replica_manager.get_partition(info.name, key[1])
        if partition is None or not partition.is_leader or partition.offline:
            target.error = ErrorCode.NOT_LEADER_OR_FOLLOWER
        else:
            target.partition = partition
    return target


async def _acknowledge(ctx: ApiContext, request: Request, group_id: str, member_id: str,
                       acks: dict[Key, list[AcknowledgementBatch]]
                       ) -> dict[Key, PartitionOutcome]:
    """Apply ``acks`` partition by partition, then persist the partitions they changed;
    each partition's outcome (an acknowledgement is answered NONE only once written)."""
    manager = ctx.share.partitions
    renew_allowed = request.api_version >= 2
    outcomes: dict[Key, PartitionOutcome] = {}
    changed: list[tuple[Key, tuple[str, str, int]]] = []
    for key, batches in acks.items():
        target = _resolve(ctx, request, key)
        outcome = outcomes[key] = _leader_outcome(ctx, target)
        if target.error != ErrorCode.NONE:
            outcome.acknowledge_error = target.error
            continue
        share_key = (group_id, target.topic, key[1])
        share = manager.get(share_key)
        if share is None:  # never fetched here (or the leader moved): nothing is locked
            outcome.acknowledge_error = ErrorCode.INVALID_RECORD_STATE
            continue
        outcome.acknowledge_error = share.acknowledge(member_id, batches, manager.clock(),
                                                      renew_allowed)
        manager.touched(share_key)
        if outcome.acknowledge_error == ErrorCode.NONE:
            changed.append((key, share_key))
    # Shielded: the state changed above is written even if the connection goes meanwhile.
    written = await asyncio.shield(asyncio.gather(*(manager.persist(k) for _, k in changed)))
    for (key, _), error in zip(changed, written):
        if error != ErrorCode.NONE:
            outcomes[key].acknowledge_error = _persist_error(error)
    return outcomes


def _persist_error(error: ErrorCode) -> ErrorCode:
    """What a share consumer is told when the share state was not written: Kafka's
    mapping of the persister's errors (coordinator trouble is retriable)."""
    if error in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                 ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error == ErrorCode.FENCED_STATE_EPOCH:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return ErrorCode.UNKNOWN_SERVER_ERROR


def _close(ctx: ApiContext, group_id: str, member_id: str) -> None:
    """Close the member's session and release the locks it still holds."""
    session = ctx.share.sessions.close(group_id, member_id)
    if session is None:
        return
    names = []
    for topic_id, index in session.partitions:
        info = ctx.image.topic_by_id(str(topic_id))
        if info is not None:
            names.append((info.name, index))
    ctx.share.partitions.release_member(group_id, member_id, names)


def _close_with_connection(ctx: ApiContext, request: Request, session: Any) -> None:
    """A share session belongs to the connection that opened it (Kafka's
    ShareSessionCache, one session a connection): when that connection closes with the
    session still open (a consumer killed, or one gone without closing it) the session
    is closed and the member's locks released at once, delivery counts kept, as
    Kafka's leader does on the member's disconnect."""
    connection = getattr(request, "session", None)
    if connection is None:
        return

    def closed() -> None:
        if ctx.share.sessions.is_open(session):
            _close(ctx, session.group_id, session.member_id)
    connection.when_closed("share-session", closed)


def _leader_outcome(ctx: ApiContext, target: Target) -> PartitionOutcome:
    """An outcome carrying ``target``'s error and the partition's current leader."""
    outcome = PartitionOutcome(target.error)
    info = ctx.image.topics.get(target.topic) if target.topic else None
    partition_info = info.partitions.get(target.key[1]) if info is not None else None
    if partition_info is not None:
        outcome.leader = (partition_info.leader, partition_info.leader_epoch)
    return outcome


@dataclass
class ReadPlan:
    """What one pass of a ShareFetch reads: the share partitions with something to
    hand out, their log reads, whether any has AVAILABLE records already, and every
    share partition loaded (the ones a long poll watches for records handed back)."""

    reads: list[tuple[Target, Any]] = field(default_factory=list)
    statuses: list[FetchPartitionStatus] = field(default_factory=list)
    ready: bool = False
    watched: list[tuple[str, str, int]] = field(default_factory=list)


async def _fetch(ctx: ApiContext, request: Request, targets: list[Target],
                 outcomes: dict[Key, PartitionOutcome]) -> None:
    """Read the session's partitions led here and acquire what they hold for the
    member; errors of the others into ``outcomes``.

    Long poll: with nothing AVAILABLE the read waits up to ``max_wait_ms`` for new
    records (the fetch purgatory) or for records handed back to the group (a RELEASE,
    a lock expiry, a closed session: the manager's ``watch``); woken by the latter, it
    plans again and reads at once (a bounded number of times: another member may take
    the records first, and then the wait goes on until the same deadline)."""
    body = request.body
    manager = ctx.share.partitions
    settings = manager.settings(body.group_id)
    isolation = READ_COMMITTED if settings.isolation_level == "read_committed" \
        else READ_UNCOMMITTED
    deadline_ms = manager.clock() + max(0, body.max_wait_ms)
    for attempt in range(MAX_WAKES + 1):
        plan = await _plan(ctx, request, targets, outcomes, isolation)
        wait_ms = 0 if plan.ready else max(0, deadline_ms - manager.clock())
        watch = wait_ms > 0 and attempt < MAX_WAKES
        waiter = manager.watch(plan.watched) if watch else None
        try:
            results = await _read(ctx, plan.statuses, wait_ms, body.min_bytes,
                                  body.max_bytes, isolation, waiter)
        finally:
            if waiter is not None:
                manager.unwatch(waiter, plan.watched)
        if results is not None:
            _acquire(ctx, body, plan.reads, results, outcomes)
            return


async def _plan(ctx: ApiContext, request: Request, targets: list[Target],
                outcomes: dict[Key, PartitionOutcome], isolation: int) -> ReadPlan:
    """Load the targets' share partitions and plan their reads from each one's next
    fetch offset; the errors into ``outcomes``.  The plan is ready (no long poll) only
    when AVAILABLE records are readable now (``_readable_now``)."""
    body = request.body
    manager = ctx.share.partitions
    plan = ReadPlan()
    for target in targets:
        if target.error != ErrorCode.NONE:
            outcome = outcomes.setdefault(target.key, _leader_outcome(ctx, target))
            outcome.error = target.error
            continue
        partition = target.partition
        key = (body.group_id, target.topic, target.key[1])
        error, share = await manager.load(key, str(target.key[0]), partition)
        if share is None:
            outcome = outcomes.setdefault(target.key, _leader_outcome(ctx, target))
            outcome.error = _persist_error(error) if error != \
                ErrorCode.NOT_LEADER_OR_FOLLOWER else error
            continue
        plan.watched.append(key)
        share.maybe_follow_log_start(partition.log_start_offset)
        if not share.has_available() and not share.can_acquire_new():
            continue  # the window is full of locked records: nothing to hand out
        plan.ready = plan.ready or _readable_now(share, partition, isolation)
        plan.reads.append((target, share))
        plan.statuses.append(FetchPartitionStatus(partition.key, partition,
                                                  share.next_fetch_offset(), body.max_bytes,
                                                  -1))
    return plan


def _readable_now(share: Any, partition: Any, isolation: int) -> bool:
    """Whether ``share`` has AVAILABLE records a consumer's read sees now: its next
    fetch offset is in the window and below the high watermark (the last stable offset
    for read_committed).  A new leader's high watermark trails the records the old
    leader handed out until its followers fetch from it (it starts at what it knew as a
    follower), so the share partition it loads can hold AVAILABLE records it may not
    read yet: then the fetch long-polls, and the high watermark's move wakes it (the
    fetch purgatory), as Kafka's DelayedShareFetch waits, instead of answering nothing
    at once to a consumer that asks again at once."""
    offset = share.next_fetch_offset()
    return offset < share.end_offset and offset < partition.available_to(-1, isolation)


async def _read(ctx: ApiContext, statuses: list, max_wait_ms: int, min_bytes: int,
                max_bytes: int, isolation: int,
                waiter: asyncio.Future[None] | None = None) -> list | None:
    """The replica manager's read of ``statuses``, after its long poll; with nothing
    to read, the wait alone (a full window must not make the consumer spin).  None,
    the wait withdrawn, when ``waiter`` is done first (records were handed back)."""
    if not statuses and max_wait_ms <= 0:
        return []
    loop = asyncio.get_running_loop()
    answerable: asyncio.Future[Callable[[], list]] = loop.create_future()

    def then(read: Callable[[], list]) -> None:
        if not answerable.done():
            answerable.set_result(read)

    withdraw: Callable[[], None] | None = None
    timer = None
    if statuses:
        withdraw = ctx.replica_manager.fetch(statuses, -1, max_wait_ms, min_bytes,
                                             max(1, max_bytes), then, isolation)
    else:
        timer = loop.call_later(max_wait_ms / 1000, then, list)
    try:
        await asyncio.wait([answerable] if waiter is None else [answerable, waiter],
                           return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not answerable.done():  # woken, or the connection is gone
            if withdraw is not None:
                withdraw()
            if timer is not None:
                timer.cancel()
    if not answerable.done():
        return None
    return answerable.result()()


def _acquire(ctx: ApiContext, body: Any, reads: list, results: list,
             outcomes: dict[Key, PartitionOutcome]) -> None:
    """Acquire for the member the records each read returned, at most max_records."""
    manager = ctx.share.partitions
    remaining = body.max_records if body.max_records > 0 else DEFAULT_MAX_RECORDS
    now_ms = manager.clock()
    for (target, share), result in zip(reads, results):
        outcome = outcomes.setdefault(target.key, _leader_outcome(ctx, target))
        if result.error != ErrorCode.NONE:
            outcome.error = result.error
            continue
        if not result.records or remaining <= 0:
            continue
        records = bytes(result.records)
        aborted = [(t.producer_id, t.first_offset) for t in result.aborted_transactions]
        acquired = share.acquire(body.member_id, batch_spans(records, aborted), now_ms,
                                 remaining)
        manager.touched((body.group_id, target.topic, target.key[1]))
        if acquired:
            remaining -= sum(r.last_offset - r.first_offset + 1 for r in acquired)
            outcome.records = records
            outcome.acquired = acquired


def _fetch_answer(ctx: ApiContext, request: Request, error: ErrorCode,
                  outcomes: dict[Key, PartitionOutcome]) -> ShareFetchResponse:
    """The ShareFetch response: the partitions with something to say."""
    return _answer(ctx, request, error, outcomes, ShareFetchResponse,
                   ShareFetchResponse.ShareFetchableTopicResponse, _fetch_partition)


def _fetch_partition(index: int, o: PartitionOutcome) -> Any:
    return FetchPartitionData(
        partition_index=index, error_code=o.error, error_message=None,
        acknowledge_error_code=o.acknowledge_error or ErrorCode.NONE,
        acknowledge_error_message=None,
        current_leader=FetchPartitionData.LeaderIdAndEpoch(
            leader_id=o.leader[0], leader_epoch=o.leader[1]),
        records=o.records,
        acquired_records=[FetchPartitionData.AcquiredRecords(
            first_offset=r.first_offset, last_offset=r.last_offset,
            delivery_count=r.delivery_count) for r in o.acquired])


def _answer(ctx: ApiContext, request: Request, error: ErrorCode,
            outcomes: dict[Key, PartitionOutcome], response_class: Any, topic_class: Any,
            partition_data: Callable[[int, PartitionOutcome], Any]) -> Any:
    """A ShareFetch or ShareAcknowledge response (``response_class``): each outcome as
    ``partition_data(index, outcome)`` under its ``topic_class`` entry, the group's lock
    duration, and NodeEndpoints for the leaders a NOT_LEADER_OR_FOLLOWER names."""
    by_topic: dict[uuid.UUID, list] = {}
    leaders: set[int] = set()
    for (topic_id, index), o in outcomes.items():
        if ErrorCode.NOT_LEADER_OR_FOLLOWER in (o.error, o.acknowledge_error):
            leaders.add(o.leader[0])
        by_topic.setdefault(topic_id, []).append(partition_data(index, o))
    settings = ctx.share.partitions.settings(request.body.group_id or "")
    return response_class(
        throttle_time_ms=0, error_code=error, error_message=None,
        acquisition_lock_timeout_ms=settings.record_lock_duration_ms,
        responses=[topic_class(topic_id=topic_id, partitions=partitions)
                   for topic_id, partitions in by_topic.items()],
        node_endpoints=_endpoints(ctx, request, leaders, response_class))


def _endpoints(ctx: ApiContext, request: Request, leaders: set[int],
               response_class: Any) -> list:
    """NodeEndpoints for the current leaders named in NOT_LEADER_OR_FOLLOWER answers,
    on the listener the request came in on (as Metadata answers)."""
    listener = request.session.listener.name if request.session is not None else None
    endpoints = []
    for broker_id in sorted(leaders):
        broker = ctx.image.brokers.get(broker_id)
        if broker is None:
            continue
        address = broker.endpoint(listener) if listener else (broker.host, broker.port)
        if address is not None:
            endpoints.append(response_class.NodeEndpoint(
                node_id=broker_id, host=address[0], port=address[1], rack=broker.rack))
    return endpoints


# -- ShareAcknowledge ------------------------------------------------------------------------

async def handle_share_acknowledge(ctx: ApiContext,
                                   request: Request) -> ShareAcknowledgeResponse:
    body = request.body
    group_id, member_id, epoch = body.group_id, body.member_id, body.share_session_epoch
    error = _check_request(ctx, request, group_id, member_id)
    session = None
    if error == ErrorCode.NONE:
        error, session = ctx.share.sessions.check(group_id, member_id, epoch)
    if error != ErrorCode.NONE or session is None:
        return _acknowledge_answer(ctx, request, error, {})
    acks = {(t.topic_id, p.partition_index): _batches(p.acknowledgement_batches)
            for t in body.topics for p in t.partitions}
    outcomes = await _acknowledge(ctx, request, group_id, member_id, acks)
    if epoch == FINAL_EPOCH:
        _close(ctx, group_id, member_id)
    return _acknowledge_answer(ctx, request, ErrorCode.NONE, outcomes)


def _acknowledge_answer(ctx: ApiContext, request: Request, error: ErrorCode,
                        outcomes: dict[Key, PartitionOutcome]) -> ShareAcknowledgeResponse:
    """The ShareAcknowledge response: each partition's acknowledgement error."""
    return _answer(ctx, request, error, outcomes, ShareAcknowledgeResponse,
                   ShareAcknowledgeResponse.ShareAcknowledgeTopicResponse,
                   _acknowledge_partition)


def _acknowledge_partition(index: int, o: PartitionOutcome) -> Any:
    return AckPartitionData(
        partition_index=index, error_code=o.acknowledge_error or ErrorCode.NONE,
        error_message=None, current_leader=AckPartitionData.LeaderIdAndEpoch(
            leader_id=o.leader[0], leader_epoch=o.leader[1]))

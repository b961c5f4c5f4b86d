"""Produce: acks 0 (no response), 1 (after the leader's append), all (after the HW);
the acks rules (min.insync.replicas, the acks=all wait and its answers) are in
broker/replication/acks.py.

Authorization (Kafka's): Write on each topic (TOPIC_AUTHORIZATION_FAILED per partition);
a transactional produce (``transactional_id`` set) also needs Write on that
TransactionalId, else every partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED.

Transactions (KIP-890 part 1): a producer's transactional batch that would open a
transaction on a partition this broker leads (none of that producer open there) is
appended only once the transaction's coordinator confirmed the partition is in the
ongoing transaction (``broker/transactions/verification.py``); otherwise the partition
answers the coordinator's error: INVALID_TXN_STATE for a partition not in it (a write
delayed past its transaction's end, which would hang), INVALID_PRODUCER_EPOCH for a
fenced producer, NOT_ENOUGH_REPLICAS (retriable) while the coordinator is unavailable,
loading, moving or ending the transaction.  A marker for the producer written while the
question was out voids the answer (INVALID_TXN_STATE): the transaction it confirmed is
over.  Such a request is answered from a task; every other stays on the hot path.
Produce v12+ (transaction version 2, KIP-890 part 2: the client sends no
AddPartitionsToTxn) asks the coordinator to add the partition instead (AddPartitionsToTxn
v5 without ``VerifyOnly``), with the same answers.  Every transaction has an epoch of its
own there, so the batch that opens it on a partition is its epoch's sequence 0; a later
batch whose add is answered before the first batch was appended (pipelined behind it,
or retried before it) is refused with the retriable NOT_ENOUGH_REPLICAS and appended on
a retry after it (Kafka's lowest-sequence rule for writes under verification; an
OUT_OF_ORDER_SEQUENCE_NUMBER there would be fatal to a Java producer whose first batch
was acknowledged in between).

Client quotas (KIP-546): the request's bytes count against the client's
producer_byte_rate; over it, the answer carries throttle_time_ms and the connection
stops reading for that time (client_quotas.throttle).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka.protocol.producer import ProduceResponse

from protocol.errors import ErrorCode, RecordError
from protocol.hot_requests import encode_produce_response
from protocol.messages import Framed, Request
from protocol.records import parse_header

from ..quotas.rates import PRODUCER_BYTE_RATE
from ..replication import acks
from ..replication.acks import ProducePartitionStatus
from ..replication.origin import AppendOrigin
from ..security.acls import AclOperation, ResourceType
from .client_quotas import charge_request_time, throttle
from .outcome import CLOSE, Answer, Later, answer_of

if TYPE_CHECKING:
    from .context import ApiContext

log = logging.getLogger(__name__)

TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = TopicResponse.PartitionProduceResponse
WRITE = AclOperation.WRITE


def handle_produce(ctx: ApiContext, request: Request) -> Answer:
    """The body, None (acks=0), CLOSE (a failed acks=0 produce), or for acks=all a
    ``Later`` resolved when every appended partition's high watermark passed its batch
    (or the wait ended).  A plain ``def``: the hot path runs without a task."""
    body = request.body
    required_acks = body.acks
    if request.api_version < request.spec.refused_below:
        # Advertised for old librdkafka's sake, never served (message format v0/v1).
        return _uniform(body, ErrorCode.UNSUPPORTED_VERSION)
    if not acks.valid_required_acks(required_acks):
        return _uniform(body, ErrorCode.INVALID_REQUIRED_ACKS)
    if body.transactional_id is not None and not ctx.authorizer.allows(
            request, WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
        return _uniform(body, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    denied = ctx.authorizer.refused(request, WRITE, (t.name for t in body.topic_data))
    if body.transactional_id is not None:
        unverified = _unverified(ctx, body, denied)
        if unverified:
            return _verify_then_produce(ctx, request, denied, unverified)
    return _answer(ctx, request, _append_all(ctx, body, denied, {}))


def _append_all(ctx: ApiContext, body: Any, denied: set[str],
                refused: dict[tuple[str, int], ErrorCode]
                ) -> dict[tuple[str, int], ProducePartitionStatus]:
    """Append every partition's batch, except those of ``denied`` topics and those
    ``refused`` (answered with that error)."""
    statuses = {}
    max_batch = ctx.config["message.max.bytes"]
    for topic in body.topic_data:
        for data in topic.partition_data:
            key = (topic.name, data.index)
            if topic.name in denied:  # Write on the topic (checked before any append)
                statuses[key] = ProducePartitionStatus(
                    None, -1, -1, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            elif key in refused:
                statuses[key] = ProducePartitionStatus(None, -1, -1, refused[key])
            else:
                statuses[key] = ctx.replica_manager.append_one(
                    topic.name, data.index, data.records, body.acks, max_batch,
                    origin=AppendOrigin.CLIENT)
    return statuses


def _answer(ctx: ApiContext, request: Request,
            statuses: dict[tuple[str, int], ProducePartitionStatus]) -> Answer:
    required_acks = request.body.acks
    throttle(ctx, request, PRODUCER_BYTE_RATE, request.size_bytes)
    if required_acks == acks.ACKS_NONE:
        if acks.closes_connection(s.error for s in statuses.values()):
            return CLOSE
        return None
    if required_acks == acks.ACKS_LEADER:
        return _response(request, statuses)
    later = Later()
    operation = ctx.replica_manager.watch_acks(
        statuses, request.body.timeout_ms,
        lambda done: later.resolve(lambda: _response(request, done)))
    if later.resolved:  # every partition was done at once (failed, or an ISR of one)
        return _response(request, statuses)
    later.on_cancel = operation.withdraw  # the connection is gone: stop watching
    return later


# -- transaction verification (KIP-890 part 1) ---------------------------------------------

@dataclass
class _Unverified:
    """A partition's batch waiting for its coordinator's confirmation."""

    producer_id: int
    producer_epoch: int
    header: Any  # protocol.records.BatchHeader
    producer_state: Any  # storage.producer_state.ProducerStateManager
    guard: object


# Produce v12+ is a transaction version 2 client's (KIP-890 part 2): the coordinator adds
# the partition to the transaction instead of only confirming it is there.
IMPLICIT_ADD_SINCE_VERSION = 12

# What a partition answers for its coordinator's error; the others pass as they are.
_VERIFY_ERRORS = {
    ErrorCode.NOT_COORDINATOR: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.CONCURRENT_TRANSACTIONS: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH,
}


def _unverified(ctx: ApiContext, body: Any,
                denied: set[str]) -> dict[tuple[str, int], _Unverified]:
    """The partitions led here whose batch would open a transaction; a guard is started
    for each.  A batch that does not parse is left to the append's checks."""
    found = {}
    for topic in body.topic_data:
        if topic.name in denied:
            continue
        for data in topic.partition_data:
            partition = ctx.replica_manager.get_partition(topic.name, data.index)
            if partition is None or not partition.is_leader or not data.records:
                continue
            try:
                header = parse_header(data.records)
            except RecordError:
                continue  # CORRUPT_MESSAGE from the append, as for any other producer
            state = partition.log.producer_state
            if header is not None and state.needs_verification(header):
                found[(topic.name, data.index)] = _Unverified(
                    header.producer_id, header.producer_epoch, header, state,
                    state.start_verification(header.producer_id))
    return found


def _opens_out_of_order(u: _Unverified) -> bool:
    """A version 2 transaction's write would still open it here, past its epoch's
    sequence 0: its first batch has not been appended yet."""
    return u.header.base_sequence != 0 and u.producer_state.needs_verification(u.header)


async def _verify_then_produce(ctx: ApiContext, request: Request, denied: set[str],
                               unverified: dict[tuple[str, int], _Unverified]) -> Answer:
    """Ask the coordinator about ``unverified`` (one question per producer id and epoch),
    then append, in one pass, every batch whose partition was confirmed and whose guard
    still holds."""
    by_producer: dict[tuple[int, int], set[tuple[str, int]]] = {}
    for tp, u in unverified.items():
        by_producer.setdefault((u.producer_id, u.producer_epoch), set()).add(tp)
    transactional_id = request.body.transactional_id
    add = request.api_version >= IMPLICIT_ADD_SINCE_VERSION
    refused: dict[tuple[str, int], ErrorCode] = {}
    for (producer_id, producer_epoch), partitions in by_producer.items():
        errors = await ctx.transactions.verifier.verify(
            transactional_id, producer_id, producer_epoch, partitions, add=add)
        for tp, error in errors.items():
            if error != ErrorCode.NONE:
                refused[tp] = _VERIFY_ERRORS.get(error, error)
    for tp, u in unverified.items():  # no await from here to the appends
        if tp in refused:
            continue
        if not u.producer_state.verification_holds(u.producer_id, u.guard):
            refused[tp] = ErrorCode.INVALID_TXN_STATE
        elif add and _opens_out_of_order(u):  # retried after the first batch
            refused[tp] = ErrorCode.NOT_ENOUGH_REPLICAS
    if refused:
        log.info("refused transactional produce of %s: %s", transactional_id,
                 {f"{t}-{i}": e.name for (t, i), e in refused.items()})
    return await answer_of(_answer(ctx, request, _append_all(ctx, request.body, denied,
                                                             refused)))


def _response(request: Request,
              statuses: dict[tuple[str, int], ProducePartitionStatus]) -> Framed:
    """Encoded by hand (protocol/hot_requests.py): one per produce request, the hot path."""
    charge_request_time(request)  # KIP-124, before the throttle time is encoded
    by_topic: dict[str, list] = {}
    for (topic, index), status in statuses.items():
        ok = status.error == ErrorCode.NONE
        by_topic.setdefault(topic, []).append((
            index, status.error, status.base_offset if ok else -1,
            status.log_append_time_ms, status.log_start_offset,
            None if ok else status.error.name))
    return Framed([encode_produce_response(request.api_version, request.correlation_id,
                                           list(by_topic.items()), request.throttle_ms)])


def _uniform(body: Any, code: ErrorCode) -> ProduceResponse:
    return ProduceResponse(
        responses=[TopicResponse(name=topic.name, partition_responses=[
            PartitionResponse(index=data.index, error_code=code, base_offset=-1,
                              log_append_time_ms=-1, log_start_offset=-1, record_errors=[],
                              error_message=code.name)
            for data in topic.partition_data]) for topic in body.topic_data],
        throttle_time_ms=0)

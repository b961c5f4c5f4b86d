"""AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions.

The transaction coordinator (``broker/transactions/``) behind Kafka's KafkaApis rules:

* authorization: Write on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
  for the first three; AddPartitionsToTxn also Write on each topic (internal topics are
  never authorized: TOPIC_AUTHORIZATION_FAILED), AddOffsetsToTxn Read on the group (else
  GROUP_AUTHORIZATION_FAILED); DescribeTransactions Describe on each id; ListTransactions
  lists only the ids the principal may Describe;
* AddPartitionsToTxn: a refused or unknown partition fails the request with its own
  error, every other partition OPERATION_NOT_ATTEMPTED; else the coordinator's one error
  for every partition;
* AddPartitionsToTxn v4+ is the brokers' batched form (KIP-890): ClusterAction on the
  cluster (else CLUSTER_AUTHORIZATION_FAILED for the request); per transaction,
  ``VerifyOnly`` asks whether each partition is in the ongoing transaction (NONE or
  INVALID_TXN_STATE, ``TransactionCoordinator.verify_partitions``), otherwise the
  partitions are added as v3 adds them (v5: for a transaction version 2 client, the
  leader's implicit add of Produce v12+ / TxnOffsetCommit v5+);
* EndTxn v5+ is transaction version 2's (KIP-890 part 2): the coordinator bumps the
  epoch and the answer names the producer id and epoch the client goes on with;
* PRODUCER_FENCED (KIP-588) is answered as INVALID_PRODUCER_EPOCH below version 2 of
  these three APIs (``fenced_for_version``), which older clients understand.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from kafka.protocol.admin import DescribeTransactionsResponse, ListTransactionsResponse
from kafka.protocol.producer import (
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnResponse,
    EndTxnResponse,
)

from protocol.errors import ErrorCode

from ..groups.placement import OFFSETS_TOPIC
from ..security.acls import AclOperation, ResourceType
from ..topics import is_internal
from ..transactions.metadata import TV_2

if TYPE_CHECKING:
    from protocol.messages import Request

    from .context import ApiContext

WRITE, READ, DESCRIBE = AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE
TXN_DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
# The first version of AddPartitionsToTxn, AddOffsetsToTxn and EndTxn that knows
# PRODUCER_FENCED.
PRODUCER_FENCED_SINCE_VERSION = 2
# AddPartitionsToTxn v4 is the brokers' batched form (KIP-890 part 1).
BATCHED_SINCE_VERSION = 4
# EndTxn v5 and a leader's AddPartitionsToTxn v5 add are transaction version 2's
# (KIP-890 part 2): the epoch is bumped at every commit and abort.
END_TXN_TV2_SINCE_VERSION = 5
ADD_TV2_SINCE_VERSION = 5


def fenced_for_version(error: ErrorCode, version: int,
                       since: int = PRODUCER_FENCED_SINCE_VERSION) -> ErrorCode:
    if error == ErrorCode.PRODUCER_FENCED and version < since:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


def _may_write_txn(ctx: ApiContext, request: Request, transactional_id: str) -> bool:
    return ctx.authorizer.allows(request, WRITE, ResourceType.TRANSACTIONAL_ID,
                                 transactional_id or "")


# -- AddPartitionsToTxn -----------------------------------------------------------------------

def _partition_results(errors: dict[tuple[str, int], int]) -> list:
    Result = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
    by_topic: dict[str, list] = {}
    for (topic, index), error in errors.items():
        by_topic.setdefault(topic, []).append(Result.AddPartitionsToTxnPartitionResult(
            partition_index=index, partition_error_code=error))
    return [Result(name=t, results_by_partition=p) for t, p in by_topic.items()]


async def handle_add_partitions_to_txn(ctx: ApiContext,
                                       request: Request) -> AddPartitionsToTxnResponse:
    if request.api_version >= BATCHED_SINCE_VERSION:
        return await _add_partitions_batched(ctx, request)
    body = request.body
    wanted = [(t.name, p) for t in body.v3_and_below_topics for p in t.partitions]
    transactional_id = body.v3_and_below_transactional_id

    def answer(errors: dict[tuple[str, int], int]) -> AddPartitionsToTxnResponse:
        return AddPartitionsToTxnResponse(throttle_time_ms=0,
                                          results_by_topic_v3_and_below=_partition_results(errors))

    if not _may_write_txn(ctx, request, transactional_id):
        return answer(dict.fromkeys(wanted, TXN_DENIED))
    denied = ctx.authorizer.refused(request, WRITE, {t for t, _ in wanted if not is_internal(t)})
    topics = ctx.image.topics
    refused = {}
    for topic, index in wanted:
        if is_internal(topic) or topic in denied:
            refused[(topic, index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif topic not in topics or index not in topics[topic].partitions:
            refused[(topic, index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if refused:
        return answer({tp: refused.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in wanted})
    error = await ctx.transactions.add_partitions(
        transactional_id, body.v3_and_below_producer_id, body.v3_and_below_producer_epoch,
        set(wanted))
    error = fenced_for_version(error, request.api_version)
    return answer(dict.fromkeys(wanted, error))


async def _add_partitions_batched(ctx: ApiContext,
                                  request: Request) -> AddPartitionsToTxnResponse:
    """v4+: the inter-broker form, one result per transaction."""
    Result = AddPartitionsToTxnResponse.AddPartitionsToTxnResult
    if not ctx.authorizer.allows_cluster(request, AclOperation.CLUSTER_ACTION):
        return AddPartitionsToTxnResponse(
            throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            results_by_transaction=[])
    results = []
    for txn in request.body.transactions:
        wanted = {(t.name, p) for t in txn.topics for p in t.partitions}
        if txn.verify_only:
            errors = ctx.transactions.verify_partitions(
                txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted)
        else:
            version = TV_2 if request.api_version >= ADD_TV2_SINCE_VERSION else None
            error = await ctx.transactions.add_partitions(
                txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted, version)
            errors = dict.fromkeys(wanted, error)
        results.append(Result(transactional_id=txn.transactional_id,
                              topic_results=_partition_results(errors)))
    return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                      results_by_transaction=results)


# -- AddOffsetsToTxn --------------------------------------------------------------------------

async def handle_add_offsets_to_txn(ctx: ApiContext, request: Request) -> AddOffsetsToTxnResponse:
    body = request.body
    if not _may_write_txn(ctx, request, body.transactional_id):
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=TXN_DENIED)
    if not ctx.authorizer.allows(request, READ, ResourceType.GROUP, body.group_id or ""):
        return AddOffsetsToTxnResponse(throttle_time_ms=0,
                                       error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    offsets_partition = (OFFSETS_TOPIC, ctx.groups.manager.partition_for(body.group_id or ""))
    error = await ctx.transactions.add_partitions(body.transactional_id, body.producer_id,
                                                  body.producer_epoch, {offsets_partition})
    return AddOffsetsToTxnResponse(throttle_time_ms=0,
                                   error_code=fenced_for_version(error, request.api_version))


# -- TxnOffsetCommit v5+: the offsets partition added implicitly ------------------------------

# TxnOffsetCommit v5+ is a transaction version 2 client's: it sends no AddOffsetsToTxn.
TXN_OFFSET_COMMIT_ADD_SINCE_VERSION = 5
# The coordinator's passing errors, as a TxnOffsetCommit answer the client retries.
_OFFSETS_ADD_ERRORS = {
    ErrorCode.NOT_COORDINATOR: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.CONCURRENT_TRANSACTIONS: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH,
}


async def add_offsets_partition(ctx: ApiContext, request: Request) -> ErrorCode:
    """TxnOffsetCommit v5+ (KIP-890 part 2): the group coordinator adds the group's
    ``__consumer_offsets`` partition to the transaction (what AddOffsetsToTxn did) before
    it stores the offsets; NONE once added (and for older versions), else the error every
    partition answers."""
    if request.api_version < TXN_OFFSET_COMMIT_ADD_SINCE_VERSION:
        return ErrorCode.NONE
    body = request.body
    partition = (OFFSETS_TOPIC, ctx.groups.manager.partition_for(body.group_id or ""))
    errors = await ctx.transactions.verifier.verify(
        body.transactional_id, body.producer_id, body.producer_epoch, {partition}, add=True)
    error = errors.get(partition, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return _OFFSETS_ADD_ERRORS.get(error, error)


# -- EndTxn -----------------------------------------------------------------------------------

async def handle_end_txn(ctx: ApiContext, request: Request) -> EndTxnResponse:
    body = request.body
    if not _may_write_txn(ctx, request, body.transactional_id):
        return EndTxnResponse(throttle_time_ms=0, error_code=TXN_DENIED)
    tv2 = request.api_version >= END_TXN_TV2_SINCE_VERSION
    result = await ctx.transactions.end_transaction(body.transactional_id, body.producer_id,
                                                    body.producer_epoch, bool(body.committed),
                                                    tv2=tv2)
    error = fenced_for_version(result.error, request.api_version)
    if tv2:
        return EndTxnResponse(throttle_time_ms=0, error_code=error,
                              producer_id=result.producer_id,
                              producer_epoch=result.producer_epoch)
    return EndTxnResponse(throttle_time_ms=0, error_code=error)


# -- DescribeTransactions / ListTransactions -----------------------------------------------------

async def handle_describe_transactions(
        ctx: ApiContext, request: Request) -> DescribeTransactionsResponse:
    State = DescribeTransactionsResponse.TransactionState
    states = []
    for transactional_id in request.body.transactional_ids:
        if not ctx.authorizer.allows(request, DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                     transactional_id):
            states.append(State(error_code=TXN_DENIED, transactional_id=transactional_id,
                                transaction_state="", transaction_timeout_ms=0,
                                transaction_start_time_ms=-1, producer_id=-1,
                                producer_epoch=-1, topics=[]))
            continue
        d = ctx.transactions.describe(transactional_id)
        by_topic: dict[str, list[int]] = {}
        for topic, index in d.partitions:
            by_topic.setdefault(topic, []).append(index)
        states.append(State(
            error_code=d.error, transactional_id=transactional_id, transaction_state=d.state,
            transaction_timeout_ms=d.timeout_ms, transaction_start_time_ms=d.start_time_ms,
            producer_id=d.producer_id, producer_epoch=d.producer_epoch,
            topics=[State.TopicData(topic=t, partitions=p) for t, p in by_topic.items()]))
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)


async def handle_list_transactions(ctx: ApiContext, request: Request) -> ListTransactionsResponse:
    body = request.body
    listing = ctx.transactions.list_transactions(
        list(body.state_filters or []), list(body.producer_id_filters or []),
        body.duration_filter if request.api_version >= 1 else -1)
    State = ListTransactionsResponse.TransactionState
    return ListTransactionsResponse(
        throttle_time_ms=0, error_code=listing.error,
        unknown_state_filters=listing.unknown_state_filters,
        transaction_states=[
            State(transactional_id=t, producer_id=pid, transaction_state=state)
            for t, pid, state in listing.transactions
            if ctx.authorizer.allows(request, DESCRIBE, ResourceType.TRANSACTIONAL_ID, t,
                                     log_denial=False)])

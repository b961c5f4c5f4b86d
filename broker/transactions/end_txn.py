"""Whether an EndTxn may end a transaction, and how (Kafka's endTransaction checks; pure).

Two rule sets, chosen by the request as Kafka does: EndTxn v5+ is a transaction
version 2 client (KIP-890 part 2), older versions (and the coordinator's own aborts,
which fence) follow version 1's rules.

Version 1: the request's producer id and epoch must be the transaction's (a fencing
abort may carry a newer epoch); Ongoing proceeds; a retry of an EndTxn that already
succeeded (same result, Prepare*/Complete*) answers CONCURRENT_TRANSACTIONS while its
markers are written, NONE once complete; anything else is INVALID_TXN_STATE.

Version 2: every end bumps the epoch, so the epoch alone tells a retry from a new
request.  A retry carries the epoch before the bump (``retry_on_epoch_bump``), or the
last epoch of the previous producer id when the bump ran out of epochs and a new id was
handed out (``retry_on_overflow``).  Ongoing, Empty: the epoch must be the current one
(a commit or abort delayed from the previous transaction carries the epoch before the
bump and is PRODUCER_FENCED: it never ends the next transaction, Jepsen's delayed
commit).  Prepare*: only a retry (CONCURRENT_TRANSACTIONS).  Complete*: a retry of the
same result answers NONE with the current producer id and epoch; an abort at the current
epoch of a transaction with no partition (Empty, Complete*) is a transaction of its
own, ended with the epoch bumped like any other.
"""
from __future__ import annotations

from dataclasses import dataclass

from protocol.errors import ErrorCode

from .metadata import MAX_PRODUCER_EPOCH, TransactionMetadata, TransactionState

S = TransactionState


@dataclass(frozen=True)
class Proceed:
    """Write ``state`` (PrepareCommit or PrepareAbort)."""

    state: TransactionState
    no_partition_added: bool = False


@dataclass(frozen=True)
class Answer:
    """Answer the request without a write: ``error`` (NONE: a completed retry)."""

    error: ErrorCode


def decide(metadata: TransactionMetadata, producer_id: int, producer_epoch: int,
           commit: bool, tv2: bool, from_client: bool) -> Proceed | Answer:
    """What an EndTxn for ``metadata`` does (module doc); ``tv2``: an EndTxn v5+."""
    if tv2 and from_client:
        return _decide_v2(metadata, producer_id, producer_epoch, commit)
    return _decide_v1(metadata, producer_id, producer_epoch, commit, from_client)


def _decide_v1(metadata: TransactionMetadata, producer_id: int, producer_epoch: int,
               commit: bool, from_client: bool) -> Proceed | Answer:
    if metadata.producer_id != producer_id:
        return Answer(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    if (from_client and producer_epoch != metadata.producer_epoch) \
            or producer_epoch < metadata.producer_epoch:
        return Answer(ErrorCode.PRODUCER_FENCED)
    fencing = metadata.pending_state is S.PREPARE_EPOCH_FENCE
    if metadata.pending_transition_in_progress and not fencing:
        return Answer(ErrorCode.CONCURRENT_TRANSACTIONS)
    state = metadata.state
    if state is S.ONGOING:
        return Proceed(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT)
    if state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT, S.PREPARE_COMMIT, S.PREPARE_ABORT):
        if (state in (S.COMPLETE_COMMIT, S.PREPARE_COMMIT)) != commit:
            return Answer(ErrorCode.INVALID_TXN_STATE)
        done = state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
        return Answer(ErrorCode.NONE if done else ErrorCode.CONCURRENT_TRANSACTIONS)
    return Answer(ErrorCode.INVALID_TXN_STATE)


def is_retry_v2(metadata: TransactionMetadata, producer_id: int, producer_epoch: int) -> bool:
    """A version 2 EndTxn retried after its epoch bump (or after the new producer id)."""
    on_bump = metadata.producer_id == producer_id \
        and metadata.producer_epoch == producer_epoch + 1
    on_overflow = metadata.last_producer_id == producer_id \
        and producer_epoch == MAX_PRODUCER_EPOCH - 1 and metadata.producer_epoch == 0
    return on_bump or on_overflow


def _decide_v2(metadata: TransactionMetadata, producer_id: int, producer_epoch: int,
               commit: bool) -> Proceed | Answer:
    state = metadata.state
    retry = is_retry_v2(metadata, producer_id, producer_epoch)
    overflow_retry = retry and metadata.producer_id != producer_id
    current = metadata.producer_epoch == producer_epoch
    if metadata.producer_id != producer_id and not overflow_retry:
        return Answer(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        valid = retry
    elif state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        valid = retry or current
    else:
        valid = current
    if not valid:
        return Answer(ErrorCode.PRODUCER_FENCED)
    if metadata.pending_transition_in_progress:
        return Answer(ErrorCode.CONCURRENT_TRANSACTIONS)
    abort = Proceed(S.PREPARE_ABORT, no_partition_added=True)
    if state is S.ONGOING:
        return Proceed(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT)
    if state is S.COMPLETE_COMMIT:
        if commit:
            return Answer(ErrorCode.NONE if retry else ErrorCode.INVALID_TXN_STATE)
        return Answer(ErrorCode.INVALID_TXN_STATE) if retry else abort
    if state is S.COMPLETE_ABORT:
        if commit:
            return Answer(ErrorCode.INVALID_TXN_STATE)
        return Answer(ErrorCode.NONE) if retry else abort
    if state is S.PREPARE_COMMIT:
        return Answer(ErrorCode.CONCURRENT_TRANSACTIONS if commit
                      else ErrorCode.INVALID_TXN_STATE)
    if state is S.PREPARE_ABORT:
        return Answer(ErrorCode.INVALID_TXN_STATE if commit
                      else ErrorCode.CONCURRENT_TRANSACTIONS)
    if state is S.EMPTY and not commit:
        return abort
    return Answer(ErrorCode.INVALID_TXN_STATE)

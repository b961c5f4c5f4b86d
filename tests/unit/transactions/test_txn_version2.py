"""Transaction version 2 (KIP-890 part 2): the epoch bump at every end, the new producer
id when the epochs run out, and the EndTxn decisions (Kafka's endTransaction)."""
from __future__ import annotations

from broker.transactions import end_txn
from broker.transactions.metadata import (
    MAX_PRODUCER_EPOCH,
    TV_1,
    TV_2,
    TransactionMetadata,
    TransactionState,
)
from protocol.errors import ErrorCode

S = TransactionState
PID = 1000


def ongoing(epoch=4, version=TV_2):
    m = TransactionMetadata("tx", 0, PID, epoch, 60_000, S.EMPTY)
    m.complete_transition_to(m.prepare_add_partitions({("t", 0)}, 100, version))
    return m


def end(m, state=S.PREPARE_COMMIT, version=TV_2, next_producer_id=-1, now=200):
    m.complete_transition_to(m.prepare_abort_or_commit(state, now, version, next_producer_id))
    m.complete_transition_to(m.prepare_complete(now + 1))
    return m


def test_version_2_bumps_the_epoch_at_prepare_and_keeps_it():
    m = ongoing(epoch=4)
    transit = m.prepare_abort_or_commit(S.PREPARE_COMMIT, 200, TV_2)
    assert (transit.producer_epoch, transit.last_producer_epoch) == (5, 4)
    assert transit.client_transaction_version == TV_2
    m.complete_transition_to(transit)
    m.complete_transition_to(m.prepare_complete(201))
    assert (m.state, m.producer_id, m.producer_epoch) == (S.COMPLETE_COMMIT, PID, 5)


def test_version_1_keeps_the_epoch():
    m = end(ongoing(epoch=4, version=TV_1), version=TV_1)
    assert (m.producer_id, m.producer_epoch) == (PID, 4)


def test_the_last_epoch_hands_out_the_next_producer_id_at_epoch_0():
    m = ongoing(epoch=MAX_PRODUCER_EPOCH - 1)
    transit = m.prepare_abort_or_commit(S.PREPARE_ABORT, 200, TV_2, next_producer_id=2000)
    assert (transit.producer_id, transit.producer_epoch) == (PID, MAX_PRODUCER_EPOCH)
    m.complete_transition_to(transit)
    m.complete_transition_to(m.prepare_complete(201))
    assert (m.producer_id, m.producer_epoch, m.last_producer_id) == (2000, 0, PID)
    # The client's retry names the old id at the last epoch it was given.
    assert end_txn.is_retry_v2(m, PID, MAX_PRODUCER_EPOCH - 1)
    decision = end_txn.decide(m, PID, MAX_PRODUCER_EPOCH - 1, False, True, True)
    assert decision == end_txn.Answer(ErrorCode.NONE)


def test_a_commit_delayed_from_the_previous_transaction_is_fenced():
    """Jepsen's delayed commit: the next transaction is Ongoing at the bumped epoch."""
    m = end(ongoing(epoch=4))
    m.complete_transition_to(m.prepare_add_partitions({("t", 1)}, 300, TV_2))
    assert end_txn.decide(m, PID, 4, True, True, True) == end_txn.Answer(
        ErrorCode.PRODUCER_FENCED)
    assert end_txn.decide(m, PID, 5, True, True, True) == end_txn.Proceed(S.PREPARE_COMMIT)
    # Under version 1's rules the same epoch would have ended the new transaction.
    v1 = end(ongoing(epoch=4, version=TV_1), version=TV_1)
    v1.complete_transition_to(v1.prepare_add_partitions({("t", 1)}, 300, TV_1))
    assert end_txn.decide(v1, PID, 4, True, False, True) == end_txn.Proceed(S.PREPARE_COMMIT)


def test_retries_and_empty_aborts_under_version_2():
    m = end(ongoing(epoch=4))  # CompleteCommit at 5
    assert end_txn.decide(m, PID, 4, True, True, True) == end_txn.Answer(ErrorCode.NONE)
    assert end_txn.decide(m, PID, 4, False, True, True) == end_txn.Answer(
        ErrorCode.INVALID_TXN_STATE)
    assert end_txn.decide(m, PID, 5, False, True, True) == end_txn.Proceed(
        S.PREPARE_ABORT, no_partition_added=True)
    assert end_txn.decide(m, PID, 5, True, True, True) == end_txn.Answer(
        ErrorCode.INVALID_TXN_STATE)
    assert end_txn.decide(m, PID, 3, True, True, True) == end_txn.Answer(
        ErrorCode.PRODUCER_FENCED)
    assert end_txn.decide(m, PID + 1, 5, True, True, True) == end_txn.Answer(
        ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    empty = TransactionMetadata("tx", 0, PID, 0, 60_000, S.EMPTY)
    assert end_txn.decide(empty, PID, 0, False, True, True) == end_txn.Proceed(
        S.PREPARE_ABORT, no_partition_added=True)
    transit = empty.prepare_abort_or_commit(S.PREPARE_ABORT, 50, TV_2, no_partition_added=True)
    assert (transit.producer_epoch, transit.txn_start_timestamp_ms) == (1, 50)


def test_a_retry_while_the_markers_are_written_is_concurrent():
    m = ongoing(epoch=4)
    m.complete_transition_to(m.prepare_abort_or_commit(S.PREPARE_COMMIT, 200, TV_2))
    assert end_txn.decide(m, PID, 4, True, True, True) == end_txn.Answer(
        ErrorCode.CONCURRENT_TRANSACTIONS)
    assert end_txn.decide(m, PID, 5, True, True, True) == end_txn.Answer(
        ErrorCode.PRODUCER_FENCED)

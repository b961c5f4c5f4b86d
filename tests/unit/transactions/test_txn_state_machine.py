"""Kafka's transaction state machine: valid transitions, pending states, epoch rules."""
from __future__ import annotations

import pytest

from broker.transactions.metadata import (
    MAX_PRODUCER_EPOCH,
    VALID_PREVIOUS_STATES,
    IllegalTransition,
    TransactionMetadata,
    TransactionState,
)
from protocol.errors import ErrorCode

S = TransactionState


def metadata(state=S.EMPTY, epoch=0, partitions=()):
    return TransactionMetadata("tx", 0, 1000, epoch, 60_000, state, set(partitions), 10, 10)


def complete(m, transit):
    m.complete_transition_to(transit)
    return m


def test_a_commit_goes_through_ongoing_prepare_and_complete():
    m = metadata()
    complete(m, m.prepare_add_partitions({("t", 0)}, 100))
    assert (m.state, m.topic_partitions, m.txn_start_timestamp_ms) == (S.ONGOING, {("t", 0)}, 100)
    complete(m, m.prepare_add_partitions({("t", 1)}, 150))
    assert m.txn_start_timestamp_ms == 100  # the same transaction
    complete(m, m.prepare_abort_or_commit(S.PREPARE_COMMIT, 200))
    complete(m, m.prepare_complete(300))
    assert (m.state, m.topic_partitions) == (S.COMPLETE_COMMIT, set())


def test_a_pending_transition_blocks_any_other():
    m = metadata()
    m.prepare_add_partitions({("t", 0)}, 100)
    assert m.pending_transition_in_progress
    with pytest.raises(IllegalTransition):
        m.prepare_add_partitions({("t", 1)}, 100)


def test_invalid_previous_state_is_refused():
    with pytest.raises(IllegalTransition):
        metadata(S.EMPTY).prepare_abort_or_commit(S.PREPARE_COMMIT, 1)
    # Kafka 4: transaction version 2 aborts a transaction with no partition added.
    assert VALID_PREVIOUS_STATES[S.PREPARE_ABORT] == {S.ONGOING, S.PREPARE_EPOCH_FENCE,
                                                      S.EMPTY, S.COMPLETE_COMMIT,
                                                      S.COMPLETE_ABORT}
    assert VALID_PREVIOUS_STATES[S.DEAD] == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}


def test_fence_bumps_the_epoch_once_even_after_a_failed_attempt():
    m = metadata(S.ONGOING, epoch=4, partitions={("t", 0)})
    transit = m.prepare_fence_producer_epoch(10)
    assert (transit.state, transit.producer_epoch) == (S.PREPARE_EPOCH_FENCE, 5)
    m.start_epoch_fence_abort(transit.producer_epoch)
    m.prepare_abort_or_commit(S.PREPARE_ABORT, 10)
    m.pending_state = None  # the write failed
    m.has_failed_epoch_fence = True
    assert m.prepare_fence_producer_epoch(20).producer_epoch == 5


def test_increment_epoch_rules_of_kip_360():
    m = metadata(S.COMPLETE_COMMIT, epoch=3)
    m.last_producer_epoch = 2
    assert m.prepare_increment_producer_epoch(1000, None, 1).producer_epoch == 4
    m.pending_state = None
    bumped = m.prepare_increment_producer_epoch(1000, 3, 1)
    assert (bumped.producer_epoch, bumped.last_producer_epoch) == (4, 3)
    m.pending_state = None
    retry = m.prepare_increment_producer_epoch(1000, 2, 1)
    assert (retry.producer_epoch, retry.last_producer_epoch) == (3, 2)
    m.pending_state = None
    assert m.prepare_increment_producer_epoch(1000, 1, 1) == ErrorCode.PRODUCER_FENCED


def test_rotation_starts_a_new_producer_id_at_epoch_zero():
    m = metadata(S.EMPTY, epoch=MAX_PRODUCER_EPOCH - 1)
    transit = m.prepare_producer_id_rotation(2000, 1000, 1, record_last_epoch=True)
    complete(m, transit)
    assert (m.producer_id, m.producer_epoch, m.last_producer_id, m.last_producer_epoch) == \
        (2000, 0, 1000, MAX_PRODUCER_EPOCH - 1)


def test_state_names_and_codes_are_kafkas():
    assert [(s.code, s.kafka_name) for s in S] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"),
        (4, "CompleteCommit"), (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence")]
    assert S.from_name("Ongoing") is S.ONGOING and S.from_name("ongoing") is None

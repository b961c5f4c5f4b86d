"""The transaction coordinator seen through raw requests on one broker process.

FindCoordinator key type 1 (creating ``__transaction_state``), InitProducerId with a
transactional id (epoch bumps, INVALID_TRANSACTION_TIMEOUT), a fenced epoch on
AddPartitionsToTxn (PRODUCER_FENCED from v2, INVALID_PRODUCER_EPOCH before),
DescribeTransactions/ListTransactions showing the Ongoing transaction, and EndTxn.
The end-to-end data checks with real clients live elsewhere.  One broker serves the
module; each test has transactional ids and topics of its own.
"""
from __future__ import annotations

import time

import pytest
from kafka.protocol.admin import (
    CreateTopicsRequest,
    DescribeTransactionsRequest,
    ListTransactionsRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest

from broker.testing import KafkaConnection

NONE = 0
INVALID_PRODUCER_EPOCH = 47
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
PRODUCER_FENCED = 90
RETRIABLE = {14, 15, 16, 51}  # LOAD_IN_PROGRESS, NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT
WAIT_S = 20.0


@pytest.fixture
def conn(module_broker):
    """A connection to the module's broker (each test has transactional ids and topics
    of its own)."""
    with KafkaConnection(module_broker.bootstrap) as connection:
        yield connection


def until_done(send, what: str):
    """``send()`` until its error is not a retriable coordinator error."""
    deadline = time.monotonic() + WAIT_S
    while True:
        response = send()
        if response.error_code not in RETRIABLE or time.monotonic() > deadline:
            return response
        time.sleep(0.2)


def find_coordinator(conn, txn_id: str):
    return until_done(lambda: conn.request(FindCoordinatorRequest[3](
        key=txn_id, key_type=1)), "FindCoordinator")


def init_producer_id(conn, txn_id: str, timeout_ms: int = 60_000, version: int = 4):
    return until_done(lambda: conn.request(InitProducerIdRequest[version](
        transactional_id=txn_id, transaction_timeout_ms=timeout_ms, producer_id=-1,
        producer_epoch=-1)), "InitProducerId")


def add_partitions(conn, txn_id, producer_id, epoch, topic, version=3):
    response = conn.request(AddPartitionsToTxnRequest[version](
        v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=producer_id,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(
            name=topic, partitions=[0])]))
    [result] = response.results_by_topic_v3_and_below
    return result.results_by_partition[0].partition_error_code


def create_topic(conn, name: str) -> None:
    Topic = CreateTopicsRequest.CreatableTopic
    response = conn.request(CreateTopicsRequest[4](topics=[Topic(
        name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=10_000, validate_only=False))
    assert response.topics[0].error_code == NONE


def test_find_coordinator_for_a_transactional_id(conn, module_broker):
    response = find_coordinator(conn, "txn-find")
    assert response.error_code == NONE
    assert response.port == int(module_broker.bootstrap.rsplit(":", 1)[1])
    batched = conn.request(FindCoordinatorRequest[4](key_type=1, coordinator_keys=["a", "b"]))
    assert [c.error_code for c in batched.coordinators] == [NONE, NONE]


def test_init_producer_id_bumps_the_epoch_and_fences_the_old_one(conn):
    find_coordinator(conn, "txn-fence")
    first = init_producer_id(conn, "txn-fence")
    assert first.error_code == NONE and first.producer_epoch == 0
    second = init_producer_id(conn, "txn-fence")
    assert second.error_code == NONE
    assert (second.producer_id, second.producer_epoch) == (first.producer_id, 1)
    create_topic(conn, "txn-fence-topic")
    old = (first.producer_id, first.producer_epoch)
    assert add_partitions(conn, "txn-fence", *old, "txn-fence-topic") == PRODUCER_FENCED
    assert add_partitions(conn, "txn-fence", *old, "txn-fence-topic",
                          version=1) == INVALID_PRODUCER_EPOCH


def test_transaction_timeout_above_the_maximum_is_refused(conn):
    find_coordinator(conn, "txn-timeout")
    assert init_producer_id(conn, "txn-timeout", timeout_ms=3_600_000).error_code \
        == INVALID_TRANSACTION_TIMEOUT
    assert init_producer_id(conn, "txn-timeout", timeout_ms=0).error_code \
        == INVALID_TRANSACTION_TIMEOUT


def test_ongoing_transaction_is_described_listed_and_ended(conn):
    find_coordinator(conn, "txn-ongoing")
    create_topic(conn, "txn-ongoing-topic")
    init = init_producer_id(conn, "txn-ongoing")
    pid, epoch = init.producer_id, init.producer_epoch
    assert add_partitions(conn, "txn-ongoing", pid, epoch, "txn-ongoing-topic") == NONE

    [state] = conn.request(DescribeTransactionsRequest[0](
        transactional_ids=["txn-ongoing"])).transaction_states
    assert (state.error_code, state.transaction_state, state.producer_id) == \
        (NONE, "Ongoing", pid)
    assert [(t.topic, list(t.partitions)) for t in state.topics] == [("txn-ongoing-topic", [0])]
    listed = conn.request(ListTransactionsRequest[1](
        state_filters=["Ongoing", "Nonsense"], producer_id_filters=[], duration_filter=-1))
    assert listed.error_code == NONE and list(listed.unknown_state_filters) == ["Nonsense"]
    assert ("txn-ongoing", pid, "Ongoing") in [
        (t.transactional_id, t.producer_id, t.transaction_state)
        for t in listed.transaction_states]

    ended = conn.request(EndTxnRequest[3](transactional_id="txn-ongoing", producer_id=pid,
                                          producer_epoch=epoch, committed=True))
    assert ended.error_code == NONE
    [state] = conn.request(DescribeTransactionsRequest[0](
        transactional_ids=["txn-ongoing"])).transaction_states
    assert state.transaction_state in ("PrepareCommit", "CompleteCommit")
    # A second InitProducerId while the markers are pending is told to retry.
    again = conn.request(InitProducerIdRequest[4](
        transactional_id="txn-ongoing", transaction_timeout_ms=60_000, producer_id=-1,
        producer_epoch=-1))
    assert again.error_code in (NONE, CONCURRENT_TRANSACTIONS)


def test_a_transactional_id_the_coordinator_never_saw_is_an_invalid_mapping(conn):
    """AddPartitionsToTxn and AddOffsetsToTxn for an id with no state at its coordinator
    are answered INVALID_PRODUCER_ID_MAPPING (as Kafka does) on a connection that stays
    open, not a handler failure that closes it (found by the fuzzer)."""
    from kafka.protocol.producer import AddOffsetsToTxnRequest

    create_topic(conn, "txn-never-seen")
    assert find_coordinator(conn, "never-initialised").error_code == NONE
    assert add_partitions(conn, "never-initialised", 4242, 0, "txn-never-seen") == \
        INVALID_PRODUCER_ID_MAPPING
    response = conn.request(AddOffsetsToTxnRequest[2](
        transactional_id="never-initialised", producer_id=4242, producer_epoch=0,
        group_id="g-never"))
    assert response.error_code == INVALID_PRODUCER_ID_MAPPING
    assert find_coordinator(conn, "never-initialised").error_code == NONE  # still open

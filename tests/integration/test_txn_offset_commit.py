"""The group coordinator's side of transactions, seen through raw requests on a real broker.

TxnOffsetCommit writes a producer's offsets as a transactional batch of the group's
``__consumer_offsets`` partition; they stay pending until that producer's marker:

* meanwhile OffsetFetch shows the offsets committed before, and with require_stable (v7+,
  what read_committed consumers send) answers UNSTABLE_OFFSET_COMMIT (88) per partition;
* a COMMIT marker (WriteTxnMarkers, as the transaction coordinator sends it) makes them
  the committed offsets, an ABORT marker drops them;
* pending offsets survive a kill -9: the reloaded coordinator still answers UNSTABLE, and
  the marker sent after the restart settles them;
* an epoch older than the one the partition has seen for the producer is refused with
  INVALID_PRODUCER_EPOCH (47).
"""
from __future__ import annotations

import time

import pytest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import (
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
    WriteTxnMarkersRequest,
)

from broker.api import HANDLERS
from broker.groups.placement import OFFSETS_TOPIC, partition_for
from broker.testing import KafkaConnection

NONE = 0
INVALID_PRODUCER_EPOCH = 47
UNSTABLE_OFFSET_COMMIT = 88
RETRIABLE = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR
GROUP, TOPIC, TXN_ID = "txn-group", "txn-in", "txn-app"
WAIT_S = 20.0

needs_markers = pytest.mark.skipif(
    ApiKey.WriteTxnMarkers not in HANDLERS,
    reason="WriteTxnMarkers (API 27) is not served yet: no marker can settle the offsets")


def retrying(call, error_of):
    """``call()`` until ``error_of(answer)`` is not a coordinator error (loading, moving)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        answer = call()
        if error_of(answer) not in RETRIABLE or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


def offsets_partition(conn: KafkaConnection) -> int:
    answer = retrying(lambda: conn.request(FindCoordinatorRequest[1](key=GROUP, key_type=0)),
                      lambda a: a.error_code)
    assert answer.error_code == NONE, answer
    topic = conn.metadata([OFFSETS_TOPIC]).topics[0]
    return partition_for(GROUP, len(topic.partitions))


def init_producer_id(conn: KafkaConnection, producer_id: int = -1, epoch: int = -1):
    answer = conn.request(InitProducerIdRequest[4](
        transactional_id=None, transaction_timeout_ms=60_000, producer_id=producer_id,
        producer_epoch=epoch))
    assert answer.error_code == NONE, answer
    return answer.producer_id, answer.producer_epoch


def commit(conn: KafkaConnection, offset: int) -> None:
    topic = OffsetCommitRequest.OffsetCommitRequestTopic
    answer = retrying(lambda: conn.request(OffsetCommitRequest[8](
        group_id=GROUP, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=[topic(name=TOPIC, partitions=[topic.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
            committed_metadata="")])])), lambda a: a.topics[0].partitions[0].error_code)
    assert answer.topics[0].partitions[0].error_code == NONE


def txn_commit(conn: KafkaConnection, producer: tuple[int, int], offset: int,
               version: int = 3) -> int:
    topic = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    answer = retrying(lambda: conn.request(TxnOffsetCommitRequest[version](
        transactional_id=TXN_ID, group_id=GROUP, producer_id=producer[0],
        producer_epoch=producer[1], generation_id=-1, member_id="", group_instance_id=None,
        topics=[topic(name=TOPIC, partitions=[topic.TxnOffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
            committed_metadata="txn")])])), lambda a: a.topics[0].partitions[0].error_code)
    return answer.topics[0].partitions[0].error_code


def fetch(conn: KafkaConnection, version: int = 8, stable: bool = True) -> tuple[int, int]:
    """(partition error, committed offset) of TOPIC-0 in GROUP."""
    if version >= 8:
        group = OffsetFetchRequest.OffsetFetchRequestGroup
        request = OffsetFetchRequest[version](require_stable=stable, groups=[group(
            group_id=GROUP, topics=[group.OffsetFetchRequestTopics(
                name=TOPIC, partition_indexes=[0])])])

        def partition(answer):
            assert answer.groups[0].error_code in RETRIABLE | {NONE}
            return answer.groups[0].topics[0].partitions[0]
        answer = retrying(lambda: conn.request(request), lambda a: a.groups[0].error_code)
    else:
        request = OffsetFetchRequest[version](group_id=GROUP, require_stable=stable, topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])])

        def partition(answer):
            return answer.topics[0].partitions[0]
        answer = retrying(lambda: conn.request(request), lambda a: a.error_code)
        assert answer.error_code == NONE
    p = partition(answer)
    return p.error_code, p.committed_offset


def marker(conn: KafkaConnection, producer: tuple[int, int], index: int, commit: bool) -> None:
    body = WriteTxnMarkersRequest.WritableTxnMarker
    answer = conn.request(WriteTxnMarkersRequest[1](markers=[body(
        producer_id=producer[0], producer_epoch=producer[1], transaction_result=commit,
        coordinator_epoch=0, topics=[body.WritableTxnMarkerTopic(
            name=OFFSETS_TOPIC, partition_indexes=[index])])]))
    assert answer.markers[0].topics[0].partitions[0].error_code == NONE, answer


@pytest.fixture
def setup(raftwood_broker_factory):
    broker = raftwood_broker_factory()
    with KafkaConnection(broker.bootstrap) as conn:
        assert conn.create_topic(TOPIC, 1) == NONE
        index = offsets_partition(conn)
        commit(conn, 5)
        producer = init_producer_id(conn)
    return broker, index, producer


def test_transactional_offsets_are_unstable_until_their_marker(setup):
    broker, _, producer = setup
    with KafkaConnection(broker.bootstrap) as conn:
        assert txn_commit(conn, producer, 9) == NONE
        assert fetch(conn, version=8) == (UNSTABLE_OFFSET_COMMIT, -1)
        assert fetch(conn, version=7) == (UNSTABLE_OFFSET_COMMIT, -1)
        assert fetch(conn, version=8, stable=False) == (NONE, 5)
        assert fetch(conn, version=6, stable=False) == (NONE, 5)


def test_old_versions_are_served(setup):
    broker, _, producer = setup
    with KafkaConnection(broker.bootstrap) as conn:
        for version in (0, 1, 2):
            assert txn_commit(conn, producer, 9 + version, version=version) == NONE
        assert fetch(conn) == (UNSTABLE_OFFSET_COMMIT, -1)


@needs_markers
def test_a_commit_marker_makes_them_visible_and_an_abort_marker_drops_them(setup):
    broker, index, producer = setup
    with KafkaConnection(broker.bootstrap) as conn:
        assert txn_commit(conn, producer, 9) == NONE
        marker(conn, producer, index, commit=True)
        assert fetch(conn) == (NONE, 9)
        assert txn_commit(conn, producer, 11) == NONE
        assert fetch(conn) == (UNSTABLE_OFFSET_COMMIT, -1)
        marker(conn, producer, index, commit=False)
        assert fetch(conn) == (NONE, 9)


@pytest.mark.slow
@needs_markers
def test_pending_offsets_survive_kill_9_and_the_marker_after_the_restart_settles_them(setup):
    broker, index, producer = setup
    with KafkaConnection(broker.bootstrap) as conn:
        assert txn_commit(conn, producer, 13) == NONE
    broker.kill()
    broker.start()
    with KafkaConnection(broker.bootstrap) as conn:
        assert fetch(conn) == (UNSTABLE_OFFSET_COMMIT, -1)
        assert fetch(conn, stable=False) == (NONE, 5)
        marker(conn, producer, index, commit=True)
        assert fetch(conn) == (NONE, 13)
    broker.kill()
    broker.start()
    with KafkaConnection(broker.bootstrap) as conn:
        assert fetch(conn) == (NONE, 13)


def test_a_stale_producer_epoch_is_refused(setup):
    broker, _, producer = setup
    with KafkaConnection(broker.bootstrap) as conn:
        bumped = init_producer_id(conn, *producer)
        assert bumped[1] == producer[1] + 1
        assert txn_commit(conn, bumped, 9) == NONE
        assert txn_commit(conn, producer, 10) == INVALID_PRODUCER_EPOCH

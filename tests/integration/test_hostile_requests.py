"""Requests that name 100,000 topics or partitions (within socket.request.max.bytes): each
is answered, one entry per name, the broker's memory grows by a bounded amount, and a
second client is served while and after they run.
"""
from __future__ import annotations

import threading
import time

import pytest
from kafka.protocol.admin import DeleteRecordsRequest
from kafka.protocol.consumer import ListOffsetsRequest, OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

from broker.testing import BrokerProcess, KafkaConnection
from tests.integration.test_hostile_connections import rss_bytes

COUNT = 100_000
TOPIC = "wide"
WAIT_S = 120.0
UNKNOWN_TOPIC_OR_PARTITION = 3
# Generous: 100,000 entries decoded, answered and encoded cost tens of MB in Python; the
# bound is there to catch a copy per entry or a leak, not to measure.
RSS_GROWTH_BOUND = 512 << 20


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    home = tmp_path_factory.mktemp("hostile-requests")
    broker = BrokerProcess(home / "data", log_path=home / "broker.log",
                           extra_settings={"auto.create.topics.enable": "false"})
    broker.start()
    with KafkaConnection(broker.bootstrap) as conn:
        assert conn.create_topic(TOPIC, 2) == 0
        _wait_for_group_coordinator(conn)
    yield broker
    assert broker.stop() == 0, broker.log_tail()


def _wait_for_group_coordinator(conn: KafkaConnection) -> None:
    """Until __consumer_offsets exists (FindCoordinator creates it) and is loaded,
    OffsetFetch answers NOT_COORDINATOR."""
    topic = OffsetFetchRequest.OffsetFetchRequestTopic
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        conn.request(FindCoordinatorRequest[1](key="wide-group", key_type=0))
        answer = conn.request(OffsetFetchRequest[7](group_id="wide-group", require_stable=False,
                                                    topics=[topic(name=TOPIC,
                                                                  partition_indexes=[0])]))
        if answer.error_code == 0:
            return
        time.sleep(0.2)
    raise AssertionError(f"the group coordinator never loaded (error {answer.error_code})")


def _metadata():
    topic = MetadataRequest.MetadataRequestTopic
    return MetadataRequest[4](topics=[topic(name=f"t-{i:07d}") for i in range(COUNT)],
                              allow_auto_topic_creation=False)


def _list_offsets():
    topic = ListOffsetsRequest.ListOffsetsTopic
    return ListOffsetsRequest[7](replica_id=-1, isolation_level=0, topics=[topic(
        name=TOPIC, partitions=[topic.ListOffsetsPartition(
            partition_index=i, current_leader_epoch=-1, timestamp=-1) for i in range(COUNT)])])


def _offset_fetch():
    topic = OffsetFetchRequest.OffsetFetchRequestTopic
    return OffsetFetchRequest[7](group_id="wide-group", require_stable=False, topics=[
        topic(name=TOPIC, partition_indexes=list(range(COUNT)))])


def _delete_records():
    topic = DeleteRecordsRequest.DeleteRecordsTopic
    return DeleteRecordsRequest[2](timeout_ms=5000, topics=[topic(name=TOPIC, partitions=[
        topic.DeleteRecordsPartition(partition_index=i, offset=0) for i in range(COUNT)])])


def _entries(name, answer) -> int:
    if name == "Metadata":
        return len(answer.topics)
    partitions = [p for t in answer.topics for p in t.partitions]
    return len(partitions)


@pytest.mark.parametrize("name, build", [
    ("Metadata", _metadata), ("ListOffsets", _list_offsets), ("OffsetFetch", _offset_fetch),
    ("DeleteRecords", _delete_records)])
def test_a_request_naming_100k_entries_is_answered_in_bounded_memory(broker, name, build):
    request = build()
    before = rss_bytes(broker.pid)
    others_served: list[bool] = []

    def another_client():
        with KafkaConnection(broker.bootstrap, timeout_s=WAIT_S) as conn:
            others_served.append(conn.metadata([TOPIC]).topics[0].error_code == 0)

    with KafkaConnection(broker.bootstrap, timeout_s=WAIT_S) as conn:
        other = threading.Thread(target=another_client)
        other.start()
        answer = conn.request(request)
        other.join(WAIT_S)
    assert _entries(name, answer) == COUNT
    grown = rss_bytes(broker.pid) - before
    print(f"{name} x {COUNT}: broker RSS grew {grown / 1e6:.1f} MB")
    assert grown < RSS_GROWTH_BOUND, f"{name}: RSS grew {grown / 1e6:.0f} MB"
    assert others_served == [True]
    with KafkaConnection(broker.bootstrap) as conn:
        assert conn.metadata([TOPIC]).topics[0].error_code == 0

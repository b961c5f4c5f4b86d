"""KafkaLeaderEndpoint (broker/replication/leader_endpoint.py): the requests a follower
sends its leader (Fetch v11, OffsetForLeaderEpoch v3, replica_id = our node id), the
answers turned into plain values, and an unreachable leader as LeaderUnavailable.

The connection is a stub that records the request and returns a prepared response built
from kafka-python's classes (the hand-written FetchResponseIn has the same attributes).
"""
from __future__ import annotations

import asyncio
import socket

import pytest
from kafka.protocol.consumer import FetchRequest, FetchResponse, OffsetForLeaderEpochResponse

from broker.client.kafka_client import ConnectionFailed
from broker.replication.leader_endpoint import (
    EpochEndOffset,
    EpochQuery,
    FetchedData,
    FetchSettings,
    KafkaLeaderEndpoint,
    LeaderUnavailable,
    PartitionFetch,
    SessionFetch,
)
from protocol.hot_requests import FetchResponseIn

TopicResponse = FetchResponse.FetchableTopicResponse
PartitionData = TopicResponse.PartitionData
EpochTopic = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
EpochAnswer = EpochTopic.EpochEndOffset
SETTINGS = FetchSettings(wait_max_ms=500, response_max_bytes=10 << 20, request_timeout_s=5.0)


class StubConnection:
    def __init__(self, host, port, answer=None, failure=None):
        self.host, self.port = host, port
        self.answer, self.failure = answer, failure
        self.sent = []
        self.closed = 0

    async def request(self, message, response_class):
        self.sent.append((message, response_class))
        if self.failure is not None:
            raise self.failure
        return self.answer

    async def close(self):
        self.closed += 1


def endpoint_with(answer=None, failure=None, address=("leader-host", 9092)):
    addresses = {2: address}
    endpoint = KafkaLeaderEndpoint(3, 2, addresses.get, SETTINGS)
    endpoint.connection = StubConnection(*address, answer=answer, failure=failure)
    return endpoint, addresses


def partition_data(index, error=0, hw=-1, start=-1, records=b""):
    return PartitionData(partition_index=index, error_code=error, high_watermark=hw,
                         last_stable_offset=hw, log_start_offset=start,
                         aborted_transactions=[], preferred_read_replica=-1, records=records)


def test_fetch_sends_a_v11_follower_fetch_and_returns_each_partitions_answer():
    answer = FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=[
        TopicResponse(topic="a", partitions=[partition_data(0, hw=7, start=1, records=b"xyz"),
                                             partition_data(1, error=1, start=4)]),
        TopicResponse(topic="b", partitions=[partition_data(0, hw=2, start=0)])])
    endpoint, _ = endpoint_with(answer)
    result = asyncio.run(endpoint.fetch([
        PartitionFetch("a", 0, 5, 6, 1, 1000), PartitionFetch("a", 1, 5, 9, 0, 1000),
        PartitionFetch("b", 0, 2, 2, 0, 1000)]))

    sent, response_class = endpoint.connection.sent[0]
    assert response_class is FetchResponseIn and sent.API_VERSION == 11
    # What goes on the wire, read back by kafka-python's decoder:
    sent.with_header(correlation_id=1, client_id="raftwood-fetcher-3")
    request = FetchRequest.decode(sent.encode(header=True, framed=True)[4:], version=11,
                                  header=True)
    assert (request.replica_id, request.max_wait_ms, request.min_bytes, request.max_bytes,
            request.isolation_level, request.session_id, request.session_epoch) == \
        (3, 500, 1, 10 << 20, 0, 0, -1)
    assert [(t.topic, [(p.partition, p.current_leader_epoch, p.fetch_offset,
                        p.log_start_offset, p.partition_max_bytes) for p in t.partitions])
            for t in request.topics] == [("a", [(0, 5, 6, 1, 1000), (1, 5, 9, 0, 1000)]),
                                         ("b", [(0, 2, 2, 0, 1000)])]
    assert result.error_code == 0
    assert result.partitions == {("a", 0): FetchedData(0, 7, 1, b"xyz"),
                                 ("a", 1): FetchedData(1, -1, 4, b""),
                                 ("b", 0): FetchedData(0, 2, 0, b"")}


def test_a_fetch_in_a_session_carries_its_id_epoch_and_forgotten_partitions():
    answer = FetchResponse(throttle_time_ms=0, error_code=0, session_id=41, responses=[
        TopicResponse(topic="a", partitions=[partition_data(1, hw=9, start=0)])])
    endpoint, _ = endpoint_with(answer)
    result = asyncio.run(endpoint.fetch(
        [PartitionFetch("a", 1, 5, 9, 0, 1000)],
        SessionFetch(41, 7, [("a", 0), ("b", 3), ("b", 4)])))
    sent, _ = endpoint.connection.sent[0]
    sent.with_header(correlation_id=1, client_id="raftwood-fetcher-3")
    request = FetchRequest.decode(sent.encode(header=True, framed=True)[4:], version=11,
                                  header=True)
    assert (request.session_id, request.session_epoch) == (41, 7)
    assert [(f.topic, f.partitions) for f in request.forgotten_topics_data] == \
        [("a", [0]), ("b", [3, 4])]
    assert [(t.topic, [p.partition for p in t.partitions]) for t in request.topics] == \
        [("a", [1])]
    assert (result.session_id, list(result.partitions)) == (41, [("a", 1)])


def test_a_request_level_fetch_error_has_no_partitions():
    answer = FetchResponse(throttle_time_ms=0, error_code=70, session_id=0, responses=[])
    endpoint, _ = endpoint_with(answer)
    result = asyncio.run(endpoint.fetch([PartitionFetch("a", 0, 0, 0, 0, 1)]))
    assert (result.error_code, result.partitions) == (70, {})


def test_offsets_for_leader_epoch_sends_v3_and_returns_each_answer():
    answer = OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=[EpochTopic(
        topic="a", partitions=[EpochAnswer(error_code=0, partition=0, leader_epoch=4,
                                           end_offset=17),
                               EpochAnswer(error_code=74, partition=1, leader_epoch=-1,
                                           end_offset=-1)])])
    endpoint, _ = endpoint_with(answer)
    result = asyncio.run(endpoint.offsets_for_leader_epoch([
        EpochQuery("a", 0, 6, 5), EpochQuery("a", 1, 6, 3)]))

    request, response_class = endpoint.connection.sent[0]
    assert response_class is OffsetForLeaderEpochResponse and request.API_VERSION == 3
    assert request.replica_id == 3
    assert [(t.topic, [(p.partition, p.current_leader_epoch, p.leader_epoch)
                       for p in t.partitions]) for t in request.topics] == \
        [("a", [(0, 6, 5), (1, 6, 3)])]
    request.encode()
    assert result == {("a", 0): EpochEndOffset(0, 4, 17), ("a", 1): EpochEndOffset(74, -1, -1)}


def test_a_dropped_connection_is_leader_unavailable():
    endpoint, _ = endpoint_with(failure=ConnectionFailed("leader-host:9092: reset"))
    with pytest.raises(LeaderUnavailable, match="reset"):
        asyncio.run(endpoint.fetch([PartitionFetch("a", 0, 0, 0, 0, 1)]))


def test_an_unknown_address_is_not_ready_and_unavailable():
    endpoint, addresses = endpoint_with()
    assert endpoint.ready()
    del addresses[2]
    assert not endpoint.ready()
    with pytest.raises(LeaderUnavailable):
        asyncio.run(endpoint.offsets_for_leader_epoch([EpochQuery("a", 0, 0, 0)]))


def test_a_new_address_closes_the_old_connection_and_opens_one_there():
    with socket.socket() as probe:                       # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        free_port = probe.getsockname()[1]
    endpoint, addresses = endpoint_with()
    stub = endpoint.connection
    addresses[2] = ("127.0.0.1", free_port)
    with pytest.raises(LeaderUnavailable):
        asyncio.run(endpoint.fetch([PartitionFetch("a", 0, 0, 0, 0, 1)]))
    assert stub.closed == 1 and stub.sent == []
    assert (endpoint.connection.host, endpoint.connection.port) == ("127.0.0.1", free_port)
    asyncio.run(endpoint.close())

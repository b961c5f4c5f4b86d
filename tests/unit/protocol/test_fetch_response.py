"""The hand-written Fetch response encoder equals kafka-python's, byte for byte."""
import random

import pytest
from kafka.protocol.consumer import FetchResponse

from protocol.fetch_response import (
    MAX_VERSION,
    MIN_VERSION,
    AbortedTransaction,
    FetchPartitionResult,
    encode_fetch_response,
)

TopicResponse = FetchResponse.FetchableTopicResponse
PartitionData = TopicResponse.PartitionData


def _reference(version, correlation_id, throttle, error, session, topics) -> bytes:
    body = FetchResponse(
        throttle_time_ms=throttle, error_code=error, session_id=session,
        responses=[TopicResponse(topic=name, partitions=[PartitionData(
            partition_index=p.partition_index, error_code=p.error_code,
            high_watermark=p.high_watermark, last_stable_offset=p.last_stable_offset,
            log_start_offset=p.log_start_offset,
            aborted_transactions=[PartitionData.AbortedTransaction(
                producer_id=a.producer_id, first_offset=a.first_offset)
                for a in p.aborted_transactions],
            preferred_read_replica=p.preferred_read_replica, records=bytes(p.records))
            for p in partitions]) for name, partitions in topics])
    body.API_VERSION = version
    body.with_header(correlation_id=correlation_id)
    return bytes(body.encode(header=True, framed=True))


def _random_topics(rng: random.Random):
    topics = []
    for t in range(rng.randint(0, 4)):
        name = f"topic-{t}-" + "x" * rng.choice([0, 5, 130])  # 130: a 2-byte varint length
        partitions = []
        for index in range(rng.randint(0, 4)):
            size = rng.choice([0, 1, 100, 200])
            records = rng.randbytes(size)
            if size and rng.random() < 0.5:
                records = memoryview(records + b"tail")[:size]  # what the log returns
            partitions.append(FetchPartitionResult(
                index, rng.choice([0, 1, 6, 75]), rng.randint(-1, 2 ** 40),
                rng.randint(-1, 2 ** 40), rng.randint(-1, 2 ** 40), records,
                [AbortedTransaction(rng.randint(0, 2 ** 50), rng.randint(0, 2 ** 40))
                 for _ in range(rng.choice([0, 0, 2]))],
                rng.choice([-1, 2])))
        topics.append((name, partitions))
    return topics


@pytest.mark.parametrize("version", range(MIN_VERSION, MAX_VERSION + 1))
def test_encoding_equals_kafka_python_for_every_served_version(version):
    rng = random.Random(version)
    for _ in range(50):
        topics = _random_topics(rng)
        correlation_id, throttle = rng.randint(0, 2 ** 31 - 1), rng.choice([0, 10])
        error, session = rng.choice([0, 70]), rng.choice([0, 12345])
        got = b"".join(bytes(part) for part in encode_fetch_response(
            version, correlation_id, throttle_time_ms=throttle, error_code=error,
            session_id=session, topics=topics))
        assert got == _reference(version, correlation_id, throttle, error, session, topics)


def test_record_buffers_are_passed_through_not_copied():
    records = bytearray(b"r" * 1000)
    parts = encode_fetch_response(12, 1, topics=[("t", [FetchPartitionResult(
        0, 0, 5, 5, 0, records)])])
    assert any(part is records for part in parts)


@pytest.mark.parametrize("version", [3, 13])
def test_versions_outside_the_served_range_are_refused(version):
    with pytest.raises(ValueError):
        encode_fetch_response(version, 1)

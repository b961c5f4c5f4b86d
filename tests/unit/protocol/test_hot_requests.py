"""The hand-written Produce/Fetch decoders and the Produce response encoder agree with
kafka-python on every served version; any truncation is a CorruptRequest."""
import random

import pytest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from protocol import hot_requests
from protocol.errors import CorruptRequest
from protocol.fetch_response import FetchPartitionResult, encode_fetch_response
from protocol.messages import _decode_body, decode_request

TopicData = ProduceRequest.TopicProduceData
PartitionData = TopicData.PartitionProduceData
FetchTopic = FetchRequest.FetchTopic
FetchPartition = FetchTopic.FetchPartition
Forgotten = FetchRequest.ForgottenTopic


def _frame(message, version, correlation_id, client_id):
    message.API_VERSION = version
    message.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(message.encode(header=True, framed=False))


def _produce(rng):
    return ProduceRequest(
        transactional_id=rng.choice([None, "", "txn-1"]), acks=rng.choice([-1, 0, 1]),
        timeout_ms=rng.randint(0, 60_000),
        topic_data=[TopicData(name=f"topic-{t}" + "x" * rng.choice([0, 140]), partition_data=[
            PartitionData(index=rng.randint(0, 50),
                          records=rng.choice([None, b"", rng.randbytes(rng.randint(1, 300))]))
            for _ in range(rng.randint(0, 3))]) for t in range(rng.randint(0, 3))])


def _fetch(rng):
    return FetchRequest(
        replica_id=rng.choice([-1, 2]), max_wait_ms=500, min_bytes=rng.randint(0, 10),
        max_bytes=rng.randint(0, 2 ** 31 - 1), isolation_level=rng.choice([0, 1]),
        session_id=rng.choice([0, 77]), session_epoch=rng.choice([-1, 0, 5]),
        topics=[FetchTopic(topic=f"t{t}", partitions=[FetchPartition(
            partition=p, current_leader_epoch=rng.randint(-1, 9),
            fetch_offset=rng.randint(0, 2 ** 40), last_fetched_epoch=rng.randint(-1, 9),
            log_start_offset=rng.randint(-1, 99), partition_max_bytes=1 << 20)
            for p in range(rng.randint(0, 4))]) for t in range(rng.randint(0, 3))],
        forgotten_topics_data=[Forgotten(topic="gone", partitions=[1, 2])]
        if rng.random() < 0.3 else [],
        rack_id=rng.choice(["", "rack-a"]))


def _same(ours, theirs, fields):
    for name in fields:
        a, b = getattr(ours, name), getattr(theirs, name)
        if isinstance(a, memoryview):
            a = bytes(a)
        assert a == b, name


@pytest.mark.parametrize("version", range(3, 13))
def test_produce_decoding_equals_kafka_python(version):
    rng = random.Random(version)
    for _ in range(40):
        frame = _frame(_produce(rng), version, rng.randint(0, 2 ** 31 - 1), "client-x")
        ours, end = hot_requests.decode_produce(frame, version)
        theirs, their_end = _decode_body(ProduceRequest, frame, version)
        assert end == their_end == len(frame)
        _same(ours.header, theirs.header,
              ["request_api_key", "request_api_version", "correlation_id", "client_id"])
        _same(ours, theirs, ["transactional_id", "acks", "timeout_ms"])
        assert ours.expect_response() == theirs.expect_response()
        assert len(ours.topic_data) == len(theirs.topic_data)
        for a, b in zip(ours.topic_data, theirs.topic_data):
            _same(a, b, ["name"])
            assert len(a.partition_data) == len(b.partition_data)
            for pa, pb in zip(a.partition_data, b.partition_data):
                _same(pa, pb, ["index", "records"])


@pytest.mark.parametrize("version", range(4, 13))
def test_fetch_decoding_equals_kafka_python(version):
    rng = random.Random(100 + version)
    for _ in range(40):
        frame = _frame(_fetch(rng), version, 9, None)
        ours, end = hot_requests.decode_fetch(frame, version)
        theirs, their_end = _decode_body(FetchRequest, frame, version)
        assert end == their_end == len(frame)
        fields = ["replica_id", "max_wait_ms", "min_bytes", "max_bytes", "isolation_level"]
        if version >= 7:
            fields += ["session_id", "session_epoch"]
        if version >= 11:
            fields += ["rack_id"]
        _same(ours, theirs, fields)
        assert ours.header.client_id == theirs.header.client_id
        partition_fields = ["partition", "fetch_offset", "partition_max_bytes"]
        partition_fields += ["current_leader_epoch"] if version >= 9 else []
        partition_fields += ["last_fetched_epoch"] if version >= 12 else []
        partition_fields += ["log_start_offset"] if version >= 5 else []
        assert [t.topic for t in ours.topics] == [t.topic for t in theirs.topics]
        for a, b in zip(ours.topics, theirs.topics):
            assert len(a.partitions) == len(b.partitions)
            for pa, pb in zip(a.partitions, b.partitions):
                _same(pa, pb, partition_fields)
        if version >= 7:
            assert [(f.topic, list(f.partitions)) for f in ours.forgotten_topics_data] == \
                [(f.topic, list(f.partitions)) for f in theirs.forgotten_topics_data]


@pytest.mark.parametrize("make, version", [(_produce, 3), (_produce, 9), (_fetch, 4),
                                           (_fetch, 12)])
def test_every_truncation_is_a_corrupt_request(make, version):
    rng = random.Random(5)
    frame = b""
    while len(frame) < 120:  # one with topics and partitions, so every field gets cut
        frame = _frame(make(rng), version, 1, "c")
    decode_request(frame)  # whole: fine
    for cut in range(8, len(frame)):
        with pytest.raises(CorruptRequest):
            decode_request(frame[:cut])


@pytest.mark.parametrize("version", range(3, 13))
def test_produce_response_encoding_equals_kafka_python(version):
    rng = random.Random(200 + version)
    Topic = ProduceResponse.TopicProduceResponse
    Partition = Topic.PartitionProduceResponse
    for _ in range(30):
        topics = [(f"t{t}", [(rng.randint(0, 9), rng.choice([0, 6, 19]), rng.randint(-1, 2 ** 40),
                              -1, rng.randint(-1, 99), rng.choice([None, "NOT_LEADER"]))
                             for _ in range(rng.randint(0, 3))]) for t in range(rng.randint(0, 3))]
        ours = hot_requests.encode_produce_response(version, 42, topics, throttle_time_ms=3)
        body = ProduceResponse(responses=[Topic(name=name, partition_responses=[Partition(
            index=i, error_code=e, base_offset=b, log_append_time_ms=t, log_start_offset=s,
            record_errors=[], error_message=m) for i, e, b, t, s, m in parts])
            for name, parts in topics], throttle_time_ms=3)
        body.API_VERSION = version
        body.with_header(correlation_id=42)
        assert ours == bytes(body.encode(header=True, framed=True))


@pytest.mark.parametrize("version", range(4, 13))
def test_follower_fetch_request_encoding_equals_kafka_python(version):
    rng = random.Random(300 + version)
    for _ in range(30):
        entries = [(f"t{rng.randint(0, 2)}", rng.randint(0, 9), rng.randint(-1, 9),
                    rng.randint(0, 2 ** 40), rng.randint(-1, 99), 1 << 20)
                   for _ in range(rng.randint(0, 5))]
        session_id, session_epoch = rng.choice([(0, -1), (0, 0),
                                                (rng.randint(1, 2 ** 31 - 1),
                                                 rng.randint(1, 2 ** 31 - 1))])
        forgotten = [(f"f{rng.randint(0, 2)}", rng.randint(0, 9))
                     for _ in range(rng.randint(0, 4))]
        ours = hot_requests.FetchRequestOut(version, 2, 500, 1, 10 << 20, entries,
                                            session_id, session_epoch, forgotten)
        ours.with_header(correlation_id=17, client_id="raftwood-fetcher-2")
        forgotten_by_topic = {}
        for topic, partition in forgotten:
            forgotten_by_topic.setdefault(topic, []).append(partition)
        by_topic = {}
        for topic, partition, epoch, offset, start, max_bytes in entries:
            by_topic.setdefault(topic, []).append(FetchPartition(
                partition=partition, current_leader_epoch=epoch, fetch_offset=offset,
                last_fetched_epoch=-1, log_start_offset=start, partition_max_bytes=max_bytes))
        theirs = FetchRequest[version](
            replica_id=2, max_wait_ms=500, min_bytes=1, max_bytes=10 << 20, isolation_level=0,
            session_id=session_id, session_epoch=session_epoch, rack_id="",
            forgotten_topics_data=[FetchRequest[version].ForgottenTopic(topic=t, partitions=ps)
                                   for t, ps in forgotten_by_topic.items()],
            topics=[FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()])
        theirs.with_header(correlation_id=17, client_id="raftwood-fetcher-2")
        assert ours.encode(header=True, framed=True) == \
            bytes(theirs.encode(header=True, framed=True))


@pytest.mark.parametrize("version", range(4, 13))
def test_follower_fetch_response_decoding_equals_kafka_python(version):
    from kafka.protocol.consumer import FetchResponse
    Topic = FetchResponse.FetchableTopicResponse
    Data = Topic.PartitionData
    rng = random.Random(400 + version)
    for _ in range(30):
        body = FetchResponse(
            throttle_time_ms=rng.randint(0, 5), error_code=rng.choice([0, 70]),
            session_id=rng.choice([0, 9]), responses=[Topic(topic=f"t{t}", partitions=[Data(
                partition_index=p, error_code=rng.choice([0, 1, 6]),
                high_watermark=rng.randint(-1, 2 ** 40), last_stable_offset=rng.randint(-1, 9),
                log_start_offset=rng.randint(-1, 9),
                aborted_transactions=[Data.AbortedTransaction(producer_id=5, first_offset=6)]
                if rng.random() < 0.3 else [],
                preferred_read_replica=rng.choice([-1, 3]),
                records=rng.choice([b"", rng.randbytes(rng.randint(1, 200))]))
                for p in range(rng.randint(0, 3))]) for t in range(rng.randint(0, 3))])
        body.API_VERSION = version
        body.with_header(correlation_id=23)
        frame = bytes(body.encode(header=True, framed=False))
        ours = hot_requests.FetchResponseIn.decode(frame, version=version, header=True)
        theirs = FetchResponse.decode(frame, version=version, header=True)
        assert ours.header.correlation_id == theirs.header.correlation_id == 23
        if version >= 7:
            assert (ours.error_code, ours.session_id) == (theirs.error_code, theirs.session_id)
        assert [t.topic for t in ours.responses] == [t.topic for t in theirs.responses]
        for a, b in zip(ours.responses, theirs.responses):
            for pa, pb in zip(a.partitions, b.partitions, strict=True):
                fields = ["partition_index", "error_code", "high_watermark",
                          "last_stable_offset"] + (["log_start_offset"] if version >= 5 else [])
                _same(pa, pb, fields + (["preferred_read_replica"] if version >= 11 else []))
                assert bytes(pa.records) == (pb.records or b"")
                assert pa.aborted_transactions == [
                    (t.producer_id, t.first_offset) for t in pb.aborted_transactions or []]


def test_a_truncated_fetch_response_does_not_decode():
    parts = encode_fetch_response(11, 5, topics=[("t", [
        FetchPartitionResult(0, 0, 9, 9, 0, b"r" * 50)])])
    frame = b"".join(bytes(p) for p in parts)[4:]
    hot_requests.FetchResponseIn.decode(frame, version=11)
    for cut in range(len(frame)):
        with pytest.raises(hot_requests.HotDecodeError):
            hot_requests.FetchResponseIn.decode(frame[:cut], version=11)


@pytest.mark.parametrize("version", range(4, 13))
def test_damaged_frames_raise_only_hot_decode_errors(version):
    """Fields are read in fixed-size runs: a damaged length, count or varint anywhere
    still ends in HotDecodeError (CorruptRequest), never struct.error or IndexError."""
    rng = random.Random(900 + version)
    parts = encode_fetch_response(version, 5, topics=[("t", [
        FetchPartitionResult(p, 0, 9, 9, 0, b"r" * 20) for p in range(2)])])
    frames = [(hot_requests.decode_produce, _frame(_produce(rng), version, 1, "c")),
              (hot_requests.decode_fetch, _frame(_fetch(rng), version, 1, "c")),
              (hot_requests.FetchResponseIn.decode, b"".join(bytes(p) for p in parts)[4:])]
    for decode, frame in frames:
        for _ in range(300):
            damaged = bytearray(frame)
            for _ in range(rng.randint(1, 3)):
                damaged[rng.randrange(len(damaged))] = rng.choice([0, 0x7F, 0x80, 0xFF])
            try:
                decode(bytes(damaged), version)
            except hot_requests.HotDecodeError:
                pass

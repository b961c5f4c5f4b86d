"""ConsumerGroupHeartbeat and ConsumerGroupDescribe, written by hand: the bytes a
librdkafka consumer sends (assembled here field by field from Kafka's schema, not by our
encoder) decode, and every message round-trips at every served version."""
from __future__ import annotations

import struct
import uuid

import pytest

from protocol.consumer_group_messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DescribedGroup,
    DescribedMember,
    DescribedTopicPartitions,
    FlexDecodeError,
    TopicPartitions,
)
from protocol.errors import CorruptRequest
from protocol.messages import decode_request, encode_response

TOPIC_ID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")


def compact(text: str) -> bytes:
    return bytes([len(text) + 1]) + text.encode()


def librdkafka_join(version: int) -> bytes:
    """A first heartbeat as rd_kafka_ConsumerGroupHeartbeatRequest writes it."""
    header = struct.pack(">hhih", 68, version, 9, 7) + b"rdkafka" + b"\x00"
    body = (compact("g848") + compact("rebeRX1FTGWnehkWbYP3ZQ") + struct.pack(">i", 0)
            + b"\x00" + b"\x00" + struct.pack(">i", 300000)
            + b"\x02" + compact("t6"))
    if version >= 1:
        body += compact("")  # librdkafka sends an empty regex, not a null one
    body += b"\x00" + b"\x01" + b"\x00"  # no assignor, an empty owned list, no tags
    return header + body


@pytest.mark.parametrize("version", [0, 1])
def test_a_librdkafka_join_decodes(version):
    frame = librdkafka_join(version)
    request = decode_request(frame)
    body = request.body
    assert (request.api_key, request.api_version, request.correlation_id, request.client_id) \
        == (68, version, 9, "rdkafka")
    assert (body.group_id, body.member_id, body.member_epoch) == \
        ("g848", "rebeRX1FTGWnehkWbYP3ZQ", 0)
    assert (body.instance_id, body.rack_id, body.rebalance_timeout_ms) == (None, None, 300000)
    assert body.subscribed_topic_names == ["t6"]
    assert body.subscribed_topic_regex == ("" if version >= 1 else None)
    assert (body.server_assignor, body.topic_partitions) == (None, [])
    for cut in range(len(frame)):
        with pytest.raises(CorruptRequest):
            decode_request(frame[:cut])


@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_request_round_trips(version):
    message = ConsumerGroupHeartbeatRequest[version](
        group_id="g", member_id="m", member_epoch=5, instance_id="i", rack_id="r",
        rebalance_timeout_ms=-1, subscribed_topic_names=None,
        subscribed_topic_regex="^t.*" if version >= 1 else None, server_assignor="range",
        topic_partitions=[TopicPartitions(TOPIC_ID, [3, 1])])
    message.with_header(correlation_id=3, client_id="c")
    decoded = decode_request(message.encode(header=True, framed=True)[4:]).body
    assert decoded == message


def test_heartbeat_response_with_and_without_assignment():
    request = decode_request(librdkafka_join(1))
    for assignment in (None, [], [TopicPartitions(TOPIC_ID, [0, 1])]):
        response = ConsumerGroupHeartbeatResponse(member_id="m", member_epoch=2,
                                                  heartbeat_interval_ms=5000,
                                                  assignment=assignment)
        data = encode_response(request, response)
        assert struct.unpack(">ii", data[:8]) == (len(data) - 4, 9)
        assert data[8] == 0  # response header v1: an empty tag buffer
        decoded = ConsumerGroupHeartbeatResponse.decode(data[4:], 1, header=True)
        assert decoded.header.correlation_id == 9
        assert decoded.assignment == assignment
    # A null assignment is the nullable struct's -1 marker before the final tag buffer.
    assert ConsumerGroupHeartbeatResponse(member_epoch=1).encode(version=0)[-2:] == b"\xff\x00"


def test_describe_round_trips():
    request = ConsumerGroupDescribeRequest[0](group_ids=["g"], include_authorized_operations=True)
    request.with_header(correlation_id=4, client_id=None)
    decoded = decode_request(request.encode(header=True, framed=True)[4:])
    assert (decoded.client_id, decoded.body) == (None, request)
    parts = [DescribedTopicPartitions(TOPIC_ID, "t", [0, 2])]
    response = ConsumerGroupDescribeResponse(groups=[DescribedGroup(
        0, None, "g", "Stable", 3, 3, "uniform", [DescribedMember(
            "m", None, None, 3, "c", "/h", ["t"], None, parts, parts)])])
    assert ConsumerGroupDescribeResponse.decode(response.encode(version=0), 0) == response


def test_garbage_is_a_decode_error():
    with pytest.raises(FlexDecodeError):
        ConsumerGroupHeartbeatResponse.decode(b"\x00\x00\x00", 0)

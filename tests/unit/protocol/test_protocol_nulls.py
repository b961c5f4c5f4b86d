"""A null where Kafka's schema forbids it is refused at decode time (CorruptRequest), in
every served API and version; a null the schema allows decodes as None."""
from __future__ import annotations

import pytest

from protocol.errors import CorruptRequest
from protocol.messages import decode_request
from protocol.nulls import first_null
from tests.hostile_frames import null_cases

# kafka-python writes a null Metadata v0 topic list as an empty one (v0 has no null).
ENCODER_REWRITES = {("Metadata", 0, ("topics",))}
CASES = null_cases()


def test_the_sweep_covers_every_served_api_with_a_schema():
    assert len({(case.api, case.version) for case in CASES}) > 150
    assert {"Produce", "Fetch", "Metadata", "FindCoordinator", "SaslHandshake",
            "DescribeTopicPartitions"} <= {case.api for case in CASES}


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.label)
def test_a_null_decodes_only_where_the_schema_allows_it(case):
    frame = case.frame[4:]
    if case.nullable or (case.api, case.version, case.path) in ENCODER_REWRITES:
        request = decode_request(frame)
        assert first_null(request.spec.request_class, case.version, request.body) is None
    else:
        with pytest.raises(CorruptRequest, match="null"):
            decode_request(frame)


@pytest.mark.parametrize("hex_frame, field", [
    ("0000001a00110000000000010009667a2d636c69656e748000504c41494e", "mechanism"),
    ("0000000e000a0000000000050002667affff", "key"),
])
def test_the_issue_frames_name_the_null_field(hex_frame, field):
    with pytest.raises(CorruptRequest, match=f"non-nullable field {field} "):
        decode_request(bytes.fromhex(hex_frame)[4:])


def test_a_nested_null_is_named_by_its_path():
    from kafka.protocol.metadata import MetadataRequest
    topic = MetadataRequest.MetadataRequestTopic
    message = MetadataRequest[4](topics=[topic(name="a"), topic(name=None)])
    message.with_header(correlation_id=1, client_id="t")
    with pytest.raises(CorruptRequest, match=r"topics\[1\]\.name"):
        decode_request(bytes(message.encode(header=True, framed=True))[4:])

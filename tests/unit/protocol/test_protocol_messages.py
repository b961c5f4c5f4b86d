"""Requests encoded by real clients' code decode through our registry, and our
responses decode through theirs.

The bytes under test are produced by kafka-python 3.x's message classes and by
aiokafka's own request structs (a separate hand-written codec), never by
protocol/: a test that only round-trips our own encoder through our own decoder
would pass with both sides wrong in the same way.
"""
from __future__ import annotations

import io
import struct
import uuid

import pytest
from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    AlterConfigsRequest,
    AlterConfigsResponse,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    CreateAclsRequest,
    CreateAclsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
    UpdateFeaturesRequest,
    UpdateFeaturesResponse,
)
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from kafka.record.default_records import DefaultRecordBatchBuilder

from protocol.consumer_group_messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from protocol.consumer_group_messages import DescribedGroup as CgDescribedGroup
from protocol.consumer_group_messages import TopicPartitions as CgTopicPartitions
from protocol.errors import ErrorCode, UnsupportedVersion
from protocol.messages import (
    SERVED,
    api_versions_body,
    decode_request,
    encode_response,
    unsupported_api_versions_response,
)
from protocol.raft_voter_messages import (
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
    VoterListener,
)
from protocol.share_fetch_messages import (
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
)
from protocol.share_group_messages import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from protocol.share_state_messages import (
    ReadShareGroupStateRequest,
    ReadShareGroupStateResponse,
    ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse,
    WriteShareGroupStateRequest,
    WriteShareGroupStateResponse,
)
from protocol.telemetry_messages import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)

# What we serve, written out independently of protocol/messages.py (Produce and Fetch capped
# at v12, below the topic-id versions; Produce advertised from v0 for old librdkafka).
# Inclusive ranges.
EXPECTED_RANGES = {
    0: (0, 12),   # Produce
    1: (4, 12),   # Fetch
    2: (1, 9),    # ListOffsets
    3: (0, 12),   # Metadata
    18: (0, 4),   # ApiVersions
    19: (2, 7),   # CreateTopics
    20: (1, 6),   # DeleteTopics
    22: (0, 5),   # InitProducerId
    23: (2, 4),   # OffsetForLeaderEpoch
    32: (1, 4),   # DescribeConfigs
    33: (0, 2),   # AlterConfigs
    44: (0, 1),   # IncrementalAlterConfigs
    # Consumer groups (issue 7): OffsetCommit/OffsetFetch capped at v9 (v10: topic ids).
    8: (2, 9),    # OffsetCommit
    9: (1, 9),    # OffsetFetch
    10: (0, 4),   # FindCoordinator
    11: (0, 9),   # JoinGroup
    12: (0, 4),   # Heartbeat
    13: (0, 5),   # LeaveGroup
    14: (0, 5),   # SyncGroup
    15: (0, 5),   # DescribeGroups
    16: (0, 5),   # ListGroups
    42: (0, 2),   # DeleteGroups
    # Security (issue 13): SaslHandshake v0 (bare tokens follow) and v1; KIP-554 at v0.
    17: (0, 1),   # SaslHandshake
    36: (0, 2),   # SaslAuthenticate
    50: (0, 0),   # DescribeUserScramCredentials
    51: (0, 0),   # AlterUserScramCredentials
    # ACLs (issue 13) from v1, where the pattern type starts (Kafka 4 dropped v0 too).
    29: (1, 3),   # DescribeAcls
    30: (1, 3),   # CreateAcls
    31: (1, 3),   # DeleteAcls
    # Operating a cluster (issue 16).
    37: (0, 3),   # CreatePartitions
    21: (0, 2),   # DeleteRecords
    60: (0, 2),   # DescribeCluster
    35: (1, 4),   # DescribeLogDirs (v0 is gone from Kafka 4 and kafka-python)
    43: (0, 2),   # ElectLeaders
    75: (0, 0),   # DescribeTopicPartitions
    # Transactions (issue 15; EndTxn v5, WriteTxnMarkers v2: KIP-890's version 2).
    24: (0, 5),   # AddPartitionsToTxn
    25: (0, 3),   # AddOffsetsToTxn
    26: (0, 5),   # EndTxn
    27: (1, 2),   # WriteTxnMarkers (v0 is gone from Kafka 4 and kafka-python)
    28: (0, 5),   # TxnOffsetCommit
    65: (0, 0),   # DescribeTransactions
    66: (0, 1),   # ListTransactions
    # KIP-848 consumer groups (issue 14), codecs by hand (no kafka-python classes).
    68: (0, 1),   # ConsumerGroupHeartbeat
    69: (0, 0),   # ConsumerGroupDescribe
    # KIP-932 share groups, group side: v1 only (v0 was Kafka 4.0's early access).
    76: (1, 1),   # ShareGroupHeartbeat
    77: (1, 1),   # ShareGroupDescribe
    90: (0, 0),   # DescribeShareGroupOffsets (v1 adds KIP-1226's lag, after Kafka 4.2)
    91: (0, 0),   # AlterShareGroupOffsets
    92: (0, 0),   # DeleteShareGroupOffsets
    # KIP-932 share groups, partition side: Kafka 4.2's v1-2; the inter-broker state calls.
    78: (1, 2),   # ShareFetch
    79: (1, 2),   # ShareAcknowledge
    84: (0, 0),   # ReadShareGroupState
    85: (0, 0),   # WriteShareGroupState
    87: (0, 1),   # ReadShareGroupStateSummary
    61: (0, 0),   # DescribeProducers
    45: (0, 1),   # AlterPartitionReassignments
    46: (0, 0),   # ListPartitionReassignments
    80: (0, 0),   # AddRaftVoter
    81: (0, 0),   # RemoveRaftVoter
    55: (0, 1),   # DescribeQuorum (v2: KIP-853's directory ids and endpoints)
    57: (0, 2),   # UpdateFeatures (KIP-584)
    47: (0, 0),   # OffsetDelete (KIP-496)
    48: (0, 1),   # DescribeClientQuotas (KIP-546)
    49: (0, 1),   # AlterClientQuotas
    71: (0, 0),   # GetTelemetrySubscriptions (KIP-714)
    72: (0, 0),   # PushTelemetry
    74: (0, 1),   # ListConfigResources (v0: KIP-714's ListClientMetricsResources)
}
# First flexible version of each API, from Kafka's JSON schemas ("flexibleVersions").
# Flexible requests use request header v2, flexible responses response header v1 --
# except ApiVersions, whose response header is always v0.
FIRST_FLEXIBLE = {0: 9, 1: 12, 2: 6, 3: 9, 18: 3, 19: 5, 20: 4, 22: 2, 23: 4, 32: 4, 33: 2, 44: 1,
                  8: 8, 9: 6, 10: 3, 11: 6, 12: 4, 13: 4, 14: 4, 15: 5, 16: 3, 42: 2,
                  17: 99, 36: 2, 50: 0, 51: 0,  # SaslHandshake is never flexible
                  29: 2, 30: 2, 31: 2, 37: 2, 21: 2, 60: 0, 35: 2, 43: 2, 75: 0,
                  24: 3, 25: 3, 26: 3, 27: 1, 28: 3, 65: 0, 66: 0, 61: 0, 68: 0, 69: 0,
                  45: 0, 46: 0, 80: 0, 81: 0, 55: 0, 76: 1, 77: 1, 90: 0, 91: 0, 92: 0,
                  57: 0, 47: 99, 48: 1, 49: 1,  # OffsetDelete is never flexible
                  78: 0, 79: 0, 84: 0, 85: 0, 87: 0, 71: 0, 72: 0, 74: 0}

CLIENT_ID = "raftwood-unit"
_OffsetsGroup = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseGroup
TOPIC_ID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")


def record_batch() -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    for i in range(3):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=b"v%d" % i,
                       headers=[])
    return bytes(builder.build())


BATCH = record_batch()


def is_flexible(api_key: int, version: int) -> bool:
    return version >= FIRST_FLEXIBLE[api_key]


def request_header_size(api_key: int, version: int, client_id: str | None) -> int:
    """api_key, api_version, correlation_id, nullable client_id (+ empty tag buffer in v2)."""
    client_bytes = 0 if client_id is None else len(client_id.encode())
    return 8 + 2 + client_bytes + (1 if is_flexible(api_key, version) else 0)


def kafka_python_frame(message, correlation_id: int, client_id: str | None = CLIENT_ID) -> bytes:
    message.with_header(correlation_id=correlation_id, client_id=client_id)
    data = bytes(message.encode(header=True, framed=True))
    assert struct.unpack(">i", data[:4])[0] == len(data) - 4
    return data[4:]


def assert_header(req, api_key, version, correlation_id, client_id=CLIENT_ID):
    assert req.api_key == api_key
    assert req.api_version == version
    assert req.correlation_id == correlation_id
    assert req.client_id == client_id
    assert req.spec is SERVED[api_key]


def assert_body_reencodes_to_the_same_bytes(req, payload: bytes):
    """The decoded body, encoded again at its version, is exactly the bytes after the header."""
    header_size = request_header_size(req.api_key, req.api_version, req.client_id)
    body = req.body
    if hasattr(body, "to_message"):  # Produce/Fetch: protocol/hot_requests.py's bodies
        body = body.to_message()
    assert bytes(body.encode(version=req.api_version)) == payload[header_size:]


def versions(api_key: int) -> list[int]:
    low, high = EXPECTED_RANGES[api_key]
    return list(range(low, high + 1))


# --------------------------------------------------------------------------- the registry

def test_served_ranges_are_exactly_the_designed_ones():
    assert {key: (spec.min_version, spec.max_version) for key, spec in SERVED.items()} \
        == EXPECTED_RANGES


def test_every_served_range_lies_within_what_kafka_python_can_encode():
    for spec in SERVED.values():
        for cls in (spec.request_class, spec.response_class):
            assert spec.max_version <= cls.max_version, (spec.name, cls.max_version)
        assert spec.request_class.API_KEY == spec.response_class.API_KEY == spec.api_key


def test_produce_is_advertised_from_v0_but_refused_below_v3():
    spec = SERVED[0]
    assert (spec.min_version, spec.refused_below) == (0, 3)
    assert all(s.refused_below == 0 for key, s in SERVED.items() if key != 0)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_refused_produce_versions_still_decode_so_the_handler_can_answer_per_partition(version):
    message = ProduceRequest[version](acks=1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name="orders", partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=b"old")])])
    req = decode_request(kafka_python_frame(message, 77))
    assert req.api_version < req.spec.refused_below
    assert req.body.topic_data[0].partition_data[0].index == 0


# --------------------------------------------------------------------------- kafka-python requests

@pytest.mark.parametrize("version", versions(18))
def test_kafka_python_api_versions_request_round_trips(version):
    message = ApiVersionsRequest[version](client_software_name="kafka-python",
                                          client_software_version="3.0.12")
    payload = kafka_python_frame(message, 1000 + version)
    req = decode_request(payload)
    assert_header(req, 18, version, 1000 + version)
    if version >= 3:
        assert req.body.client_software_name == "kafka-python"
        assert req.body.client_software_version == "3.0.12"
    assert_body_reencodes_to_the_same_bytes(req, payload)


@pytest.mark.parametrize("version", versions(3))
def test_kafka_python_metadata_request_round_trips(version):
    topics = [MetadataRequest.MetadataRequestTopic(name=name)
              for name in ("orders", "événements")]
    kwargs = {"topics": topics}
    if version >= 4:
        kwargs["allow_auto_topic_creation"] = False
    if version >= 8:
        kwargs["include_topic_authorized_operations"] = True
    payload = kafka_python_frame(MetadataRequest[version](**kwargs), 2**31 - 1)
    req = decode_request(payload)
    assert_header(req, 3, version, 2**31 - 1)
    assert [t.name for t in req.body.topics] == ["orders", "événements"]
    if version >= 4:
        assert req.body.allow_auto_topic_creation is False
    if version >= 8:
        assert req.body.include_topic_authorized_operations is True
    assert_body_reencodes_to_the_same_bytes(req, payload)


@pytest.mark.parametrize("version", range(1, 13))
def test_kafka_python_metadata_request_for_all_topics_decodes_as_null_topics(version):
    req = decode_request(kafka_python_frame(MetadataRequest[version](topics=None), 5))
    assert req.body.topics is None


@pytest.mark.parametrize("version", versions(0)[3:])
def test_kafka_python_produce_request_round_trips_with_the_record_batch_intact(version):
    P = ProduceRequest
    message = P[version](transactional_id=None, acks=-1, timeout_ms=30_000, topic_data=[
        P.TopicProduceData(name="orders", partition_data=[
            P.TopicProduceData.PartitionProduceData(index=2, records=BATCH)])])
    payload = kafka_python_frame(message, 40 + version)
    req = decode_request(payload)
    assert_header(req, 0, version, 40 + version)
    assert req.body.transactional_id is None
    assert (req.body.acks, req.body.timeout_ms) == (-1, 30_000)
    (topic,) = req.body.topic_data
    (partition,) = topic.partition_data
    assert (topic.name, partition.index) == ("orders", 2)
    assert bytes(partition.records) == BATCH
    assert req.expects_response()
    assert_body_reencodes_to_the_same_bytes(req, payload)


def test_produce_with_acks_zero_expects_no_response():
    P = ProduceRequest
    message = P[9](transactional_id="tx-1", acks=0, timeout_ms=1, topic_data=[])
    req = decode_request(kafka_python_frame(message, 9))
    assert req.body.transactional_id == "tx-1"
    assert not req.expects_response()


@pytest.mark.parametrize("version", versions(1))
def test_kafka_python_fetch_request_round_trips(version):
    F = FetchRequest
    partition = F.FetchTopic.FetchPartition(partition=3, current_leader_epoch=7, fetch_offset=1234,
                                            last_fetched_epoch=6, log_start_offset=-1,
                                            partition_max_bytes=1 << 20)
    message = F[version](replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=50 << 20,
                         isolation_level=1, session_id=0, session_epoch=-1,
                         topics=[F.FetchTopic(topic="orders", partitions=[partition])],
                         forgotten_topics_data=[], rack_id="rack-a")
    payload = kafka_python_frame(message, 600 + version)
    req = decode_request(payload)
    assert_header(req, 1, version, 600 + version)
    body = req.body
    assert (body.replica_id, body.max_wait_ms, body.min_bytes) == (-1, 500, 1)
    assert (body.max_bytes, body.isolation_level) == (50 << 20, 1)
    (topic,) = body.topics
    (got,) = topic.partitions
    assert (topic.topic, got.partition, got.fetch_offset, got.partition_max_bytes) \
        == ("orders", 3, 1234, 1 << 20)
    if version >= 7:
        assert (body.session_id, body.session_epoch) == (0, -1)
    if version >= 9:
        assert got.current_leader_epoch == 7
    if version >= 11:
        assert body.rack_id == "rack-a"
    if version >= 12:
        assert got.last_fetched_epoch == 6
    assert_body_reencodes_to_the_same_bytes(req, payload)


@pytest.mark.parametrize("version", versions(2))
def test_kafka_python_list_offsets_request_round_trips(version):
    L = ListOffsetsRequest
    partition = L.ListOffsetsTopic.ListOffsetsPartition(partition_index=1, current_leader_epoch=4,
                                                        timestamp=-2)
    message = L[version](replica_id=-1, isolation_level=1,
                         topics=[L.ListOffsetsTopic(name="orders", partitions=[partition])])
    payload = kafka_python_frame(message, 70 + version)
    req = decode_request(payload)
    assert_header(req, 2, version, 70 + version)
    (topic,) = req.body.topics
    (got,) = topic.partitions
    assert (req.body.replica_id, topic.name, got.partition_index, got.timestamp) \
        == (-1, "orders", 1, -2)
    if version >= 2:
        assert req.body.isolation_level == 1
    if version >= 4:
        assert got.current_leader_epoch == 4
    assert_body_reencodes_to_the_same_bytes(req, payload)


@pytest.mark.parametrize("version", versions(19))
def test_kafka_python_create_topics_request_round_trips(version):
    C = CreateTopicsRequest.CreatableTopic
    topic = C(name="orders", num_partitions=3, replication_factor=2, assignments=[],
              configs=[C.CreatableTopicConfig(name="cleanup.policy", value="delete"),
                       C.CreatableTopicConfig(name="retention.ms", value=None)])
    manual = C(name="manual", num_partitions=-1, replication_factor=-1, configs=[],
               assignments=[C.CreatableReplicaAssignment(partition_index=0, broker_ids=[1, 2])])
    message = CreateTopicsRequest[version](topics=[topic, manual], timeout_ms=30_000,
                                           validate_only=True)
    payload = kafka_python_frame(message, 19)
    req = decode_request(payload)
    assert_header(req, 19, version, 19)
    got, got_manual = req.body.topics
    assert (got.name, got.num_partitions, got.replication_factor) == ("orders", 3, 2)
    assert [(c.name, c.value) for c in got.configs] \
        == [("cleanup.policy", "delete"), ("retention.ms", None)]
    assert [(a.partition_index, a.broker_ids) for a in got_manual.assignments] == [(0, [1, 2])]
    assert (req.body.timeout_ms, req.body.validate_only) == (30_000, True)
    assert_body_reencodes_to_the_same_bytes(req, payload)


@pytest.mark.parametrize("version", versions(20))
def test_kafka_python_delete_topics_request_round_trips(version):
    D = DeleteTopicsRequest
    if version >= 6:
        message = D[version](timeout_ms=15_000, topics=[
            D.DeleteTopicState(name="orders", topic_id=uuid.UUID(int=0)),
            D.DeleteTopicState(name=None, topic_id=TOPIC_ID)])
    else:
        message = D[version](timeout_ms=15_000, topic_names=["orders", "events"])
    payload = kafka_python_frame(message, 20)
    req = decode_request(payload)
    assert_header(req, 20, version, 20)
    assert req.body.timeout_ms == 15_000
    if version >= 6:
        assert [t.name for t in req.body.topics] == ["orders", None]
        assert req.body.topics[1].topic_id == TOPIC_ID
    else:
        assert req.body.topic_names == ["orders", "events"]
    assert_body_reencodes_to_the_same_bytes(req, payload)


@pytest.mark.parametrize("version", versions(23))
def test_kafka_python_offset_for_leader_epoch_request_round_trips(version):
    Topic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    message = OffsetForLeaderEpochRequest[version](replica_id=2, topics=[
        Topic(topic="orders", partitions=[
            Topic.OffsetForLeaderPartition(partition=0, current_leader_epoch=5, leader_epoch=4)])])
    payload = kafka_python_frame(message, 23)
    req = decode_request(payload)
    assert_header(req, 23, version, 23)
    (topic,) = req.body.topics
    (got,) = topic.partitions
    assert (topic.topic, got.partition, got.current_leader_epoch, got.leader_epoch) \
        == ("orders", 0, 5, 4)
    if version >= 3:
        assert req.body.replica_id == 2
    assert_body_reencodes_to_the_same_bytes(req, payload)


@pytest.mark.parametrize("version", [1, 9])  # request header v1 and v2
def test_null_client_id_decodes_as_none(version):
    payload = kafka_python_frame(MetadataRequest[version](topics=[]), 3, client_id=None)
    req = decode_request(payload)
    assert req.client_id is None
    assert_body_reencodes_to_the_same_bytes(req, payload)


def test_request_size_is_the_frame_length():
    payload = kafka_python_frame(MetadataRequest[4](topics=[], allow_auto_topic_creation=True), 1)
    assert decode_request(payload).size_bytes == len(payload)


# --------------------------------------------------------------------------- our responses

def _metadata_response(v):
    M = MetadataResponse
    P = M.MetadataResponseTopic.MetadataResponsePartition
    return M[v](throttle_time_ms=0, cluster_id="raftwood-cluster", controller_id=1,
                brokers=[M.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=9092,
                                                  rack=None),
                         M.MetadataResponseBroker(node_id=2, host="127.0.0.2", port=9093,
                                                  rack="r2")],
                topics=[M.MetadataResponseTopic(
                    error_code=0, name="orders", topic_id=TOPIC_ID, is_internal=False,
                    partitions=[P(error_code=0, partition_index=0, leader_id=2, leader_epoch=7,
                                  replica_nodes=[2, 1], isr_nodes=[2], offline_replicas=[])])])


def _check_metadata(resp, v):
    assert [(b.node_id, b.host, b.port) for b in resp.brokers] \
        == [(1, "127.0.0.1", 9092), (2, "127.0.0.2", 9093)]
    (topic,) = resp.topics
    (partition,) = topic.partitions
    assert (topic.name, partition.leader_id, partition.replica_nodes, partition.isr_nodes) \
        == ("orders", 2, [2, 1], [2])
    if v >= 1:
        assert resp.controller_id == 1 and resp.brokers[1].rack == "r2"
    if v >= 2:
        assert resp.cluster_id == "raftwood-cluster"
    if v >= 7:
        assert partition.leader_epoch == 7
    if v >= 10:
        assert topic.topic_id == TOPIC_ID


def _produce_response(v):
    R = ProduceResponse.TopicProduceResponse
    return ProduceResponse[v](throttle_time_ms=0, responses=[R(name="orders", partition_responses=[
        R.PartitionProduceResponse(index=2, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                   base_offset=-1, log_append_time_ms=-1, log_start_offset=-1),
        R.PartitionProduceResponse(index=3, error_code=0, base_offset=41,
                                   log_append_time_ms=-1, log_start_offset=0)])])


def _check_produce(resp, v):
    (topic,) = resp.responses
    assert topic.name == "orders"
    assert [(p.index, p.error_code, p.base_offset) for p in topic.partition_responses] \
        == [(2, 6, -1), (3, 0, 41)]


def _fetch_response(v):
    R = FetchResponse.FetchableTopicResponse
    return FetchResponse[v](throttle_time_ms=0, error_code=0, session_id=0, responses=[
        R(topic="orders", partitions=[R.PartitionData(
            partition_index=0, error_code=0, high_watermark=3, last_stable_offset=3,
            log_start_offset=0, aborted_transactions=None, preferred_read_replica=-1,
            records=BATCH)])])


def _check_fetch(resp, v):
    (topic,) = resp.responses
    (partition,) = topic.partitions
    assert (topic.topic, partition.partition_index, partition.high_watermark) == ("orders", 0, 3)
    assert bytes(partition.records) == BATCH
    if v >= 5:
        assert partition.log_start_offset == 0


def _list_offsets_response(v):
    R = ListOffsetsResponse.ListOffsetsTopicResponse
    return ListOffsetsResponse[v](throttle_time_ms=0, topics=[R(name="orders", partitions=[
        R.ListOffsetsPartitionResponse(partition_index=1, error_code=0, timestamp=-1, offset=42,
                                       leader_epoch=3)])])


def _check_list_offsets(resp, v):
    (topic,) = resp.topics
    (partition,) = topic.partitions
    assert (topic.name, partition.partition_index, partition.offset) == ("orders", 1, 42)
    if v >= 4:
        assert partition.leader_epoch == 3


def _create_topics_response(v):
    R = CreateTopicsResponse.CreatableTopicResult
    return CreateTopicsResponse[v](throttle_time_ms=0, topics=[
        R(name="orders", topic_id=TOPIC_ID, error_code=ErrorCode.TOPIC_ALREADY_EXISTS,
          error_message="Topic 'orders' already exists.", num_partitions=-1,
          replication_factor=-1, configs=None)])


def _check_create_topics(resp, v):
    (topic,) = resp.topics
    assert (topic.name, topic.error_code) == ("orders", 36)
    assert topic.error_message == "Topic 'orders' already exists."
    if v >= 7:
        assert topic.topic_id == TOPIC_ID


def _delete_topics_response(v):
    R = DeleteTopicsResponse.DeletableTopicResult
    return DeleteTopicsResponse[v](throttle_time_ms=0, responses=[
        R(name="orders", topic_id=TOPIC_ID, error_code=0, error_message=None),
        R(name="nope", topic_id=uuid.UUID(int=0), error_code=3, error_message=None)])


def _check_delete_topics(resp, v):
    assert [(r.name, r.error_code) for r in resp.responses] == [("orders", 0), ("nope", 3)]


def _offset_for_leader_epoch_response(v):
    R = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
    return OffsetForLeaderEpochResponse[v](throttle_time_ms=0, topics=[
        R(topic="orders", partitions=[
            R.EpochEndOffset(error_code=0, partition=0, leader_epoch=4, end_offset=100)])])


def _check_offset_for_leader_epoch(resp, v):
    (topic,) = resp.topics
    (partition,) = topic.partitions
    assert (topic.topic, partition.partition, partition.leader_epoch, partition.end_offset) \
        == ("orders", 0, 4, 100)


def _init_producer_id_response(v):
    return InitProducerIdResponse[v](throttle_time_ms=0, error_code=0, producer_id=4242,
                                     producer_epoch=3)


def _check_init_producer_id(resp, v):
    assert (resp.error_code, resp.producer_id, resp.producer_epoch) == (0, 4242, 3)


def _describe_configs_response(v):
    R = DescribeConfigsResponse.DescribeConfigsResult
    return DescribeConfigsResponse[v](throttle_time_ms=0, results=[R(
        error_code=0, error_message=None, resource_type=2, resource_name="orders", configs=[
            R.DescribeConfigsResourceResult(name="retention.ms", value="1000", read_only=False,
                                            config_source=1, is_default=False,
                                            is_sensitive=False, synonyms=[], config_type=0,
                                            documentation=None)])])


def _check_describe_configs(resp, v):
    (result,) = resp.results
    (entry,) = result.configs
    assert (result.resource_name, entry.name, entry.value) == ("orders", "retention.ms", "1000")


def _alter_configs_response(cls):
    def build(v):
        return cls[v](throttle_time_ms=0, responses=[cls.AlterConfigsResourceResponse(
            error_code=40, error_message="bad", resource_type=2, resource_name="orders")])
    return build


def _check_alter_configs(resp, v):
    (result,) = resp.responses
    assert (result.error_code, result.resource_name) == (40, "orders")


def _api_versions_response(v):
    return api_versions_body(version=v)


def _check_api_versions(resp, v):
    assert resp.error_code == 0
    assert {(k.api_key, k.min_version, k.max_version) for k in resp.api_keys} \
        == {(key, low, high) for key, (low, high) in EXPECTED_RANGES.items()}


def _find_coordinator_response(v):
    C = FindCoordinatorResponse.Coordinator
    return FindCoordinatorResponse[v](
        throttle_time_ms=0, error_code=0, error_message=None, node_id=2, host="h", port=9093,
        coordinators=[C(key="g", node_id=2, host="h", port=9093, error_code=0,
                        error_message=None)])


def _check_find_coordinator(resp, v):
    if v >= 4:
        (c,) = resp.coordinators
        assert (c.key, c.node_id, c.host, c.port, c.error_code) == ("g", 2, "h", 9093, 0)
    else:
        assert (resp.error_code, resp.node_id, resp.host, resp.port) == (0, 2, "h", 9093)


def _join_group_response(v):
    return JoinGroupResponse[v](
        throttle_time_ms=0, error_code=0, generation_id=3, protocol_type="consumer",
        protocol_name="range", leader="m1", skip_assignment=False, member_id="m1",
        members=[JoinGroupResponse.JoinGroupResponseMember(member_id="m1",
                                                           group_instance_id=None,
                                                           metadata=b"meta")])


def _check_join_group(resp, v):
    assert (resp.error_code, resp.generation_id, resp.protocol_name, resp.leader,
            resp.member_id) == (0, 3, "range", "m1", "m1")
    assert [(m.member_id, bytes(m.metadata)) for m in resp.members] == [("m1", b"meta")]


def _sync_group_response(v):
    return SyncGroupResponse[v](throttle_time_ms=0, error_code=0, protocol_type="consumer",
                                protocol_name="range", assignment=b"assigned")


def _check_sync_group(resp, v):
    assert (resp.error_code, bytes(resp.assignment)) == (0, b"assigned")


def _error_only_response(cls, code, **fields):
    def build(v):
        return cls[v](throttle_time_ms=0, error_code=code, **fields)
    return build


def _check_error_code(code):
    def check(resp, v):
        assert resp.error_code == code
    return check


def _offset_commit_response(v):
    T = OffsetCommitResponse.OffsetCommitResponseTopic
    return OffsetCommitResponse[v](throttle_time_ms=0, topics=[T(name="orders", partitions=[
        T.OffsetCommitResponsePartition(partition_index=1, error_code=25)])])


def _check_offset_commit(resp, v):
    (topic,) = resp.topics
    assert [(p.partition_index, p.error_code) for p in topic.partitions] == [(1, 25)]


def _offset_fetch_response(v):
    T = OffsetFetchResponse.OffsetFetchResponseTopic
    G = OffsetFetchResponse.OffsetFetchResponseGroup
    GT = G.OffsetFetchResponseTopics
    return OffsetFetchResponse[v](
        throttle_time_ms=0, error_code=0,
        topics=[T(name="orders", partitions=[T.OffsetFetchResponsePartition(
            partition_index=0, committed_offset=42, committed_leader_epoch=1, metadata="",
            error_code=0)])],
        groups=[G(group_id="g", error_code=0, topics=[GT(name="orders", partitions=[
            GT.OffsetFetchResponsePartitions(partition_index=0, committed_offset=42,
                                             committed_leader_epoch=1, metadata="",
                                             error_code=0)])])])


def _check_offset_fetch(resp, v):
    topics = resp.groups[0].topics if v >= 8 else resp.topics
    (topic,) = topics
    assert [(p.partition_index, p.committed_offset) for p in topic.partitions] == [(0, 42)]


def _list_groups_response(v):
    L = ListGroupsResponse.ListedGroup
    return ListGroupsResponse[v](throttle_time_ms=0, error_code=0, groups=[
        L(group_id="g", protocol_type="consumer", group_state="Stable", group_type="classic")])


def _check_list_groups(resp, v):
    assert [(g.group_id, g.protocol_type) for g in resp.groups] == [("g", "consumer")]
    if v >= 4:
        assert resp.groups[0].group_state == "Stable"


def _describe_groups_response(v):
    D = DescribeGroupsResponse.DescribedGroup
    return DescribeGroupsResponse[v](throttle_time_ms=0, groups=[D(
        error_code=0, error_message=None, group_id="g", group_state="Stable",
        protocol_type="consumer", protocol_data="range", authorized_operations=None,
        members=[D.DescribedGroupMember(member_id="m1", group_instance_id=None, client_id="c",
                                        client_host="/127.0.0.1", member_metadata=b"s",
                                        member_assignment=b"a")])])


def _check_describe_groups(resp, v):
    (group,) = resp.groups
    assert (group.group_id, group.group_state, group.protocol_data) == ("g", "Stable", "range")
    (member,) = group.members
    assert (member.member_id, member.client_host, bytes(member.member_assignment)) \
        == ("m1", "/127.0.0.1", b"a")


def _delete_groups_response(v):
    return DeleteGroupsResponse[v](throttle_time_ms=0, results=[
        DeleteGroupsResponse.DeletableGroupResult(group_id="g", error_code=69)])


def _check_delete_groups(resp, v):
    assert [(r.group_id, r.error_code) for r in resp.results] == [("g", 69)]


def _describe_quorum_response(v):
    state = DescribeQuorumResponse.TopicData.PartitionData.ReplicaState
    return DescribeQuorumResponse[v](error_code=0, topics=[DescribeQuorumResponse.TopicData(
        topic_name="__cluster_metadata", partitions=[
            DescribeQuorumResponse.TopicData.PartitionData(
                partition_index=0, error_code=0, leader_id=2, leader_epoch=7,
                high_watermark=41, current_voters=[
                    state(replica_id=2, log_end_offset=42, last_fetch_timestamp=1_700_000_000_000,
                          last_caught_up_timestamp=1_700_000_000_000),
                    state(replica_id=1, log_end_offset=40, last_fetch_timestamp=-1,
                          last_caught_up_timestamp=-1)],
                observers=[state(replica_id=4, log_end_offset=-1, last_fetch_timestamp=-1,
                                 last_caught_up_timestamp=-1)])])])


def _check_describe_quorum(resp, v):
    partition = resp.topics[0].partitions[0]
    assert resp.topics[0].topic_name == "__cluster_metadata"
    assert (partition.leader_id, partition.leader_epoch, partition.high_watermark) == (2, 7, 41)
    assert [(r.replica_id, r.log_end_offset) for r in partition.current_voters] == [(2, 42),
                                                                                   (1, 40)]
    assert [r.replica_id for r in partition.observers] == [4]
    if v >= 1:
        assert partition.current_voters[0].last_caught_up_timestamp == 1_700_000_000_000
        assert partition.current_voters[1].last_fetch_timestamp == -1


def _share_fetch_response(v):
    data = ShareFetchResponse.ShareFetchableTopicResponse.PartitionData
    return ShareFetchResponse[v](
        throttle_time_ms=0, error_code=0, error_message=None, acquisition_lock_timeout_ms=1000,
        responses=[ShareFetchResponse.ShareFetchableTopicResponse(topic_id=TOPIC_ID, partitions=[
            data(partition_index=0, error_code=0, error_message=None, acknowledge_error_code=121,
                 acknowledge_error_message=None,
                 current_leader=data.LeaderIdAndEpoch(leader_id=1, leader_epoch=4),
                 records=record_batch(), acquired_records=[data.AcquiredRecords(
                     first_offset=0, last_offset=2, delivery_count=1)])])],
        node_endpoints=[])


def _check_share_fetch(resp, v):
    partition = resp.responses[0].partitions[0]
    assert resp.acquisition_lock_timeout_ms == 1000
    assert (partition.acknowledge_error_code, partition.current_leader.leader_epoch) == (121, 4)
    assert [(r.first_offset, r.last_offset, r.delivery_count)
            for r in partition.acquired_records] == [(0, 2, 1)]
    assert bytes(partition.records) == record_batch()


_REQUESTS = {
    0: lambda v: ProduceRequest[v](transactional_id=None, acks=1, timeout_ms=1, topic_data=[]),
    1: lambda v: FetchRequest[v](replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1, topics=[],
                                 forgotten_topics_data=[]),
    2: lambda v: ListOffsetsRequest[v](replica_id=-1, topics=[]),
    3: lambda v: MetadataRequest[v](topics=[]),
    18: lambda v: ApiVersionsRequest[v](client_software_name="x", client_software_version="1"),
    19: lambda v: CreateTopicsRequest[v](topics=[], timeout_ms=1),
    20: lambda v: DeleteTopicsRequest[v](topic_names=[], topics=[], timeout_ms=1),
    22: lambda v: InitProducerIdRequest[v](transactional_id=None, transaction_timeout_ms=1,
                                           producer_id=-1, producer_epoch=-1),
    23: lambda v: OffsetForLeaderEpochRequest[v](replica_id=-1, topics=[]),
    32: lambda v: DescribeConfigsRequest[v](resources=[], include_synonyms=False,
                                            include_documentation=False),
    33: lambda v: AlterConfigsRequest[v](resources=[], validate_only=False),
    44: lambda v: IncrementalAlterConfigsRequest[v](resources=[], validate_only=False),
    8: lambda v: OffsetCommitRequest[v](group_id="g", generation_id_or_member_epoch=1,
                                        member_id="m", topics=[]),
    9: lambda v: OffsetFetchRequest[v](group_id="g", topics=[], groups=[]),
    10: lambda v: FindCoordinatorRequest[v](key="g", key_type=0, coordinator_keys=["g"]),
    11: lambda v: JoinGroupRequest[v](group_id="g", session_timeout_ms=10000,
                                      rebalance_timeout_ms=10000, member_id="",
                                      protocol_type="consumer", protocols=[]),
    12: lambda v: HeartbeatRequest[v](group_id="g", generation_id=1, member_id="m"),
    13: lambda v: LeaveGroupRequest[v](group_id="g", member_id="m", members=[]),
    14: lambda v: SyncGroupRequest[v](group_id="g", generation_id=1, member_id="m",
                                      assignments=[]),
    15: lambda v: DescribeGroupsRequest[v](groups=["g"]),
    16: lambda v: ListGroupsRequest[v](states_filter=[], types_filter=[]),
    42: lambda v: DeleteGroupsRequest[v](groups_names=["g"]),
    17: lambda v: SaslHandshakeRequest[v](mechanism="PLAIN"),
    36: lambda v: SaslAuthenticateRequest[v](auth_bytes=b"\x00u\x00p"),
    50: lambda v: DescribeUserScramCredentialsRequest[v](users=None),
    51: lambda v: AlterUserScramCredentialsRequest[v](deletions=[], upsertions=[]),
    29: lambda v: DescribeAclsRequest[v](resource_type_filter=1, resource_name_filter=None,
                                         pattern_type_filter=1, principal_filter=None,
                                         host_filter=None, operation=1, permission_type=1),
    30: lambda v: CreateAclsRequest[v](creations=[]),
    31: lambda v: DeleteAclsRequest[v](filters=[]),
    37: lambda v: CreatePartitionsRequest[v](topics=[], timeout_ms=1, validate_only=False),
    21: lambda v: DeleteRecordsRequest[v](topics=[], timeout_ms=1),
    60: lambda v: DescribeClusterRequest[v](include_cluster_authorized_operations=False),
    35: lambda v: DescribeLogDirsRequest[v](topics=None),
    43: lambda v: ElectLeadersRequest[v](topic_partitions=None, timeout_ms=1,
                                         **({"election_type": 1} if v >= 1 else {})),
    75: lambda v: DescribeTopicPartitionsRequest[v](topics=[], response_partition_limit=4,
                                                    cursor=None),
    24: lambda v: AddPartitionsToTxnRequest[v](
        v3_and_below_transactional_id="tx", v3_and_below_producer_id=7,
        v3_and_below_producer_epoch=0, v3_and_below_topics=[]),
    25: lambda v: AddOffsetsToTxnRequest[v](transactional_id="tx", producer_id=7,
                                            producer_epoch=0, group_id="g"),
    26: lambda v: EndTxnRequest[v](transactional_id="tx", producer_id=7, producer_epoch=0,
                                   committed=False),
    27: lambda v: WriteTxnMarkersRequest[v](markers=[]),
    28: lambda v: TxnOffsetCommitRequest[v](transactional_id="tx", group_id="g", producer_id=7,
                                           producer_epoch=0, topics=[]),
    65: lambda v: DescribeTransactionsRequest[v](transactional_ids=["tx"]),
    66: lambda v: ListTransactionsRequest[v](state_filters=[], producer_id_filters=[]),
    68: lambda v: ConsumerGroupHeartbeatRequest[v](group_id="g", member_id="m", member_epoch=0,
                                                   rebalance_timeout_ms=1,
                                                   subscribed_topic_names=["t"]),
    69: lambda v: ConsumerGroupDescribeRequest[v](group_ids=["g"]),
    80: lambda v: AddRaftVoterRequest[v](voter_id=4, listeners=[
        VoterListener("CONTROLLER", "h", 65535)]),
    81: lambda v: RemoveRaftVoterRequest[v](voter_id=3),
    55: lambda v: DescribeQuorumRequest[v](topics=[DescribeQuorumRequest.TopicData(
        topic_name="__cluster_metadata",
        partitions=[DescribeQuorumRequest.TopicData.PartitionData(partition_index=0)])]),
    61: lambda v: DescribeProducersRequest[v](topics=[]),
    45: lambda v: AlterPartitionReassignmentsRequest[v](timeout_ms=1, topics=[],
                                                        allow_replication_factor_change=True),
    46: lambda v: ListPartitionReassignmentsRequest[v](timeout_ms=1, topics=None),
    57: lambda v: UpdateFeaturesRequest[v](timeout_ms=1, feature_updates=[],
                                           validate_only=True),
    47: lambda v: OffsetDeleteRequest[v](group_id="g", topics=[]),
    48: lambda v: DescribeClientQuotasRequest[v](components=[], strict=False),
    49: lambda v: AlterClientQuotasRequest[v](entries=[], validate_only=True),
    78: lambda v: ShareFetchRequest[v](
        group_id="g", member_id="m", share_session_epoch=0, max_wait_ms=0, min_bytes=1,
        max_bytes=1, max_records=1, batch_size=1, share_acquire_mode=0, topics=[],
        forgotten_topics_data=[]),
    79: lambda v: ShareAcknowledgeRequest[v](group_id="g", member_id="m",
                                             share_session_epoch=1, is_renew_ack=False,
                                             topics=[]),
    84: lambda v: ReadShareGroupStateRequest[v](group_id="g", topics=[]),
    87: lambda v: ReadShareGroupStateSummaryRequest[v](group_id="g", topics=[]),
    76: lambda v: ShareGroupHeartbeatRequest[v](group_id="g", member_id="m", member_epoch=0,
                                                rack_id=None, subscribed_topic_names=["t"]),
    77: lambda v: ShareGroupDescribeRequest[v](group_ids=["g"],
                                               include_authorized_operations=False),
    91: lambda v: AlterShareGroupOffsetsRequest[v](group_id="g", topics=[]),
    92: lambda v: DeleteShareGroupOffsetsRequest[v](group_id="g", topics=[]),
    90: lambda v: DescribeShareGroupOffsetsRequest[v](groups=[
        DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup(
            group_id="g", topics=None)]),
    85: lambda v: WriteShareGroupStateRequest[v](group_id="g", topics=[]),
    71: lambda v: GetTelemetrySubscriptionsRequest[v](client_instance_id=TOPIC_ID),
    72: lambda v: PushTelemetryRequest[v](client_instance_id=TOPIC_ID, subscription_id=7,
                                          terminating=False, compression_type=1,
                                          metrics=b"otlp"),
    74: lambda v: ListConfigResourcesRequest[v](resource_types=[16, 2]),
}
def _add_partitions_results() -> list:
    Result = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
    return [Result(name="t", results_by_partition=[Result.AddPartitionsToTxnPartitionResult(
        partition_index=3, partition_error_code=51)])]


_RESPONSES = {
    0: (_produce_response, _check_produce, ProduceResponse),
    1: (_fetch_response, _check_fetch, FetchResponse),
    2: (_list_offsets_response, _check_list_offsets, ListOffsetsResponse),
    3: (_metadata_response, _check_metadata, MetadataResponse),
    18: (_api_versions_response, _check_api_versions, ApiVersionsResponse),
    19: (_create_topics_response, _check_create_topics, CreateTopicsResponse),
    20: (_delete_topics_response, _check_delete_topics, DeleteTopicsResponse),
    22: (_init_producer_id_response, _check_init_producer_id, InitProducerIdResponse),
    23: (_offset_for_leader_epoch_response, _check_offset_for_leader_epoch,
         OffsetForLeaderEpochResponse),
    32: (_describe_configs_response, _check_describe_configs, DescribeConfigsResponse),
    33: (_alter_configs_response(AlterConfigsResponse), _check_alter_configs, AlterConfigsResponse),
    44: (_alter_configs_response(IncrementalAlterConfigsResponse), _check_alter_configs,
         IncrementalAlterConfigsResponse),
    8: (_offset_commit_response, _check_offset_commit, OffsetCommitResponse),
    9: (_offset_fetch_response, _check_offset_fetch, OffsetFetchResponse),
    10: (_find_coordinator_response, _check_find_coordinator, FindCoordinatorResponse),
    11: (_join_group_response, _check_join_group, JoinGroupResponse),
    12: (_error_only_response(HeartbeatResponse, 27), _check_error_code(27), HeartbeatResponse),
    13: (_error_only_response(LeaveGroupResponse, 25, members=[]), _check_error_code(25),
         LeaveGroupResponse),
    14: (_sync_group_response, _check_sync_group, SyncGroupResponse),
    15: (_describe_groups_response, _check_describe_groups, DescribeGroupsResponse),
    16: (_list_groups_response, _check_list_groups, ListGroupsResponse),
    42: (_delete_groups_response, _check_delete_groups, DeleteGroupsResponse),
    17: (lambda v: SaslHandshakeResponse[v](error_code=33, mechanisms=["PLAIN"]),
         _check_error_code(33), SaslHandshakeResponse),
    36: (lambda v: SaslAuthenticateResponse[v](error_code=58, error_message="no",
                                               auth_bytes=b"", session_lifetime_ms=0),
         _check_error_code(58), SaslAuthenticateResponse),
    50: (_error_only_response(DescribeUserScramCredentialsResponse, 0, error_message=None,
                              results=[]), _check_error_code(0),
         DescribeUserScramCredentialsResponse),
    51: (lambda v: AlterUserScramCredentialsResponse[v](throttle_time_ms=0, results=[]),
         lambda resp, v: None, AlterUserScramCredentialsResponse),
    29: (_error_only_response(DescribeAclsResponse, 31, error_message="no", resources=[]),
         _check_error_code(31), DescribeAclsResponse),
    30: (lambda v: CreateAclsResponse[v](throttle_time_ms=0, results=[
            CreateAclsResponse.AclCreationResult(error_code=31, error_message=None)]),
         lambda resp, v: resp.results[0].error_code == 31 or pytest.fail("CreateAcls result"),
         CreateAclsResponse),
    31: (lambda v: DeleteAclsResponse[v](throttle_time_ms=0, filter_results=[]),
         lambda resp, v: None, DeleteAclsResponse),
    37: (lambda v: CreatePartitionsResponse[v](throttle_time_ms=0, results=[
            CreatePartitionsResponse.CreatePartitionsTopicResult(name="t", error_code=37,
                                                                 error_message="no")]),
         lambda resp, v: resp.results[0].error_code == 37 or pytest.fail("CreatePartitions"),
         CreatePartitionsResponse),
    21: (lambda v: DeleteRecordsResponse[v](throttle_time_ms=0, topics=[
            DeleteRecordsResponse.DeleteRecordsTopicResult(name="t", partitions=[
                DeleteRecordsResponse.DeleteRecordsTopicResult.DeleteRecordsPartitionResult(
                    partition_index=0, low_watermark=5, error_code=1)])]),
         lambda resp, v: (resp.topics[0].partitions[0].low_watermark == 5
                          and resp.topics[0].partitions[0].error_code == 1)
         or pytest.fail("DeleteRecords"), DeleteRecordsResponse),
    60: (lambda v: DescribeClusterResponse[v](
            throttle_time_ms=0, error_code=0, error_message=None, cluster_id="c",
            controller_id=2, authorized_operations=None, brokers=[
                DescribeClusterResponse.DescribeClusterBroker(broker_id=2, host="h", port=9,
                                                              rack=None)]),
         lambda resp, v: (resp.controller_id == 2 and resp.brokers[0].port == 9)
         or pytest.fail("DescribeCluster"), DescribeClusterResponse),
    35: (lambda v: DescribeLogDirsResponse[v](throttle_time_ms=0, error_code=0, results=[
            DescribeLogDirsResponse.DescribeLogDirsResult(error_code=0, log_dir="/d", topics=[
                DescribeLogDirsResponse.DescribeLogDirsResult.DescribeLogDirsTopic(
                    name="t", partitions=[DescribeLogDirsResponse.DescribeLogDirsResult
                                          .DescribeLogDirsTopic.DescribeLogDirsPartition(
                                              partition_index=0, partition_size=77,
                                              offset_lag=0, is_future_key=False)])])]),
         lambda resp, v: resp.results[0].topics[0].partitions[0].partition_size == 77
         or pytest.fail("DescribeLogDirs"), DescribeLogDirsResponse),
    43: (lambda v: ElectLeadersResponse[v](throttle_time_ms=0, error_code=0,
            replica_election_results=[ElectLeadersResponse.ReplicaElectionResult(
                topic="t", partition_result=[ElectLeadersResponse.ReplicaElectionResult
                                             .PartitionResult(partition_id=3, error_code=84,
                                                              error_message=None)])]),
         lambda resp, v: resp.replica_election_results[0].partition_result[0].error_code == 84
         or pytest.fail("ElectLeaders"), ElectLeadersResponse),
    75: (lambda v: DescribeTopicPartitionsResponse[v](throttle_time_ms=0, topics=[
            DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic(
                error_code=0, name="t", topic_id=None, is_internal=False,
                topic_authorized_operations=-(1 << 31), partitions=[
                    DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
                    .DescribeTopicPartitionsResponsePartition(
                        error_code=0, partition_index=3, leader_id=2, leader_epoch=5,
                        replica_nodes=[2, 1], isr_nodes=[2], eligible_leader_replicas=[],
                        last_known_elr=[], offline_replicas=[1])])],
            next_cursor=DescribeTopicPartitionsResponse.Cursor(topic_name="t",
                                                               partition_index=4)),
         lambda resp, v: (resp.topics[0].partitions[0].offline_replicas == [1]
                          and resp.next_cursor.partition_index == 4)
         or pytest.fail("DescribeTopicPartitions"), DescribeTopicPartitionsResponse),
    24: (lambda v: AddPartitionsToTxnResponse[v](
            throttle_time_ms=0, error_code=0,
            results_by_transaction=[AddPartitionsToTxnResponse.AddPartitionsToTxnResult(
                transactional_id="tx", topic_results=_add_partitions_results())],
            results_by_topic_v3_and_below=_add_partitions_results()),
         lambda resp, v: (resp.results_by_topic_v3_and_below if v < 4
                          else resp.results_by_transaction[0].topic_results)[0]
         .results_by_partition[0].partition_error_code == 51
         or pytest.fail("AddPartitionsToTxn"), AddPartitionsToTxnResponse),
    25: (_error_only_response(AddOffsetsToTxnResponse, 51), _check_error_code(51),
         AddOffsetsToTxnResponse),
    26: (_error_only_response(EndTxnResponse, 48), _check_error_code(48), EndTxnResponse),
    27: (lambda v: WriteTxnMarkersResponse[v](markers=[
            WriteTxnMarkersResponse.WritableTxnMarkerResult(producer_id=7, topics=[])]),
         lambda resp, v: resp.markers[0].producer_id == 7 or pytest.fail("WriteTxnMarkers"),
         WriteTxnMarkersResponse),
    28: (lambda v: TxnOffsetCommitResponse[v](throttle_time_ms=0, topics=[
            TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic(name="t", partitions=[
                TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
                .TxnOffsetCommitResponsePartition(partition_index=1, error_code=90)])]),
         lambda resp, v: resp.topics[0].partitions[0].error_code == 90
         or pytest.fail("TxnOffsetCommit"), TxnOffsetCommitResponse),
    65: (lambda v: DescribeTransactionsResponse[v](throttle_time_ms=0, transaction_states=[
            DescribeTransactionsResponse.TransactionState(
                error_code=0, transactional_id="tx", transaction_state="Ongoing",
                transaction_timeout_ms=60_000, transaction_start_time_ms=5, producer_id=7,
                producer_epoch=1, topics=[])]),
         lambda resp, v: resp.transaction_states[0].transaction_state == "Ongoing"
         or pytest.fail("DescribeTransactions"), DescribeTransactionsResponse),
    66: (lambda v: ListTransactionsResponse[v](throttle_time_ms=0, error_code=0,
                                               unknown_state_filters=["Nope"],
                                               transaction_states=[]),
         lambda resp, v: resp.unknown_state_filters == ["Nope"]
         or pytest.fail("ListTransactions"), ListTransactionsResponse),
    68: (lambda v: ConsumerGroupHeartbeatResponse(
            error_code=110, error_message="fenced", member_id="m", member_epoch=4,
            heartbeat_interval_ms=5000, assignment=[
                CgTopicPartitions(TOPIC_ID, [0, 3])]),
         lambda resp, v: (resp.error_code, resp.member_epoch, resp.assignment)
         == (110, 4, [CgTopicPartitions(TOPIC_ID, [0, 3])])
         or pytest.fail("ConsumerGroupHeartbeat"), ConsumerGroupHeartbeatResponse),
    69: (lambda v: ConsumerGroupDescribeResponse(groups=[CgDescribedGroup(
            error_code=69, error_message="Group g not found.", group_id="g")]),
         lambda resp, v: (resp.groups[0].error_code, resp.groups[0].group_id) == (69, "g")
         or pytest.fail("ConsumerGroupDescribe"), ConsumerGroupDescribeResponse),
    61: (lambda v: DescribeProducersResponse[v](throttle_time_ms=0, topics=[
            DescribeProducersResponse.TopicResponse(name="t", partitions=[
                DescribeProducersResponse.TopicResponse.PartitionResponse(
                    partition_index=2, error_code=0, error_message=None, active_producers=[
                        DescribeProducersResponse.TopicResponse.PartitionResponse
                        .ProducerState(producer_id=7, producer_epoch=1, last_sequence=9,
                                       last_timestamp=5, coordinator_epoch=3,
                                       current_txn_start_offset=40)])])]),
         lambda resp, v: resp.topics[0].partitions[0].active_producers[0]
         .current_txn_start_offset == 40 or pytest.fail("DescribeProducers"),
         DescribeProducersResponse),
    45: (lambda v: AlterPartitionReassignmentsResponse[v](
            throttle_time_ms=0, allow_replication_factor_change=True, error_code=0,
            error_message=None, responses=[
                AlterPartitionReassignmentsResponse.ReassignableTopicResponse(
                    name="t", partitions=[AlterPartitionReassignmentsResponse
                                          .ReassignableTopicResponse
                                          .ReassignablePartitionResponse(
                                              partition_index=2, error_code=85,
                                              error_message="no")])]),
         lambda resp, v: resp.responses[0].partitions[0].error_code == 85
         or pytest.fail("AlterPartitionReassignments"), AlterPartitionReassignmentsResponse),
    46: (lambda v: ListPartitionReassignmentsResponse[v](
            throttle_time_ms=0, error_code=0, error_message=None, topics=[
                ListPartitionReassignmentsResponse.OngoingTopicReassignment(
                    name="t", partitions=[ListPartitionReassignmentsResponse
                                          .OngoingTopicReassignment
                                          .OngoingPartitionReassignment(
                                              partition_index=1, replicas=[2, 3, 4, 1],
                                              adding_replicas=[4], removing_replicas=[1])])]),
         lambda resp, v: resp.topics[0].partitions[0].adding_replicas == [4]
         or pytest.fail("ListPartitionReassignments"), ListPartitionReassignmentsResponse),
    80: (lambda v: AddRaftVoterResponse(error_code=126, error_message="voter 4 exists"),
         lambda resp, v: (resp.error_code, resp.error_message) == (126, "voter 4 exists")
         or pytest.fail("AddRaftVoter"), AddRaftVoterResponse),
    81: (lambda v: RemoveRaftVoterResponse(error_code=127, error_message=None),
         lambda resp, v: (resp.error_code, resp.error_message) == (127, None)
         or pytest.fail("RemoveRaftVoter"), RemoveRaftVoterResponse),
    55: (_describe_quorum_response, _check_describe_quorum, DescribeQuorumResponse),
    57: (lambda v: UpdateFeaturesResponse(throttle_time_ms=0, error_code=95,
                                          error_message="no", results=[]),
         lambda resp, v: (resp.error_code, resp.error_message) == (95, "no")
         or pytest.fail("UpdateFeatures"), UpdateFeaturesResponse),
    47: (lambda v: OffsetDeleteResponse(error_code=69, throttle_time_ms=0, topics=[]),
         lambda resp, v: resp.error_code == 69 or pytest.fail("OffsetDelete"),
         OffsetDeleteResponse),
    48: (lambda v: DescribeClientQuotasResponse(throttle_time_ms=0, error_code=31,
                                                error_message="no", entries=None),
         lambda resp, v: (resp.error_code, resp.entries) == (31, None)
         or pytest.fail("DescribeClientQuotas"), DescribeClientQuotasResponse),
    49: (lambda v: AlterClientQuotasResponse(throttle_time_ms=0, entries=[]),
         lambda resp, v: resp.entries == [] or pytest.fail("AlterClientQuotas"),
         AlterClientQuotasResponse),
    78: (_share_fetch_response, _check_share_fetch, ShareFetchResponse),
    79: (lambda v: ShareAcknowledgeResponse[v](
            throttle_time_ms=0, error_code=122, error_message=None,
            acquisition_lock_timeout_ms=30_000, responses=[], node_endpoints=[]),
         lambda resp, v: resp.error_code == 122 and (
             v < 2 or resp.acquisition_lock_timeout_ms == 30_000)
         or pytest.fail("ShareAcknowledge"), ShareAcknowledgeResponse),
    84: (lambda v: ReadShareGroupStateResponse[v](results=[
            ReadShareGroupStateResponse.ReadStateResult(topic_id=TOPIC_ID, partitions=[
                ReadShareGroupStateResponse.ReadStateResult.PartitionResult(
                    partition=1, error_code=16, error_message=None, state_epoch=0,
                    start_offset=-1, state_batches=[])])]),
         lambda resp, v: resp.results[0].partitions[0].error_code == 16
         or pytest.fail("ReadShareGroupState"), ReadShareGroupStateResponse),
    87: (lambda v: ReadShareGroupStateSummaryResponse[v](results=[
            ReadShareGroupStateSummaryResponse.ReadStateSummaryResult(
                topic_id=TOPIC_ID, partitions=[
                    ReadShareGroupStateSummaryResponse.ReadStateSummaryResult.PartitionResult(
                        partition=1, error_code=0, error_message=None, state_epoch=3,
                        leader_epoch=2, start_offset=40, delivery_complete_count=5)])]),
         lambda resp, v: resp.results[0].partitions[0].start_offset == 40
         and (v < 1 or resp.results[0].partitions[0].delivery_complete_count == 5)
         or pytest.fail("ReadShareGroupStateSummary"), ReadShareGroupStateSummaryResponse),
    71: (lambda v: GetTelemetrySubscriptionsResponse[v](
            throttle_time_ms=0, error_code=0, client_instance_id=TOPIC_ID, subscription_id=-5,
            accepted_compression_types=[4, 1], push_interval_ms=1000,
            telemetry_max_bytes=1024, delta_temporality=False, requested_metrics=["org."]),
         lambda resp, v: (resp.client_instance_id, resp.subscription_id,
                          resp.requested_metrics) == (TOPIC_ID, -5, ["org."])
         or pytest.fail("GetTelemetrySubscriptions"), GetTelemetrySubscriptionsResponse),
    72: (lambda v: PushTelemetryResponse[v](throttle_time_ms=0, error_code=117),
         lambda resp, v: resp.error_code == 117 or pytest.fail("PushTelemetry"),
         PushTelemetryResponse),
    74: (lambda v: ListConfigResourcesResponse[v](
            throttle_time_ms=0, error_code=0, config_resources=[
                ListConfigResourcesResponse.ConfigResource(resource_name="s",
                                                           resource_type=16)]),
         lambda resp, v: resp.config_resources[0].resource_name == "s"
         or pytest.fail("ListConfigResources"), ListConfigResourcesResponse),
    85: (lambda v: WriteShareGroupStateResponse[v](results=[]),
         lambda resp, v: resp.results == [] or pytest.fail("WriteShareGroupState"),
         WriteShareGroupStateResponse),
    76: (lambda v: ShareGroupHeartbeatResponse[v](
            throttle_time_ms=0, error_code=0, error_message=None, member_id="m",
            member_epoch=3, heartbeat_interval_ms=5000,
            assignment=ShareGroupHeartbeatResponse.Assignment(topic_partitions=[
                ShareGroupHeartbeatResponse.Assignment.TopicPartitions(
                    topic_id=TOPIC_ID, partitions=[0, 2])])),
         lambda resp, v: (resp.member_epoch, [(t.topic_id, t.partitions) for t in
                                              resp.assignment.topic_partitions])
         == (3, [(TOPIC_ID, [0, 2])]) or pytest.fail("ShareGroupHeartbeat"),
         ShareGroupHeartbeatResponse),
    77: (lambda v: ShareGroupDescribeResponse[v](throttle_time_ms=0, groups=[
            ShareGroupDescribeResponse.DescribedGroup(
                error_code=69, error_message="Group g not found.", group_id="g",
                group_state="", group_epoch=-1, assignment_epoch=-1, assignor_name="",
                members=[], authorized_operations=-(1 << 31))]),
         lambda resp, v: (resp.groups[0].error_code, resp.groups[0].group_id) == (69, "g")
         or pytest.fail("ShareGroupDescribe"), ShareGroupDescribeResponse),
    90: (lambda v: DescribeShareGroupOffsetsResponse[v](throttle_time_ms=0, groups=[
            _OffsetsGroup(group_id="g", error_code=0, error_message=None, topics=[
                _OffsetsGroup.DescribeShareGroupOffsetsResponseTopic(
                    topic_name="t", topic_id=TOPIC_ID, partitions=[
                        _OffsetsGroup.DescribeShareGroupOffsetsResponseTopic
                        .DescribeShareGroupOffsetsResponsePartition(
                            partition_index=1, start_offset=42, leader_epoch=3,
                            error_code=0, error_message=None)])])]),
         lambda resp, v: resp.groups[0].topics[0].partitions[0].start_offset == 42
         or pytest.fail("DescribeShareGroupOffsets"), DescribeShareGroupOffsetsResponse),
    91: (lambda v: AlterShareGroupOffsetsResponse[v](
            throttle_time_ms=0, error_code=68, error_message="non-empty", responses=[]),
         lambda resp, v: (resp.error_code, resp.responses) == (68, [])
         or pytest.fail("AlterShareGroupOffsets"), AlterShareGroupOffsetsResponse),
    92: (lambda v: DeleteShareGroupOffsetsResponse[v](
            throttle_time_ms=0, error_code=0, error_message=None, responses=[
                DeleteShareGroupOffsetsResponse.DeleteShareGroupOffsetsResponseTopic(
                    topic_name="t", topic_id=TOPIC_ID, error_code=3, error_message=None)]),
         lambda resp, v: resp.responses[0].error_code == 3
         or pytest.fail("DeleteShareGroupOffsets"), DeleteShareGroupOffsetsResponse),
}
_RESPONSE_CASES = [(key, v) for key in sorted(EXPECTED_RANGES) for v in versions(key)
                   if not (key == 0 and v < 3)]


@pytest.mark.parametrize("api_key,version", _RESPONSE_CASES,
                         ids=[f"{SERVED[k].name}-v{v}" for k, v in _RESPONSE_CASES])
def test_response_uses_the_header_version_of_its_request_and_decodes_in_kafka_python(api_key,
                                                                                     version):
    build, check, response_class = _RESPONSES[api_key]
    correlation_id = 0x5A5A0000 + api_key * 100 + version
    req = decode_request(kafka_python_frame(_REQUESTS[api_key](version), correlation_id))
    data = encode_response(req, build(version))

    assert struct.unpack(">i", data[:4])[0] == len(data) - 4
    assert struct.unpack(">i", data[4:8])[0] == correlation_id
    # Response header v1 (flexible) adds an empty tagged-field buffer; ApiVersions never does.
    header_v1 = is_flexible(api_key, version) and api_key != 18
    body_start = 9 if header_v1 else 8
    if header_v1:
        assert data[8] == 0
    body_alone = response_class.decode(data[body_start:], version=version)
    check(body_alone, version)

    decoded = response_class.decode(data[4:], version=version, header=True)
    assert decoded.header.correlation_id == correlation_id
    check(decoded, version)


def test_api_versions_v3_response_keeps_header_v0_with_a_flexible_body():
    req = decode_request(kafka_python_frame(ApiVersionsRequest[3](
        client_software_name="librdkafka", client_software_version="2.6.0"), 42))
    data = encode_response(req, api_versions_body(version=3))
    assert data[4:8] == struct.pack(">i", 42)
    assert data[8:10] == b"\x00\x00"  # error_code follows the correlation id directly
    assert data[10] == len(EXPECTED_RANGES) + 1  # compact array length: flexible body
    assert ApiVersionsResponse.decode(data[8:], version=3).api_keys[0].api_key == 0


# --------------------------------------------------------------------------- unsupported versions

def raw_header(api_key: int, version: int, correlation_id: int, client_id: bytes = b"x") -> bytes:
    return struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id


@pytest.mark.parametrize("api_key", [999, 67, -1, 32767, 4, 5])
def test_unknown_api_key_is_unsupported_version_with_the_correlation_id_kept(api_key):
    with pytest.raises(UnsupportedVersion) as info:
        decode_request(raw_header(api_key, 0, 12345) + b"\x00" * 8)
    assert (info.value.api_key, info.value.api_version, info.value.correlation_id) \
        == (api_key, 0, 12345)


_OUTSIDE = sorted({(key, v) for key, (low, high) in EXPECTED_RANGES.items()
                   for v in (low - 1, high + 1, -1, 32767)})


@pytest.mark.parametrize("api_key,version", _OUTSIDE)
def test_versions_just_outside_each_served_range_are_unsupported(api_key, version):
    # The body is garbage: the version check must come before any attempt to parse it.
    with pytest.raises(UnsupportedVersion) as info:
        decode_request(raw_header(api_key, version, 777) + b"\xff" * 32)
    assert (info.value.api_key, info.value.api_version, info.value.correlation_id) \
        == (api_key, version, 777)


@pytest.mark.parametrize("api_key,version", [(1, 3), (1, 13), (3, 13), (0, 13), (18, 5)])
def test_well_formed_requests_from_kafka_python_at_unserved_versions_are_unsupported(api_key,
                                                                                     version):
    message = {
        1: lambda: FetchRequest[version](replica_id=-1, max_wait_ms=1, min_bytes=1, max_bytes=1,
                                         topics=[], forgotten_topics_data=[]),
        3: lambda: MetadataRequest[version](topics=None),
        0: lambda: ProduceRequest[version](transactional_id=None, acks=1, timeout_ms=1,
                                           topic_data=[]),
        18: lambda: ApiVersionsRequest[4](),
    }[api_key]()
    payload = bytearray(kafka_python_frame(message, 31))
    struct.pack_into(">h", payload, 2, version)  # ApiVersions v5 does not exist in kafka-python
    with pytest.raises(UnsupportedVersion) as info:
        decode_request(bytes(payload))
    assert info.value.correlation_id == 31


def test_unsupported_api_versions_response_is_a_v0_body_with_error_35_and_every_range():
    data = unsupported_api_versions_response(correlation_id=99)
    assert struct.unpack(">i", data[:4])[0] == len(data) - 4
    assert struct.unpack(">ih", data[4:10]) == (99, ErrorCode.UNSUPPORTED_VERSION)
    decoded = ApiVersionsResponse.decode(data[4:], version=0, header=True)
    assert decoded.header.correlation_id == 99
    assert decoded.error_code == 35
    assert {(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys} \
        == {(key, low, high) for key, (low, high) in EXPECTED_RANGES.items()}
    # Exactly a v0 body: error_code, int32-counted array of 6-byte entries, nothing after.
    assert len(data) == 4 + 4 + 2 + 4 + 6 * len(EXPECTED_RANGES)


def test_client_that_sent_api_versions_v4_can_read_the_v0_fallback():
    """kafka-python decodes with the version it sent; an error code switches it to v0 (KIP-511)."""
    data = unsupported_api_versions_response(correlation_id=7)
    decoded = ApiVersionsResponse.decode(data[4:], version=4, header=True)
    assert decoded.error_code == 35
    assert max(k.max_version for k in decoded.api_keys if k.api_key == 18) == 4


# --------------------------------------------------------------------------- aiokafka's encoders

aiokafka_api = pytest.importorskip("aiokafka.protocol.api")
from aiokafka.protocol import admin as aio_admin  # noqa: E402
from aiokafka.protocol import fetch as aio_fetch  # noqa: E402
from aiokafka.protocol import metadata as aio_metadata  # noqa: E402
from aiokafka.protocol import offset as aio_offset  # noqa: E402
from aiokafka.protocol import produce as aio_produce  # noqa: E402


def aiokafka_frame(request, version: int, correlation_id: int, client_id: str = "aiokafka-unit"):
    """Bytes exactly as aiokafka.conn.AIOKafkaConnection.send writes them (minus the size)."""
    request_struct = request.prepare({request.API_KEY: (version, version)})
    assert request_struct.API_VERSION == version
    header = request_struct.build_request_header(correlation_id=correlation_id,
                                                 client_id=client_id)
    message = header.encode() + request_struct.encode()
    return request_struct, message


def aiokafka_read_response(request_struct, data: bytes, correlation_id: int):
    """As AIOKafkaConnection._handle_frame reads a response frame (after the size)."""
    assert struct.unpack(">i", data[:4])[0] == len(data) - 4
    buffer = io.BytesIO(data[4:])
    header = request_struct.parse_response_header(buffer)
    assert header.correlation_id == correlation_id
    response = request_struct.RESPONSE_TYPE.decode(buffer)
    assert buffer.read() == b"", "aiokafka left bytes of our response unread"
    return response


@pytest.mark.parametrize("version", [0, 1, 2])
def test_aiokafka_api_versions_request_and_response(version):
    request_struct, payload = aiokafka_frame(aio_admin.ApiVersionRequest(), version, 1)
    req = decode_request(payload)
    assert_header(req, 18, version, 1, "aiokafka-unit")
    data = encode_response(req, api_versions_body(version=version))
    response = aiokafka_read_response(request_struct, data, 1).to_object()
    assert response["error_code"] == 0
    assert {(a["api_key"], a["min_version"], a["max_version"])
            for a in response["api_versions"]} \
        == {(key, low, high) for key, (low, high) in EXPECTED_RANGES.items()}


def test_aiokafka_reads_the_unsupported_api_versions_fallback():
    request_struct = aio_admin.ApiVersionRequest().prepare({18: (0, 0)})
    response = aiokafka_read_response(request_struct, unsupported_api_versions_response(5),
                                      5).to_object()
    assert response["error_code"] == 35
    assert len(response["api_versions"]) == len(EXPECTED_RANGES)


@pytest.mark.parametrize("version", range(6))
def test_aiokafka_metadata_request_and_response(version):
    request = aio_metadata.MetadataRequest(topics=["orders", "events"],
                                           allow_auto_topic_creation=False)
    request_struct, payload = aiokafka_frame(request, version, 300 + version)
    req = decode_request(payload)
    assert_header(req, 3, version, 300 + version, "aiokafka-unit")
    assert [t.name for t in req.body.topics] == ["orders", "events"]
    if version >= 4:
        assert req.body.allow_auto_topic_creation is False
    assert_body_reencodes_to_the_same_bytes(req, payload)

    response = aiokafka_read_response(request_struct,
                                      encode_response(req, _metadata_response(version)),
                                      300 + version).to_object()
    assert [b["node_id"] for b in response["brokers"]] == [1, 2]
    (topic,) = response["topics"]
    (partition,) = topic["partitions"]
    assert (partition["leader"], partition["replicas"], partition["isr"]) == (2, [2, 1], [2])


@pytest.mark.parametrize("version", range(1, 6))
def test_aiokafka_metadata_request_for_all_topics_is_null(version):
    _, payload = aiokafka_frame(aio_metadata.MetadataRequest(topics=None), version, 8)
    assert decode_request(payload).body.topics is None


@pytest.mark.parametrize("version", range(3, 8))
def test_aiokafka_produce_request_and_response(version):
    request = aio_produce.ProduceRequest(None, -1, 30_000, [("orders", [(2, BATCH)])])
    request_struct, payload = aiokafka_frame(request, version, 500 + version)
    req = decode_request(payload)
    assert_header(req, 0, version, 500 + version, "aiokafka-unit")
    (topic,) = req.body.topic_data
    (partition,) = topic.partition_data
    assert (req.body.acks, topic.name, partition.index) == (-1, "orders", 2)
    assert bytes(partition.records) == BATCH
    assert_body_reencodes_to_the_same_bytes(req, payload)

    response = aiokafka_read_response(request_struct,
                                      encode_response(req, _produce_response(version)),
                                      500 + version).to_object()
    (topic,) = response["topics"]
    assert [(p["partition"], p["error_code"], p["offset"]) for p in topic["partitions"]] \
        == [(2, 6, -1), (3, 0, 41)]


@pytest.mark.parametrize("version", range(4, 12))
def test_aiokafka_fetch_request_and_response(version):
    request = aio_fetch.FetchRequest(max_wait_time=500, min_bytes=1, max_bytes=50 << 20,
                                     isolation_level=1, topics=[("orders", [(0, 1234, 1 << 20)])],
                                     rack_id="rack-a")
    request_struct, payload = aiokafka_frame(request, version, 700 + version)
    req = decode_request(payload)
    assert_header(req, 1, version, 700 + version, "aiokafka-unit")
    (topic,) = req.body.topics
    (partition,) = topic.partitions
    assert (topic.topic, partition.partition, partition.fetch_offset) == ("orders", 0, 1234)
    assert req.body.isolation_level == 1
    if version >= 11:
        assert req.body.rack_id == "rack-a"
    assert_body_reencodes_to_the_same_bytes(req, payload)

    response = aiokafka_read_response(request_struct,
                                      encode_response(req, _fetch_response(version)),
                                      700 + version)
    # (to_object() cannot walk a null aborted_transactions array, so read the tuples.)
    ((topic_name, partitions),) = response.get_item("topics")
    ((partition_id, error_code, highwater_offset, *_, message_set),) = partitions
    assert (topic_name, partition_id, error_code, highwater_offset) == ("orders", 0, 0, 3)
    assert bytes(message_set) == BATCH


@pytest.mark.parametrize("version", range(1, 4))
def test_aiokafka_list_offsets_request_and_response(version):
    request = aio_offset.OffsetRequest(-1, 1 if version >= 2 else 0, [("orders", [(1, -1)])])
    request_struct, payload = aiokafka_frame(request, version, 900 + version)
    req = decode_request(payload)
    assert_header(req, 2, version, 900 + version, "aiokafka-unit")
    (topic,) = req.body.topics
    (partition,) = topic.partitions
    assert (topic.name, partition.partition_index, partition.timestamp) == ("orders", 1, -1)
    assert_body_reencodes_to_the_same_bytes(req, payload)

    response = aiokafka_read_response(request_struct,
                                      encode_response(req, _list_offsets_response(version)),
                                      900 + version).to_object()
    (topic,) = response["topics"]
    (partition,) = topic["partitions"]
    assert (partition["partition"], partition["offset"]) == (1, 42)


@pytest.mark.parametrize("version", [2, 3])
def test_aiokafka_create_topics_request_and_response(version):
    request = aio_admin.CreateTopicsRequest(
        [("orders", 3, 2, [], [("cleanup.policy", "compact")])], 30_000, False)
    request_struct, payload = aiokafka_frame(request, version, 19)
    req = decode_request(payload)
    assert_header(req, 19, version, 19, "aiokafka-unit")
    (topic,) = req.body.topics
    assert (topic.name, topic.num_partitions, topic.replication_factor) == ("orders", 3, 2)
    assert [(c.name, c.value) for c in topic.configs] == [("cleanup.policy", "compact")]
    assert_body_reencodes_to_the_same_bytes(req, payload)

    data = encode_response(req, _create_topics_response(version))
    response = aiokafka_read_response(request_struct, data, 19).to_object()
    (topic,) = response["topic_errors"]
    assert (topic["topic"], topic["error_code"]) == ("orders", 36)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_aiokafka_delete_topics_request_and_response(version):
    request = aio_admin.DeleteTopicsRequest(["orders", "nope"], 15_000)
    request_struct, payload = aiokafka_frame(request, version, 20)
    req = decode_request(payload)
    assert_header(req, 20, version, 20, "aiokafka-unit")
    assert (req.body.topic_names, req.body.timeout_ms) == (["orders", "nope"], 15_000)
    assert_body_reencodes_to_the_same_bytes(req, payload)

    data = encode_response(req, _delete_topics_response(version))
    response = aiokafka_read_response(request_struct, data, 20).to_object()
    assert [(t["topic"], t["error_code"]) for t in response["topic_error_codes"]] \
        == [("orders", 0), ("nope", 3)]

"""The APIs and versions Raftwood serves, and request/response codec around them.

kafka-python 3.x ships message classes generated from Kafka's JSON schemas; they are
our structs.  They declare ``min_version`` 0 for everything and keep no registry of
requests, so the ranges we serve live here in ``SERVED``.

Boundary rule: every decode failure leaves this module as ``CorruptRequest`` or
``UnsupportedVersion`` (see errors.py); callers never see ``struct.error`` & co.
"""
from __future__ import annotations

import io
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Consumer groups (broker/groups/).
# Security (broker/security/): SASL (KIP-152), SCRAM credentials (KIP-554), ACLs (KIP-140).
# Transactions (broker/transactions/).
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

from . import hot_requests
from .consumer_group_messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from .errors import CorruptRequest, ErrorCode, UnsupportedVersion
from .nulls import first_null
from .raft_voter_messages import (
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
)
from .share_fetch_messages import (
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
)
from .share_group_messages import (
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
from .share_state_messages import (
    ReadShareGroupStateRequest,
    ReadShareGroupStateResponse,
    ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse,
    WriteShareGroupStateRequest,
    WriteShareGroupStateResponse,
)
from .telemetry_messages import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)

_PEEK = struct.Struct(">hhi")
_DECODE_ERRORS = (struct.error, ValueError, IndexError, TypeError, UnicodeDecodeError,
                  OverflowError, KeyError, AttributeError)


@dataclass(frozen=True)
class ApiSpec:
    """One served API: its classes and the inclusive version range we accept."""

    api_key: int
    name: str
    request_class: Any
    response_class: Any
    min_version: int
    max_version: int
    # Versions advertised in ApiVersions but refused (Produce v0-v2, see below).
    refused_below: int = 0

    def serves(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


def _spec(request_class: Any, response_class: Any, min_version: int, max_version: int,
          refused_below: int = 0) -> ApiSpec:
    return ApiSpec(request_class.API_KEY, request_class.name.removesuffix("Request"),
                   request_class, response_class, min_version, max_version, refused_below)


# Produce is advertised from v0 because older librdkafka checks for it (KAFKA-18659), but
# v0-v2 (message format v0/v1) are answered with UNSUPPORTED_VERSION.  Produce and Fetch
# stop at v12: v13 replaces topic names with topic ids.
SERVED: dict[int, ApiSpec] = {spec.api_key: spec for spec in (
    _spec(ProduceRequest, ProduceResponse, 0, 12, refused_below=3),
    _spec(FetchRequest, FetchResponse, 4, 12),
    _spec(ListOffsetsRequest, ListOffsetsResponse, 1, 9),
    _spec(MetadataRequest, MetadataResponse, 0, 12),
    _spec(ApiVersionsRequest, ApiVersionsResponse, 0, 4),
    _spec(CreateTopicsRequest, CreateTopicsResponse, 2, 7),
    _spec(DeleteTopicsRequest, DeleteTopicsResponse, 1, 6),
    _spec(CreatePartitionsRequest, CreatePartitionsResponse, 0, 3),
    _spec(DeleteRecordsRequest, DeleteRecordsResponse, 0, 2),
    # DescribeLogDirs from v1: Kafka 4 removed v0, and kafka-python has no v0 schema.
    _spec(DescribeClusterRequest, DescribeClusterResponse, 0, 2),
    _spec(DescribeLogDirsRequest, DescribeLogDirsResponse, 1, 4),
    _spec(ElectLeadersRequest, ElectLeadersResponse, 0, 2),
    _spec(DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, 0, 0),
    _spec(OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, 2, 4),
    _spec(InitProducerIdRequest, InitProducerIdResponse, 0, 5),
    _spec(DescribeConfigsRequest, DescribeConfigsResponse, 1, 4),
    _spec(AlterConfigsRequest, AlterConfigsResponse, 0, 2),
    _spec(IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, 0, 1),
    # v0 was KIP-714's ListClientMetricsResources, v1 (KIP-1142) lists other types.
    _spec(ListConfigResourcesRequest, ListConfigResourcesResponse, 0, 1),
    # Consumer groups (broker/groups/).  OffsetCommit and OffsetFetch stop at v9 (v10 names
    # topics by id) and start at v2 / v1, the first versions stored in Kafka rather than in
    # ZooKeeper.  FindCoordinator v4 batches keys (v5/v6 are for transactions and share
    # groups).
    _spec(FindCoordinatorRequest, FindCoordinatorResponse, 0, 4),
    _spec(JoinGroupRequest, JoinGroupResponse, 0, 9),
    _spec(SyncGroupRequest, SyncGroupResponse, 0, 5),
    _spec(HeartbeatRequest, HeartbeatResponse, 0, 4),
    _spec(LeaveGroupRequest, LeaveGroupResponse, 0, 5),
    _spec(OffsetCommitRequest, OffsetCommitResponse, 2, 9),
    _spec(OffsetFetchRequest, OffsetFetchResponse, 1, 9),
    # TxnOffsetCommit v3 has KIP-447's member fields, v4 KIP-890's TRANSACTION_ABORTABLE,
    # v5 is transaction version 2's: the group's partition is added to the transaction.
    _spec(TxnOffsetCommitRequest, TxnOffsetCommitResponse, 0, 5),
    _spec(ListGroupsRequest, ListGroupsResponse, 0, 5),
    _spec(DescribeGroupsRequest, DescribeGroupsResponse, 0, 5),
    _spec(DeleteGroupsRequest, DeleteGroupsResponse, 0, 2),
    # KIP-848's consumer group protocol, written by hand (consumer_group_messages.py):
    # ConsumerGroupHeartbeat v1 adds the regex subscription, ConsumerGroupDescribe
    # stops at v0 (v1's member type is for groups converted from classic members).
    _spec(ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, 0, 1),
    _spec(ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, 0, 0),
    # KIP-932's share groups, group side (share_group_messages.py): v1 only, Kafka 4.1+
    # (v0 was 4.0's early access).
    _spec(ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse, 1, 1),
    _spec(ShareGroupDescribeRequest, ShareGroupDescribeResponse, 1, 1),
    _spec(DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, 0, 0),
    _spec(AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, 0, 0),
    _spec(DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse, 0, 0),
    # KIP-932's share groups, partition side (share_fetch_messages.py): Kafka 4.2's v1-2
    # (v2: ShareAcquireMode and the RENEW acknowledgement, KIP-1206 / KIP-1222).
    _spec(ShareFetchRequest, ShareFetchResponse, 1, 2),
    _spec(ShareAcknowledgeRequest, ShareAcknowledgeResponse, 1, 2),
    # KIP-932's inter-broker share-state calls (share_state_messages.py), v0: the
    # share-partition leader to the share coordinator of its key.
    _spec(ReadShareGroupStateRequest, ReadShareGroupStateResponse, 0, 0),
    _spec(WriteShareGroupStateRequest, WriteShareGroupStateResponse, 0, 0),
    # The group coordinator's read of a start offset there (DescribeShareGroupOffsets);
    # v1 adds DeliveryCompleteCount (KIP-1226).
    _spec(ReadShareGroupStateSummaryRequest, ReadShareGroupStateSummaryResponse, 0, 1),
    # KIP-714's client telemetry (telemetry_messages.py), v0 as Kafka 4.x.
    _spec(GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse, 0, 0),
    _spec(PushTelemetryRequest, PushTelemetryResponse, 0, 0),
    # Security.  SaslHandshake v0 (KIP-43): the tokens then follow as bare size-prefixed
    # frames without Kafka headers (broker/network/connection.py).  librdkafka 2.0
    # enables SASL only when the advertised range includes v0, then speaks v1.
    _spec(SaslHandshakeRequest, SaslHandshakeResponse, 0, 1),
    _spec(SaslAuthenticateRequest, SaslAuthenticateResponse, 0, 2),
    _spec(DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse, 0, 0),
    _spec(AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, 0, 0),
    # ACLs start at v1 (v0 has no pattern type; Kafka 4 removed it too).
    _spec(DescribeAclsRequest, DescribeAclsResponse, 1, 3),
    _spec(CreateAclsRequest, CreateAclsResponse, 1, 3),
    _spec(DeleteAclsRequest, DeleteAclsResponse, 1, 3),
    # Transactions.  AddPartitionsToTxn v4-v5 are the brokers' batched form (KIP-890);
    # AddOffsetsToTxn stops at v3; EndTxn v5 is transaction version 2's (KIP-890 part 2);
    # ListTransactions at v1 (v2 filters by a regular expression).
    _spec(AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, 0, 5),
    _spec(AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, 0, 3),
    _spec(EndTxnRequest, EndTxnResponse, 0, 5),
    _spec(DescribeTransactionsRequest, DescribeTransactionsResponse, 0, 0),
    _spec(ListTransactionsRequest, ListTransactionsResponse, 0, 1),
    # Transactions: the partition leader's side.  WriteTxnMarkers starts at v1 (Kafka 4
    # removed v0); v2 names each marker's transaction version.
    _spec(WriteTxnMarkersRequest, WriteTxnMarkersResponse, 1, 2),
    _spec(DescribeProducersRequest, DescribeProducersResponse, 0, 0),
    # Partition reassignment (KIP-455; v1 is KIP-860's replication-factor guard).
    _spec(AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, 0, 1),
    _spec(ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, 0, 0),
    # The metadata quorum's voter set (KIP-853), written by hand (raft_voter_messages.py).
    _spec(AddRaftVoterRequest, AddRaftVoterResponse, 0, 0),
    # Finalized feature levels (KIP-584; broker/api/features.py): v2 answers one error.
    _spec(UpdateFeaturesRequest, UpdateFeaturesResponse, 0, 2),
    # KIP-496: a group's offsets of some partitions deleted (broker/api/offset_delete.py).
    _spec(OffsetDeleteRequest, OffsetDeleteResponse, 0, 0),
    # Client quotas (KIP-546; broker/api/client_quotas.py).
    _spec(DescribeClientQuotasRequest, DescribeClientQuotasResponse, 0, 1),
    _spec(AlterClientQuotasRequest, AlterClientQuotasResponse, 0, 1),
    _spec(RemoveRaftVoterRequest, RemoveRaftVoterResponse, 0, 0),
    # The metadata quorum described (KIP-595, v1 KIP-836); v2 (KIP-853) adds directory ids
    # and endpoints Raftwood's voters do not have.
    _spec(DescribeQuorumRequest, DescribeQuorumResponse, 0, 1),
)}


@dataclass
class Request:
    """A decoded request: header fields, the kafka-python body and its ApiSpec."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any
    spec: ApiSpec
    size_bytes: int
    # Set by the connection: the peer's address in Kafka's form ("/127.0.0.1"), and the
    # connection's security session (listener, principal; the broker's, opaque here).
    client_host: str = ""
    session: Any = None
    # Set by a handler whose answer is throttled by a client quota (KIP-219): the
    # connection stops reading for this long after answering.
    throttle_ms: int = 0
    # Set by the connection while a request_percentage quota exists (KIP-124): the
    # broker's stopwatch of this request's event-loop time (opaque here).
    request_time: Any = None

    def expects_response(self) -> bool:
        return self.body.expect_response()


# Produce (from v3, the first version served) and Fetch are decoded by hand: see
# protocol/hot_requests.py.  Both produce bodies with kafka-python's attribute names.
# So are KIP-848's two APIs and KIP-853's voter changes, which kafka-python has no
# classes for.
_HOT_DECODERS: dict[int, tuple[int, Callable[[bytes, int], tuple[Any, int]]]] = {
    ProduceRequest.API_KEY: (3, hot_requests.decode_produce),
    FetchRequest.API_KEY: (4, hot_requests.decode_fetch),
    ConsumerGroupHeartbeatRequest.API_KEY: (0, ConsumerGroupHeartbeatRequest.decode_frame),
    ConsumerGroupDescribeRequest.API_KEY: (0, ConsumerGroupDescribeRequest.decode_frame),
    AddRaftVoterRequest.API_KEY: (0, AddRaftVoterRequest.decode_frame),
    RemoveRaftVoterRequest.API_KEY: (0, RemoveRaftVoterRequest.decode_frame),
}


def peek_header(frame: bytes) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id): the fixed prefix every header starts with."""
    if len(frame) < _PEEK.size:
        raise CorruptRequest(f"a request header needs {_PEEK.size} bytes, got {len(frame)}")
    return _PEEK.unpack_from(frame, 0)


def decode_request(frame: bytes, header: tuple[int, int, int] | None = None) -> Request:
    """Decode one frame (without its size prefix) into a Request.

    ``header``: ``peek_header(frame)`` when the caller already read it.  Raises
    UnsupportedVersion for an API key or version outside SERVED, and CorruptRequest for
    anything that does not parse.
    """
    api_key, api_version, correlation_id = header or peek_header(frame)
    spec = SERVED.get(api_key)
    if spec is None or not spec.serves(api_version):
        raise UnsupportedVersion(api_key, api_version, correlation_id)
    hot_decoder = _HOT_DECODERS.get(api_key)
    # The hand-written decoders refuse forbidden nulls as they read; the generated ones
    # are checked after (protocol/nulls.py).
    generated = hot_decoder is None or api_version < hot_decoder[0]
    try:
        if hot_decoder is not None and not generated:
            body, end = hot_decoder[1](frame, api_version)
        else:
            body, end = _decode_body(spec.request_class, frame, api_version)
    except _DECODE_ERRORS as exc:
        raise CorruptRequest(f"{spec.name} v{api_version} does not parse: {exc!r}") from exc
    if end > len(frame):
        raise CorruptRequest(f"{spec.name} v{api_version} runs {end - len(frame)} bytes past "
                             f"the end of its {len(frame)}-byte frame")
    if generated:
        null = first_null(spec.request_class, api_version, body)
        if null is not None:
            raise CorruptRequest(f"{spec.name} v{api_version}: non-nullable field {null} "
                                 f"was serialized as null")
    return Request(api_key, api_version, correlation_id, body.header.client_id, body, spec,
                   len(frame))


def _decode_body(request_class: Any, frame: bytes, api_version: int) -> tuple[Any, int]:
    """(body with its header, position where the body ended): ``ApiMessage.decode`` plus its end.

    kafka-python's compiled decoders read strings and bytes as ``data[pos:pos + n]``: when ``n``
    runs past the frame the slice is silently short (a truncated Metadata request names topic
    "ord" instead of "orders"; a Produce request carries a cut batch), and only the final
    position -- which ``ApiMessage.decode`` discards -- shows it.  So this repeats that method's
    three steps (kafka-python 3.0.12, pinned) and keeps the position.  The header is parsed by
    kafka-python's stream decoder, which does raise on underrun.  Bytes left over after the
    body are not rejected here.
    """
    header_stream = io.BytesIO(frame)
    header = request_class.parse_header(header_stream, version=api_version)
    flexible = request_class.flexible_version_q(api_version)
    decode_from = request_class._struct.compiled_decode_from(
        api_version, compact=flexible, tagged=flexible, data_class=request_class)
    body, end = decode_from(memoryview(frame), header_stream.tell())
    body._header = header
    return body, end


class Framed(list[Any]):
    """A response already framed by a hand-written encoder (size prefix included), as the
    buffers to write in order; ``encode_response`` passes it through untouched."""


class FramedFiles(Framed):
    """A Framed Fetch response some of whose record entries are ``storage.FileRecords``
    (regions of segment files) instead of buffers: the connection sends those from the
    files (``Connection._write_with_files``).  Its own class, so the connection tells
    it from every other answer by one class test."""


def encode_response(request: Request, body: Any) -> bytes | Framed:
    """Frame ``body`` (a response message of the request's API) as the answer to ``request``."""
    if isinstance(body, Framed):
        return body
    # The version must be set before the header: kafka-python's version setter writes
    # through to a request header and fails on a response header.
    body.API_VERSION = request.api_version
    body.with_header(correlation_id=request.correlation_id)
    return bytes(body.encode(header=True, framed=True))


def api_versions_body(error_code: int = ErrorCode.NONE, version: int = 0) -> Any:
    """An ApiVersionsResponse listing every served range (KIP-511 fallback uses v0)."""
    keys = [ApiVersionsResponse.ApiVersion(api_key=s.api_key, min_version=s.min_version,
                                           max_version=s.max_version)
            for s in sorted(SERVED.values(), key=lambda s: s.api_key)]
    return ApiVersionsResponse(version=version, error_code=error_code, api_keys=keys,
                               throttle_time_ms=0)


def unsupported_api_versions_response(correlation_id: int) -> bytes:
    """The answer to an ApiVersions request of a version we do not serve (KIP-511).

    Always a v0 body with UNSUPPORTED_VERSION and our ranges, under response header v0,
    so the client can retry with the highest version we listed.
    """
    body = api_versions_body(ErrorCode.UNSUPPORTED_VERSION, version=0)
    body.with_header(correlation_id=correlation_id)
    return bytes(body.encode(header=True, framed=True))

"""Whatever bytes a peer sends, decode_request answers with a Request, CorruptRequest or
UnsupportedVersion -- never struct.error, IndexError or another exception of the codec
underneath (the one-boundary rule of protocol/messages.py).
"""
from __future__ import annotations

import random
import struct
import uuid

import pytest
from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    AlterConfigsRequest,
    AlterPartitionReassignmentsRequest,
    AlterUserScramCredentialsRequest,
    CreateAclsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DeleteGroupsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeAclsRequest,
    DescribeClientQuotasRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    DescribeLogDirsRequest,
    DescribeProducersRequest,
    DescribeQuorumRequest,
    DescribeTopicPartitionsRequest,
    DescribeTransactionsRequest,
    DescribeUserScramCredentialsRequest,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    ListGroupsRequest,
    ListPartitionReassignmentsRequest,
    ListTransactionsRequest,
    UpdateFeaturesRequest,
)
from kafka.protocol.consumer import (
    FetchRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListOffsetsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    OffsetForLeaderEpochRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ProduceRequest,
    TxnOffsetCommitRequest,
    WriteTxnMarkersRequest,
)
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from protocol.consumer_group_messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    TopicPartitions,
)
from protocol.errors import CorruptRequest, UnsupportedVersion
from protocol.framing import FrameReader
from protocol.messages import SERVED, Request, decode_request
from protocol.raft_voter_messages import AddRaftVoterRequest, RemoveRaftVoterRequest, VoterListener
from protocol.share_fetch_messages import ShareAcknowledgeRequest, ShareFetchRequest
from protocol.share_group_messages import (
    AlterShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
    ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest,
)
from protocol.share_state_messages import (
    ReadShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest,
    WriteShareGroupStateRequest,
)
from protocol.telemetry_messages import GetTelemetrySubscriptionsRequest, PushTelemetryRequest


def _batch() -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    builder.append(0, timestamp=1_700_000_000_000, key=b"key", value=b"value", headers=[])
    return bytes(builder.build())


def _produce(v):
    P = ProduceRequest
    return P[v](transactional_id="tx" if v >= 3 else None, acks=-1, timeout_ms=1000, topic_data=[
        P.TopicProduceData(name="orders", partition_data=[
            P.TopicProduceData.PartitionProduceData(index=0, records=_batch())])])


def _fetch(v):
    F = FetchRequest
    return F[v](replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="r",
                topics=[F.FetchTopic(topic="orders", partitions=[F.FetchTopic.FetchPartition(
                    partition=0, current_leader_epoch=1, fetch_offset=5, log_start_offset=-1,
                    partition_max_bytes=1 << 16)])])


def _list_offsets(v):
    L = ListOffsetsRequest
    return L[v](replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(
        name="orders", partitions=[L.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=0, current_leader_epoch=1, timestamp=-1)])])


def _metadata(v):
    return MetadataRequest[v](topics=[MetadataRequest.MetadataRequestTopic(name="orders")],
                              allow_auto_topic_creation=True)


def _create_topics(v):
    C = CreateTopicsRequest.CreatableTopic
    return CreateTopicsRequest[v](timeout_ms=1000, validate_only=False, topics=[
        C(name="orders", num_partitions=1, replication_factor=1, assignments=[],
          configs=[C.CreatableTopicConfig(name="retention.ms", value="1000")])])


def _delete_topics(v):
    D = DeleteTopicsRequest
    return D[v](timeout_ms=1000, topic_names=["orders"],
                topics=[D.DeleteTopicState(name="orders")])


def _offset_for_leader_epoch(v):
    Topic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    return OffsetForLeaderEpochRequest[v](replica_id=-1, topics=[Topic(topic="orders", partitions=[
        Topic.OffsetForLeaderPartition(partition=0, current_leader_epoch=2, leader_epoch=1)])])


def _api_versions(v):
    return ApiVersionsRequest[v](client_software_name="kafka-python",
                                 client_software_version="3.0.12")


def _init_producer_id(v):
    return InitProducerIdRequest[v](transactional_id=None, transaction_timeout_ms=60000,
                                    producer_id=-1, producer_epoch=-1)


def _describe_configs(v):
    D = DescribeConfigsRequest
    return D[v](resources=[D.DescribeConfigsResource(resource_type=2, resource_name="orders",
                                                     configuration_keys=["retention.ms"])],
                include_synonyms=False, include_documentation=False)


def _incremental_alter_configs(v):
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    return IncrementalAlterConfigsRequest[v](validate_only=False, resources=[R(
        resource_type=2, resource_name="orders",
        configs=[R.AlterableConfig(name="retention.ms", config_operation=0, value="1000")])])


def _alter_configs(v):
    R = AlterConfigsRequest.AlterConfigsResource
    return AlterConfigsRequest[v](validate_only=False, resources=[R(
        resource_type=2, resource_name="orders",
        configs=[R.AlterableConfig(name="retention.ms", value="1000")])])


# Each API at its lowest served version, its first flexible version and its highest.
def _offset_commit(v):
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    return OffsetCommitRequest[v](
        group_id="g", generation_id_or_member_epoch=3, member_id="m", group_instance_id=None,
        retention_time_ms=-1, topics=[T(name="orders", partitions=[
            T.OffsetCommitRequestPartition(partition_index=0, committed_offset=42,
                                           committed_leader_epoch=1, committed_metadata="x")])])


def _offset_fetch(v):
    G = OffsetFetchRequest.OffsetFetchRequestGroup
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    return OffsetFetchRequest[v](
        group_id="g", require_stable=False,
        topics=[T(name="orders", partition_indexes=[0, 1])],
        groups=[G(group_id="g", topics=[G.OffsetFetchRequestTopics(name="orders",
                                                                     partition_indexes=[0])])])


def _find_coordinator(v):
    return FindCoordinatorRequest[v](key="g", key_type=0, coordinator_keys=["g", "h"])


def _join_group(v):
    P = JoinGroupRequest.JoinGroupRequestProtocol
    return JoinGroupRequest[v](group_id="g", session_timeout_ms=10000,
                               rebalance_timeout_ms=30000, member_id="m",
                               group_instance_id=None, protocol_type="consumer",
                               protocols=[P(name="range", metadata=b"\x00\x00sub")],
                               reason="r")


def _sync_group(v):
    A = SyncGroupRequest.SyncGroupRequestAssignment
    return SyncGroupRequest[v](group_id="g", generation_id=1, member_id="m",
                               protocol_type="consumer", protocol_name="range",
                               assignments=[A(member_id="m", assignment=b"\x00\x00a")])


def _heartbeat(v):
    return HeartbeatRequest[v](group_id="g", generation_id=1, member_id="m")


def _leave_group(v):
    M = LeaveGroupRequest.MemberIdentity
    return LeaveGroupRequest[v](group_id="g", member_id="m",
                                members=[M(member_id="m", reason="bye")])


def _describe_groups(v):
    return DescribeGroupsRequest[v](groups=["g", "h"], include_authorized_operations=False)


def _list_groups(v):
    return ListGroupsRequest[v](states_filter=["Stable"], types_filter=["classic"])


def _delete_groups(v):
    return DeleteGroupsRequest[v](groups_names=["g"])


def _consumer_group_heartbeat(v):
    return ConsumerGroupHeartbeatRequest[v](
        group_id="g", member_id="m", member_epoch=3, rebalance_timeout_ms=300000,
        subscribed_topic_names=["t"], server_assignor="uniform",
        topic_partitions=[TopicPartitions(uuid.UUID(int=7), [0, 2])])


def _consumer_group_describe(v):
    return ConsumerGroupDescribeRequest[v](group_ids=["g", "h"],
                                           include_authorized_operations=True)


def _share_group_heartbeat(v):
    return ShareGroupHeartbeatRequest[v](group_id="g", member_id="m", member_epoch=0,
                                         rack_id=None, subscribed_topic_names=["orders"])


def _share_fetch(v):
    topic = ShareFetchRequest.FetchTopic
    batch = topic.FetchPartition.AcknowledgementBatch
    return ShareFetchRequest[v](
        group_id="g", member_id="m", share_session_epoch=1, max_wait_ms=100, min_bytes=1,
        max_bytes=1 << 20, max_records=500, batch_size=500, share_acquire_mode=0,
        topics=[topic(topic_id=uuid.uuid4(), partitions=[topic.FetchPartition(
            partition_index=0, acknowledgement_batches=[batch(
                first_offset=0, last_offset=2, acknowledge_types=[1, 2, 3])])])],
        forgotten_topics_data=[ShareFetchRequest.ForgottenTopic(
            topic_id=uuid.uuid4(), partitions=[1, 2])])


def _share_acknowledge(v):
    topic = ShareAcknowledgeRequest.AcknowledgeTopic
    batch = topic.AcknowledgePartition.AcknowledgementBatch
    return ShareAcknowledgeRequest[v](
        group_id="g", member_id="m", share_session_epoch=2, is_renew_ack=False,
        topics=[topic(topic_id=uuid.uuid4(), partitions=[topic.AcknowledgePartition(
            partition_index=0, acknowledgement_batches=[batch(
                first_offset=5, last_offset=5, acknowledge_types=[1])])])])


def _read_share_group_state(v):
    topic = ReadShareGroupStateRequest.ReadStateData
    return ReadShareGroupStateRequest[v](group_id="g", topics=[topic(
        topic_id=uuid.uuid4(), partitions=[topic.PartitionData(partition=0, leader_epoch=3)])])


def _read_share_group_state_summary(v):
    topic = ReadShareGroupStateSummaryRequest.ReadStateSummaryData
    return ReadShareGroupStateSummaryRequest[v](group_id="g", topics=[topic(
        topic_id=uuid.uuid4(), partitions=[topic.PartitionData(partition=0, leader_epoch=3)])])


def _write_share_group_state(v):
    topic = WriteShareGroupStateRequest.WriteStateData
    part = topic.PartitionData
    return WriteShareGroupStateRequest[v](group_id="g", topics=[topic(
        topic_id=uuid.uuid4(), partitions=[part(
            partition=0, state_epoch=1, leader_epoch=3, start_offset=10,
            state_batches=[part.StateBatch(first_offset=10, last_offset=12,
                                           delivery_state=0, delivery_count=1)])])])


def _share_group_describe(v):
    return ShareGroupDescribeRequest[v](group_ids=["g", "h"],
                                        include_authorized_operations=True)


def _describe_share_group_offsets(v):
    G = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
    T = G.DescribeShareGroupOffsetsRequestTopic
    return DescribeShareGroupOffsetsRequest[v](groups=[
        G(group_id="g", topics=[T(topic_name="orders", partitions=[0, 1])]),
        G(group_id="h", topics=None)])


def _alter_share_group_offsets(v):
    T = AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
    P = T.AlterShareGroupOffsetsRequestPartition
    return AlterShareGroupOffsetsRequest[v](group_id="g", topics=[
        T(topic_name="orders", partitions=[P(partition_index=0, start_offset=7)])])


def _delete_share_group_offsets(v):
    T = DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic
    return DeleteShareGroupOffsetsRequest[v](group_id="g", topics=[T(topic_name="orders")])


def _add_raft_voter(v):
    return AddRaftVoterRequest[v](cluster_id="c", timeout_ms=5000, voter_id=4,
                                  listeners=[VoterListener("CONTROLLER", "h", 9196)])


def _remove_raft_voter(v):
    return RemoveRaftVoterRequest[v](cluster_id=None, voter_id=3)


def _describe_quorum(v):
    return DescribeQuorumRequest[v](topics=[DescribeQuorumRequest.TopicData(
        topic_name="__cluster_metadata",
        partitions=[DescribeQuorumRequest.TopicData.PartitionData(partition_index=0)])])


def _update_features(v):
    return UpdateFeaturesRequest[v](timeout_ms=1000, validate_only=True, feature_updates=[
        UpdateFeaturesRequest.FeatureUpdateKey(feature="group.version", max_version_level=1,
                                               allow_downgrade=False, upgrade_type=1)])


def _offset_delete(v):
    topic = OffsetDeleteRequest.OffsetDeleteRequestTopic
    return OffsetDeleteRequest[v](group_id="g", topics=[topic(
        name="t", partitions=[topic.OffsetDeleteRequestPartition(partition_index=0)])])


def _describe_client_quotas(v):
    component = DescribeClientQuotasRequest.ComponentData
    return DescribeClientQuotasRequest[v](strict=True, components=[
        component(entity_type="user", match_type=0, match="alice")])


def _alter_client_quotas(v):
    entry = AlterClientQuotasRequest.EntryData
    return AlterClientQuotasRequest[v](validate_only=True, entries=[entry(
        entity=[entry.EntityData(entity_type="client-id", entity_name=None)],
        ops=[entry.OpData(key="producer_byte_rate", value=1024.0, remove=False)])])


def _get_telemetry_subscriptions(v):
    return GetTelemetrySubscriptionsRequest[v](client_instance_id=uuid.uuid4())


def _push_telemetry(v):
    return PushTelemetryRequest[v](client_instance_id=uuid.uuid4(), subscription_id=-3,
                                   terminating=False, compression_type=1, metrics=b"\x1f\x8b")


def _list_config_resources(v):
    from kafka.protocol.admin import ListConfigResourcesRequest
    return ListConfigResourcesRequest[v](resource_types=[16, 32])


def _sasl_handshake(v):
    return SaslHandshakeRequest[v](mechanism="SCRAM-SHA-512")


def _sasl_authenticate(v):
    return SaslAuthenticateRequest[v](auth_bytes=b"n,,n=user,r=abc")


def _describe_scram(v):
    U = DescribeUserScramCredentialsRequest.UserName
    return DescribeUserScramCredentialsRequest[v](users=[U(name="alice")])


def _alter_scram(v):
    R = AlterUserScramCredentialsRequest
    return R[v](deletions=[R.ScramCredentialDeletion(name="bob", mechanism=1)],
                upsertions=[R.ScramCredentialUpsertion(name="alice", mechanism=2, iterations=4096,
                                                       salt=b"salt", salted_password=b"x" * 64)])


def _describe_acls(v):
    return DescribeAclsRequest[v](resource_type_filter=2, resource_name_filter="orders",
                                  pattern_type_filter=2, principal_filter=None,
                                  host_filter=None, operation=1, permission_type=1)


def _create_acls(v):
    C = CreateAclsRequest.AclCreation
    return CreateAclsRequest[v](creations=[C(resource_type=2, resource_name="orders",
                                             resource_pattern_type=3, principal="User:alice",
                                             host="*", operation=3, permission_type=3)])


def _delete_acls(v):
    F = DeleteAclsRequest.DeleteAclsFilter
    return DeleteAclsRequest[v](filters=[F(resource_type_filter=1, resource_name_filter=None,
                                           pattern_type_filter=1, principal_filter="User:bob",
                                           host_filter=None, operation=1, permission_type=1)])


def _create_partitions(v):
    T = CreatePartitionsRequest.CreatePartitionsTopic
    return CreatePartitionsRequest[v](
        topics=[T(name="orders", count=4, assignments=[T.CreatePartitionsAssignment(
            broker_ids=[1, 2])]), T(name="events", count=6, assignments=None)],
        timeout_ms=5000, validate_only=False)


def _delete_records(v):
    T = DeleteRecordsRequest.DeleteRecordsTopic
    return DeleteRecordsRequest[v](topics=[T(name="orders", partitions=[
        T.DeleteRecordsPartition(partition_index=0, offset=12),
        T.DeleteRecordsPartition(partition_index=3, offset=-1)])], timeout_ms=5000)


def _describe_cluster(v):
    return DescribeClusterRequest[v](include_cluster_authorized_operations=True,
                                     endpoint_type=1, include_fenced_brokers=True)


def _describe_log_dirs(v):
    T = DescribeLogDirsRequest.DescribableLogDirTopic
    return DescribeLogDirsRequest[v](topics=[T(topic="orders", partitions=[0, 3])])


def _elect_leaders(v):
    T = ElectLeadersRequest.TopicPartitions
    args = dict(topic_partitions=[T(topic="orders", partitions=[0, 3])], timeout_ms=5000)
    return ElectLeadersRequest[v](**args, **({"election_type": 1} if v >= 1 else {}))


def _describe_topic_partitions(v):
    T = DescribeTopicPartitionsRequest.TopicRequest
    return DescribeTopicPartitionsRequest[v](
        topics=[T(name="orders"), T(name="events")], response_partition_limit=4,
        cursor=DescribeTopicPartitionsRequest.Cursor(topic_name="orders", partition_index=2))


def _write_txn_markers(v):
    M = WriteTxnMarkersRequest.WritableTxnMarker
    T = M.WritableTxnMarkerTopic
    return WriteTxnMarkersRequest[v](markers=[M(
        producer_id=7, producer_epoch=2, transaction_result=True, coordinator_epoch=4,
        topics=[T(name="orders", partition_indexes=[0, 3])])])


def _add_partitions_to_txn(v):
    T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    return AddPartitionsToTxnRequest[v](
        v3_and_below_transactional_id="tx-1", v3_and_below_producer_id=7,
        v3_and_below_producer_epoch=2, v3_and_below_topics=[T(name="orders", partitions=[0, 3])])


def _add_offsets_to_txn(v):
    return AddOffsetsToTxnRequest[v](transactional_id="tx-1", producer_id=7, producer_epoch=2,
                                     group_id="billing")


def _end_txn(v):
    return EndTxnRequest[v](transactional_id="tx-1", producer_id=7, producer_epoch=2,
                            committed=True)


def _txn_offset_commit(v):
    T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    P = T.TxnOffsetCommitRequestPartition
    args = dict(transactional_id="tx-1", group_id="billing", producer_id=7, producer_epoch=2,
                topics=[T(name="orders", partitions=[P(
                    partition_index=3, committed_offset=42, committed_leader_epoch=1,
                    committed_metadata="m")])])
    if v >= 3:
        args.update(generation_id=4, member_id="m-1", group_instance_id=None)
    return TxnOffsetCommitRequest[v](**args)


def _describe_transactions(v):
    return DescribeTransactionsRequest[v](transactional_ids=["tx-1", "tx-2"])


def _list_transactions(v):
    args = dict(state_filters=["Ongoing"], producer_id_filters=[7])
    if v >= 1:
        args["duration_filter"] = 60_000
    return ListTransactionsRequest[v](**args)


def _describe_producers(v):
    T = DescribeProducersRequest.TopicRequest
    return DescribeProducersRequest[v](topics=[T(name="orders", partition_indexes=[0, 3])])


def _alter_reassignments(v):
    T = AlterPartitionReassignmentsRequest.ReassignableTopic
    P = T.ReassignablePartition
    return AlterPartitionReassignmentsRequest[v](
        timeout_ms=5000, allow_replication_factor_change=False, topics=[T(
            name="orders", partitions=[P(partition_index=0, replicas=[2, 3, 4]),
                                       P(partition_index=1, replicas=None)])])


def _list_reassignments(v):
    T = ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics
    return ListPartitionReassignmentsRequest[v](
        timeout_ms=5000, topics=[T(name="orders", partition_indexes=[0, 1])])


CORPUS_BUILDERS = {
    "Produce": (_produce, [3, 8, 9, 12]),
    "Fetch": (_fetch, [4, 11, 12]),
    "ListOffsets": (_list_offsets, [1, 5, 6, 9]),
    "Metadata": (_metadata, [0, 8, 9, 12]),
    "CreateTopics": (_create_topics, [2, 4, 5, 7]),
    "DeleteTopics": (_delete_topics, [1, 3, 4, 6]),
    "OffsetForLeaderEpoch": (_offset_for_leader_epoch, [2, 3, 4]),
    "ApiVersions": (_api_versions, [0, 2, 3, 4]),
    "InitProducerId": (_init_producer_id, [0, 1, 2, 5]),
    "DescribeConfigs": (_describe_configs, [1, 3, 4]),
    "AlterConfigs": (_alter_configs, [0, 1, 2]),
    "IncrementalAlterConfigs": (_incremental_alter_configs, [0, 1]),
    "OffsetCommit": (_offset_commit, [2, 5, 7, 8, 9]),
    "OffsetFetch": (_offset_fetch, [1, 2, 6, 7, 8, 9]),
    "FindCoordinator": (_find_coordinator, [0, 1, 3, 4]),
    "JoinGroup": (_join_group, [0, 1, 5, 6, 9]),
    "SyncGroup": (_sync_group, [0, 3, 4, 5]),
    "Heartbeat": (_heartbeat, [0, 3, 4]),
    "LeaveGroup": (_leave_group, [0, 3, 4, 5]),
    "DescribeGroups": (_describe_groups, [0, 3, 5]),
    "ListGroups": (_list_groups, [0, 3, 4, 5]),
    "DeleteGroups": (_delete_groups, [0, 2]),
    "ConsumerGroupHeartbeat": (_consumer_group_heartbeat, [0, 1]),
    "ConsumerGroupDescribe": (_consumer_group_describe, [0]),
    "ShareGroupHeartbeat": (_share_group_heartbeat, [1]),
    "ShareGroupDescribe": (_share_group_describe, [1]),
    "DescribeShareGroupOffsets": (_describe_share_group_offsets, [0]),
    "AlterShareGroupOffsets": (_alter_share_group_offsets, [0]),
    "DeleteShareGroupOffsets": (_delete_share_group_offsets, [0]),
    "ShareFetch": (_share_fetch, [1, 2]),
    "ShareAcknowledge": (_share_acknowledge, [1, 2]),
    "ReadShareGroupState": (_read_share_group_state, [0]),
    "WriteShareGroupState": (_write_share_group_state, [0]),
    "ReadShareGroupStateSummary": (_read_share_group_state_summary, [0, 1]),
    "SaslHandshake": (_sasl_handshake, [0, 1]),
    "SaslAuthenticate": (_sasl_authenticate, [0, 1, 2]),
    "DescribeUserScramCredentials": (_describe_scram, [0]),
    "AlterUserScramCredentials": (_alter_scram, [0]),
    "DescribeAcls": (_describe_acls, [1, 2, 3]),
    "CreateAcls": (_create_acls, [1, 2, 3]),
    "DeleteAcls": (_delete_acls, [1, 2, 3]),
    "CreatePartitions": (_create_partitions, [0, 1, 2, 3]),
    "DeleteRecords": (_delete_records, [0, 1, 2]),
    "DescribeCluster": (_describe_cluster, [0, 1, 2]),
    "DescribeLogDirs": (_describe_log_dirs, [1, 2, 3, 4]),
    "ElectLeaders": (_elect_leaders, [0, 1, 2]),
    "DescribeTopicPartitions": (_describe_topic_partitions, [0]),
    "WriteTxnMarkers": (_write_txn_markers, [1]),
    "AddPartitionsToTxn": (_add_partitions_to_txn, [0, 2, 3]),
    "AddOffsetsToTxn": (_add_offsets_to_txn, [0, 3]),
    "EndTxn": (_end_txn, [0, 3]),
    "TxnOffsetCommit": (_txn_offset_commit, [0, 2, 3]),
    "DescribeTransactions": (_describe_transactions, [0]),
    "ListTransactions": (_list_transactions, [0, 1]),
    "DescribeProducers": (_describe_producers, [0]),
    "AlterPartitionReassignments": (_alter_reassignments, [0, 1]),
    "ListPartitionReassignments": (_list_reassignments, [0]),
    "AddRaftVoter": (_add_raft_voter, [0]),
    "RemoveRaftVoter": (_remove_raft_voter, [0]),
    "DescribeQuorum": (_describe_quorum, [0, 1]),
    "UpdateFeatures": (_update_features, [0, 1, 2]),
    "OffsetDelete": (_offset_delete, [0]),
    "DescribeClientQuotas": (_describe_client_quotas, [0, 1]),
    "AlterClientQuotas": (_alter_client_quotas, [0, 1]),
    "GetTelemetrySubscriptions": (_get_telemetry_subscriptions, [0]),
    "PushTelemetry": (_push_telemetry, [0]),
    "ListConfigResources": (_list_config_resources, [0, 1]),
}


def _corpus() -> list[tuple[str, bytes]]:
    cases = []
    for name, (build, versions) in CORPUS_BUILDERS.items():
        for v in versions:
            message = build(v)
            message.with_header(correlation_id=1000 + v, client_id="robust")
            cases.append((f"{name}-v{v}", bytes(message.encode(header=True, framed=False))))
    return cases


CORPUS = _corpus()


def test_corpus_covers_every_served_api_and_decodes_whole():
    assert {decode_request(payload).api_key for _, payload in CORPUS} == set(SERVED)


@pytest.mark.parametrize("name,payload", CORPUS, ids=[name for name, _ in CORPUS])
def test_every_prefix_of_a_valid_request_is_corrupt_never_a_codec_exception(name, payload):
    decode_request(payload)  # the whole request is fine
    wrongly_accepted = []
    for cut in range(len(payload)):
        try:
            req = decode_request(payload[:cut])
        except CorruptRequest:
            continue
        # Anything else -- struct.error, IndexError, UnsupportedVersion -- fails the test here.
        wrongly_accepted.append((cut, req.body))
    assert not wrongly_accepted, f"truncated {name} accepted: {wrongly_accepted[:3]}"


@pytest.mark.parametrize("cut", range(8))
def test_a_frame_too_short_for_the_fixed_header_is_corrupt(cut):
    payload = CORPUS[0][1]
    with pytest.raises(CorruptRequest):
        decode_request(payload[:cut])


def test_client_id_longer_than_the_frame_is_corrupt():
    header = struct.pack(">hhih", 3, 1, 9, 500) + b"abc"
    with pytest.raises(CorruptRequest):
        decode_request(header + b"\x00\x00\x00\x00")


def test_string_length_past_the_end_of_the_frame_is_corrupt_not_silently_shortened():
    """A topic name announcing 32767 bytes with 6 present must not decode as a short name."""
    frame = struct.pack(">hhih", 3, 1, 9, 1) + b"c" + struct.pack(">ih", 1, 0x7FFF) + b"orders"
    with pytest.raises(CorruptRequest):
        decode_request(frame)


def test_records_length_past_the_end_of_the_frame_is_corrupt_not_silently_shortened():
    name, payload = next(case for case in CORPUS if case[0] == "Produce-v3")
    frame = bytearray(payload)
    batch = _batch()
    records_at = bytes(frame).rindex(batch)
    struct.pack_into(">i", frame, records_at - 4, len(batch) + 100)  # claims 100 bytes more
    with pytest.raises(CorruptRequest):
        decode_request(bytes(frame))


def _outcome(frame: bytes) -> str:
    try:
        result = decode_request(frame)
    except CorruptRequest:
        return "corrupt"
    except UnsupportedVersion:
        return "unsupported"
    assert isinstance(result, Request)
    return "decoded"


def test_random_frames_decode_or_fail_only_with_our_two_errors():
    rng = random.Random(0x5EED)
    outcomes = {"corrupt": 0, "unsupported": 0, "decoded": 0}
    for _ in range(400):
        body = rng.randbytes(rng.randrange(0, 200))
        if rng.random() < 0.7:
            # A served api key and version, so the body parser (not the registry) is exercised.
            spec = rng.choice(list(SERVED.values()))
            version = rng.randint(spec.min_version, spec.max_version)
            body = struct.pack(">hhi", spec.api_key, version, rng.getrandbits(31)) + body
        outcomes[_outcome(body)] += 1
    # The fuzzing reached the body parsers and the registry, not just peek_header.
    assert outcomes["corrupt"] > 50 and outcomes["unsupported"] > 50


def test_single_byte_mutations_of_valid_requests_fail_only_with_our_two_errors():
    rng = random.Random(1234)
    outcomes = {"corrupt": 0, "unsupported": 0, "decoded": 0}
    for _ in range(600):
        _, payload = rng.choice(CORPUS)
        frame = bytearray(payload)
        position = rng.randrange(len(frame))
        frame[position] = rng.randrange(256)
        outcomes[_outcome(bytes(frame))] += 1
    assert outcomes["decoded"] > 0 and outcomes["corrupt"] > 0


def test_random_stream_through_framing_and_decoding_raises_only_our_errors():
    """Bytes a misbehaving peer might send, through the same two steps a connection uses."""
    rng = random.Random(99)
    for _ in range(200):
        reader = FrameReader(max_frame_bytes=4096)
        stream = b"".join(struct.pack(">i", rng.randrange(-4, 300))
                          + rng.randbytes(rng.randrange(300)) for _ in range(3))
        try:
            reader.feed(stream)
            while (frame := reader.next_frame()) is not None:
                _outcome(frame)
        except CorruptRequest:
            pass

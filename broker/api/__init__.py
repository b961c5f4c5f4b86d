"""Request handlers, one module per API family.

One form for every API (``outcome.py``)::

    async def handle_x(ctx: ApiContext, request: Request) -> XResponse: ...
    def handle_y(ctx: ApiContext, request: Request) -> YResponse | Later: ...

``ctx`` is the broker's ApiContext (``context.py``: config, node id, metadata client
and image, replica manager, group coordinator, producer ids, SASL mechanisms; never
the whole Broker, and Raft only through the metadata client).  A handler translates
the decoded message into calls on those and builds the response body.  ``None``
means "send nothing" (acks=0 produce); ``CLOSE`` asks the connection to close, as
Kafka does after a failed acks=0 produce.  The connection calls every handler in the
pass that decoded its request: a plain ``def`` answering now or with a ``Later`` runs
without a task (Produce and Fetch, the hot paths: on uvloop a task and the loop pass
that starts it cost about 7 us, a timer 3 us, with the future and wake-up of a
waiting request about a seventh of a small produce's instructions); an ``async def``
handler's coroutine runs in a task of its own.
"""
from __future__ import annotations

from kafka.protocol.api_key import ApiKey

from . import (  # issue #16  # security (broker/security/)
    acls,
    admin,
    client_quotas,  # KIP-546
    cluster,
    config_resources,  # ListConfigResources (KIP-1142, KIP-714's v0)
    configs,
    describe_partitions,
    describe_producers,
    elections,
    features,  # KIP-584: finalized feature levels
    fetch,
    group_acls,  # consumer groups (broker/groups/) behind their authorization gate
    log_offsets,
    metadata,
    offset_delete,  # KIP-496, in front of the group coordinator
    partitions,
    produce,
    producer_ids,
    quorum,  # KIP-853 / KIP-595: the metadata quorum's voters, described
    reassignments,  # KIP-455, on the controller
    records,
    sasl,
    scram_users,
    share_fetch,  # KIP-932: share groups, the partition leader's side
    share_group_offsets,  # KIP-932: a share group's offsets altered and deleted
    share_groups,  # KIP-932: share groups, the group coordinator's side
    share_state,  # KIP-932: the share coordinator's inter-broker calls
    telemetry,  # KIP-714: client metrics pushed to the broker
    transactions,  # the transaction coordinator (broker/transactions/)
    txn_markers,  # transactions: the partition leader's side
)
from .context import ApiContext
from .outcome import CLOSE, Answer, Handler, Later, answer_of

__all__ = ["CLOSE", "HANDLERS", "Answer", "ApiContext", "Handler", "Later", "answer_of"]

HANDLERS: dict[int, Handler] = {
    ApiKey.Produce: produce.handle_produce,
    ApiKey.Fetch: fetch.handle_fetch,
    ApiKey.ListOffsets: log_offsets.handle_list_offsets,
    ApiKey.Metadata: metadata.handle_metadata,
    ApiKey.ApiVersions: metadata.handle_api_versions,
    ApiKey.CreateTopics: admin.handle_create_topics,
    ApiKey.DeleteTopics: admin.handle_delete_topics,
    ApiKey.CreatePartitions: partitions.handle_create_partitions,
    ApiKey.DeleteRecords: records.handle_delete_records,
    ApiKey.DescribeCluster: cluster.handle_describe_cluster,
    ApiKey.DescribeLogDirs: cluster.handle_describe_log_dirs,
    ApiKey.ElectLeaders: elections.handle_elect_leaders,
    ApiKey.DescribeTopicPartitions: describe_partitions.handle_describe_topic_partitions,
    ApiKey.OffsetForLeaderEpoch: log_offsets.handle_offset_for_leader_epoch,
    ApiKey.InitProducerId: producer_ids.handle_init_producer_id,
    ApiKey.DescribeConfigs: configs.handle_describe_configs,
    ApiKey.AlterConfigs: configs.handle_alter_configs,
    ApiKey.IncrementalAlterConfigs: configs.handle_incremental_alter_configs,
    ApiKey.FindCoordinator: group_acls.handle_find_coordinator,
    ApiKey.JoinGroup: group_acls.handle_join_group,
    ApiKey.SyncGroup: group_acls.handle_sync_group,
    ApiKey.Heartbeat: group_acls.handle_heartbeat,
    ApiKey.LeaveGroup: group_acls.handle_leave_group,
    ApiKey.OffsetCommit: group_acls.handle_offset_commit,
    ApiKey.TxnOffsetCommit: group_acls.handle_txn_offset_commit,
    ApiKey.OffsetFetch: group_acls.handle_offset_fetch,
    ApiKey.OffsetDelete: offset_delete.handle_offset_delete,
    ApiKey.ListGroups: group_acls.handle_list_groups,
    ApiKey.DescribeGroups: group_acls.handle_describe_groups,
    ApiKey.DeleteGroups: group_acls.handle_delete_groups,
    ApiKey.ConsumerGroupHeartbeat: group_acls.handle_consumer_group_heartbeat,
    ApiKey.ConsumerGroupDescribe: group_acls.handle_consumer_group_describe,
    ApiKey.ShareGroupHeartbeat: share_groups.handle_share_group_heartbeat,
    ApiKey.ShareGroupDescribe: share_groups.handle_share_group_describe,
    ApiKey.DescribeShareGroupOffsets: share_groups.handle_describe_share_group_offsets,
    ApiKey.AlterShareGroupOffsets: share_group_offsets.handle_alter_share_group_offsets,
    ApiKey.DeleteShareGroupOffsets: share_group_offsets.handle_delete_share_group_offsets,
    ApiKey.ShareFetch: share_fetch.handle_share_fetch,
    ApiKey.ShareAcknowledge: share_fetch.handle_share_acknowledge,
    ApiKey.ReadShareGroupState: share_state.handle_read_share_group_state,
    ApiKey.WriteShareGroupState: share_state.handle_write_share_group_state,
    ApiKey.ReadShareGroupStateSummary: share_state.handle_read_share_group_state_summary,
    ApiKey.SaslHandshake: sasl.handle_sasl_handshake,
    ApiKey.SaslAuthenticate: sasl.handle_sasl_authenticate,
    ApiKey.DescribeUserScramCredentials: scram_users.handle_describe_user_scram_credentials,
    ApiKey.AlterUserScramCredentials: scram_users.handle_alter_user_scram_credentials,
    ApiKey.DescribeAcls: acls.handle_describe_acls,
    ApiKey.CreateAcls: acls.handle_create_acls,
    ApiKey.DeleteAcls: acls.handle_delete_acls,
    ApiKey.AddPartitionsToTxn: transactions.handle_add_partitions_to_txn,
    ApiKey.AddOffsetsToTxn: transactions.handle_add_offsets_to_txn,
    ApiKey.EndTxn: transactions.handle_end_txn,
    ApiKey.DescribeTransactions: transactions.handle_describe_transactions,
    ApiKey.ListTransactions: transactions.handle_list_transactions,
    ApiKey.WriteTxnMarkers: txn_markers.handle_write_txn_markers,
    ApiKey.DescribeProducers: describe_producers.handle_describe_producers,
    ApiKey.AlterPartitionReassignments: reassignments.handle_alter_partition_reassignments,
    ApiKey.ListPartitionReassignments: reassignments.handle_list_partition_reassignments,
    ApiKey.AddRaftVoter: quorum.handle_add_raft_voter,
    ApiKey.RemoveRaftVoter: quorum.handle_remove_raft_voter,
    ApiKey.DescribeQuorum: quorum.handle_describe_quorum,
    ApiKey.UpdateFeatures: features.handle_update_features,
    ApiKey.DescribeClientQuotas: client_quotas.handle_describe_client_quotas,
    ApiKey.AlterClientQuotas: client_quotas.handle_alter_client_quotas,
    ApiKey.GetTelemetrySubscriptions: telemetry.handle_get_telemetry_subscriptions,
    ApiKey.PushTelemetry: telemetry.handle_push_telemetry,
    ApiKey.ListConfigResources: config_resources.handle_list_config_resources,
}

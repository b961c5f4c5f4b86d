"""Consumer groups: the classic group protocol, KIP-848's consumer group protocol and
committed offsets (issues 7 and 14).

    placement.py          group id → ``__consumer_offsets`` partition (the core's hash)
    state.py              a group, its members and the state-machine table (pure)
    consumer_protocol.py  reading the "consumer" protocol's subscriptions/assignments (pure)
    records.py            Kafka's key/value formats of ``__consumer_offsets`` (pure)
    manager.py            the group cache, the core's shard for ``__consumer_offsets``:
                          loading, writes, offset expiry
    coordinator.py        JoinGroup, SyncGroup, Heartbeat, LeaveGroup, rebalance timers;
                          builds the collaborators below and answers FindCoordinator
                          with the core's lookup
    waiters.py            a member's waiting JoinGroup/SyncGroup and its timers
    static_members.py     static membership (KIP-345): rejoin under a new id, fencing
    results.py            what JoinGroup and SyncGroup answer (pure)
    offsets.py            OffsetCommit, TxnOffsetCommit (KIP-98/447), OffsetFetch
    admin.py              ListGroups, DescribeGroups, DeleteGroups
    consumer_group.py     a KIP-848 group: members, epochs, reconciliation (pure)
    assignors.py          KIP-848's server-side assignors, uniform and range (pure)
    consumer_coordinator.py  ConsumerGroupHeartbeat, ConsumerGroupDescribe, their timers

The coordinator of a group is the leader of the group's ``__consumer_offsets`` partition;
a broker that becomes that leader loads the partition and takes over (the coordinator
core, ``broker/coordinator/``, with manager.py as its shard).  The
request handlers live in ``broker/api/groups.py``.
"""
from .coordinator import GroupCoordinator, JoinResult, SyncResult
from .placement import OFFSETS_TOPIC, java_string_hashcode, partition_for

__all__ = ["GroupCoordinator", "JoinResult", "SyncResult", "OFFSETS_TOPIC",
           "java_string_hashcode", "partition_for"]

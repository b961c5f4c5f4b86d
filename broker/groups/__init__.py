"""Consumer groups: the classic group protocol and committed offsets (issue 7).

    placement.py          group id → ``__consumer_offsets`` partition (Kafka's hash)
    state.py              a group, its members and the state-machine table (pure)
    consumer_protocol.py  reading the "consumer" protocol's subscriptions/assignments (pure)
    records.py            Kafka's key/value formats of ``__consumer_offsets`` (pure)
    manager.py            the group cache: load/unload on leadership, writes, offset expiry
    coordinator.py        JoinGroup, SyncGroup, Heartbeat, LeaveGroup, rebalance timers
    static_members.py     static membership (KIP-345): rejoin under a new id, fencing
    results.py            what JoinGroup and SyncGroup answer (pure)
    offsets.py            OffsetCommit, TxnOffsetCommit (KIP-98/447), OffsetFetch
    admin.py              FindCoordinator, ListGroups, DescribeGroups, DeleteGroups

The coordinator of a group is the leader of the group's ``__consumer_offsets`` partition;
a broker that becomes that leader loads the partition and takes over (manager.py).  The
request handlers live in ``broker/api/groups.py``.
"""
from .coordinator import GroupCoordinator, JoinResult, SyncResult
from .placement import OFFSETS_TOPIC, java_string_hashcode, partition_for

__all__ = ["GroupCoordinator", "JoinResult", "SyncResult", "OFFSETS_TOPIC",
           "java_string_hashcode", "partition_for"]

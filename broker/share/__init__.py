"""Share groups (KIP-932), the partition leader's side: each share partition's in-flight
window (partition.py), the batches a read hands to it (spans.py), the share sessions of
ShareFetch and ShareAcknowledge (sessions.py), the partitions this broker leads for share
groups with their lock timers, loading and persisting (manager.py), and their state on
``__share_group_state``: the records (records.py), the share coordinator (coordinator.py)
and how a leader reaches it, in process or over the inter-broker listener (persister.py,
remote.py).  The group side (membership, assignment) is broker/groups/; the internals are
in docs/share-partitions.md."""

"""Share groups (KIP-932), the partition leader's side: each share partition's in-flight
window (partition.py), the batches a read hands to it (spans.py), the partitions this
broker leads for share groups with their lock timers (manager.py) and the share sessions
of ShareFetch and ShareAcknowledge (sessions.py).  The group side (membership,
assignment) is broker/groups/."""

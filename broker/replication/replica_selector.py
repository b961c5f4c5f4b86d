"""Which replica a consumer should read from (KIP-392, Kafka's RackAwareReplicaSelector).

Only the leader decides, for consumers whose Fetch (v11+) names a ``rack_id``
(``client.rack``), and only with ``replica.selector.class`` set to the rack-aware selector.
The candidates are the leader and every live follower whose log holds the fetch offset
(its log start at or below it, its log end past it, as the leader last saw from its
fetches).  Kafka's rule: the leader when it is in the client's rack or no candidate is;
otherwise the candidate of that rack with the highest log end offset, the one caught up
most recently breaking a tie.  The answer travels as the partition's
``preferred_read_replica`` with no records; the client then fetches from that replica,
which serves it below its own high watermark (``Partition.read(follower_read=True)``).

Pure: no I/O, no clock.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .partition import Partition


def preferred_read_replica(partition: Partition, fetch_offset: int, client_rack: str,
                           rack_of: Callable[[int], str | None],
                           is_live: Callable[[int], bool]) -> int | None:
    """The replica id the consumer should read ``partition`` from, or None when that is
    the leader (this broker) or no rack was given."""
    if not client_rack or rack_of(partition.node_id) == client_rack:
        return None
    candidates = [
        (state.log_end_offset, state.last_caught_up_ms, replica_id)
        for replica_id, state in partition.followers.items()
        if is_live(replica_id) and rack_of(replica_id) == client_rack
        and state.log_start_offset <= fetch_offset < state.log_end_offset]
    if not candidates:
        return None
    return max(candidates)[2]

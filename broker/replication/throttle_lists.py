"""Which replicas the replication throttles apply to (Kafka's throttled-replica lists).

``leader.replication.throttled.replicas`` and ``follower.replication.throttled.replicas``
are topic configs (``throttle.py`` parses them); this module answers, from the newest
metadata image, whether one leader-to-follower or follower fetch counts against the
broker's ``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate``.
"""
from __future__ import annotations

from collections.abc import Callable

from ..controller.state import ClusterState
from ..topics import THROTTLED_REPLICAS_CONFIGS
from .partition import Partition
from .throttle import ThrottledReplicas, parse_throttled_replicas

LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS = THROTTLED_REPLICAS_CONFIGS


class ThrottleLists:
    """Reads the lists from ``image()`` at each call (no cache).  Event-loop only."""

    def __init__(self, node_id: int, image: Callable[[], ClusterState]):
        self.node_id = node_id
        self._image = image

    def throttled_replicas(self, topic: str, name: str) -> ThrottledReplicas:
        """The topic's ``name`` list (leader or follower) as the current image has it."""
        info = self._image().topics.get(topic)
        return parse_throttled_replicas(info.configs.get(name) if info is not None else None)

    def leader_throttles(self, partition: Partition, replica_id: int) -> bool:
        """Whether what this leader sends to follower ``replica_id`` counts against
        ``leader.replication.throttled.rate``.  Kafka's rule: the topic's leader list
        names this partition on this broker (``p:us`` or ``*``) and the follower is out
        of the ISR.  Raftwood's own, on top: a replica joining the partition (an adding
        replica of a reassignment, or one the leader's image does not list yet) is
        throttled without any list, as it was before the lists were served."""
        if replica_id in partition.adding_replicas or replica_id not in partition.replicas:
            return True
        return replica_id not in partition.isr and self.throttled_replicas(
            partition.topic, LEADER_THROTTLED_REPLICAS).throttles(partition.index, self.node_id)

    def follower_throttles(self, partition: Partition) -> bool:
        """Whether this follower's fetches of ``partition`` count against
        ``follower.replication.throttled.rate``: the topic's follower list names it on
        this broker (``p:us`` or ``*``).  The fetcher applies it only while the replica
        is behind the leader (Kafka's isReplicaInSync)."""
        return self.throttled_replicas(partition.topic, FOLLOWER_THROTTLED_REPLICAS).throttles(
            partition.index, self.node_id)

"""CoordinatorContext: what a coordinator on an internal topic uses of its broker.

The group and transaction coordinators (and the transaction marker channel) get this
instead of the whole Broker: the configuration, the replica manager (their partitions'
logs: loading, appending, acks) and the newest metadata image, read through the
metadata client.  ``broker/node.py`` builds one; a test may pass any object with the
same three attributes.  Fields are set once; the objects they name are the broker's
own (event-loop only).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import BrokerConfig
    from ..controller.metadata_client import ClusterState, MetadataClient
    from ..replication.replica_manager import ReplicaManager


@dataclass(frozen=True)
class CoordinatorContext:
    config: BrokerConfig
    replica_manager: ReplicaManager
    metadata: MetadataClient

    @property
    def image(self) -> ClusterState:
        """The newest applied metadata image (read it, never mutate it)."""
        return self.metadata.image

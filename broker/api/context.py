"""ApiContext: what request handlers may use, instead of the whole Broker.

The Broker builds one at start-up and the connection passes it to every handler
(``async def handle(ctx, request)``).  It holds exactly the collaborators handlers
use; anything else of the broker (the store, the controller, the lifecycle, the
listeners) is out of their reach.  In particular handlers reach the cluster metadata
(reads and Raft writes alike) only through ``metadata``, a MetadataClient.

Fields are set once; the objects they name are the broker's own (event-loop only).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..metrics.client_metrics import ClientTelemetry
from ..quotas.rates import ClientQuotas
from ..security.authorizer import ALLOW_ALL, Authorizer
from ..share.manager import ShareState

if TYPE_CHECKING:
    from ..config import BrokerConfig
    from ..controller.metadata_client import ClusterState, MetadataClient
    from ..groups import GroupCoordinator
    from ..replication.fetch_sessions import FetchSessionCache
    from ..replication.producer_ids import ProducerIdManager
    from ..replication.replica_manager import ReplicaManager
    from ..security.sasl import SaslMechanisms
    from ..transactions import TransactionCoordinator


@dataclass(frozen=True)
class ApiContext:
    config: BrokerConfig
    node_id: int
    metadata: MetadataClient
    replica_manager: ReplicaManager
    groups: GroupCoordinator
    producer_ids: ProducerIdManager
    sasl: SaslMechanisms
    transactions: TransactionCoordinator
    fetch_sessions: FetchSessionCache  # incremental fetch sessions (KIP-227)
    # ACLs (authorizer.class.name); its ``allows*`` / ``refused`` say what a request's
    # principal may do.  Off (the default, and the Broker's without the setting):
    # everything is allowed.
    authorizer: Authorizer = ALLOW_ALL
    # Share groups, the partition leader's side (KIP-932): share sessions and the share
    # partitions led here.  Built from the replica manager and the group side when not
    # given (a frozen dataclass sets its derived field through object.__setattr__).
    share: ShareState | None = None
    # Client quotas (KIP-546): this broker's byte rates per client, throttling Produce
    # and Fetch answers (the quotas themselves are in the metadata image).  Built from
    # the config's quota.window.* settings when not given.
    quotas: ClientQuotas | None = None
    # KIP-714 client telemetry: subscriptions and pushed metrics (the Broker registers
    # it with its metrics registry).  Built from the config when not given.
    telemetry: ClientTelemetry | None = None

    def __post_init__(self) -> None:
        if self.quotas is None:
            object.__setattr__(self, "quotas", ClientQuotas.for_broker(self.config))
        if self.telemetry is None:
            object.__setattr__(self, "telemetry", ClientTelemetry.for_broker(self.config))
        if self.share is None:
            object.__setattr__(self, "share",
                               ShareState.for_broker(self.replica_manager, self.groups,
                                                    self.config, self.metadata))

    @property
    def image(self) -> ClusterState:
        """The newest applied metadata image (read it, never mutate it)."""
        return self.metadata.image

"""The Broker: configuration, metadata store, controller, replica manager and server.

Start-up order: open the metadata store (a Raft node, or a local file when alone);
start the Kafka listener; register with the cluster, then heartbeat.  The replica
manager acts on the first image that shows this process registered (opening and
recovering logs then): never on a replayed or previous-incarnation image.  Shutdown (SIGTERM/SIGINT)
in uvicorn's order, with Kafka's controlled shutdown first: move leadership away,
stop accepting, answer what is in flight within a bound, cancel the rest, close every
log cleanly (the clean-shutdown marker lets the next start skip the recovery scan),
and leave the Raft group last.

A fatal failure (the only log directory went offline, KIP-112) takes the same path
with exit code 1: the controlled shutdown stops heartbeats and fences this broker, so
the controller moves its leaderships and drops it from every ISR; its logs, already
closed without writing, are left for recovery on a healthy disk.
"""
from __future__ import annotations

import asyncio
import gc
import logging
import signal

from .api.context import ApiContext
from .api.status import status
from .config import BrokerConfig, ConfigError
from .controller.controller import Controller
from .controller.lifecycle import BrokerLifecycle
from .controller.metadata_client import MetadataClient, MetadataUnavailable
from .controller.store import open_store
from .coordinator.context import CoordinatorContext
from .dynamic_config import DynamicBrokerConfig
from .groups import GroupCoordinator
from .metrics import BrokerMetrics, MetricSources
from .network.connection import Connection, ConnectionContext
from .network.limits import ConnectionLimits
from .replication.fetch_sessions import FetchSessionCache
from .replication.producer_ids import ProducerIdManager
from .replication.replica_manager import ReplicaManager
from .security import tls
from .security.authorizer import Authorizer, image_bindings
from .security.sasl import SaslMechanisms, scram_lookup
from .tasks import TaskSupervisor
from .transactions import TransactionCoordinator
from .ui import page as replication_page
from .ui.feed import ViewContext, broker_feed

log = logging.getLogger(__name__)

SHUTDOWN_DRAIN_S = 5.0


class Broker:
    """One broker process. Event-loop only (after construction).

    ``exit_code`` is 0 unless a fatal failure stopped the broker (then 1).
    """

    def __init__(self, config: BrokerConfig):
        self.config = config
        self.node_id = config.node_id
        self.exit_code = 0
        self.tasks = TaskSupervisor(f"[Broker {self.node_id}]", self._stop_after_fatal)
        self.store = open_store(config)
        # Everything but this class reaches the metadata (images, Raft commands) through it.
        self.metadata = MetadataClient(self.store)
        self.replica_manager = ReplicaManager(config, self.metadata,
                                              on_fatal=self._stop_after_fatal)
        # Dynamic broker configs first: partitions opened for an image take its defaults.
        self.tls_contexts: dict = {}  # listener name → live SSLContext (dynamic reload)
        # max.connections and its kin, counted by every connection, changed at run time.
        self.connection_limits = ConnectionLimits(
            config, config.listener_plan.inter_broker_name)
        self.dynamic_config = DynamicBrokerConfig(config, self.replica_manager,
                                                  self.connection_limits,
                                                  lambda: self.tls_contexts)
        self.metadata.add_listener(self.dynamic_config.apply_image)
        self.metadata.add_listener(self.replica_manager.apply_image)
        self.controller = Controller(self.metadata, config)
        self.lifecycle = BrokerLifecycle(self.metadata, config, self.replica_manager)
        self.replica_manager.incarnation = self.lifecycle.incarnation
        # Before the store starts: it listens for leadership of __consumer_offsets partitions
        # (and creates the topic on first use through the metadata client).
        # What the coordinators get instead of this Broker (broker/coordinator/context.py).
        coordinator_context = CoordinatorContext(config, self.replica_manager, self.metadata)
        self.groups = GroupCoordinator(
            coordinator_context, create_topic=self.metadata.create_topic_on_live_brokers)
        self.producer_ids = ProducerIdManager(self.metadata)
        # Before the store starts too: it listens for leadership of __transaction_state.
        self.transactions = TransactionCoordinator(
            coordinator_context, self.producer_ids,
            create_topic=self.metadata.create_topic_on_live_brokers)
        self.sasl = SaslMechanisms(config, scram_lookup(lambda: self.metadata.image))
        # What request handlers get instead of this Broker (broker/api/context.py).
        self.api_context = ApiContext(
            config=config, node_id=self.node_id, metadata=self.metadata,
            replica_manager=self.replica_manager, groups=self.groups,
            producer_ids=self.producer_ids, sasl=self.sasl, transactions=self.transactions,
            fetch_sessions=FetchSessionCache(config["max.incremental.fetch.session.cache.slots"]),
            authorizer=Authorizer(config, image_bindings(lambda: self.metadata.image)))
        # Its registry, served when metrics.port is set, with the replication view.
        self.metrics = BrokerMetrics(
            config, MetricSources(self.replica_manager, self.metadata, self.store, self.groups,
                                  self.api_context.fetch_sessions),
            replication_feed=lambda: broker_feed(ViewContext(
                self.node_id, config, config.listener_plan.inter_broker_name,
                lambda: status(self.api_context), lambda: self.metadata.image)),
            replication_page=replication_page)
        self.metrics.registry.register(self.api_context.telemetry)
        self.connections: set[Connection] = set()
        # What each connection gets instead of this Broker (broker/network/connection.py).
        self.connection_context = ConnectionContext(
            config, self.api_context, self.connections, self.connection_limits,
            self.metrics.requests)
        self._servers: list[asyncio.base_events.Server] = []
        self._stopped = asyncio.Event()

    @property
    def image(self):
        return self.metadata.image

    async def start(self) -> None:
        await self.store.start()
        self.replica_manager.start_maintenance()
        self.groups.start()
        self.transactions.start()
        plan = self.config.listener_plan
        await self._start_listeners(plan)
        await self.metrics.start()
        # Without these loops the broker would run on fenced, or as a controller that
        # fences nobody: a crash in either stops the broker (exit code 1).
        self.tasks.spawn("controller", self.controller.run(), fatal=True)
        await self.lifecycle.register()
        await self._init_cluster_id()
        self.tasks.spawn("heartbeat", self.lifecycle.heartbeat_loop(), fatal=True)
        log.info("Raftwood broker %d started: listening on %s, advertised as %s, "
                 "inter-broker listener %s, cluster %s, data in %s", self.node_id,
                 _describe(plan.listeners), _describe(plan.advertised), plan.inter_broker_name,
                 self.metadata.image.cluster_id, self.config["log.dirs"])
        # What start-up built (logs, indexes, the metadata image) lives as long as the
        # broker: moved out of the collector's generations, full collections no longer
        # walk it (measured under acks=all load: a full collection went from about 30 ms
        # of CPU to 11 ms).  Collected first, so no start-up garbage is kept forever.
        gc.collect()
        gc.freeze()

    async def _start_listeners(self, plan) -> None:
        """One server per listener; TLS contexts are built first, so a bad keystore stops
        the start before anything listens (ConfigError)."""
        try:
            contexts = tls.server_contexts(self.config)
        except tls.SettingError as exc:
            raise ConfigError(str(exc)) from exc
        self.tls_contexts = contexts
        loop = asyncio.get_running_loop()
        for listener in plan.listeners:
            server = await loop.create_server(
                lambda listener=listener: Connection(self.connection_context, listener),
                listener.host or None,
                listener.port, ssl=contexts.get(listener.name), reuse_address=True,
                backlog=1024)
            self._servers.append(server)

    async def _init_cluster_id(self, attempts: int = 60) -> None:
        """Set the cluster id once per cluster, retrying while the Raft leadership moves
        (a refused command is retriable, as for registration)."""
        for _ in range(attempts):
            if self.metadata.image.cluster_id:
                return
            try:
                await self.metadata.init_cluster(_new_cluster_id())
                return
            except MetadataUnavailable as exc:
                log.info("Raftwood broker %d: cluster id not set yet (%s); retrying",
                         self.node_id, exc)
                await asyncio.sleep(0.5)
        raise MetadataUnavailable("could not set the cluster id: no metadata quorum")

    async def serve_until_signalled(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stopped.set)
        start = loop.create_task(self.start())
        stopped = loop.create_task(self._stopped.wait())
        await asyncio.wait({start, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if not start.done():
            start.cancel()
        elif start.exception() is not None:
            stopped.cancel()
            await self.shutdown()
            raise start.exception()
        await stopped
        await self.shutdown()

    def request_stop(self) -> None:
        self._stopped.set()

    def _stop_after_fatal(self, reason: str) -> None:
        """Stop callback of every TaskSupervisor of this broker: shut down, exit code 1."""
        if self.exit_code == 0:
            self.exit_code = 1
            log.error("Raftwood broker %d stopping after a fatal error: %s", self.node_id, reason)
        self._stopped.set()

    async def shutdown(self) -> None:
        log.info("Raftwood broker %d shutting down", self.node_id)
        await self.lifecycle.controlled_shutdown()  # no heartbeat after this; fenced
        await self.tasks.shutdown()
        for server in self._servers:
            server.close()
        await self.metrics.stop()
        await self.groups.shutdown()  # waiting joins/syncs answer now, before the drain
        await self.transactions.shutdown()
        connections = list(self.connections)
        if connections:
            await asyncio.gather(*(c.drain(SHUTDOWN_DRAIN_S) for c in connections),
                                 return_exceptions=True)
        await self.replica_manager.shutdown()
        await self.store.stop()
        log.info("Raftwood broker %d stopped", self.node_id)


def _describe(listeners) -> str:
    return ",".join(f"{listener.name}://{listener.host}:{listener.port}"
                    for listener in listeners)


def _new_cluster_id() -> str:
    """A Kafka-style cluster id: 16 random bytes, URL-safe base64 without padding."""
    import base64
    import uuid
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")

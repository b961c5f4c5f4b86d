"""The Broker: configuration, metadata, replica manager and server, and their lifecycle.

Shutdown (SIGTERM/SIGINT) in uvicorn's order: stop accepting, answer what is in
flight within a bound, cancel the rest, then close every log cleanly (which writes
the clean-shutdown marker so the next start skips the recovery scan).
"""
from __future__ import annotations

import asyncio
import logging
import signal

from .config import BrokerConfig
from .handlers.producer_ids import ProducerIdManager
from .local_metadata import LocalMetadata
from .replica_manager import ReplicaManager
from .server import Connection

log = logging.getLogger(__name__)

SHUTDOWN_DRAIN_S = 5.0


class Broker:
    """One broker process. Event-loop only (after construction)."""

    def __init__(self, config: BrokerConfig):
        self.config = config
        self.node_id = config.node_id
        self.metadata = LocalMetadata(config["log.dirs"], config["cluster.id"])
        self.replica_manager = ReplicaManager(config, self.metadata)
        self.producer_ids = ProducerIdManager(self.metadata)
        self.connections: set[Connection] = set()
        self._server: asyncio.base_events.Server | None = None
        self._stopped = asyncio.Event()

    async def start(self) -> None:
        self.replica_manager.startup()
        self.replica_manager.start_maintenance()
        host, port = self.config.listener
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: Connection(self), host, port,
                                                reuse_address=True, backlog=1024)
        adv_host, adv_port = self.config.advertised_listener
        log.info("Raftwood broker %d started: listening on %s:%d, advertised as %s:%d, "
                 "cluster %s, data in %s", self.node_id, host, port, adv_host, adv_port,
                 self.metadata.cluster_id, self.config["log.dirs"])

    async def serve_until_signalled(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stopped.set)
        await self.start()
        await self._stopped.wait()
        await self.shutdown()

    def request_stop(self) -> None:
        self._stopped.set()

    async def shutdown(self) -> None:
        log.info("Raftwood broker %d shutting down", self.node_id)
        if self._server is not None:
            self._server.close()
        connections = list(self.connections)
        if connections:
            await asyncio.gather(*(c.drain(SHUTDOWN_DRAIN_S) for c in connections),
                                 return_exceptions=True)
        await self.replica_manager.shutdown()
        log.info("Raftwood broker %d stopped", self.node_id)

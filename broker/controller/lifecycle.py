"""Each broker's side of membership: register, heartbeat, controlled shutdown.

The heartbeat loop reacts to its timer (``broker.heartbeat.interval.ms``) and to an
image that brings a new topic or partition (a heartbeat then goes at once: the broker
that created it waits for every live broker to report it, ``propagation.py``); it
sends this broker's epoch, the log end offset of every replica it hosts (the
controller's election hints) and the position of the newest image it applied,
re-registers when the cluster no longer knows its epoch, and exits on cancellation.  Every metadata
write goes through the MetadataClient (register_broker, heartbeat, fence_self).

Invariant: once ``controlled_shutdown`` has taken the heartbeat lock no heartbeat is
in flight or sent again, so none can be ordered after this broker's fencing and
unfence it.
"""
from __future__ import annotations

import asyncio
import logging
import uuid

from .metadata_client import ApplyError, MetadataClient, MetadataUnavailable

log = logging.getLogger(__name__)

REGISTER_RETRY_S = 0.5
SHUTDOWN_WAIT_S = 10.0


class BrokerLifecycle:
    """Event-loop only.  ``metadata``: a MetadataClient (or a store, wrapped in one)."""

    def __init__(self, metadata, config, replica_manager):
        self.metadata = MetadataClient.wrap(metadata)
        self.config = config
        self.node_id = config.node_id
        self.replica_manager = replica_manager
        self.incarnation = uuid.uuid4().hex
        self.broker_epoch = -1
        self.interval_s = config["broker.heartbeat.interval.ms"] / 1000.0
        # Held around every heartbeat; controlled shutdown takes it to stop heartbeats
        # first, so none can be ordered after our fencing and unfence us again.
        self._heartbeat_lock = asyncio.Lock()
        self.shutting_down = False
        # Set by an image with a topic or partition the previous one lacked.
        self._new_partitions = asyncio.Event()
        self._partition_counts: dict[str, int] = {}
        self.metadata.add_listener(self._on_image)
        if replica_manager is not None:  # logs opened after their image: report them too
            replica_manager.applier.add_caught_up_listener(lambda _: self._new_partitions.set())

    def _on_image(self, image) -> None:
        """Listener: wake the heartbeat loop when a topic appeared or grew."""
        counts = {t.topic_id: len(t.partitions) for t in image.topics.values()}
        if any(n > self._partition_counts.get(topic_id, 0) for topic_id, n in counts.items()):
            self._new_partitions.set()
        self._partition_counts = counts

    async def register(self, deadline_s: float = 120.0) -> int:
        """Register with the cluster, retrying until a quorum answers."""
        host, port = self.config.advertised_listener
        loop = asyncio.get_running_loop()
        give_up = loop.time() + deadline_s
        while True:
            try:
                self.broker_epoch = await self.metadata.register_broker(
                    self.node_id, host, port, self.incarnation,
                    self.config["unclean.leader.election.enable"],
                    self.config.listener_plan.endpoints(), self.config["broker.rack"] or None)
                log.info("[Broker %d] registered with broker epoch %d", self.node_id,
                         self.broker_epoch)
                return self.broker_epoch
            except MetadataUnavailable as exc:
                if loop.time() > give_up:
                    raise
                log.info("[Broker %d] waiting for the metadata quorum: %s", self.node_id, exc)
                await asyncio.sleep(REGISTER_RETRY_S)

    async def heartbeat_loop(self) -> None:
        while True:
            await self._until_next_heartbeat()
            async with self._heartbeat_lock:
                if self.shutting_down:
                    return
                known = await self._heartbeat()
            if not known:
                log.warning("[Broker %d] cluster does not know epoch %d: re-registering",
                            self.node_id, self.broker_epoch)
                await self.register()

    async def _until_next_heartbeat(self) -> None:
        """One interval, or less when an image brings new partitions.  Not
        ``asyncio.wait_for``: on Python 3.11 it can swallow a cancellation (gh-86296)."""
        waiter = asyncio.ensure_future(self._new_partitions.wait())
        try:
            await asyncio.wait({waiter}, timeout=self.interval_s)
        finally:
            waiter.cancel()
        self._new_partitions.clear()

    async def _heartbeat(self) -> bool:
        """One heartbeat; False when the cluster no longer knows our broker epoch."""
        try:
            return await self.metadata.heartbeat(
                self.node_id, self.broker_epoch, self.config["unclean.leader.election.enable"],
                self.replica_manager.log_end_offsets(), timeout_s=self.interval_s * 2,
                metadata_position=self.replica_manager.applied_position)
        except (MetadataUnavailable, ApplyError) as exc:
            log.info("[Broker %d] heartbeat not applied: %s", self.node_id, exc)
            return True

    async def controlled_shutdown(self) -> None:
        """Move leadership away before exiting: fence ourselves, as Kafka fences every
        broker that shuts down cleanly (elections follow, we leave every ISR so acks=all
        writes need not wait for our session to expire, and Metadata stops listing us),
        and wait until our image shows it.  Skipped when no other broker is live, and
        when this broker reaches no majority of the metadata quorum's voters (the fencing
        could not commit: the wait would only delay the exit by its whole bound)."""
        async with self._heartbeat_lock:  # no heartbeat in flight, none after this
            self.shutting_down = True
        image = self.metadata.image
        if not image.is_live(self.node_id) or len(image.live_brokers()) <= 1:
            return
        if not self.metadata.quorum_reachable():
            log.warning("[Broker %d] controlled shutdown skipped: no majority of the "
                        "metadata quorum's voters is reachable", self.node_id)
            return
        try:
            await self.metadata.fence_self(self.node_id,
                                           self.config["unclean.leader.election.enable"],
                                           timeout_s=SHUTDOWN_WAIT_S)
            log.info("[Broker %d] controlled shutdown: leadership moved", self.node_id)
        except (MetadataUnavailable, ApplyError) as exc:
            log.warning("[Broker %d] controlled shutdown incomplete: %s", self.node_id, exc)

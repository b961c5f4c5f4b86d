"""The controller: decisions taken on the Raft leader, applied through the metadata client.

Runs on every broker's event loop but acts only while this broker's Raft node leads.
It reacts to:
  * heartbeats (every broker's, seen as applied commands): a broker is alive while
    its heartbeats keep arriving; the log end offsets they carry are election hints;
  * its own timer (every half heartbeat interval): fence brokers whose session
    expired (elections follow inside the same command), and, every
    ``leader.imbalance.check.interval.seconds``, restore preferred leaders.
Exits on cancellation.  On becoming controller every registered broker gets a fresh
session (a new controller cannot know how long a broker has been silent).

Every decision carries the Raft term this node leads in
(``metadata.controller_term``, read before deciding): the apply refuses it unless it
is committed in that term, so a decision outlives no leadership.  Fencing also needs evidence that
the quorum works: this broker's own heartbeats are committed like everyone's, so while its own
session has expired too the controller has no quorum, and fences nobody (a controller cut off
would otherwise conclude that every other broker died).
"""
from __future__ import annotations

import asyncio
import logging
import time

from ..logs import state_change
from .commands import Heartbeat, RegisterBroker
from .metadata_client import ApplyError, MetadataClient, MetadataUnavailable
from .state import ClusterState

log = logging.getLogger(__name__)

UNFENCE_CHECK_INTERVAL_S = 3.0   # between preferred-leader checks after a broker returns
UNFENCE_CHECK_WINDOW_S = 60.0    # how long after the return they go on


class Controller:
    """Event-loop only.  ``metadata``: a MetadataClient (or a store, wrapped in one)."""

    def __init__(self, metadata, config):
        self.metadata = MetadataClient.wrap(metadata)
        self.node_id = config.node_id
        self.session_timeout_s = config["broker.session.timeout.ms"] / 1000.0
        self.tick_s = max(0.05, config["broker.heartbeat.interval.ms"] / 2000.0)
        self.unclean_default = config["unclean.leader.election.enable"]
        self.auto_rebalance = config["auto.leader.rebalance.enable"]
        self.rebalance_interval_s = config["leader.imbalance.check.interval.seconds"]
        self.last_seen: dict[int, float] = {}
        self.leo_hints: dict[str, dict[int, int]] = {}
        self.active = False
        self._last_rebalance = 0.0
        self._live_epochs: dict[int, int] = {}   # live broker -> broker epoch, last tick
        self._returns_until = 0.0                # end of the window of quick checks
        self._next_quick_check = 0.0
        self.metadata.add_membership_observer(self.on_membership)

    def on_membership(self, command: RegisterBroker | Heartbeat) -> None:
        """A registration or heartbeat was applied: the broker is alive now. A
        heartbeat carries its replicas' log end offsets (election hints)."""
        broker_id = command.broker_id
        self.last_seen[broker_id] = time.monotonic()
        if isinstance(command, Heartbeat):
            for key, leo in (command.log_end_offsets or {}).items():
                self.leo_hints.setdefault(key, {})[broker_id] = leo

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.tick_s)
            try:
                await self.tick()
            except (MetadataUnavailable, ApplyError) as exc:
                log.info("[Controller %d] deferred: %s", self.node_id, exc)

    async def tick(self) -> None:
        term = self.metadata.controller_term
        if term is None:
            if self.active:
                log.info("[Controller %d] no longer the controller", self.node_id)
            self.active = False
            return
        now = time.monotonic()
        image: ClusterState = self.metadata.image
        if not self.active:
            self.active = True
            self._last_rebalance = now
            self.last_seen = dict.fromkeys(image.brokers, now)
            self._live_epochs = {}  # every live broker counts as returning
            self.maybe_open_return_window(image, now)
            log.info("[Controller %d] became the controller (metadata version %d)",
                     self.node_id, image.version)
            return
        expired = self.expired_brokers(image, now)
        if expired:
            log.warning("[Controller %d] fencing brokers %s: no heartbeat for %.1fs",
                        self.node_id, expired, self.session_timeout_s)
            elections = await self.metadata.fence_brokers(
                expired, self.leo_hints, self.unclean_default, controller_term=term)
            self._log_elections(elections)
        self.maybe_open_return_window(self.metadata.image, now)
        if self.auto_rebalance and self.rebalance_due(now):
            await self.restore_preferred_leaders(self.metadata.image, term)

    def maybe_open_return_window(self, image: ClusterState, now: float) -> None:
        """A live broker with a broker epoch not seen live at the last tick (it
        registered, or a heartbeat unfenced it) opens the window of quick checks."""
        live = {b: image.brokers[b].broker_epoch for b in image.live_brokers()}
        returned = sorted(b for b, epoch in live.items() if self._live_epochs.get(b) != epoch)
        self._live_epochs = live
        if returned:
            log.debug("[Controller %d] brokers %s (re)joined: preferred leaders checked "
                      "every %.0fs for %.0fs", self.node_id, returned,
                      UNFENCE_CHECK_INTERVAL_S, UNFENCE_CHECK_WINDOW_S)
            if now > self._returns_until:   # no window open: the first check soon
                self._next_quick_check = now + UNFENCE_CHECK_INTERVAL_S
            self._returns_until = now + UNFENCE_CHECK_WINDOW_S

    def rebalance_due(self, now: float) -> bool:
        """The periodic check (``leader.imbalance.check.interval.seconds``), or a quick
        one inside the window after a broker returned; marks it done."""
        quick = now <= self._returns_until and now >= self._next_quick_check
        periodic = now - self._last_rebalance >= self.rebalance_interval_s
        if quick:
            self._next_quick_check = now + UNFENCE_CHECK_INTERVAL_S
        if periodic:
            self._last_rebalance = now
        return quick or periodic

    def expired_brokers(self, image: ClusterState, now: float) -> list[int]:
        """Live brokers silent for longer than the session timeout; none while our own
        heartbeats are not being committed either (we lack a quorum, not they)."""
        silent = [b for b in image.live_brokers()
                  if now - self.last_seen.get(b, now) > self.session_timeout_s]
        if self.node_id in image.brokers and \
                now - self.last_seen.get(self.node_id, now) > self.session_timeout_s:
            if silent:
                log.info("[Controller %d] no heartbeat committed for %.1fs, ours included: "
                         "no quorum, fencing nobody", self.node_id, self.session_timeout_s)
            return []
        return silent

    async def restore_preferred_leaders(self, image: ClusterState, term: int | None) -> None:
        targets = [(topic.name, index) for topic, index, p in image.partitions()
                   if p.leader != p.replicas[0] and p.replicas[0] in p.isr
                   and image.is_live(p.replicas[0])]
        if targets:
            elections = await self.metadata.elect_preferred(targets, controller_term=term)
            self._log_elections(elections, "preferred")

    def _log_elections(self, elections, kind: str = "") -> None:
        for e in elections:
            log.info("[Controller %d] %s election: %s-%d led by %d in epoch %d%s", self.node_id,
                     kind or "leader", e.topic, e.partition, e.leader, e.leader_epoch,
                     " (UNCLEAN)" if e.unclean else "", extra=state_change(
                         partition=f"{e.topic}-{e.partition}", controller=self.node_id,
                         leader=e.leader, leader_epoch=e.leader_epoch, unclean=e.unclean,
                         reason=f"{kind or 'leader'}-election"))

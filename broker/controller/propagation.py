"""Which metadata images the other brokers have applied, learnt from their heartbeats.

CreateTopics and CreatePartitions answer once every live broker's metadata knows the
new partitions, so a client's next request to any broker finds them (issue #16: a
client creating 20 topics and asking every broker at once got
UNKNOWN_TOPIC_OR_PARTITION from the brokers that had not applied them yet).

The design, the simplest correct one found: every broker heartbeat carries the
position (``ClusterState.position()``: Raft term, index, version) of the newest image
its sender has acted on: its logs are open and its leaderships taken (the replica
manager's ``applied_position``; a large creation opens its logs in slices after the
image arrived, and is reported once the last one is open).
Heartbeats are Raft entries, so *every* broker applies every other broker's reports
in log order and any broker (not only the controller) can wait: the broker that
handled the request waits until each live broker other than itself (registered,
unfenced, in its own newest image) has reported a position at least as new as the
image its change produced, and until its own replica manager has acted on it
(``follow_local``; usually done when the metadata write returns).

Why it is correct: all brokers apply the same log, and an image's position is the
position of the last command that changed it, so a broker whose image is at or past
position P has applied every change up to P.  Reports are kept as the *latest* per
broker, not the highest (a broker restarted with an emptied metadata directory starts
low again), and a registration forgets the previous incarnation's report.  Fencing
shrinks the set of live brokers waited for, so an image change re-checks too.

Latency: brokers heartbeat every ``broker.heartbeat.interval.ms``, and at once when an
image brings a new topic or partition (``BrokerLifecycle``), so the wait is usually one
Raft round trip after the others applied the change.  A wait is bounded by the
request's timeout; what is still unknown then is the caller's to report (Kafka answers
REQUEST_TIMED_OUT for those topics, which are created all the same).

Event-loop only (observers and listeners are called on the loop).
"""
from __future__ import annotations

import asyncio

from ..purgatory import DelayedOperation, Purgatory
from .commands import Heartbeat, RegisterBroker

Position = tuple
_KEY = "metadata-propagation"  # one key: every heartbeat is a trigger for every waiter


class MetadataPropagation:
    """Tracks the latest reported position of each broker (see the module doc).

    ``store`` is a LocalStore or RaftStore; a stand-in without their observer hooks (a
    unit test's) reports nothing, so only a cluster without other live brokers answers
    a wait at once."""

    def __init__(self, store):
        self._store = store
        self.reported: dict[int, Position] = {}
        self._local = None  # this broker's image applier (``follow_local``)
        self._purgatory = Purgatory("metadata-propagation")
        if hasattr(store, "add_membership_observer"):
            store.add_membership_observer(self._on_membership)
            store.add_listener(self._on_image)

    def follow_local(self, applier) -> None:
        """Count this broker's own ``applier.applied_position`` (its replica manager's
        ImageApplier) as its report, re-checking the waits each time it moves."""
        self._local = applier
        applier.add_caught_up_listener(lambda _position: self._trigger())

    def _on_membership(self, command) -> None:
        """Trigger: a heartbeat reports a position; a registration starts a new
        incarnation, whose position is unknown until its first heartbeat."""
        if isinstance(command, RegisterBroker):
            self.reported.pop(command.broker_id, None)
        elif isinstance(command, Heartbeat) and command.metadata_position is not None:
            self.reported[command.broker_id] = tuple(command.metadata_position)
            self._trigger()

    def _on_image(self, image) -> None:
        """Trigger: a fencing may leave no lagging broker to wait for."""
        self._trigger()

    def _trigger(self) -> None:
        if self._purgatory.watched(_KEY):
            self._purgatory.check_and_complete(_KEY)

    def lagging(self, position: Position, node_id: int) -> list[int]:
        """Live brokers other than ``node_id`` not known to have applied ``position``,
        and ``node_id`` itself while its own replica manager has not (``follow_local``)."""
        position = tuple(position)
        lagging = [b for b in self._store.image.live_brokers()
                   if b != node_id and self.reported.get(b, ()) < position]
        if self._local is not None and tuple(self._local.applied_position) < position:
            lagging.append(node_id)
        return lagging

    async def wait_until_known(self, position: Position, node_id: int,
                               timeout_s: float) -> list[int]:
        """Wait until every live broker has applied ``position`` (``node_id``, this
        broker, as ``lagging`` says), for at most ``timeout_s``; returns the brokers
        still lagging (empty: all know it)."""
        future = asyncio.get_running_loop().create_future()

        def respond(lagging: list[int]) -> None:
            if not future.done():
                future.set_result(lagging)

        operation = DelayedPropagation(int(max(0.0, timeout_s) * 1000), self, tuple(position),
                                       node_id, respond)
        self._purgatory.try_complete_else_watch(operation, [_KEY])
        try:
            return await future
        finally:
            operation.force_complete()  # cancelled: stop watching

    def shutdown(self) -> None:
        self._purgatory.shutdown()


class DelayedPropagation(DelayedOperation):
    """A metadata write's answer waiting until the other live brokers applied it.

    Completes (A) when no live broker lags, (B) when the timeout expires (the lagging
    brokers are answered), (C) when forced (the request was cancelled)."""

    def __init__(self, timeout_ms: int, tracker: MetadataPropagation, position: Position,
                 node_id: int, respond):
        super().__init__(timeout_ms)
        self._tracker = tracker
        self._position = position
        self._node_id = node_id
        self._respond = respond

    def try_complete(self) -> bool:
        if self._tracker.lagging(self._position, self._node_id):
            return False
        return self.force_complete()  # (A)

    def on_complete(self) -> None:
        self._respond(self._tracker.lagging(self._position, self._node_id))  # (A) (B) (C)

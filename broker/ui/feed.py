"""The replication view's live feed: one poller per endpoint, shared by every page open.

Ownership: the metrics endpoint owns one ``ReplicationFeed`` (when the broker gives it
one) and calls ``stop`` when it stops.  The feed owns its poller task and, through
``ClusterCollector``, one connection per peer broker.  Event-loop only.

Invariants:
* The poller runs only while at least one subscriber is open: a broker nobody watches
  pays nothing.  It builds one snapshot every ``INTERVAL_S`` (a slow collection delays
  the next; it never overlaps), so N pages cost the same as one.
* ``seq`` increases by one per published snapshot; every event carries the ``seq`` of
  the snapshot it was derived at, and ``events`` keeps the last ``MAX_EVENTS`` of them, so
  a page that opens (or reconnects) gets the recent log and then only what is new.
* Collecting never raises into the poller: a peer that does not answer within
  ``PEER_TIMEOUT_S`` is marked unreachable in the snapshot and not asked again for
  ``PEER_RETRY_S`` (a dead broker costs one refused connect per retry, not one per
  poll); a failure of our own (a bug) is logged and the poll retried.

Why the serving broker asks its peers rather than the page asking each broker: the
metrics ports of the other brokers are not in the cluster metadata, the inter-broker
listener already reaches every broker (with its TLS and SASL), and one stream per page
keeps the browser side free of cross-origin requests.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..client.client_protocol import NEED_DATA, ClientProtocol, failure_reason
from ..client.kafka_client import READ_BYTES
from ..security.client import inter_broker_security
from .faults import FaultReader, reader_from_environment
from .snapshot import build_snapshot, diff

if TYPE_CHECKING:
    from ..config import BrokerConfig
    from ..controller.metadata_client import ClusterState

log = logging.getLogger(__name__)

INTERVAL_S = 0.5
MAX_EVENTS = 200
PEER_TIMEOUT_S = 1.0
PEER_RETRY_S = 2.0
CLIENT_ID = "raftwood-replication-view"


class ReplicationFeed:
    """Snapshots from ``collect`` (an async callable returning one snapshot), their
    diffs, the injected faults ``faults`` reads (``faults.py``), and the subscribers
    reading them."""

    def __init__(self, collect: Callable[[], Awaitable[dict]], interval_s: float = INTERVAL_S,
                 max_events: int = MAX_EVENTS, prefix: str = "[Replication view]",
                 faults: FaultReader | None = None):
        self._collect = collect
        self._faults = faults
        self.interval_s = interval_s
        self.snapshot: dict | None = None
        self.seq = 0
        self.events: collections.deque[dict] = collections.deque(maxlen=max_events)
        self.subscribers = 0
        self._prefix = prefix
        self._published = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._stopped = False
        self._closers: list[Callable[[], Awaitable[None]]] = []

    def on_stop(self, closer: Callable[[], Awaitable[None]]) -> None:
        """Also await ``closer()`` in ``stop`` (the collector's peer connections)."""
        self._closers.append(closer)

    def subscribe(self) -> Subscription:
        """A new reader; starts the poller if it is the first.  Close it when done."""
        if self._stopped:
            raise RuntimeError("the replication feed is stopped")
        self.subscribers += 1
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())
        return Subscription(self)

    def _unsubscribe(self) -> None:
        self.subscribers -= 1
        if self.subscribers == 0 and self._task is not None:
            self._task.cancel()
            self._task = None

    async def stop(self) -> None:
        """End the poller and wake every subscriber (they then see ``stopped``)."""
        self._stopped = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self._published.set()
        for closer in self._closers:
            await closer()

    @property
    def stopped(self) -> bool:
        return self._stopped

    def publish(self, snapshot: dict) -> list[dict]:
        """Take a new snapshot: diff it against the last, keep its events and the faults
        recorded since the last one, wake readers."""
        events = diff(self.snapshot, snapshot)
        if self._faults is not None:
            events.extend(self._faults.new_events())
        self.seq += 1
        for event in events:
            event["seq"] = self.seq
            self.events.append(event)
        self.snapshot = snapshot
        published, self._published = self._published, asyncio.Event()
        published.set()
        return events

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            try:
                snapshot = await self._collect()
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug of ours: the page misses a beat, the broker goes on
                log.exception("%s collecting a snapshot failed", self._prefix)
            else:
                self.publish(snapshot)
            await asyncio.sleep(max(0.0, self.interval_s - (loop.time() - started)))


class Subscription:
    """One reader of a feed: ``await next()`` returns the newest snapshot it has not
    seen, with the events since the last one it got (the whole kept log the first
    time), or None once the feed stopped."""

    def __init__(self, feed: ReplicationFeed):
        self.feed = feed
        self.seen = -1   # first next(): the current snapshot, if any, and every kept event
        self._closed = False

    async def next(self) -> dict | None:
        feed = self.feed
        while not feed.stopped and (feed.snapshot is None or self.seen >= feed.seq):
            await feed._published.wait()
        if feed.stopped:
            return None
        events = [e for e in feed.events if e["seq"] > self.seen]
        self.seen = feed.seq
        return {"seq": feed.seq, "snapshot": feed.snapshot, "events": events}

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.feed._unsubscribe()

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class PeerStatus:
    """The status request to one peer broker over its inter-broker listener, on one
    kept connection.  Any failure or timeout closes it; the next ``fetch`` reconnects."""

    def __init__(self, host: str, port: int, security=None, timeout_s: float = PEER_TIMEOUT_S):
        self.host, self.port = host, port
        self.security = security   # broker.security.client.ClientSecurity, None: PLAINTEXT
        self.timeout_s = timeout_s
        self.retry_at = 0.0        # monotonic time before which a failed peer is not asked
        self.last_error = ""       # why the last fetch failed (shown until the retry)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._protocol: ClientProtocol | None = None

    @property
    def peer(self) -> str:
        return f"{self.host}:{self.port}"

    async def fetch(self) -> dict:
        """The peer's status object; ConnectionError (with the reason) otherwise."""
        try:
            async with asyncio.timeout(self.timeout_s):
                if self._writer is None:
                    await self._connect()
                return await self._status()
        except (OSError, TimeoutError, ValueError) as exc:
            # A timeout may leave an answer on the way: never reuse such a connection.
            await self.close()
            reason = failure_reason(exc) if isinstance(exc, OSError) else str(exc)
            raise ConnectionError(reason) from exc

    async def _connect(self) -> None:
        context = self.security.ssl_context if self.security is not None else None
        self._reader, self._writer = await asyncio.open_connection(
            self.host, self.port, ssl=context,
            server_hostname=self.host if context is not None else None)
        self._protocol = ClientProtocol(CLIENT_ID)
        if self.security is not None and self.security.sasl_mechanism:
            await self.security.authenticate(self._round_trip, self.peer)

    async def _round_trip(self, message, response_class=None):
        _, data = self._protocol.send_request(message, response_class)
        return await self._answer(data)

    async def _status(self) -> dict:
        _, data = self._protocol.send_status()
        answer = await self._answer(data)
        if not isinstance(answer, dict):
            raise ValueError("status answer is not a JSON object")
        return answer

    async def _answer(self, data: bytes):
        self._writer.write(data)
        await self._writer.drain()
        while (response := self._protocol.next_response()) is NEED_DATA:
            chunk = await self._reader.read(READ_BYTES)
            self._protocol.receive_data(chunk)
        return response

    async def close(self) -> None:
        writer, self._writer, self._reader, self._protocol = self._writer, None, None, None
        if writer is not None:
            writer.close()
            try:
                await writer.wait_closed()
            except (OSError, asyncio.CancelledError):
                pass


@dataclass(frozen=True)
class ViewContext:
    """What the replication view reads of its broker, instead of the whole Broker (built
    in ``broker/node.py``): this broker's status (``broker/api/status.py``, no network),
    the newest image (who the peers are, where they listen), the inter-broker listener's
    name and the settings its TLS/SASL is built from."""

    node_id: int
    config: BrokerConfig
    inter_broker_listener: str
    own_status: Callable[[], dict[str, Any]]
    image: Callable[[], ClusterState]


class ClusterCollector:
    """Builds a snapshot for a Broker: its own status (no network) plus each registered
    peer's, asked concurrently over the inter-broker listener with ``PEER_TIMEOUT_S``."""

    def __init__(self, context: ViewContext, timeout_s: float = PEER_TIMEOUT_S,
                 retry_s: float = PEER_RETRY_S):
        self.context = context
        self.timeout_s = timeout_s
        self.retry_s = retry_s
        self.peers: dict[int, PeerStatus] = {}
        self._security = None
        self._security_error: str | None = None

    def _peer_security(self):
        """The inter-broker listener's TLS/SASL, built once (a broker that started has a
        usable one; if not, every peer shows the reason instead of failing the page)."""
        if self._security is None and self._security_error is None:
            try:
                self._security = inter_broker_security(self.context.config)
            except Exception as exc:  # SettingError and what TLS loading may raise
                self._security_error = f"inter-broker security unusable: {exc}"
        return self._security

    async def __call__(self) -> dict:
        context = self.context
        own = context.own_status()
        me = own.get("broker_id")
        hosted = {me: own.get("hosted") or []}
        unreachable: dict[int, str] = {}
        listener = context.inter_broker_listener
        security = self._peer_security()
        asks = {}
        now = time.monotonic()
        for info in context.image().brokers.values():
            if info.broker_id == me:
                continue
            address = info.endpoint(listener)
            if address is None:
                unreachable[info.broker_id] = f"no {listener} listener"
                continue
            if self._security_error is not None:
                unreachable[info.broker_id] = self._security_error
                continue
            peer = self.peers.get(info.broker_id)
            if peer is None or (peer.host, peer.port) != tuple(address):
                if peer is not None:
                    await peer.close()
                peer = self.peers[info.broker_id] = PeerStatus(*address, security,
                                                               self.timeout_s)
            if now < peer.retry_at:
                unreachable[info.broker_id] = peer.last_error or "not answering"
                continue
            asks[info.broker_id] = peer
        answers = await asyncio.gather(*(p.fetch() for p in asks.values()),
                                       return_exceptions=True)
        for broker_id, answer in zip(asks, answers):
            peer = asks[broker_id]
            if isinstance(answer, dict):
                hosted[broker_id] = answer.get("hosted") or []
            elif isinstance(answer, Exception):
                peer.retry_at = time.monotonic() + self.retry_s
                peer.last_error = str(answer) or type(answer).__name__
                unreachable[broker_id] = peer.last_error
            else:  # CancelledError of a peer task only: treat as not answering
                unreachable[broker_id] = "not answering"
        return build_snapshot(own, hosted, unreachable, int(time.time() * 1000))

    async def close(self) -> None:
        peers, self.peers = list(self.peers.values()), {}
        for peer in peers:
            await peer.close()


def broker_feed(context: ViewContext) -> ReplicationFeed:
    """The feed the Broker's metrics endpoint serves: this broker's cluster view."""
    collector = ClusterCollector(context)
    feed = ReplicationFeed(collector, prefix=f"[Replication view broker={context.node_id}]",
                           faults=reader_from_environment())
    feed.on_stop(collector.close)
    return feed

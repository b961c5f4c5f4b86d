"""InterBrokerChannels: one connection per destination broker for a broker's own requests
to its peers (Kafka's InterBrokerSendThread over a NetworkClient).

Its users: the transaction marker channel (WriteTxnMarkers to partition leaders), the
KIP-890 verifier (AddPartitionsToTxn VerifyOnly to a transactional id's coordinator) and
the share-state client (Read/WriteShareGroupState to a share coordinator).  Each user
owns its instance, as each of Kafka's managers owns its NetworkClient: a broker answers
one connection's requests in the order they came, so a WriteTxnMarkers waiting up to
30 s for its replication would otherwise hold up every verification behind it.

Invariants:
  * at most one connection per destination broker, dialled at the address the newest
    metadata image gives for the inter-broker listener (``security.listener_name``),
    with that listener's TLS and SASL (``security``);
  * one request at a time on a connection (``AsyncConnection`` pairs a request with the
    next answer);
  * a failed or cancelled exchange leaves the connection closed, and the next request
    reconnects (``AsyncConnection``);
  * when a broker's address changes (it restarted elsewhere, a listener moved) the
    next request dials the new one, and the old connection is closed once the requests
    already in line for it are done.

Event-loop only.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from .kafka_client import Address, AsyncConnection, ConnectionFailed

log = logging.getLogger(__name__)


class _Channel:
    """The connection to one broker at one address; ``lock`` is held for a request's
    whole round trip."""

    def __init__(self, address: Address, connection: AsyncConnection):
        self.address = address
        self.connection = connection
        self.lock = asyncio.Lock()


class InterBrokerChannels:
    """Requests to other brokers by broker id (module doc).

    ``image()`` is the newest metadata image (its ``brokers`` map ids to registrations
    with ``endpoint(listener)``); ``security`` a ``broker.security.client.ClientSecurity``
    of the inter-broker listener; ``timeout_s`` bounds each exchange (connecting and SASL
    included); ``prefix`` starts this user's log lines."""

    def __init__(self, image: Callable[[], Any], security: Any, client_id: str,
                 timeout_s: float, prefix: str):
        self._image = image
        self.security = security
        self.listener = security.listener_name
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._prefix = prefix
        self.channels: dict[int, _Channel] = {}

    def address_of(self, broker_id: int) -> Address | None:
        """Where ``broker_id`` listens for inter-broker requests, as the newest image
        says; None when it is not registered or has no such listener."""
        info = self._image().brokers.get(broker_id)
        address = info.endpoint(self.listener) if info is not None else None
        return tuple(address) if address is not None else None

    async def request(self, broker_id: int, request: Any, response_class: Any,
                      wait_s: float | None = None) -> Any | None:
        """The answer of ``broker_id`` to ``request``; None when it has no address, the
        exchange failed (logged), or (given ``wait_s``) the connection stayed busy with
        other requests for ``wait_s`` seconds."""
        channel = self._channel(broker_id)
        if channel is None:
            return None
        try:  # a stalled peer must not queue requests past their own deadline
            await asyncio.wait_for(channel.lock.acquire(), wait_s)
        except TimeoutError:
            return None
        try:
            return await channel.connection.request(request, response_class)
        except ConnectionFailed as exc:
            log.info("%s %s to broker %d at %s failed: %s", self._prefix,
                     type(request).__name__, broker_id, channel.connection.peer, exc)
            return None
        finally:
            channel.lock.release()

    def _channel(self, broker_id: int) -> _Channel | None:
        address = self.address_of(broker_id)
        if address is None:
            return None
        channel = self.channels.get(broker_id)
        if channel is not None and channel.address == address:
            return channel
        if channel is not None:
            self._retire(channel)
        connection = AsyncConnection(address[0], address[1], client_id=self.client_id,
                                     timeout_s=self.timeout_s, security=self.security)
        channel = self.channels[broker_id] = _Channel(address, connection)
        return channel

    def _retire(self, channel: _Channel) -> None:
        """Close ``channel`` once the requests already in line for it are done (they
        have their answers or fail on their own)."""
        async def close() -> None:
            async with channel.lock:
                await channel.connection.close()
        task = asyncio.get_running_loop().create_task(close())
        _retiring.add(task)
        task.add_done_callback(_retiring.discard)

    async def shutdown(self) -> None:
        """Close every connection; a later request dials again."""
        channels, self.channels = list(self.channels.values()), {}
        for channel in channels:
            await channel.connection.close()


# Closes of replaced connections still under way (a task is kept until it is done).
_retiring: set[asyncio.Task] = set()

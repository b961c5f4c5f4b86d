"""InterBrokerChannels (broker/client/interbroker.py): one connection per destination
broker, reused by its requests, dialled again after a failure, moved when the image gives
the broker a new address (the old connection closed), and a busy connection refused
after ``wait_s``.

The peers are small asyncio servers on real sockets that answer ApiVersions v0 (and count
the connections they accept and see closed); the image is a plain object with the
``brokers`` map the metadata image has.
"""
from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass, field

from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from broker.client.interbroker import InterBrokerChannels
from broker.security.client import ClientSecurity

LISTENER = "REPLICATION"
WAIT_S = 10.0  # bounds every wait on a condition; none is expected to take long


class Peer:
    """A broker stand-in on 127.0.0.1: answers each ApiVersions v0 request after
    ``delay_s`` (error 0, no APIs); ``hang_up`` closes every connection it holds."""

    def __init__(self, delay_s: float = 0.0):
        self.delay_s = delay_s
        self.accepted = 0
        self.closed = 0
        self.writers: set[asyncio.StreamWriter] = set()
        self.server: asyncio.Server | None = None

    async def start(self) -> Peer:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    @property
    def address(self) -> tuple[str, int]:
        return "127.0.0.1", self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader, writer) -> None:
        self.accepted += 1
        self.writers.add(writer)
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                correlation_id = struct.unpack(">i", frame[4:8])[0]
                await asyncio.sleep(self.delay_s)
                body = struct.pack(">ihi", correlation_id, 0, 0)
                writer.write(struct.pack(">i", len(body)) + body)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.closed += 1
            self.writers.discard(writer)
            writer.close()

    def hang_up(self) -> None:
        for writer in list(self.writers):
            writer.transport.abort()

    async def stop(self) -> None:
        self.hang_up()
        self.server.close()
        await self.server.wait_closed()


@dataclass
class Registration:
    address: tuple[str, int]
    fenced: bool = False

    def endpoint(self, listener: str):
        return list(self.address) if listener == LISTENER else None


@dataclass
class Image:
    brokers: dict[int, Registration] = field(default_factory=dict)


def channels_for(image: Image, timeout_s: float = WAIT_S) -> InterBrokerChannels:
    return InterBrokerChannels(lambda: image, ClientSecurity(LISTENER), "t", timeout_s,
                               "[test]")


async def until(condition) -> None:
    """Wait (bounded by WAIT_S) for ``condition()``."""
    async with asyncio.timeout(WAIT_S):
        while not condition():
            await asyncio.sleep(0.01)


async def ask(channels: InterBrokerChannels, broker_id: int, **kwargs):
    return await channels.request(broker_id, ApiVersionsRequest[0](), ApiVersionsResponse,
                                  **kwargs)


def test_requests_to_one_broker_share_one_connection_and_others_get_their_own():
    async def scenario():
        one, two = await Peer().start(), await Peer().start()
        image = Image({1: Registration(one.address), 2: Registration(two.address)})
        channels = channels_for(image)
        answers = await asyncio.gather(*(ask(channels, 1 + i % 2) for i in range(6)))
        assert [a.error_code for a in answers] == [0] * 6
        assert (one.accepted, two.accepted) == (1, 1)
        await channels.shutdown()
        await until(lambda: (one.closed, two.closed) == (1, 1))
        await one.stop()
        await two.stop()

    asyncio.run(scenario())


def test_an_unknown_broker_or_one_without_the_listener_gets_no_request():
    async def scenario():
        peer = await Peer().start()
        image = Image({1: Registration(peer.address)})
        channels = channels_for(image)
        channels.listener = "OTHER"
        assert await ask(channels, 1) is None
        assert await ask(channels, 7) is None
        assert peer.accepted == 0
        await peer.stop()

    asyncio.run(scenario())


def test_a_lost_connection_fails_one_request_and_the_next_one_reconnects():
    async def scenario():
        peer = await Peer().start()
        channels = channels_for(Image({1: Registration(peer.address)}))
        assert (await ask(channels, 1)).error_code == 0
        peer.hang_up()
        await until(lambda: peer.closed == 1)
        answers = [await ask(channels, 1) for _ in range(2)]
        # The first may find the connection dead (None) or already closed (answered).
        assert answers[-1] is not None and answers[-1].error_code == 0
        assert peer.accepted == 2
        await channels.shutdown()
        await peer.stop()

    asyncio.run(scenario())


def test_a_new_address_is_dialled_and_the_old_connection_closed():
    async def scenario():
        old, new = await Peer().start(), await Peer().start()
        image = Image({1: Registration(old.address)})
        channels = channels_for(image)
        assert (await ask(channels, 1)).error_code == 0
        image.brokers[1] = Registration(new.address)  # restarted on another port
        assert (await ask(channels, 1)).error_code == 0
        assert (old.accepted, new.accepted) == (1, 1)
        await until(lambda: old.closed == 1)
        await channels.shutdown()
        await old.stop()
        await new.stop()

    asyncio.run(scenario())


def test_a_connection_moved_while_in_use_is_closed_by_its_last_user():
    async def scenario():
        old, new = await Peer(delay_s=1.0).start(), await Peer().start()
        image = Image({1: Registration(old.address)})
        channels = channels_for(image)
        slow = asyncio.ensure_future(ask(channels, 1))
        await until(lambda: old.accepted == 1)
        image.brokers[1] = Registration(new.address)
        assert (await ask(channels, 1)).error_code == 0
        assert (await slow).error_code == 0  # the request out finishes on the old one
        await until(lambda: old.closed == 1)
        await channels.shutdown()
        await old.stop()
        await new.stop()

    asyncio.run(scenario())


def test_a_request_waits_for_a_busy_connection_at_most_wait_s():
    async def scenario():
        peer = await Peer(delay_s=1.0).start()
        channels = channels_for(Image({1: Registration(peer.address)}))
        slow = asyncio.ensure_future(ask(channels, 1))
        await until(lambda: peer.accepted == 1)
        assert await ask(channels, 1, wait_s=0.1) is None
        peer.delay_s = 0.0
        assert (await slow).error_code == 0
        assert (await ask(channels, 1, wait_s=0.1)).error_code == 0
        assert peer.accepted == 1
        await channels.shutdown()
        await peer.stop()

    asyncio.run(scenario())

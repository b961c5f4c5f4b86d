"""A minimal Kafka client for broker-to-broker requests (the replica fetcher).

One request in flight per connection, which is all a fetcher needs: it sends a
Fetch or OffsetForLeaderEpoch and waits for its answer.  Uses the same kafka-python
message classes as the server side.
"""
from __future__ import annotations

import asyncio
import struct

_SIZE = struct.Struct(">i")
MAX_RESPONSE_BYTES = 256 * 1024 * 1024


class ConnectionFailed(Exception):
    """The peer could not be reached or dropped the connection (retry later)."""


class BrokerConnection:
    """Event-loop only. ``request`` raises ConnectionFailed and leaves the connection
    closed on any I/O problem; the next ``request`` reconnects."""

    def __init__(self, host: str, port: int, client_id: str, timeout_s: float = 30.0):
        self.host = host
        self.port = port
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation_id = 0

    async def request(self, message, response_class):
        """Send ``message`` (a versioned kafka-python request) and return the response."""
        try:
            return await asyncio.wait_for(self._exchange(message, response_class),
                                          self.timeout_s)
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError,
                struct.error) as exc:
            await self.close()
            raise ConnectionFailed(f"{self.host}:{self.port}: {exc!r}") from exc

    async def _exchange(self, message, response_class):
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        version = message.API_VERSION
        message.with_header(correlation_id=self._correlation_id, client_id=self.client_id)
        self._writer.write(bytes(message.encode(header=True, framed=True)))
        await self._writer.drain()
        (size,) = _SIZE.unpack(await self._reader.readexactly(4))
        if size < 4 or size > MAX_RESPONSE_BYTES:
            raise ValueError(f"response size {size}")
        frame = await self._reader.readexactly(size)
        response = response_class.decode(frame, version=version, header=True)
        if response.header.correlation_id != self._correlation_id:
            raise ValueError("correlation id mismatch")
        return response

    async def close(self) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.close()
            try:
                await writer.wait_closed()
            except (OSError, asyncio.CancelledError):
                pass

"""The client side of Kafka's wire format, without I/O: requests to bytes, bytes to
responses.

In the h11 manner: ``ClientProtocol.send_request()`` numbers a request and returns its
framed bytes; ``receive_data()`` buffers whatever arrived (``b""`` = the peer closed);
``next_response()`` returns the decoded response to the oldest request still owed one,
or ``NEED_DATA``.  A response frame's announced size is checked before its payload is
buffered: from ``MIN_RESPONSE_BYTES`` to ``max_response_bytes``, both inclusive, so a
broken peer cannot make us allocate what it announces.

Both connections in ``kafka_client`` (asyncio and blocking) are this plus a socket;
no other client code in the project frames, numbers or matches requests.

Errors, one family: :class:`ConnectionFailed` (the connection is over: the peer could
not be reached, closed it, timed out); :class:`BadResponse` (the peer misbehaved: a
frame size out of bounds, a response that does not decode, or ``CorrelationMismatch``,
an answer to another request).  kafka-python's decode errors (struct.error,
ValueError, IndexError ...) are converted here; nothing else leaves.  Using the object
wrongly (receiving with nothing outstanding) is a RuntimeError, not one of these.
"""
from __future__ import annotations

import struct
from collections import deque

from protocol.status import decode_status_response, encode_status_request

SIZE = struct.Struct(">i")
# A response holds at least its correlation id.
MIN_RESPONSE_BYTES = 4
# A status answer or a Fetch is large but bounded; refuse absurd sizes rather than allocate.
MAX_RESPONSE_BYTES = 256 * 1024 * 1024
_MAX_CORRELATION_ID = 0x7FFFFFFF
NEED_DATA = object()   # next_response(): no complete response buffered yet
# What kafka-python (or json, for the status answer: its errors are ValueErrors) raises
# on a truncated or malformed response.
_DECODE_ERRORS = (struct.error, ValueError, IndexError, KeyError, TypeError, EOFError)


class ConnectionFailed(ConnectionError):
    """The broker could not be reached, closed the connection, timed out, or answered
    something unusable.  The connection is finished; a new one may succeed.

    ``reason`` is the short cause ("timed out", "connection closed by the broker");
    ``peer`` is ``host:port`` once the connection layer has named it.
    """

    def __init__(self, reason: str, peer: str | None = None):
        super().__init__(reason)
        self.reason = reason
        self.peer = peer

    def __str__(self) -> str:
        return f"{self.peer}: {self.reason}" if self.peer else self.reason


class BadResponse(ConnectionFailed):
    """The peer misbehaved: a response frame of a size out of bounds, one that does not
    decode as the response to what was sent, or an answer to another request."""


class CorrelationMismatch(BadResponse):
    """A well-framed response carried another correlation id than the request."""

    def __init__(self, received: int, expected: int, peer: str | None = None):
        super().__init__(f"response for correlation id {received}, expected {expected}", peer)
        self.received = received
        self.expected = expected


def failure_reason(exc: OSError) -> str:
    """A socket error in a few words: ``timed out`` or the system's message."""
    if isinstance(exc, TimeoutError):
        return "timed out"
    return exc.strerror or str(exc) or type(exc).__name__


class ResponseReader:
    """Splits a byte stream into response frames (without their size prefix).

    Invariants: the buffer never holds more than one announced frame plus one read
    beyond it, because a size is validated before its payload is awaited; frames come
    out in arrival order.  After an error the stream is unusable.  Pure; one owner.
    """

    def __init__(self, max_response_bytes: int = MAX_RESPONSE_BYTES):
        self.max_response_bytes = max_response_bytes
        self._buffer = bytearray()
        self._frame_size: int | None = None
        self._closed = False

    def feed(self, data: bytes) -> None:
        """Bytes that arrived; ``b""`` means the peer closed (no more will come)."""
        if not data:
            self._closed = True
        self._buffer += data

    @property
    def buffered_bytes(self) -> int:
        return len(self._buffer)

    def next_frame(self) -> bytes | None:
        """One complete frame, or None when more bytes are needed.  BadResponse for a
        size out of bounds; ConnectionFailed when the peer closed before a whole frame."""
        buffer = self._buffer
        size = self._frame_size
        if size is None and len(buffer) >= SIZE.size:
            (size,) = SIZE.unpack_from(buffer, 0)
            if not MIN_RESPONSE_BYTES <= size <= self.max_response_bytes:
                raise BadResponse(f"response frame of {size} bytes (allowed "
                                  f"{MIN_RESPONSE_BYTES}..{self.max_response_bytes})")
            self._frame_size = size
        if size is not None and len(buffer) >= SIZE.size + size:
            end = SIZE.size + size
            self._frame_size = None
            if end == len(buffer):  # the usual case: nothing after it
                # Dropping a bytearray's head moves its start, copying nothing: the
                # frame is copied once, by bytes().
                del buffer[:SIZE.size]
                frame = bytes(buffer)
                buffer.clear()
            else:  # one copy (a slice of a bytearray, then bytes(), made two)
                with memoryview(buffer) as view:
                    frame = bytes(view[SIZE.size:end])
                del buffer[:end]
            return frame
        if self._closed:
            raise ConnectionFailed(self._closed_reason())
        return None

    def _closed_reason(self) -> str:
        if not self._buffer:
            return "connection closed by the broker"
        if self._frame_size is None:
            return (f"connection closed by the broker inside a frame's size "
                    f"({len(self._buffer)} of {SIZE.size} bytes)")
        return (f"connection closed by the broker inside a frame "
                f"({len(self._buffer) - SIZE.size} of {self._frame_size} bytes)")


class ClientProtocol:
    """Requests numbered and framed; responses matched to them in order.

    Invariants: correlation ids increase by one from 1 and wrap before 2**31; responses
    are matched to requests strictly in sending order (Kafka answers in order on a
    connection); a request sent with ``expect_response=False`` (Produce with acks=0)
    is owed nothing.  Pure: the caller moves the bytes.  One owner (not thread-safe).

    A request still owed a response is a plain tuple (correlation id, response class,
    version), the class None for the status request; no object or closure per
    request, as a follower sends one per acknowledged batch.
    """

    def __init__(self, client_id: str, max_response_bytes: int = MAX_RESPONSE_BYTES):
        self.client_id = client_id
        self.reader = ResponseReader(max_response_bytes)
        self._last_correlation_id = 0
        self._outstanding: deque[tuple[int, type | None, int]] = deque()

    def _next_correlation_id(self) -> int:
        self._last_correlation_id = self._last_correlation_id % _MAX_CORRELATION_ID + 1
        return self._last_correlation_id

    @property
    def outstanding(self) -> int:
        """How many sent requests are still owed a response."""
        return len(self._outstanding)

    @property
    def next_expected(self) -> int | None:
        """The correlation id the next response must carry; None when nothing is owed."""
        return self._outstanding[0][0] if self._outstanding else None

    def send_request(self, message, response_class=None, *,
                     expect_response: bool = True) -> tuple[int, bytes]:
        """(correlation id, framed bytes) of a kafka-python request (version set by
        ``Cls[v]``).  Its response decodes with ``response_class``, by default the one
        its header names."""
        correlation_id = self._next_correlation_id()
        message.with_header(correlation_id=correlation_id, client_id=self.client_id)
        data = bytes(message.encode(header=True, framed=True))
        if expect_response:
            self._outstanding.append((
                correlation_id, response_class or message.header.get_response_class(),
                message.API_VERSION))
        return correlation_id, data

    def send_status(self, query: dict | None = None) -> tuple[int, bytes]:
        """(correlation id, framed bytes) of Raftwood's private status request
        (``protocol/status.py``); its response is the broker's JSON status."""
        correlation_id = self._next_correlation_id()
        self._outstanding.append((correlation_id, None, 0))
        return correlation_id, encode_status_request(correlation_id, query or {},
                                                     self.client_id)

    def receive_data(self, data: bytes) -> None:
        """Bytes from the peer; ``b""`` when it closed the connection."""
        self.reader.feed(data)

    def next_response(self):
        """The response to the oldest outstanding request, or NEED_DATA.

        BadResponse when the frame does not decode or answers another correlation id;
        ConnectionFailed when the peer closed first.  RuntimeError if nothing is owed.
        """
        if not self._outstanding:
            raise RuntimeError("no request is waiting for a response")
        frame = self.reader.next_frame()
        if frame is None:
            return NEED_DATA
        correlation_id, response_class, version = self._outstanding.popleft()
        try:
            if response_class is None:
                answered_id, response = decode_status_response(frame)
            else:
                response = response_class.decode(frame, version=version, header=True)
                answered_id = response.header.correlation_id
        except _DECODE_ERRORS as exc:
            raise BadResponse(f"response does not decode: {exc!r}") from exc
        if answered_id != correlation_id:
            raise CorrelationMismatch(answered_id, correlation_id)
        return response

    def next_frame(self) -> bytes | None:
        """A raw response frame (for tests that decode it themselves), or None."""
        return self.reader.next_frame()

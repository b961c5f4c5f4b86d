"""Kafka's framing: a 4-byte big-endian size, then that many bytes.

``FrameReader`` is sans-IO in the h11 manner: ``feed()`` buffers whatever arrived,
``next_frame()`` returns one complete frame or None ("need more data").  Sizes are
checked before any payload is buffered, so a peer cannot make us hold more than
``max_frame_bytes`` (Kafka's ``socket.request.max.bytes``) plus one read.
"""
from __future__ import annotations

import struct

from .errors import CorruptRequest

SIZE = struct.Struct(">i")
DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024
# A frame at least this big that fills the buffer is handed out as the buffer itself (a
# bytearray), not copied out: a 1 MB produce batch or fetch answer is then copied once
# between the socket and its use instead of twice.
HAND_OVER_BYTES = 64 * 1024
# api_key int16 + api_version int16 + correlation_id int32: the least a request header holds.
MIN_REQUEST_BYTES = 8


class FrameReader:
    """Splits a byte stream into request frames.

    Invariants: a frame's announced size is validated before its payload is awaited;
    frames come out in order, each copied out of the buffer once, except a frame of at
    least HAND_OVER_BYTES that is all the buffer holds: that one is the buffer itself
    (a bytearray the reader lets go of and never touches again); bytes already handed
    out are dropped lazily (once they are half the buffer), so a read carrying many
    small frames costs no quadratic shifting.
    After a CorruptRequest the stream is unusable and the caller must close it.
    """

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
                 min_frame_bytes: int = MIN_REQUEST_BYTES):
        self.max_frame_bytes = max_frame_bytes
        self.min_frame_bytes = min_frame_bytes
        self._buffer = bytearray()
        self._start = 0  # bytes before this position were already handed out
        self._frame_size: int | None = None

    def feed(self, data: bytes) -> None:
        if self._start and self._start >= len(self._buffer) // 2:
            # Compact only once the consumed prefix is at least half the buffer, so each
            # byte is moved O(1) times however many frames one read carried.
            del self._buffer[:self._start]
            self._start = 0
        self._buffer += data

    @property
    def buffered_bytes(self) -> int:
        return len(self._buffer) - self._start

    def next_frame(self) -> bytes | bytearray | None:
        """The next complete frame without its size prefix, or None when more is needed."""
        start = self._start
        if self._frame_size is None:
            if len(self._buffer) - start < SIZE.size:
                return None
            (size,) = SIZE.unpack_from(self._buffer, start)
            if size < self.min_frame_bytes:
                raise CorruptRequest(
                    f"frame size {size} is below the minimum {self.min_frame_bytes}")
            if size > self.max_frame_bytes:
                raise CorruptRequest(f"frame size {size} exceeds socket.request.max.bytes "
                                     f"({self.max_frame_bytes})")
            self._frame_size = size
        end = start + SIZE.size + self._frame_size
        if len(self._buffer) < end:
            return None
        self._frame_size = None
        if start == 0 and end == len(self._buffer) and end >= HAND_OVER_BYTES:
            handed = self._buffer
            self._buffer = bytearray()
            del handed[:SIZE.size]  # O(1) at a bytearray's front in CPython: no copy
            return handed
        with memoryview(self._buffer) as view:  # released at once: the buffer may resize
            frame = bytes(view[start + SIZE.size:end])
        if end == len(self._buffer):
            self._buffer.clear()
            self._start = 0
        else:
            self._start = end
        return frame


def frame(payload: bytes) -> bytes:
    """Prefix ``payload`` with its size (used by tests and clients of ours)."""
    return SIZE.pack(len(payload)) + payload

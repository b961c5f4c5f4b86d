"""Kafka's fixed-width primitive types, read and written by hand (pure).

For the few formats that are not protocol messages and so have no kafka-python class:
the embedded consumer protocol (member subscriptions and assignments) and the records of
``__consumer_offsets``; and the unsigned varint of flexible versions, shared by the
hand-written hot-path codecs.  Big-endian, non-flexible encodings: int16/int32/int64,
STRING (int16 length, -1 for null), BYTES (int32 length, -1 for null), arrays with an
int32 count.

``Reader`` raises ``error`` (a ValueError subclass given by the caller, ValueError by
default) for truncated input or a length that cannot be right, never IndexError or
struct.error, so each caller converts one exception at its boundary.
"""
from __future__ import annotations

import struct
from typing import TypeAlias

#: what the decoders read: bytes, or a view of a request frame or of a file's pages
Buffer: TypeAlias = bytes | bytearray | memoryview

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class Reader:
    """Sequential reader over ``data``; ``pos`` is the next byte to read."""

    def __init__(self, data: bytes, error: type[ValueError] = ValueError):
        self.data = bytes(data)
        self.pos = 0
        self.error = error

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise self.error(f"truncated: {n} bytes wanted at {self.pos} of {len(self.data)}")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def int32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def int64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def nullable_string(self) -> str | None:
        n = self.int16()
        return None if n == -1 else self._decode(self._take(n))

    def string(self) -> str:
        """A STRING that may not be null."""
        n = self.int16()
        return self._decode(self._take(n))

    def bytes_(self) -> bytes:
        """BYTES; null reads as empty."""
        n = self.int32()
        return b"" if n == -1 else self._take(n)

    def count(self) -> int:
        """An array's element count: never negative, never more than the bytes left."""
        n = self.int32()
        if n < 0 or n > len(self.data) - self.pos:
            raise self.error(f"bad array length {n}")
        return n

    def _decode(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.error(f"string is not UTF-8: {exc}") from None


def int16(value: int) -> bytes:
    return _I16.pack(value)


def int32(value: int) -> bytes:
    return _I32.pack(value)


def int64(value: int) -> bytes:
    return _I64.pack(value)


def string(text: str | None) -> bytes:
    """STRING (None → null)."""
    if text is None:
        return _I16.pack(-1)
    raw = text.encode("utf-8")
    return _I16.pack(len(raw)) + raw


def bytes_(data: bytes | None) -> bytes:
    """BYTES (None → null)."""
    if data is None:
        return _I32.pack(-1)
    return _I32.pack(len(data)) + data


def uvarint(value: int) -> bytes:
    """UNSIGNED_VARINT (the lengths and counts of flexible versions): 7 bits a byte,
    low first, the high bit set on every byte but the last."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint(value: int) -> bytes:
    """VARINT as records use it (signed, zigzag: 0, -1, 1, -2 ... become 0, 1, 2, 3 ...),
    then 7 bits a byte, low first."""
    out = bytearray()
    value = (value << 1) ^ (value >> 63)
    while value & ~0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)

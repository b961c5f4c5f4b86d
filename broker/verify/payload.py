"""The values the verify workload writes: numbered, self-describing, checksummed.

A value is ASCII text::

    rw1 <producer> <sequence:09d> <filler> <crc32:08x>

``producer`` names the client instance that wrote it (``kp-0``, ``ck-1`` ...),
``sequence`` counts that producer's sends from 0, ``filler`` pads the value to a
size derived from the sequence (so batches vary in size), and the CRC-32 covers every
byte before it.  So any value found in a log says who wrote it and which send it was,
and a damaged value is recognised without a reference copy.  Pure functions.
"""
from __future__ import annotations

import zlib
from typing import NamedTuple

MAGIC = b"rw1"
_FILLER = b"abcdefghijklmnopqrstuvwxyz0123456789"


class ValueId(NamedTuple):
    """Who wrote a value: (producer name, sequence number)."""

    producer: str
    sequence: int


class BadValue(ValueError):
    """Bytes that are not a well-formed, intact workload value."""


def encode_value(producer: str, sequence: int, size_hint: int = 64) -> bytes:
    """The value for ``producer``'s send number ``sequence``; deterministic."""
    if " " in producer or not producer:
        raise ValueError(f"producer name {producer!r} must be non-empty without spaces")
    head = b"%s %s %09d " % (MAGIC, producer.encode(), sequence)
    length = max(1, size_hint + (sequence * 7919) % max(1, size_hint))
    start = sequence % len(_FILLER)
    filler = (_FILLER[start:] + _FILLER * (length // len(_FILLER) + 1))[:length]
    body = head + filler + b" "
    return body + b"%08x" % zlib.crc32(body)


def decode_value(value: bytes | None) -> ValueId:
    """(producer, sequence) of an intact value; BadValue otherwise."""
    if not value or len(value) < 12:
        raise BadValue(f"too short: {value!r}")
    body, crc_text = value[:-8], value[-8:]
    try:
        crc = int(crc_text, 16)
    except ValueError as exc:
        raise BadValue(f"no checksum: {value[:40]!r}...") from exc
    if zlib.crc32(body) != crc:
        raise BadValue(f"checksum mismatch: {value[:40]!r}...")
    parts = body.split(b" ")
    if len(parts) < 4 or parts[0] != MAGIC:
        raise BadValue(f"not a workload value: {value[:40]!r}...")
    try:
        return ValueId(parts[1].decode(), int(parts[2]))
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadValue(f"malformed header: {value[:40]!r}...") from exc

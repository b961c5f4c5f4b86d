"""The "consumer" embedded protocol: what members put in JoinGroup and SyncGroup (pure).

The coordinator treats member metadata and assignments as opaque bytes.  Two readers
need to look inside when the protocol type is ``consumer``: offset expiry (KIP-211:
offsets of topics the group no longer subscribes to) and ``raftwood groups describe``
(who owns which partition).  Kafka's ``ConsumerProtocolSubscription`` and
``ConsumerProtocolAssignment`` are non-flexible in every version and start with the
fields read here, so one reader serves all versions:

    Subscription: version int16, topics [string], (user data, owned partitions, ... )
    Assignment:   version int16, [topic string, partitions [int32]], (user data)

Readers return None for bytes that do not parse: a client with another embedded format
must never break the coordinator.
"""
from __future__ import annotations

import struct

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class _Reader:
    def __init__(self, data: bytes):
        self.data = memoryview(bytes(data))
        self.pos = 0

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("short")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def int32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def string(self) -> str:
        return bytes(self._take(self.int16())).decode("utf-8")

    def count(self) -> int:
        n = self.int32()
        if n < 0 or n > len(self.data):
            raise ValueError("bad array length")
        return n


def subscribed_topics(metadata: bytes) -> set[str] | None:
    """The topics of a ConsumerProtocolSubscription, or None if it does not parse."""
    try:
        reader = _Reader(metadata)
        reader.int16()
        return {reader.string() for _ in range(reader.count())}
    except (ValueError, struct.error, UnicodeDecodeError):
        return None


def assigned_partitions(assignment: bytes) -> dict[str, list[int]] | None:
    """The partitions of a ConsumerProtocolAssignment (topic → sorted partitions); None
    if it does not parse.  Empty bytes (a member with nothing assigned yet) → {}."""
    if not assignment:
        return {}
    try:
        reader = _Reader(assignment)
        reader.int16()
        result: dict[str, list[int]] = {}
        for _ in range(reader.count()):
            topic = reader.string()
            result.setdefault(topic, []).extend(reader.int32() for _ in range(reader.count()))
        return {topic: sorted(parts) for topic, parts in result.items()}
    except (ValueError, struct.error, UnicodeDecodeError):
        return None


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return _I16.pack(len(raw)) + raw


def encode_subscription(topics: list[str], version: int = 0) -> bytes:
    """A v0 ConsumerProtocolSubscription (for tests and tools): topics, null user data."""
    return (_I16.pack(version) + _I32.pack(len(topics)) + b"".join(map(_string, topics))
            + _I32.pack(-1))


def encode_assignment(partitions: dict[str, list[int]], version: int = 0) -> bytes:
    """A v0 ConsumerProtocolAssignment (for tests and tools), null user data."""
    body = b"".join(_string(topic) + _I32.pack(len(parts)) + b"".join(map(_I32.pack, parts))
                    for topic, parts in partitions.items())
    return _I16.pack(version) + _I32.pack(len(partitions)) + body + _I32.pack(-1)

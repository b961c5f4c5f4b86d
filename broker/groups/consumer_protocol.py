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

from protocol.primitives import Reader, int16, int32, string


def subscribed_topics(metadata: bytes) -> set[str] | None:
    """The topics of a ConsumerProtocolSubscription, or None if it does not parse."""
    try:
        reader = Reader(metadata)
        reader.int16()
        return {reader.string() for _ in range(reader.count())}
    except ValueError:
        return None


def assigned_partitions(assignment: bytes) -> dict[str, list[int]] | None:
    """The partitions of a ConsumerProtocolAssignment (topic → sorted partitions); None
    if it does not parse.  Empty bytes (a member with nothing assigned yet) → {}."""
    if not assignment:
        return {}
    try:
        reader = Reader(assignment)
        reader.int16()
        result: dict[str, list[int]] = {}
        for _ in range(reader.count()):
            topic = reader.string()
            result.setdefault(topic, []).extend(reader.int32() for _ in range(reader.count()))
        return {topic: sorted(parts) for topic, parts in result.items()}
    except ValueError:
        return None


def encode_subscription(topics: list[str], version: int = 0) -> bytes:
    """A v0 ConsumerProtocolSubscription (for tests and tools): topics, null user data."""
    return (int16(version) + int32(len(topics)) + b"".join(map(string, topics))
            + int32(-1))


def encode_assignment(partitions: dict[str, list[int]], version: int = 0) -> bytes:
    """A v0 ConsumerProtocolAssignment (for tests and tools), null user data."""
    body = b"".join(string(topic) + int32(len(parts)) + b"".join(map(int32, parts))
                    for topic, parts in partitions.items())
    return int16(version) + int32(len(partitions)) + body + int32(-1)

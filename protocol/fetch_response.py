"""The Fetch response, encoded by hand as a list of buffers (pure, the hot path).

A Fetch response is mostly record bytes read from segment files.  Building it with
kafka-python's message classes costs a Python object per partition and three copies of
every record byte (the encode buffer, its ``bytes()``, the framing concatenation); here the
fixed-width fields around each partition's records are packed with ``struct`` and the
records themselves are never copied: :func:`encode_fetch_response` returns the frame as a
list whose record entries are the very buffers the log returned, ready for
``transport.writelines``.  The size prefix is computed from the parts.  A record entry may
also be a ``storage.FileRecords`` (the log's zero-copy read: regions of segment files,
with ``len()``); it is placed in the list as it is, and the connection sends it with
``os.sendfile`` (``broker/network/connection.py``).  Nothing here reads it.

Covers Fetch v4-v12 (the versions Raftwood serves): response header v0 up to v11, v1
(flexible, tagged fields) at v12.  Field layout per version, from Kafka's
FetchResponse.json:

    throttle_time_ms int32                          v1+
    error_code int16, session_id int32              v7+
    responses[]: topic string
      partitions[]: partition_index int32, error_code int16, high_watermark int64,
                    last_stable_offset int64 (v4+), log_start_offset int64 (v5+),
                    aborted_transactions[] nullable (v4+: producer_id int64,
                    first_offset int64), preferred_read_replica int32 (v11+),
                    records nullable bytes
v12 makes every string, array and bytes "compact" (unsigned varint length + 1) and ends
each struct and the header with an empty tagged-field section.  The equivalence with
kafka-python's encoder is asserted byte for byte by the unit tests.
"""
from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from .primitives import uvarint as _uvarint

MIN_VERSION = 4
MAX_VERSION = 12
FLEXIBLE_FROM = 12

_I32 = struct.Struct(">i")
_THROTTLE = struct.Struct(">i")
_TOP_V7 = struct.Struct(">ihi")               # throttle_time_ms, error_code, session_id
_PART_V4 = struct.Struct(">ihqq")             # partition, error, high_watermark, lso
_I64 = struct.Struct(">q")
_ABORTED = struct.Struct(">qq")               # producer_id, first_offset


def _partition_run(version: int) -> struct.Struct:
    """A partition without aborted transactions in one run: partition, error,
    high_watermark, lso, log_start_offset (v5+), the aborted transactions' count (an int32
    0, or at v12 the compact count, one byte), preferred_read_replica (v11+) and the
    records' length when it is fixed-size (up to v11)."""
    return struct.Struct(">ihqq" + ("q" if version >= 5 else "")
                         + ("B" if version >= FLEXIBLE_FROM else "i")
                         + ("i" if version >= 11 else "")
                         + ("" if version >= FLEXIBLE_FROM else "i"))


_PARTITION_RUNS = {version: _partition_run(version) for version in range(MIN_VERSION,
                                                                          MAX_VERSION + 1)}


@dataclass
class AbortedTransaction:
    producer_id: int
    first_offset: int


@dataclass
class FetchPartitionResult:
    """One partition's answer.  ``records`` is any bytes-like object or a
    ``storage.FileRecords`` (kept, not copied; only its ``len()`` is used here)."""

    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: bytes | memoryview = b""
    aborted_transactions: list[AbortedTransaction] = field(default_factory=list)
    preferred_read_replica: int = -1


def encode_fetch_response(version: int, correlation_id: int, *, throttle_time_ms: int = 0,
                          error_code: int = 0, session_id: int = 0,
                          topics: Sequence[tuple[str, Sequence[FetchPartitionResult]]] = ()
                          ) -> list[bytes | memoryview]:
    """The framed response (size prefix included) as buffers to write in order.

    ``topics`` is (topic name, partition results) in the order the response lists them.
    Raises ValueError for a version outside v4-v12.
    """
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"Fetch v{version} is not encoded here (v{MIN_VERSION}-v{MAX_VERSION})")
    flexible = version >= FLEXIBLE_FROM
    partition_run = _PARTITION_RUNS[version]
    parts: list[bytes | memoryview] = []
    head = bytearray(_I32.pack(correlation_id))
    if flexible:
        head += b"\x00"                                    # header tagged fields
    if version >= 7:
        head += _TOP_V7.pack(throttle_time_ms, error_code, session_id)
    else:
        head += _THROTTLE.pack(throttle_time_ms)
    head += _uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics))
    for name, partitions in topics:
        raw = name.encode()
        head += _uvarint(len(raw) + 1) if flexible else struct.pack(">h", len(raw))
        head += raw
        head += _uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions))
        for p in partitions:
            aborted = p.aborted_transactions
            size = len(p.records)
            if not aborted:
                # the common case in one run: the partition's fields, an empty
                # aborted_transactions, and (when fixed-size) the records' length
                if flexible:
                    head += partition_run.pack(p.partition_index, p.error_code,
                                               p.high_watermark, p.last_stable_offset,
                                               p.log_start_offset, 1,  # compact 0 + 1
                                               p.preferred_read_replica)
                    head += _uvarint(size + 1)
                elif version >= 11:
                    head += partition_run.pack(p.partition_index, p.error_code,
                                               p.high_watermark, p.last_stable_offset,
                                               p.log_start_offset, 0,
                                               p.preferred_read_replica, size)
                elif version >= 5:
                    head += partition_run.pack(p.partition_index, p.error_code,
                                               p.high_watermark, p.last_stable_offset,
                                               p.log_start_offset, 0, size)
                else:
                    head += partition_run.pack(p.partition_index, p.error_code,
                                               p.high_watermark, p.last_stable_offset, 0, size)
            else:
                head += _PART_V4.pack(p.partition_index, p.error_code, p.high_watermark,
                                      p.last_stable_offset)
                if version >= 5:
                    head += _I64.pack(p.log_start_offset)
                head += _uvarint(len(aborted) + 1) if flexible else _I32.pack(len(aborted))
                for txn in aborted:
                    head += _ABORTED.pack(txn.producer_id, txn.first_offset)
                    if flexible:
                        head += b"\x00"
                if version >= 11:
                    head += _I32.pack(p.preferred_read_replica)
                head += _uvarint(size + 1) if flexible else _I32.pack(size)
            if size:
                parts.append(bytes(head))
                parts.append(p.records)
                head = bytearray()
            if flexible:
                head += b"\x00"                            # partition tagged fields
        if flexible:
            head += b"\x00"                                # topic tagged fields
    if flexible:
        head += b"\x00"                                    # response tagged fields
    if head:
        parts.append(bytes(head))
    total = sum(len(part) for part in parts)
    parts.insert(0, _I32.pack(total))
    return parts

"""What an append must satisfy before ``PartitionLog`` writes a byte of it.

The storage half of Kafka's append validation (``UnifiedLog.analyzeAndValidateRecords``
and the epoch checks around it); the record-level checks of a client's batch are
``protocol.records.validate_produce_records``'s, run by the broker before the append.
Pure functions over batch headers: no I/O, no state; each raises ``InvalidAppend``
(nothing written) or returns what the append needs.
"""
from __future__ import annotations

from protocol.records import LOG_OVERHEAD, BatchHeader, RecordError, parse_header

from .errors import InvalidAppend


def check_leader_batch(batch: bytearray, header: BatchHeader | None, leader_epoch: int,
                       latest_epoch: int | None, prefix: str) -> BatchHeader:
    """The header of ``batch``, which must be a bytearray (offsets are assigned in
    place) holding exactly one complete batch, appended at ``leader_epoch``, which
    must not be older than the log's ``latest_epoch``.  ``header``: the batch's
    header if the caller parsed it already; None parses it here."""
    if not isinstance(batch, bytearray):
        raise InvalidAppend(f"{prefix} append_as_leader needs a bytearray to "
                            f"assign offsets in place, got {type(batch).__name__}")
    if header is None:
        try:
            header = parse_header(batch)
        except RecordError as exc:
            raise InvalidAppend(f"{prefix} {exc}") from exc
    size = len(batch)
    if header is None or header.batch_length + LOG_OVERHEAD != size \
            or header.last_offset_delta < 0:
        raise InvalidAppend(f"{prefix} expected exactly one complete batch, got {size} bytes")
    if leader_epoch < 0 or (latest_epoch is not None and leader_epoch < latest_epoch):
        raise InvalidAppend(f"{prefix} leader epoch {leader_epoch} is older than "
                            f"the log's latest epoch {latest_epoch}")
    return header


def check_follower_batches(headers: list[BatchHeader], log_end_offset: int,
                           latest_epoch: int | None, prefix: str) -> int:
    """InvalidAppend unless ``headers`` start at or after ``log_end_offset``, each past
    the one before, with leader epochs that never go back below ``latest_epoch`` or
    each other; returns their largest max_timestamp (read in the same pass)."""
    expected = log_end_offset
    epoch = latest_epoch
    max_timestamp = headers[0].max_timestamp
    for header in headers:
        base_offset = header.base_offset
        # >=, not ==: below a leader's compacted range a fetch returns gaps.
        if base_offset < expected:
            raise InvalidAppend(f"{prefix} batch base offset {base_offset} < expected "
                                f"{expected} (log_end_offset {log_end_offset})")
        if header.partition_leader_epoch >= 0:
            if epoch is not None and header.partition_leader_epoch < epoch:
                raise InvalidAppend(f"{prefix} batch at {base_offset} has "
                                    f"leader epoch {header.partition_leader_epoch} < {epoch}")
            epoch = header.partition_leader_epoch
        if header.max_timestamp > max_timestamp:
            max_timestamp = header.max_timestamp
        expected = base_offset + header.last_offset_delta + 1
    return max_timestamp

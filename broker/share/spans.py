"""The batches of a log read as share acquisition sees them (pure).

A share partition hands out records, not bytes, so the leader reads the batch headers
of what it fetched: each batch's offsets, and whether its records are never delivered.
Control batches (transaction markers) never are.  With read_committed, neither are the
batches of aborted transactions: as in Kafka's consumer, an aborted transaction
``(producer_id, first_offset)`` covers that producer's transactional batches from
``first_offset`` up to its next control batch (the ABORT marker).
"""
from __future__ import annotations

from collections.abc import Iterable

from protocol.records import parse_header

from .partition import BatchSpan


def batch_spans(records: bytes, aborted: Iterable[tuple[int, int]] = ()) -> list[BatchSpan]:
    """The complete batches of ``records`` in order; ``aborted``: the read's aborted
    transactions as (producer_id, first_offset), empty for read_uncommitted.  A torn
    batch at the end (a read cut at its size limit) is left out."""
    pending = sorted(aborted, key=lambda txn: txn[1])
    aborting: set[int] = set()
    spans: list[BatchSpan] = []
    position = 0
    view = memoryview(records)
    while (header := parse_header(view, position)) is not None:
        position += header.size
        while pending and pending[0][1] <= header.last_offset:
            aborting.add(pending.pop(0)[0])
        if header.is_control:
            aborting.discard(header.producer_id)
            spans.append(BatchSpan(header.base_offset, header.last_offset, skip=True))
            continue
        skip = header.is_transactional and header.producer_id in aborting
        spans.append(BatchSpan(header.base_offset, header.last_offset, skip=skip))
    return spans

"""batch_spans: what a share partition may hand out of a log read.  Control batches
never; with read_committed, an aborted transaction's batches neither, from its first
offset up to its ABORT marker, while other producers' and committed batches are."""
from __future__ import annotations

import struct

from kafka.record.default_records import DefaultRecordBatchBuilder

from broker.share.partition import BatchSpan
from broker.share.spans import batch_spans
from protocol.control import build_marker_batch


def batch(base_offset: int, count: int, producer_id: int = -1) -> bytes:
    transactional = producer_id >= 0
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=transactional,
        producer_id=producer_id, producer_epoch=0 if transactional else -1,
        base_sequence=0 if transactional else -1, batch_size=1 << 20)
    for i in range(count):
        builder.append(i, timestamp=1_000, key=None, value=b"v", headers=[])
    return at(bytearray(builder.build()), base_offset)


def marker(base_offset: int, producer_id: int, commit: bool) -> bytes:
    return at(build_marker_batch(producer_id, 0, 0, commit, 1_000), base_offset)


def at(buf: bytearray, base_offset: int) -> bytes:
    struct.pack_into(">q", buf, 0, base_offset)
    return bytes(buf)


LOG = (batch(0, 2) + batch(2, 2, producer_id=7) + batch(4, 1, producer_id=8)
       + marker(5, 7, commit=False) + marker(6, 8, commit=True) + batch(7, 2, producer_id=7))


def test_read_uncommitted_skips_only_control_batches():
    assert batch_spans(LOG) == [
        BatchSpan(0, 1), BatchSpan(2, 3), BatchSpan(4, 4), BatchSpan(5, 5, skip=True),
        BatchSpan(6, 6, skip=True), BatchSpan(7, 8)]


def test_read_committed_skips_the_aborted_transaction_up_to_its_marker():
    assert batch_spans(LOG, aborted=[(7, 2)]) == [
        BatchSpan(0, 1), BatchSpan(2, 3, skip=True), BatchSpan(4, 4),
        BatchSpan(5, 5, skip=True), BatchSpan(6, 6, skip=True), BatchSpan(7, 8)]


def test_a_torn_batch_at_the_end_is_left_out():
    assert batch_spans(LOG[:-5]) == batch_spans(LOG)[:-1]

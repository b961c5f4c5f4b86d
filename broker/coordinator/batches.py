"""The batches a coordinator writes to its internal topic and reads back (pure).

A coordinator's records are keys and values in its own format (``groups/records.py``,
``transactions/records.py``); here they become one uncompressed RecordBatch v2 for an
append as leader, and a log read becomes (offset, key, value) again for a loader.
"""
from __future__ import annotations

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords


def build_batch(records: list[tuple[bytes, bytes | None]], timestamp_ms: int,
                producer_id: int = -1, producer_epoch: int = -1) -> bytes:
    """One uncompressed RecordBatch v2 (baseOffset 0, as a producer sends it); with a
    producer id, a transactional batch of that producer (a TxnOffsetCommit's offsets,
    which its transaction's marker commits or aborts).  No sequence: the log checks a
    coordinator's batch by its producer epoch alone.  ValueError if a record does not
    fit (the batch is sized for all of them, so never in practice)."""
    size = sum(len(k) + len(v or b"") + 32 for k, v in records) + 128
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0,
                                        is_transactional=producer_id >= 0,
                                        producer_id=producer_id, producer_epoch=producer_epoch,
                                        base_sequence=-1, batch_size=size)
    for offset_delta, (key, value) in enumerate(records):
        if builder.append(offset_delta, timestamp=timestamp_ms, key=key, value=value,
                          headers=[]) is None:
            raise ValueError(f"record {offset_delta} does not fit the batch")
    return bytes(builder.build())


def iter_records(data: bytes):
    """(log offset, key bytes, value bytes or None) of every record in ``data`` (whole
    data batches, as a log read returns them; control batches are read by their header,
    see ``protocol.control``)."""
    for batch in MemoryRecords(bytes(data)):
        for record in batch:
            yield record.offset, record.key, record.value

"""A stored batch whose records do not decode (CRC intact: the disk returned what was
written) is the data's fault, not the disk's: the lookup that needs it raises
UndecodableBatch (never StorageIOError, which takes a directory offline), the cleaner
aborts its pass leaving every segment as it was, and the log keeps serving everything
else.
"""
from __future__ import annotations

import os
import struct

import crc32c
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from storage import LogConfig, PartitionLog, cleaner
from storage.errors import StorageIOError, UndecodableBatch

NOW_MS = 10_000_000_000
TS = 1_000_000
HEADER = struct.Struct(">qiibIhiqqqhii")


def good_batch(pairs, timestamp: int = TS) -> bytearray:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    for i, (key, value) in enumerate(pairs):
        builder.append(i, timestamp=timestamp + i, key=key, value=value, headers=[])
    return bytearray(builder.build())


def bad_batch(kind: str, timestamp: int) -> bytearray:
    """One batch a header-only check accepts whose records do not decode."""
    payload, compression = {
        "gzip-garbage": (b"garbage-not-gzip", 1),
        "lz4-garbage": (b"garbage-not-lz4!" * 3, 3),
        "records-cut-short": (b"\x14\x00\x00\x00\x02k\x02", 0),
    }[kind]
    data = bytearray(HEADER.pack(0, HEADER.size - 12 + len(payload), -1, 2, 0, compression, 0,
                                 timestamp, timestamp, -1, -1, -1, 1) + payload)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return data


def open_log(directory, **config):
    return PartitionLog.open(str(directory), LogConfig(**config), clock_ms=lambda: NOW_MS)


KINDS = ["gzip-garbage", "lz4-garbage", "records-cut-short"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_lookup_that_reaches_the_batch_raises_undecodable_batch_and_the_log_serves_on(
        tmp_path, kind):
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(good_batch([(b"a", b"1"), (b"b", b"2")]), 0)
    log.append_as_leader(bad_batch(kind, TS + 100), 0)
    for lookup in (lambda: log.offset_for_timestamp(TS + 50), log.max_timestamp_and_offset):
        with pytest.raises(UndecodableBatch) as info:
            lookup()
        assert not isinstance(info.value, StorageIOError)
    assert log.offset_for_timestamp(TS + 1) == (1, TS + 1), "batches before it still decode"
    info = log.append_as_leader(good_batch([(b"c", b"3")], TS + 200), 0)
    assert info.first_offset == 3
    assert log.offset_for_timestamp(TS + 150) == (3, TS + 200), "lookups past it still work"
    assert log.max_timestamp_and_offset() == (TS + 200, 3)
    assert len(log.read(0, 1 << 20)) > 0
    log.close()


@pytest.mark.parametrize("kind", KINDS)
def test_the_cleaner_aborts_on_the_batch_and_leaves_every_segment_as_it_was(tmp_path, kind):
    log = open_log(tmp_path / "c-0", cleanup_policy="compact", segment_bytes=300)
    for i in range(6):
        log.append_as_leader(good_batch([(b"k", b"v%d" % i), (b"j", b"w%d" % i)]), 0)
        if i == 2:
            log.append_as_leader(bad_batch(kind, TS), 0)
    log.update_high_watermark(log.log_end_offset)
    assert len(log.segments) > 2
    files = {name: open(os.path.join(log.directory, name), "rb").read()
             for name in os.listdir(log.directory) if name.endswith(".log")}
    plan = cleaner.plan_cleaning(log, NOW_MS)
    assert plan is not None
    with pytest.raises(cleaner.CleaningAborted, match="does not decode"):
        cleaner.clean(plan)
    assert not [n for n in os.listdir(log.directory) if n.endswith(cleaner.CLEANED_SUFFIX)]
    assert {name: open(os.path.join(log.directory, name), "rb").read()
            for name in os.listdir(log.directory) if name.endswith(".log")} == files
    log.close()

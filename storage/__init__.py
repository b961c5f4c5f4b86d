"""The partition log on disk: segments, indexes, checkpoints, epoch cache, producer
state, recovery, retention.  No network, no cluster, no asyncio.

Imports: the standard library, crc32c (producer snapshots; batch CRCs go through
``protocol.records``), ``protocol.records`` — the shared RecordBatch v2 header view,
so the broker and the log agree on one parser — and ``protocol.record_filter`` (the
cleaner's record-level rewrite, the only place storage opens records).  The broker uses
``PartitionLog`` (and asks its ``producer_state`` about client batches) and ``LogConfig``; the other
modules are the log's parts, one on-disk concept each:

``config``             LogConfig (Kafka topic-config names)
``checkpoint``         atomic small files: offsets.checkpoint, leader-epoch-checkpoint,
                       marker
``epoch_cache``        LeaderEpochCache (epoch → start offset)
``index``              OffsetIndex, TimeIndex
``segment``            LogSegment (<base>.log/.index/.timeindex)
``producer_state``     ProducerStateManager: idempotent-producer rules, which snapshots
                       exist and when they are taken (the file layout is in its docstring)
``producer_snapshot``  <offset>.snapshot files: encode, decode, list, write, delete
``recovery``           startup recovery as named steps (a cleaner swap included),
                       RecoveryReport
``cleaner``            the log cleaner: plan, clean (a thread), commit (the swap)
``local_log``          LocalLog: the segments of one directory (roll, append bytes,
                       read, flush, delete, the cleaner's swap)
``append_checks``      what an append must satisfy before a byte is written
``log``                PartitionLog over a LocalLog: offsets, leader epochs, producer
                       state, high watermark, last stable offset, retention,
                       truncation; keeps all of the above in step; AppendInfo
``file_records``       FileRecords: a zero-copy read, regions of segment files
``errors``             StorageError and its subclasses; the OSError and RecordError
                       converters around PartitionLog's methods
"""
from .config import LogConfig
from .epoch_cache import LeaderEpochCache
from .errors import (
                     CorruptIndex,
                     CorruptLog,
                     InvalidAppend,
                     InvalidEpochAssignment,
                     InvalidIndexEntry,
                     InvalidOffset,
                     LogClosed,
                     OffsetOutOfRange,
                     StaleRegion,
                     StorageError,
                     StorageIOError,
)
from .file_records import FileRecords
from .log import AppendInfo, PartitionLog
from .recovery import RecoveryReport

__all__ = [
    "AppendInfo", "CorruptIndex", "CorruptLog", "FileRecords", "InvalidAppend",
    "InvalidEpochAssignment", "InvalidIndexEntry", "InvalidOffset", "LeaderEpochCache",
    "LogClosed", "LogConfig", "OffsetOutOfRange", "PartitionLog", "RecoveryReport",
    "StaleRegion", "StorageError", "StorageIOError",
]

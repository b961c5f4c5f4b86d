"""The partition log on disk: segments, indexes, checkpoints, epoch cache, recovery,
retention.  No network, no cluster, no asyncio.

Imports: the standard library, crc32c (through ``protocol.records``) and
``protocol.records`` — the shared RecordBatch v2 header view, so the broker and the
log agree on one parser.  The broker uses ``PartitionLog`` and ``LogConfig``; the other
modules are the log's parts, one on-disk concept each:

``config``       LogConfig (Kafka topic-config names)
``checkpoint``   atomic small files: offsets.checkpoint, leader-epoch-checkpoint, marker
``epoch_cache``  LeaderEpochCache (epoch → start offset)
``index``        OffsetIndex, TimeIndex
``segment``      LogSegment (<base>.log/.index/.timeindex)
``recovery``     startup recovery as named steps, RecoveryReport
``log``          PartitionLog, AppendInfo
``errors``       StorageError and its subclasses
"""
from .config import LogConfig
from .epoch_cache import LeaderEpochCache
from .errors import (CorruptIndex, CorruptLog, InvalidAppend, InvalidEpochAssignment,
                     InvalidIndexEntry, InvalidOffset, LogClosed, OffsetOutOfRange,
                     StorageError, StorageIOError)
from .log import AppendInfo, PartitionLog
from .recovery import RecoveryReport

__all__ = [
    "AppendInfo", "CorruptIndex", "CorruptLog", "InvalidAppend", "InvalidEpochAssignment",
    "InvalidIndexEntry", "InvalidOffset", "LeaderEpochCache", "LogClosed", "LogConfig",
    "OffsetOutOfRange", "PartitionLog", "RecoveryReport", "StorageError", "StorageIOError",
]

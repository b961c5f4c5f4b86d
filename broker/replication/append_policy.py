"""A topic's rules for a leader append of a client's batch: its size limit, timestamp
checks and type, and the codec the broker stores it with (Kafka's LogValidator, driven by
``max.message.bytes``, ``message.timestamp.*`` and ``compression.type``).

``prepare`` is the produce path's one call: the size check, the batch's validation, then
only what the topic asks for.  With Kafka's defaults that is one comparison of the
header's maxTimestamp with the clock (``message.timestamp.after.max.ms``, one hour in
Kafka 4): no copy, no record read, no CRC recomputed.  Pure but for the clock; any
thread.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from protocol.batch_rewrite import (
    LONG_MAX,
    check_create_times,
    recompress,
    stamp_log_append_time,
)
from protocol.errors import ErrorCode, RecordError
from protocol.primitives import Buffer
from protocol.records import BatchHeader, validate_produce_records

from ..topics import COMPRESSION_CODECS

_LEVELS = {1: "compression.gzip.level", 3: "compression.lz4.level",
           4: "compression.zstd.level"}


@dataclass(frozen=True)
class AppendPolicy:
    """Invariant: ``max_message_bytes`` is None (the broker's message.max.bytes, read
    live) or the topic's override; ``compression`` is None (``producer``: stored as
    sent) or a batch codec id (0 = uncompressed)."""

    max_message_bytes: int | None = None
    log_append_time: bool = False
    before_max_ms: int = LONG_MAX
    after_max_ms: int = 3_600_000
    compression: int | None = None
    compression_level: int | None = None

    @classmethod
    def from_properties(cls, props: dict[str, str], overrides: dict[str, str]) -> AppendPolicy:
        """From a topic's effective properties (``props``) and its own ``overrides``."""
        compression = COMPRESSION_CODECS[props.get("compression.type", "producer")]
        level_key = _LEVELS.get(compression or 0)
        level = int(props[level_key]) if level_key and level_key in props else None
        limit = overrides.get("max.message.bytes")
        return cls(max_message_bytes=None if limit is None else int(limit),
                   log_append_time=props.get("message.timestamp.type") == "LogAppendTime",
                   before_max_ms=int(props.get("message.timestamp.before.max.ms", LONG_MAX)),
                   after_max_ms=int(props.get("message.timestamp.after.max.ms", 3_600_000)),
                   compression=compression, compression_level=level)

    def prepare(self, records: Buffer | None, broker_max_bytes: int, topic: str, index: int
                ) -> tuple[bytearray, BatchHeader]:
        """The batch to append and its header, or RecordError with Kafka's code:
        MESSAGE_TOO_LARGE above the size limit (checked on the batch as sent and, when
        recompressed, as stored), INVALID_TIMESTAMP outside the CreateTime bounds, and
        validate_produce_records' codes."""
        limit = broker_max_bytes if self.max_message_bytes is None else self.max_message_bytes
        if records is not None and len(records) > limit:
            raise _too_large(topic, index, len(records), limit)
        batch, header = validate_produce_records(records)
        now_ms = int(time.time() * 1000)
        if self.compression is not None:
            batch, header = recompress(batch, header, self.compression, self.compression_level)
            if len(batch) > limit:
                raise _too_large(topic, index, len(batch), limit)
        if self.log_append_time:
            header = stamp_log_append_time(batch, header, now_ms)
        elif header.max_timestamp > now_ms + self.after_max_ms \
                or self.before_max_ms != LONG_MAX:
            check_create_times(batch, header, now_ms, self.before_max_ms, self.after_max_ms)
        return batch, header


def _too_large(topic: str, index: int, size: int, limit: int) -> RecordError:
    return RecordError(ErrorCode.MESSAGE_TOO_LARGE,
                       f"The record batch size in the append to {topic}-{index} is {size} "
                       f"bytes which exceeds the maximum configured value of {limit}.")

"""Idempotent-producer state of one partition (Kafka's ProducerStateManager, trimmed).

For each producer id: its epoch and the metadata of its last five batches (first and
last sequence, first and last offset).  Everything comes from batch headers, so the
state is rebuilt from the log by a header-only scan and records are never decoded.

Kafka's rules, checked before a leader appends a client batch:

* epoch below the producer's current epoch → INVALID_PRODUCER_EPOCH;
* a batch equal (epoch, first and last sequence) to one of the last five → duplicate:
  answered with the original offsets and not appended again;
* a new epoch must start at sequence 0 (unless the producer is unknown);
* within an epoch the first sequence must follow the last one (wrapping at 2^31-1),
  else OUT_OF_ORDER_SEQUENCE_NUMBER; an unknown producer may start anywhere.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from protocol.records import BatchHeader

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
BATCHES_KEPT = 5
MAX_SEQUENCE = 2 ** 31 - 1


class BatchMetadata(NamedTuple):
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int


@dataclass
class ProducerEntry:
    producer_id: int
    producer_epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=BATCHES_KEPT))

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE


class ProducerStateError(Exception):
    """Refuse the batch; ``code_name`` is the Kafka error code's name."""

    def __init__(self, code_name: str, message: str):
        super().__init__(message)
        self.code_name = code_name


def last_sequence_of(header: BatchHeader) -> int:
    return (header.base_sequence + header.last_offset_delta) % (MAX_SEQUENCE + 1)


def in_sequence(last_sequence: int, next_sequence: int) -> bool:
    return next_sequence == last_sequence + 1 or (next_sequence == 0 and last_sequence == MAX_SEQUENCE)


class ProducerStateManager:
    """Per-partition producer state. Callers: the partition, on the event loop."""

    def __init__(self):
        self.producers: dict[int, ProducerEntry] = {}

    def check(self, header: BatchHeader) -> BatchMetadata | None:
        """Validate a client batch. Returns the original batch if it is a duplicate,
        None if it may be appended; raises ProducerStateError otherwise."""
        if header.producer_id == NO_PRODUCER_ID:
            return None
        entry = self.producers.get(header.producer_id)
        if entry is None:
            return None
        first, last = header.base_sequence, last_sequence_of(header)
        if header.producer_epoch < entry.producer_epoch:
            raise ProducerStateError(
                "INVALID_PRODUCER_EPOCH",
                f"producer {header.producer_id} epoch {header.producer_epoch} is older than "
                f"{entry.producer_epoch}")
        if header.producer_epoch == entry.producer_epoch:
            for batch in entry.batches:
                if batch.first_sequence == first and batch.last_sequence == last:
                    return batch
            if entry.last_sequence != NO_SEQUENCE and not in_sequence(entry.last_sequence, first):
                raise ProducerStateError(
                    "OUT_OF_ORDER_SEQUENCE_NUMBER",
                    f"producer {header.producer_id} sent sequence {first} after "
                    f"{entry.last_sequence}")
        elif first != 0:
            raise ProducerStateError(
                "OUT_OF_ORDER_SEQUENCE_NUMBER",
                f"producer {header.producer_id} starts epoch {header.producer_epoch} at "
                f"sequence {first}, not 0")
        return None

    def update(self, header: BatchHeader) -> None:
        """Record an appended batch (leader or follower, or a recovery scan)."""
        if header.producer_id == NO_PRODUCER_ID or header.is_control:
            return
        entry = self.producers.get(header.producer_id)
        if entry is None or header.producer_epoch > entry.producer_epoch:
            entry = ProducerEntry(header.producer_id, header.producer_epoch)
            self.producers[header.producer_id] = entry
        entry.batches.append(BatchMetadata(header.base_sequence, last_sequence_of(header),
                                           header.base_offset, header.last_offset))

    def truncate_to(self, offset: int) -> None:
        """Forget batches at/after ``offset`` (after a log truncation)."""
        for producer_id in list(self.producers):
            entry = self.producers[producer_id]
            kept = [b for b in entry.batches if b.last_offset < offset]
            if kept:
                entry.batches = deque(kept, maxlen=BATCHES_KEPT)
            else:
                del self.producers[producer_id]

    def truncate_before(self, log_start_offset: int) -> None:
        """Forget producers whose every kept batch is below the log start (retention)."""
        for producer_id in list(self.producers):
            if all(b.last_offset < log_start_offset for b in self.producers[producer_id].batches):
                del self.producers[producer_id]

"""Transactional ids of the ``__transaction_state`` partitions this broker leads.

Kafka's ``TransactionStateManager``: the cache of transaction metadata, its loading when
this broker becomes leader of a transaction-state partition, its unloading when it stops,
and every write to the topic.  Ownership of one partition, driven by the replica
manager's leadership listener, as for ``__consumer_offsets`` (``groups/manager.py``):

    not owned ──(became leader)──► LOADING ──(log read to its end)──► LOADED
        ▲                            │                                  │
        └──(became follower, left this broker, or a new leader epoch)───┘

A new leader epoch ends the tenure even without a follower spell (the partition is
loaded again): the coordinator epoch of every transaction of the partition is that
leader epoch, and the markers it sends carry it, so a tenure never changes its epoch.
Requests for ids of a LOADING partition get COORDINATOR_LOAD_IN_PROGRESS, of a partition
not owned NOT_COORDINATOR.  A loaded partition's transactions found in PrepareCommit or
PrepareAbort are handed to ``on_loaded`` (the coordinator finishes them).

Writes have acks=all semantics: the record is appended as leader, then the caller waits
until the high watermark passes it, for ``TXN_LOG_APPEND_TIMEOUT_MS``.  The in-memory
metadata changes only after the write is acknowledged and only while the tenure that
issued it is current (Kafka's pending state, see ``metadata.py``).  The topic is
compacted: the latest record per transactional id survives; removed ids are tombstones.

Event-loop only.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

from protocol.errors import ErrorCode
from protocol.records import iter_headers

from ..coordination import LoadState, Ownership, load_partition
from ..groups.placement import partition_for
from ..groups.records import build_batch, iter_records
from ..replication.origin import AppendOrigin
from . import records
from .metadata import (TransactionMetadata, TransactionState, TxnTransitMetadata)

log = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"
# Kafka's TransactionStateManager bounds its log appends by request.timeout.ms, whose
# default this is (Raftwood has no such setting).
TXN_LOG_APPEND_TIMEOUT_MS = 30_000

# Kafka's mapping of append errors (TransactionStateManager.appendTransactionToLog).
_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
}


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


def transaction_state_topic_configs(config, replication_factor: int) -> dict[str, str]:
    """Topic configs of ``__transaction_state`` (compacted, never deleted by retention)."""
    return {"cleanup.policy": "compact", "retention.ms": "-1", "retention.bytes": "-1",
            "segment.bytes": str(config["transaction.state.log.segment.bytes"]),
            "min.insync.replicas": str(min(config["transaction.state.log.min.isr"],
                                           replication_factor))}


def value_of(transit: TxnTransitMetadata) -> records.TxnValue:
    return records.TxnValue(transit.producer_id, transit.producer_epoch, transit.txn_timeout_ms,
                            transit.state.code, transit.topic_partitions,
                            transit.txn_last_update_timestamp_ms,
                            transit.txn_start_timestamp_ms)


def encode_value(transit: TxnTransitMetadata) -> bytes:
    return records.txn_value(value_of(transit), TransactionState.EMPTY.code)


class TransactionStateManager:
    """The transaction cache and the transaction-state topic I/O behind the coordinator.

    ``on_loaded(ownership, [metadata])`` runs after a partition finished loading with
    its transactions left in PrepareCommit/PrepareAbort.
    """

    def __init__(self, broker, on_loaded: Callable[[Ownership, list[TransactionMetadata]], None],
                 clock_ms: Callable[[], int] = _wall_clock_ms):
        self.broker = broker
        config = broker.config
        self.node_id = config.node_id
        self.configured_partitions = config["transaction.state.log.num.partitions"]
        self.max_batch_bytes = max(config["message.max.bytes"],
                                   config["socket.request.max.bytes"])
        self.clock_ms = clock_ms
        self._on_loaded = on_loaded
        self.owned: dict[int, Ownership] = {}
        self.transactions: dict[str, TransactionMetadata] = {}
        self._prefix = f"[TransactionStateManager broker={self.node_id}]"

    # -- placement and lookup ------------------------------------------------------------------

    def num_partitions(self) -> int:
        """The existing topic's partition count wins over the config (the mapping of ids
        to partitions must never change under a running cluster)."""
        topic = self.broker.image.topics.get(TRANSACTION_STATE_TOPIC)
        return len(topic.partitions) if topic is not None else self.configured_partitions

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions())

    def status_for(self, transactional_id: str) -> ErrorCode:
        """NONE if this broker coordinates ``transactional_id`` now; else the error."""
        ownership = self.owned.get(self.partition_for(transactional_id))
        if ownership is None:
            return ErrorCode.NOT_COORDINATOR
        if ownership.state is LoadState.LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE

    def lookup(self, transactional_id: str) -> tuple[ErrorCode, TransactionMetadata | None]:
        """Kafka's getTransactionState: (error, metadata or None when unknown)."""
        error = self.status_for(transactional_id)
        if error != ErrorCode.NONE:
            return error, None
        return ErrorCode.NONE, self.transactions.get(transactional_id)

    def put_if_absent(self, metadata: TransactionMetadata) -> TransactionMetadata:
        return self.transactions.setdefault(metadata.transactional_id, metadata)

    def coordinator_epoch(self, metadata: TransactionMetadata) -> int | None:
        """The epoch of the tenure holding ``metadata``; None if it is not cached now."""
        ownership = self.owned.get(metadata.partition)
        if ownership is None or ownership.state is not LoadState.LOADED \
                or self.transactions.get(metadata.transactional_id) is not metadata:
            return None
        return ownership.leader_epoch

    def is_loading(self) -> bool:
        return any(o.state is LoadState.LOADING for o in self.owned.values())

    def loaded_transactions(self) -> list[TransactionMetadata]:
        return list(self.transactions.values())

    # -- leadership → load / unload --------------------------------------------------------------

    def on_leadership_changed(self, partition) -> None:
        """Replica-manager listener (see the module docstring)."""
        if partition.topic != TRANSACTION_STATE_TOPIC:
            return
        index = partition.index
        ownership = self.owned.get(index)
        if ownership is not None and partition.is_leader \
                and ownership.leader_epoch == partition.leader_epoch:
            return
        if ownership is not None:
            self.unload(index)
        if partition.is_leader:
            ownership = Ownership(index, partition.leader_epoch)
            self.owned[index] = ownership
            ownership.task = asyncio.get_running_loop().create_task(self._load(ownership))

    def unload(self, index: int) -> None:
        ownership = self.owned.pop(index, None)
        if ownership is None:
            return
        if ownership.task is not None and not ownership.task.done():
            ownership.task.cancel()
        unloaded = [t for t in self.transactions.values() if t.partition == index]
        for metadata in unloaded:
            del self.transactions[metadata.transactional_id]
        if unloaded:
            log.info("%s unloaded %d transactional ids of %s-%d", self._prefix, len(unloaded),
                     TRANSACTION_STATE_TOPIC, index)

    def shutdown(self) -> None:
        for index in list(self.owned):
            self.unload(index)

    async def _load(self, ownership: Ownership) -> None:
        """Read the partition from its log start to its log end offset, then publish."""
        index = ownership.partition
        started = time.monotonic()
        loader = _Loader(index)
        if not await load_partition(self.broker, TRANSACTION_STATE_TOPIC, ownership,
                                    self.owned, loader.apply, self._prefix):
            return
        loaded = loader.transactions()
        for metadata in loaded:
            self.transactions[metadata.transactional_id] = metadata
        ownership.state = LoadState.LOADED
        unfinished = [m for m in loaded
                      if m.state in (TransactionState.PREPARE_COMMIT,
                                     TransactionState.PREPARE_ABORT)]
        log.log(logging.INFO if loaded else logging.DEBUG,
                "%s loaded %d transactional ids (%d to complete) of %s-%d (coordinator epoch "
                "%d) in %.0f ms", self._prefix, len(loaded), len(unfinished),
                TRANSACTION_STATE_TOPIC, index, ownership.leader_epoch,
                (time.monotonic() - started) * 1000)
        self._on_loaded(ownership, unfinished)

    # -- writes ------------------------------------------------------------------------------

    async def append(self, metadata: TransactionMetadata, coordinator_epoch: int,
                     transit: TxnTransitMetadata, *,
                     keep_pending_on: frozenset[ErrorCode] = frozenset()) -> ErrorCode:
        """Write ``transit`` for ``metadata`` (a tombstone for Dead) and, once acknowledged
        by every in-sync replica, apply it; Kafka's appendTransactionToLog.

        NOT_COORDINATOR when the tenure of ``coordinator_epoch`` is over, before or after
        the write.  On any other failure the pending transition is dropped, unless the
        error is in ``keep_pending_on`` (the caller retries the same transition)."""
        if self.coordinator_epoch(metadata) != coordinator_epoch:
            return ErrorCode.NOT_COORDINATOR
        ownership = self.owned[metadata.partition]
        value = None if transit.state is TransactionState.DEAD else encode_value(transit)
        batch = build_batch([(records.txn_key(metadata.transactional_id), value)],
                            self.clock_ms())
        replica_manager = self.broker.replica_manager
        status = replica_manager.append_one(TRANSACTION_STATE_TOPIC, metadata.partition, batch,
                                            -1, self.max_batch_bytes,
                                            origin=AppendOrigin.COORDINATOR)
        error = status.error
        if error == ErrorCode.NONE:
            key = (TRANSACTION_STATE_TOPIC, metadata.partition)
            statuses = await replica_manager.wait_for_acks({key: status},
                                                           TXN_LOG_APPEND_TIMEOUT_MS)
            error = statuses[key].error
        error = _APPEND_ERRORS.get(error, error)
        current = self.owned.get(metadata.partition) is ownership \
            and self.transactions.get(metadata.transactional_id) is metadata
        if error == ErrorCode.NONE:
            if not current:
                return ErrorCode.NOT_COORDINATOR
            metadata.complete_transition_to(transit)
            if transit.state is TransactionState.DEAD:
                del self.transactions[metadata.transactional_id]
            return ErrorCode.NONE
        log.warning("%s writing %s of %s failed: %s", self._prefix, transit.state.kafka_name,
                    metadata.transactional_id, error.name)
        if current and error not in keep_pending_on:
            metadata.pending_state = None
        return error


class _Loader:
    """Replays one transaction-state partition's records (pure; see ``records``)."""

    def __init__(self, partition: int):
        self.partition = partition
        self.values: dict[str, records.TxnValue] = {}

    def apply(self, chunk: bytes, position: int) -> int:
        """Apply the records at or after ``position``; returns the next position: past
        the chunk's last batch, even one compaction left without records."""
        next_position = position
        for header in iter_headers(chunk):
            next_position = max(next_position, header.next_offset)
        for offset, key, value in iter_records(chunk):
            next_position = max(next_position, offset + 1)
            if offset < position or key is None:
                continue
            try:
                transactional_id = records.decode_key(key)
                if value is None:
                    self.values.pop(transactional_id, None)
                else:
                    self.values[transactional_id] = records.decode_value(value)
            except (records.RecordFormatError, UnicodeDecodeError) as exc:
                log.warning("[TransactionStateManager] skipping unreadable record at %s-%d "
                            "offset %d: %s", TRANSACTION_STATE_TOPIC, self.partition, offset, exc)
        return next_position

    def transactions(self) -> list[TransactionMetadata]:
        result = []
        for transactional_id, v in sorted(self.values.items()):
            try:
                state = TransactionState.from_code(v.status)
            except ValueError as exc:
                log.warning("[TransactionStateManager] %s: %s; skipped", transactional_id, exc)
                continue
            result.append(TransactionMetadata(
                transactional_id, self.partition, v.producer_id, v.producer_epoch,
                v.transaction_timeout_ms, state, set(v.partitions), v.start_timestamp_ms,
                v.last_update_timestamp_ms))
        return result

"""Transactional ids of the ``__transaction_state`` partitions this broker leads.

Kafka's ``TransactionStateManager``: the cache of transaction metadata, its loading when
this broker becomes leader of a transaction-state partition, its unloading when it stops,
and every write to the topic.  Ownership of the partitions, their loading and the
appends are the coordinator core's (``broker/coordinator/runtime.py``), as for
``__consumer_offsets`` (``groups/manager.py``); this manager is its shard.

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

import logging
import time
from collections.abc import Callable

from protocol.errors import ErrorCode
from protocol.records import iter_headers

from ..coordinator import CoordinatorRuntime, InternalTopic, Ownership
from ..coordinator.batches import iter_records
from ..coordinator.runtime import APPEND_ERRORS, drop_partition
from . import records
from .metadata import TransactionMetadata, TransactionState, TxnTransitMetadata

log = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"
# Kafka's TransactionStateManager bounds its log appends by request.timeout.ms, whose
# default this is (Raftwood has no such setting).
TXN_LOG_APPEND_TIMEOUT_MS = 30_000

def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


def transaction_state_topic_configs(config, replication_factor: int) -> dict[str, str]:
    """Topic configs of ``__transaction_state`` (compacted, never deleted by retention)."""
    return {"cleanup.policy": "compact", "retention.ms": "-1", "retention.bytes": "-1",
            "segment.bytes": str(config["transaction.state.log.segment.bytes"]),
            "min.insync.replicas": str(min(config["transaction.state.log.min.isr"],
                                           replication_factor))}


def transaction_state_topic(config) -> InternalTopic:
    """``__transaction_state`` as the settings describe it; a new leader epoch reloads."""
    return InternalTopic(
        TRANSACTION_STATE_TOPIC, config["transaction.state.log.num.partitions"],
        config["transaction.state.log.replication.factor"],
        lambda replication_factor: transaction_state_topic_configs(config, replication_factor),
        reload_on_new_epoch=True)


def value_of(transit: TxnTransitMetadata) -> records.TxnValue:
    return records.TxnValue(transit.producer_id, transit.producer_epoch, transit.txn_timeout_ms,
                            transit.state.code, transit.topic_partitions,
                            transit.txn_last_update_timestamp_ms,
                            transit.txn_start_timestamp_ms, transit.last_producer_id,
                            transit.next_producer_id, transit.client_transaction_version)


def encode_value(transit: TxnTransitMetadata) -> bytes:
    return records.txn_value(value_of(transit), TransactionState.EMPTY.code)


class TransactionStateManager:
    """The transaction cache and the transaction-state topic I/O behind the coordinator;
    the coordinator core's shard for ``__transaction_state`` (``runtime``).

    ``on_loaded(ownership, [metadata])`` runs after a partition finished loading with
    its transactions left in PrepareCommit/PrepareAbort.
    """

    def __init__(self, config, replica_manager, image: Callable[[], object],
                 on_loaded: Callable[[Ownership, list[TransactionMetadata]], None],
                 clock_ms: Callable[[], int] = _wall_clock_ms):
        self.node_id = config.node_id
        self.clock_ms = clock_ms
        self._on_loaded = on_loaded
        self.transactions: dict[str, TransactionMetadata] = {}
        self._prefix = f"[TransactionStateManager broker={self.node_id}]"
        self.topic = transaction_state_topic(config)
        self.runtime = CoordinatorRuntime(self.topic, config, replica_manager, image, self,
                                          _Loader, lambda: self.clock_ms(), self._prefix)

    # -- placement and lookup ------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        """The existing topic's partition count wins over the config (the mapping of ids
        to partitions must never change under a running cluster)."""
        return self.runtime.partition_for(transactional_id)

    def status_for(self, transactional_id: str) -> ErrorCode:
        """NONE if this broker coordinates ``transactional_id`` now; else the error."""
        return self.runtime.status_for(transactional_id)

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
        ownership = self.runtime.loaded_tenure(metadata.partition)
        if ownership is None or self.transactions.get(metadata.transactional_id) is not metadata:
            return None
        return ownership.leader_epoch

    def loaded_transactions(self) -> list[TransactionMetadata]:
        return list(self.transactions.values())

    # -- the runtime's shard: load / unload ------------------------------------------------------

    def on_loaded(self, ownership: Ownership, loader: _Loader) -> str | None:
        loaded = loader.transactions()
        self.transactions.update((m.transactional_id, m) for m in loaded)
        unfinished = [m for m in loaded
                      if m.state in (TransactionState.PREPARE_COMMIT,
                                     TransactionState.PREPARE_ABORT)]
        self._on_loaded(ownership, unfinished)
        return f"{len(loaded)} transactional ids ({len(unfinished)} to complete)" \
            if loaded else None

    def on_unloaded(self, index: int) -> str | None:
        unloaded = drop_partition(self.transactions, index)
        return f"{len(unloaded)} transactional ids" if unloaded else None

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
        ownership = self.runtime.owned[metadata.partition]
        value = None if transit.state is TransactionState.DEAD else encode_value(transit)
        pending = self.runtime.append_now(
            metadata.partition, [(records.txn_key(metadata.transactional_id), value)])
        if isinstance(pending, ErrorCode):
            error = pending
        else:
            error = await self.runtime.wait_for_acks(pending, TXN_LOG_APPEND_TIMEOUT_MS)
        error = APPEND_ERRORS.get(error, error)
        current = self.runtime.holds(ownership) \
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
                v.last_update_timestamp_ms, last_producer_id=v.previous_producer_id,
                next_producer_id=v.next_producer_id,
                client_transaction_version=v.client_transaction_version))
        return result

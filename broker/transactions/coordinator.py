"""The transaction coordinator: Kafka's ``TransactionCoordinator`` on one event loop.

The coordinator of a transactional id is the leader of its ``__transaction_state``
partition (``manager.py``).  It serves InitProducerId (with a transactional id),
AddPartitionsToTxn, AddOffsetsToTxn (as AddPartitions of the group's
``__consumer_offsets`` partition), EndTxn, DescribeTransactions and ListTransactions,
case by case as Kafka's coordinator, and FindCoordinator key type 1 (the coordinator
core's lookup, ``broker/coordinator/topic.py``, creating the topic on first use).

Ending a transaction: PrepareCommit/PrepareAbort is written and acknowledged, the client
is answered, then the markers are written on every partition (``markers.py``), then
CompleteCommit/CompleteAbort.  Until then the transaction's pending state makes every
other request for it answer CONCURRENT_TRANSACTIONS.  A Prepare state found when a
partition is loaded is finished the same way, so a coordinator failover mid-commit
still ends complete on every partition.

Background loops (``start``): every
``transaction.abort.timed.out.transaction.cleanup.interval.ms`` Ongoing transactions
older than their timeout are aborted with the producer's epoch bumped (the producer is
fenced); every ``transaction.remove.expired.transaction.cleanup.interval.ms`` ids idle
in Empty/CompleteCommit/CompleteAbort longer than ``transactional.id.expiration.ms`` are
forgotten (a tombstone).  Python has no locks here: each check-then-prepare runs without
an ``await`` in between, which is what Kafka's ``inLock`` blocks guarantee.

Work a client asked for outlives the client: InitProducerId, AddPartitionsToTxn/
AddOffsetsToTxn and EndTxn run as tasks of their own (``TaskSupervisor.outlive``), so a
lost connection, which cancels the request's task, never skips the write's state
transition nor the clearing of its pending state; only the answer is dropped.  As a last
resort, a transition pending longer than its write can take (``STALE_PENDING_MS``) is
dropped with a WARNING naming the id, and a PrepareCommit/PrepareAbort that nothing is
completing is completed again (``maybe_unstick``), so no id stays blocked.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from protocol.errors import ErrorCode

from ..controller.metadata_client import MetadataUnavailable
from ..coordinator import CoordinatorAnswer, CoordinatorLookup, CreateTopic, Ownership
from ..tasks import TaskSupervisor
from . import end_txn
from .manager import TRANSACTION_STATE_TOPIC, TXN_LOG_APPEND_TIMEOUT_MS, TransactionStateManager
from .markers import TransactionMarkerChannelManager
from .metadata import (
    EXPIRABLE_STATES,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TV_1,
    TV_2,
    IllegalTransition,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from .verification import TransactionVerifier

if TYPE_CHECKING:
    from ..coordinator.context import CoordinatorContext
    from ..replication.producer_ids import ProducerIdManager

log = logging.getLogger(__name__)

S = TransactionState
# A pending transition older than this (its write's own timeout and a margin, exclusive)
# has lost its write: nothing will ever complete or clear it.
STALE_PENDING_MS = TXN_LOG_APPEND_TIMEOUT_MS + 5_000


@dataclass
class InitProducerIdResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass
class EndTxnResult:
    """EndTxn's answer: v5+ also names the producer id and epoch the client goes on with."""

    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass
class TransactionDescription:
    error: ErrorCode
    transactional_id: str
    state: str = ""
    timeout_ms: int = 0
    start_time_ms: int = -1
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: list[tuple[str, int]] = field(default_factory=list)


@dataclass
class TransactionListing:
    error: ErrorCode
    unknown_state_filters: list[str]
    transactions: list[tuple[str, int, str]]  # (transactional id, producer id, state)


class TransactionCoordinator:
    """Coordinates the transactional ids whose transaction-state partitions this broker leads.

    ``context``: what it uses of the broker (config, replica manager, image).
    ``create_topic`` (wired by the broker) creates ``__transaction_state`` on first use;
    without it the topic must exist already."""

    def __init__(self, context: CoordinatorContext, producer_ids: ProducerIdManager,
                 clock_ms: Callable[[], int] | None = None,
                 create_topic: CreateTopic | None = None):
        self.context = context
        config = context.config
        self.node_id = config.node_id
        self.producer_ids = producer_ids
        self.max_timeout_ms = config["transaction.max.timeout.ms"]
        self.expiration_ms = config["transactional.id.expiration.ms"]
        self.abort_interval_ms = config[
            "transaction.abort.timed.out.transaction.cleanup.interval.ms"]
        self.expire_interval_ms = config[
            "transaction.remove.expired.transaction.cleanup.interval.ms"]
        kwargs = {"clock_ms": clock_ms} if clock_ms is not None else {}
        self.manager = TransactionStateManager(config, context.replica_manager,
                                               lambda: context.image, self._on_partition_loaded,
                                               **kwargs)
        self.clock_ms = self.manager.clock_ms
        self.markers = TransactionMarkerChannelManager(context)
        self.verifier = TransactionVerifier(context, self)
        # The transactions whose markers and Complete* are being written (their pending
        # state may be as old as the markers take); by identity, one tenure's metadata.
        self._completing: set[TransactionMetadata] = set()
        self._prefix = f"[TransactionCoordinator broker={self.node_id}]"
        self.tasks = TaskSupervisor(self._prefix)
        self.lookup = CoordinatorLookup(self.manager.topic, lambda: context.image, create_topic,
                                        self.tasks, self._prefix)

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        self.tasks.periodic("abort-timed-out-transactions", self.abort_interval_ms / 1000.0,
                            self.abort_timed_out_transactions)
        self.tasks.periodic("remove-expired-transactional-ids",
                            self.expire_interval_ms / 1000.0, self.remove_expired_transactional_ids)

    async def shutdown(self) -> None:
        await self.tasks.shutdown()
        self.manager.runtime.shutdown()
        await self.markers.shutdown()
        await self.verifier.shutdown()

    # -- FindCoordinator -------------------------------------------------------------------------

    async def find_coordinator(self, transactional_id: str) -> CoordinatorAnswer:
        """The leader of the id's transaction-state partition, creating the topic first."""
        return await self.lookup.find_coordinator(transactional_id)

    # -- InitProducerId --------------------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None) -> InitProducerIdResult:
        """Kafka's handleInitProducerId for a transactional id; ``expected`` is the
        (producer id, epoch) of KIP-360 (InitProducerId v3+), None for a fresh producer.
        Runs to its end even when the caller is cancelled (see the module docstring)."""
        return await self.tasks.outlive(f"init-producer-id {transactional_id}",
                                        self._init_producer_id(transactional_id, timeout_ms,
                                                               expected))

    async def _init_producer_id(self, transactional_id: str, timeout_ms: int,
                                expected: tuple[int, int] | None) -> InitProducerIdResult:
        if not transactional_id:
            return InitProducerIdResult(ErrorCode.INVALID_REQUEST)
        if not 0 < timeout_ms <= self.max_timeout_ms:
            return InitProducerIdResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        if TRANSACTION_STATE_TOPIC not in self.context.image.topics:
            await self.lookup.ensure_topic()
        error, metadata = self.manager.lookup(transactional_id)
        if error != ErrorCode.NONE:
            return InitProducerIdResult(error)
        if metadata is None:
            try:
                producer_id = await self.producer_ids.next_producer_id()
            except MetadataUnavailable:
                return InitProducerIdResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            error, _ = self.manager.lookup(transactional_id)  # the tenure may have ended
            if error != ErrorCode.NONE:
                return InitProducerIdResult(error)
            metadata = self.manager.put_if_absent(TransactionMetadata(
                transactional_id, self.manager.partition_for(transactional_id), producer_id,
                NO_PRODUCER_EPOCH, timeout_ms, S.EMPTY,
                txn_last_update_timestamp_ms=self.clock_ms()))
        transit = await self._prepare_init(metadata, timeout_ms, expected)
        if isinstance(transit, ErrorCode):
            return InitProducerIdResult(transit)
        coordinator_epoch = self.manager.coordinator_epoch(metadata)
        if transit.state is S.PREPARE_EPOCH_FENCE:
            # Abort the ongoing transaction first; the client retries and then gets the
            # epoch bumped a second time (a new producer id if that exhausts the epochs).
            error = (await self._end_transaction(transactional_id, transit.producer_id,
                                                 transit.producer_epoch, commit=False,
                                                 from_client=False)).error
            return InitProducerIdResult(error if error != ErrorCode.NONE
                                        else ErrorCode.CONCURRENT_TRANSACTIONS)
        error = await self.manager.append(metadata, coordinator_epoch, transit)
        if error != ErrorCode.NONE:
            return InitProducerIdResult(error)
        return InitProducerIdResult(ErrorCode.NONE, transit.producer_id, transit.producer_epoch)

    async def _prepare_init(self, metadata: TransactionMetadata, timeout_ms: int,
                            expected: tuple[int, int] | None
                            ) -> TxnTransitMetadata | ErrorCode:
        """Kafka's prepareInitProducerIdTransit.  The only ``await`` (a new producer id at
        the epoch limit) is followed by the same checks again."""
        error = self._init_refusal(metadata, expected)
        if error is not None:
            return error
        if metadata.state is S.ONGOING:
            return metadata.prepare_fence_producer_epoch(self.clock_ms())
        if is_epoch_exhausted(metadata.producer_epoch) and \
                (expected is None or expected[1] == metadata.producer_epoch):
            try:
                new_producer_id = await self.producer_ids.next_producer_id()
            except MetadataUnavailable:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            error = self._init_refusal(metadata, expected)
            if error is not None:
                return error
            return metadata.prepare_producer_id_rotation(new_producer_id, timeout_ms,
                                                         self.clock_ms(), expected is not None)
        return metadata.prepare_increment_producer_epoch(
            timeout_ms, expected[1] if expected is not None else None, self.clock_ms())

    def _init_refusal(self, metadata: TransactionMetadata,
                      expected: tuple[int, int] | None) -> ErrorCode | None:
        if self.manager.coordinator_epoch(metadata) is None:
            return ErrorCode.NOT_COORDINATOR
        self.maybe_unstick(metadata)
        if metadata.pending_transition_in_progress:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if expected is not None and not (
                metadata.producer_epoch == NO_PRODUCER_EPOCH
                or expected[0] == metadata.producer_id
                or (expected[0] == metadata.last_producer_id
                    and is_epoch_exhausted(expected[1]))):
            return ErrorCode.PRODUCER_FENCED
        if metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if metadata.state in (S.DEAD, S.PREPARE_EPOCH_FENCE):
            # Kafka treats these as impossible here (the id is being removed, or a fence is
            # pending, both covered by the pending check): a retriable answer, not a crash.
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return None

    # -- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------------

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: set[tuple[str, int]],
                             client_version: int | None = None) -> ErrorCode:
        """Kafka's handleAddPartitionsToTransaction: one error for every partition;
        ``client_version`` 2 for a partition a leader adds for a transaction version 2
        client (Produce v12+, TxnOffsetCommit v5+).  Runs to its end even when the caller
        is cancelled."""
        return await self.tasks.outlive(
            f"add-partitions {transactional_id}",
            self._add_partitions(transactional_id, producer_id, producer_epoch, partitions,
                                 client_version))

    async def _add_partitions(self, transactional_id: str, producer_id: int,
                              producer_epoch: int, partitions: set[tuple[str, int]],
                              client_version: int | None) -> ErrorCode:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        error, metadata = self.manager.lookup(transactional_id)
        if error != ErrorCode.NONE:
            return error
        if metadata is None or metadata.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        self.maybe_unstick(metadata)
        if metadata.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if metadata.pending_transition_in_progress \
                or metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if metadata.state is S.ONGOING and partitions <= metadata.topic_partitions:
            return ErrorCode.NONE
        coordinator_epoch = self.manager.coordinator_epoch(metadata)
        transit = metadata.prepare_add_partitions(partitions, self.clock_ms(), client_version)
        return await self.manager.append(metadata, coordinator_epoch, transit)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: set[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        """AddPartitionsToTxn ``VerifyOnly`` (KIP-890 part 1): whether each partition is in
        the producer's ongoing transaction (NONE) or not (INVALID_TXN_STATE); an error of
        the transaction itself answers every partition.  Reads only, writes nothing."""
        error = self._verify_transaction(transactional_id, producer_id, producer_epoch)
        if error != ErrorCode.NONE:
            return dict.fromkeys(partitions, error)
        _error, metadata = self.manager.lookup(transactional_id)
        assert metadata is not None
        ongoing = metadata.state is S.ONGOING
        return {tp: ErrorCode.NONE if ongoing and tp in metadata.topic_partitions
                else ErrorCode.INVALID_TXN_STATE for tp in partitions}

    def _verify_transaction(self, transactional_id: str, producer_id: int,
                            producer_epoch: int) -> ErrorCode:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        error, metadata = self.manager.lookup(transactional_id)
        if error != ErrorCode.NONE:
            return error
        if metadata is None or metadata.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if metadata.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if (metadata.pending_transition_in_progress
                and metadata.pending_state is not S.PREPARE_EPOCH_FENCE) \
                or metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return ErrorCode.NONE

    # -- EndTxn ----------------------------------------------------------------------------------

    async def end_transaction(self, transactional_id: str, producer_id: int,
                              producer_epoch: int, commit: bool,
                              tv2: bool = False) -> EndTxnResult:
        """EndTxn (``tv2``: v5+, transaction version 2's rules, ``end_txn.py``); runs to its
        end (Prepare*, then markers and Complete* started) even when the caller is
        cancelled."""
        return await self.tasks.outlive(
            f"end-txn {transactional_id}",
            self._end_transaction(transactional_id, producer_id, producer_epoch, commit,
                                  from_client=True, tv2=tv2))

    async def _end_transaction(self, transactional_id: str, producer_id: int,
                               producer_epoch: int, commit: bool, from_client: bool,
                               tv2: bool = False) -> EndTxnResult:
        """Kafka's endTransaction: write Prepare*, answer, then markers and Complete*.
        ``from_client`` False: an abort that fences (InitProducerId or a timeout), with
        the bumped epoch of the pending PrepareEpochFence."""
        if not transactional_id:
            return EndTxnResult(ErrorCode.INVALID_REQUEST)
        error, metadata = self.manager.lookup(transactional_id)
        if error != ErrorCode.NONE:
            return EndTxnResult(error)
        if metadata is None:
            return EndTxnResult(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if from_client:
            self.maybe_unstick(metadata)
        fencing = metadata.pending_state is S.PREPARE_EPOCH_FENCE
        decision = end_txn.decide(metadata, producer_id, producer_epoch, commit, tv2,
                                  from_client)
        if isinstance(decision, end_txn.Answer):
            if decision.error == ErrorCode.INVALID_TXN_STATE:
                self._invalid_end(metadata, commit)
            if decision.error == ErrorCode.NONE:
                return EndTxnResult(ErrorCode.NONE, metadata.producer_id,
                                    metadata.producer_epoch)
            return EndTxnResult(decision.error)
        # A client's EndTxn says its version; the coordinator's own fencing abort keeps
        # the transaction's (under version 2 it bumps the fenced epoch once more).
        version = (TV_2 if tv2 else TV_1) if from_client else None
        transit = await self._prepare_end(metadata, decision, producer_epoch, fencing,
                                          version)
        if isinstance(transit, ErrorCode):
            return EndTxnResult(transit)
        coordinator_epoch = self.manager.coordinator_epoch(metadata)
        error = await self.manager.append(metadata, coordinator_epoch, transit)
        if error != ErrorCode.NONE:
            if fencing and self.manager.coordinator_epoch(metadata) == coordinator_epoch:
                metadata.has_failed_epoch_fence = True
            return EndTxnResult(error)
        error = self._after_prepare(metadata, coordinator_epoch, producer_id, producer_epoch,
                                    decision.state)
        if error != ErrorCode.NONE:
            return EndTxnResult(error)
        self._complete(metadata, coordinator_epoch)
        if transit.next_producer_id != NO_PRODUCER_ID:  # the epochs ran out: a new id
            return EndTxnResult(ErrorCode.NONE, transit.next_producer_id, 0)
        return EndTxnResult(ErrorCode.NONE, transit.producer_id, transit.producer_epoch)

    async def _prepare_end(self, metadata: TransactionMetadata, decision: end_txn.Proceed,
                           producer_epoch: int, fencing: bool,
                           version: int | None) -> TxnTransitMetadata | ErrorCode:
        """The Prepare* transition; under version 2 a new producer id first when the bump
        reaches the last epoch (the only ``await``, after which the decision is redone
        by the caller's pending check: a transition started meanwhile wins)."""
        next_producer_id = NO_PRODUCER_ID
        if version == TV_2 and not fencing and is_epoch_exhausted(metadata.producer_epoch):
            epoch_before = metadata.producer_epoch
            try:
                next_producer_id = await self.producer_ids.next_producer_id()
            except MetadataUnavailable:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            if metadata.pending_transition_in_progress \
                    or metadata.producer_epoch != epoch_before:
                return ErrorCode.CONCURRENT_TRANSACTIONS
        if fencing and decision.state is S.PREPARE_ABORT:
            metadata.start_epoch_fence_abort(producer_epoch)
        return metadata.prepare_abort_or_commit(
            decision.state, self.clock_ms(), client_version=version,
            next_producer_id=next_producer_id, no_partition_added=decision.no_partition_added)

    def _after_prepare(self, metadata: TransactionMetadata, coordinator_epoch: int,
                       producer_id: int, producer_epoch: int,
                       wanted: TransactionState) -> ErrorCode:
        """Prepare* is acknowledged: the same checks again, the metadata may have moved."""
        if self.manager.coordinator_epoch(metadata) != coordinator_epoch:
            return ErrorCode.NOT_COORDINATOR
        if metadata.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if metadata.producer_epoch not in (producer_epoch, producer_epoch + 1):
            return ErrorCode.PRODUCER_FENCED
        if metadata.pending_transition_in_progress:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if metadata.state is not wanted:
            return self._invalid_end(metadata, wanted is S.PREPARE_COMMIT)
        return ErrorCode.NONE

    def _invalid_end(self, metadata: TransactionMetadata, commit: bool) -> ErrorCode:
        log.info("%s %s: cannot %s a transaction in state %s", self._prefix,
                 metadata.transactional_id, "commit" if commit else "abort",
                 metadata.state.kafka_name)
        return ErrorCode.INVALID_TXN_STATE

    def _complete(self, metadata: TransactionMetadata, coordinator_epoch: int) -> None:
        """Prepare Complete* now (pending from here on), then markers and the write."""
        transit = metadata.prepare_complete(self.clock_ms())
        self._completing.add(metadata)
        self.tasks.spawn(f"complete-{metadata.transactional_id}",
                         self._send_markers_and_complete(metadata, coordinator_epoch, transit))

    async def _send_markers_and_complete(self, metadata: TransactionMetadata,
                                         coordinator_epoch: int,
                                         transit: TxnTransitMetadata) -> None:
        try:
            await self._write_markers_and_complete(metadata, coordinator_epoch, transit)
        finally:
            self._completing.discard(metadata)

    def maybe_unstick(self, metadata: TransactionMetadata) -> None:
        """Resolve what nothing will ever resolve (a lost write; see the module docstring):
        a pending transition older than ``STALE_PENDING_MS`` whose markers are not being
        written is dropped, and a PrepareCommit/PrepareAbort left without its completion
        for that long is completed again.  Both are logged at WARNING with the id."""
        tid = metadata.transactional_id
        coordinator_epoch = self.manager.coordinator_epoch(metadata)
        if coordinator_epoch is None or metadata in self._completing:
            return
        now = self.clock_ms()
        if metadata.pending_state is not None:
            age_ms = now - metadata.pending_since_ms
            if age_ms > STALE_PENDING_MS:
                log.warning("%s %s: dropping the transition to %s pending for %d ms (its "
                            "write was lost); the id goes on from %s", self._prefix, tid,
                            metadata.pending_state.kafka_name, age_ms, metadata.state.kafka_name)
                metadata.pending_state = None
        if metadata.pending_state is None \
                and metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) \
                and now - metadata.txn_last_update_timestamp_ms > STALE_PENDING_MS:
            log.warning("%s %s: %s was never completed; writing its markers again",
                        self._prefix, tid, metadata.state.kafka_name)
            self._complete(metadata, coordinator_epoch)

    async def _write_markers_and_complete(self, metadata: TransactionMetadata,
                                          coordinator_epoch: int,
                                          transit: TxnTransitMetadata) -> None:
        def still_current() -> bool:
            return self.manager.coordinator_epoch(metadata) == coordinator_epoch

        commit = transit.state is S.COMPLETE_COMMIT
        # The metadata's partitions shrink as markers are written (DescribeTransactions
        # shows what is left, as Kafka's does).
        written = await self.markers.write_markers(
            metadata.transactional_id, metadata.producer_id, metadata.producer_epoch, commit,
            coordinator_epoch, metadata.topic_partitions, still_current,
            metadata.client_transaction_version)
        if not written:
            return
        while True:
            error = await self.manager.append(
                metadata, coordinator_epoch, transit,
                keep_pending_on=frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE}))
            if error != ErrorCode.COORDINATOR_NOT_AVAILABLE or not still_current():
                break
            await asyncio.sleep(0.1)  # not enough replicas yet: Kafka retries the write too
        if error == ErrorCode.NONE:
            log.debug("%s %s: %s", self._prefix, metadata.transactional_id,
                      transit.state.kafka_name)

    def _on_partition_loaded(self, ownership: Ownership,
                             unfinished: list[TransactionMetadata]) -> None:
        for metadata in unfinished:
            self._complete(metadata, ownership.leader_epoch)

    # -- background ------------------------------------------------------------------------------

    async def abort_timed_out_transactions(self) -> int:
        """Abort (fencing the producer) every Ongoing transaction past its timeout."""
        now = self.clock_ms()
        aborts = []
        for metadata in self.manager.loaded_transactions():
            self.maybe_unstick(metadata)
            if metadata.pending_transition_in_progress or metadata.state is not S.ONGOING \
                    or metadata.txn_start_timestamp_ms + metadata.txn_timeout_ms >= now:
                continue
            try:
                transit = metadata.prepare_fence_producer_epoch(now)
            except IllegalTransition as exc:
                log.error("%s cannot abort timed-out %s: %s", self._prefix,
                          metadata.transactional_id, exc)
                continue
            log.info("%s aborting %s (producer id %d): older than its timeout of %d ms",
                     self._prefix, metadata.transactional_id, metadata.producer_id,
                     metadata.txn_timeout_ms)
            aborts.append(self._end_transaction(metadata.transactional_id, transit.producer_id,
                                                transit.producer_epoch, commit=False,
                                                from_client=False))
        for result in await asyncio.gather(*aborts):
            if result.error != ErrorCode.NONE:
                log.warning("%s aborting a timed-out transaction failed: %s", self._prefix,
                            ErrorCode(result.error).name)
        return len(aborts)

    async def remove_expired_transactional_ids(self) -> int:
        """Forget ids idle longer than ``transactional.id.expiration.ms`` (tombstones)."""
        deadline = self.clock_ms() - self.expiration_ms
        removals = []
        for metadata in self.manager.loaded_transactions():
            coordinator_epoch = self.manager.coordinator_epoch(metadata)
            if coordinator_epoch is None or metadata.pending_transition_in_progress \
                    or metadata.state not in EXPIRABLE_STATES \
                    or metadata.txn_last_update_timestamp_ms > deadline:
                continue
            removals.append(self.manager.append(metadata, coordinator_epoch,
                                                metadata.prepare_dead(self.clock_ms())))
        removed = sum(1 for e in await asyncio.gather(*removals) if e == ErrorCode.NONE)
        if removed:
            log.info("%s removed %d expired transactional ids", self._prefix, removed)
        return removed

    # -- DescribeTransactions / ListTransactions -------------------------------------------------

    def describe(self, transactional_id: str) -> TransactionDescription:
        if not transactional_id:
            return TransactionDescription(ErrorCode.INVALID_REQUEST, transactional_id)
        error, metadata = self.manager.lookup(transactional_id)
        if error != ErrorCode.NONE:
            return TransactionDescription(error, transactional_id)
        if metadata is None or metadata.state is S.DEAD:
            return TransactionDescription(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, transactional_id)
        return TransactionDescription(
            ErrorCode.NONE, transactional_id, metadata.state.kafka_name, metadata.txn_timeout_ms,
            metadata.txn_start_timestamp_ms, metadata.producer_id, metadata.producer_epoch,
            sorted(metadata.topic_partitions))

    def list_transactions(self, state_filters: list[str], producer_id_filters: list[int],
                          duration_filter_ms: int = -1) -> TransactionListing:
        """Kafka's listTransactionStates: nothing at all while a partition loads."""
        wanted = {TransactionState.from_name(n) for n in state_filters} - {None}
        unknown = [n for n in state_filters if TransactionState.from_name(n) is None]
        if self.manager.runtime.is_loading():
            return TransactionListing(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, unknown, [])
        now = self.clock_ms()
        pids = set(producer_id_filters)
        listed = [(m.transactional_id, m.producer_id, m.state.kafka_name)
                  for m in self.manager.loaded_transactions()
                  if m.state is not S.DEAD
                  and (not pids or m.producer_id in pids)
                  and (not state_filters or m.state in wanted)
                  and (duration_filter_ms < 0
                       or now - m.txn_start_timestamp_ms > duration_filter_ms)]
        return TransactionListing(ErrorCode.NONE, unknown, sorted(listed))

"""One transactional id's state and Kafka's transaction state machine (pure).

Kafka's ``TransactionMetadata``: the producer id and epoch of the transactional id, the
transaction in progress (its partitions, timeout and start time) and its state:

    Empty ──► Ongoing ──► PrepareCommit ──► CompleteCommit ──► Empty, Ongoing or Dead
                 │  (more partitions: Ongoing again)
                 ├──────► PrepareAbort ───► CompleteAbort ───► Empty, Ongoing or Dead
                 └──────► PrepareEpochFence ──► PrepareAbort

A change is made in two steps, as in Kafka: ``prepare_*`` checks the transition, sets
``pending_state`` and returns the new values (a ``TxnTransitMetadata``) without changing
anything else; the caller writes them to the log and, once the write is acknowledged,
``complete_transition_to`` applies them (a failed write clears ``pending_state``).  While
a transition is pending, no other may start: requests answer CONCURRENT_TRANSACTIONS.

The previous producer id and epoch (KIP-360's retry detection) live in memory only:
the version-0 record format has no room for them, so a retried InitProducerId that
spans a coordinator change is fenced (Kafka accepts the same with this format).

Transaction version 2 (KIP-890 part 2, ``client_transaction_version`` 2, what an
EndTxn v5+ or a partition added by a leader for Produce v12+ says): every
PrepareCommit/PrepareAbort bumps the producer epoch (the markers carry the bumped
epoch, which fences every write of the transaction just ended); when that bump reaches
the last epoch (``Short.MaxValue``), the Prepare state carries a new producer id
(``next_producer_id``) and the Complete state switches to it at epoch 0.  A transaction
may also be aborted with no partition added (Empty/Complete* → PrepareAbort).
"""
from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field

from protocol.errors import ErrorCode

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_PRODUCER_EPOCH = 32767  # Short.MaxValue
# transaction.version levels: 2 bumps the epoch at every commit/abort (KIP-890 part 2).
TV_1 = 0
TV_2 = 2


def supports_epoch_bump(client_transaction_version: int) -> bool:
    return client_transaction_version >= TV_2


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka's rule: the last epoch is kept back, so a fence can still bump it once."""
    return epoch >= MAX_PRODUCER_EPOCH - 1


class TransactionState(enum.Enum):
    """Kafka's states: (status code in the log, name in DescribeTransactions/List)."""

    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")

    @property
    def code(self) -> int:
        return self.value[0]

    @property
    def kafka_name(self) -> str:
        return self.value[1]

    @classmethod
    def from_code(cls, code: int) -> TransactionState:
        for state in cls:
            if state.code == code:
                return state
        raise ValueError(f"unknown transaction status {code}")

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        return next((s for s in cls if s.kafka_name == name), None)


S = TransactionState
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    # Empty/Complete* → PrepareAbort: transaction version 2's abort of a transaction
    # with no partition added.
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT,
                                S.COMPLETE_ABORT}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
# Where an idle transactional id may be forgotten (transactional.id.expiration.ms).
EXPIRABLE_STATES = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})


class IllegalTransition(RuntimeError):
    """A transition the state machine forbids: a bug of the caller, never a client's."""


@dataclass(frozen=True)
class TxnTransitMetadata:
    """The values a pending transition writes, applied once the write is acknowledged."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    topic_partitions: frozenset[tuple[str, int]]
    txn_start_timestamp_ms: int
    txn_last_update_timestamp_ms: int
    # The producer id the Complete state switches to (epoch overflow under version 2).
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = TV_1


@dataclass(eq=False)
class TransactionMetadata:
    """One transactional id; ``partition`` is its ``__transaction_state`` partition."""

    transactional_id: str
    partition: int
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState = S.EMPTY
    topic_partitions: set[tuple[str, int]] = field(default_factory=set)
    txn_start_timestamp_ms: int = -1
    txn_last_update_timestamp_ms: int = -1
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    pending_state: TransactionState | None = None
    # When the pending transition was prepared (the ``now_ms`` of its ``prepare_*``).
    pending_since_ms: int = -1
    # A fence whose PrepareAbort write failed already bumped the epoch in memory; the
    # next attempt must not bump it again (that epoch was never handed out).
    has_failed_epoch_fence: bool = False
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = TV_1

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    # -- preparing transitions -------------------------------------------------------------

    def _prepare(self, state: TransactionState, producer_id: int, epoch: int,
                 last_epoch: int, timeout_ms: int, partitions, start_ms: int,
                 now_ms: int, next_producer_id: int = NO_PRODUCER_ID,
                 client_version: int | None = None) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransition(f"{self.transactional_id}: {self.pending_state.kafka_name} "
                                    f"is pending; cannot start {state.kafka_name}")
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalTransition(f"{self.transactional_id}: {self.state.kafka_name} → "
                                    f"{state.kafka_name} is not a valid transition")
        self.pending_state = state
        self.pending_since_ms = now_ms
        version = self.client_transaction_version if client_version is None else client_version
        return TxnTransitMetadata(producer_id, self.producer_id, epoch, last_epoch, timeout_ms,
                                  state, frozenset(partitions), start_ms, now_ms,
                                  next_producer_id, version)

    def prepare_fence_producer_epoch(self, now_ms: int) -> TxnTransitMetadata:
        """Ongoing → PrepareEpochFence with the epoch bumped (never handed to a client:
        the abort that follows writes it, and the producer must re-initialise)."""
        if self.producer_epoch == MAX_PRODUCER_EPOCH:
            raise IllegalTransition(f"{self.transactional_id}: epoch {self.producer_epoch} "
                                    f"cannot be bumped to fence the producer")
        epoch = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(S.PREPARE_EPOCH_FENCE, self.producer_id, epoch, NO_PRODUCER_EPOCH,
                             self.txn_timeout_ms, self.topic_partitions,
                             self.txn_start_timestamp_ms, now_ms)

    def prepare_increment_producer_epoch(self, timeout_ms: int, expected_epoch: int | None,
                                         now_ms: int) -> TxnTransitMetadata | ErrorCode:
        """→ Empty with the next epoch (InitProducerId), or PRODUCER_FENCED.

        ``expected_epoch`` (KIP-360, InitProducerId v3+): the producer's current epoch
        bumps it again; its previous epoch is a retry of a bump it never heard about,
        answered with the current epoch unchanged; any other epoch is fenced."""
        if is_epoch_exhausted(self.producer_epoch):
            raise IllegalTransition(f"{self.transactional_id}: epoch exhausted; rotate the id")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last_epoch = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            return ErrorCode.PRODUCER_FENCED
        return self._prepare(S.EMPTY, self.producer_id, epoch, last_epoch, timeout_ms, (), -1,
                             now_ms)

    def prepare_producer_id_rotation(self, new_producer_id: int, timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> TxnTransitMetadata:
        """→ Empty under a new producer id at epoch 0 (the old id's epochs ran out)."""
        last_epoch = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        return self._prepare(S.EMPTY, new_producer_id, 0, last_epoch, timeout_ms, (), -1, now_ms)

    def prepare_add_partitions(self, partitions, now_ms: int,
                               client_version: int | None = None) -> TxnTransitMetadata:
        """→ Ongoing with ``partitions`` added; a new transaction starts its clock now."""
        starting = self.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
        return self._prepare(S.ONGOING, self.producer_id, self.producer_epoch,
                             self.last_producer_epoch, self.txn_timeout_ms,
                             self.topic_partitions | set(partitions),
                             now_ms if starting else self.txn_start_timestamp_ms, now_ms,
                             client_version=client_version)

    def prepare_abort_or_commit(self, state: TransactionState, now_ms: int,
                                client_version: int | None = None,
                                next_producer_id: int = NO_PRODUCER_ID,
                                no_partition_added: bool = False) -> TxnTransitMetadata:
        """→ PrepareCommit/PrepareAbort; under version 2 with the epoch bumped (the caller
        passes ``next_producer_id`` when that bump reaches the last epoch)."""
        version = self.client_transaction_version if client_version is None else client_version
        epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        if supports_epoch_bump(version) and self.producer_epoch < MAX_PRODUCER_EPOCH:
            epoch, last_epoch = self.producer_epoch + 1, self.producer_epoch
        start_ms = now_ms if no_partition_added else self.txn_start_timestamp_ms
        return self._prepare(state, self.producer_id, epoch, last_epoch, self.txn_timeout_ms,
                             self.topic_partitions, start_ms, now_ms, next_producer_id,
                             version)

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        """PrepareCommit/PrepareAbort → CompleteCommit/CompleteAbort, no partitions left;
        under version 2 a ``next_producer_id`` becomes the producer id, at epoch 0."""
        state = S.COMPLETE_COMMIT if self.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        producer_id, epoch = self.producer_id, self.producer_epoch
        if supports_epoch_bump(self.client_transaction_version) \
                and self.next_producer_id != NO_PRODUCER_ID:
            producer_id, epoch = self.next_producer_id, 0
        return self._prepare(state, producer_id, epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, (), self.txn_start_timestamp_ms, now_ms)

    def prepare_dead(self, now_ms: int) -> TxnTransitMetadata:
        """→ Dead: the id is being forgotten (a tombstone is written; the last update
        time stays, it is what expired)."""
        transit = self._prepare(S.DEAD, self.producer_id, self.producer_epoch,
                                self.last_producer_epoch, self.txn_timeout_ms, (),
                                self.txn_start_timestamp_ms, now_ms)
        return dataclasses.replace(
            transit, txn_last_update_timestamp_ms=self.txn_last_update_timestamp_ms)

    # -- completing ------------------------------------------------------------------------

    def complete_transition_to(self, transit: TxnTransitMetadata) -> None:
        """Apply an acknowledged transition (the one pending)."""
        if self.pending_state is not transit.state:
            raise IllegalTransition(f"{self.transactional_id}: completing "
                                    f"{transit.state.kafka_name} but "
                                    f"{self.pending_state} is pending")
        self.producer_id = transit.producer_id
        self.last_producer_id = transit.last_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.txn_timeout_ms = transit.txn_timeout_ms
        self.topic_partitions = set(transit.topic_partitions)
        self.txn_start_timestamp_ms = transit.txn_start_timestamp_ms
        self.txn_last_update_timestamp_ms = transit.txn_last_update_timestamp_ms
        self.state = transit.state
        self.next_producer_id = transit.next_producer_id
        self.client_transaction_version = transit.client_transaction_version
        self.pending_state = None
        self.has_failed_epoch_fence = False

    def start_epoch_fence_abort(self, fenced_epoch: int) -> None:
        """The PrepareEpochFence of InitProducerId or of a timeout becomes the PrepareAbort
        about to be prepared: the fenced epoch is the transaction's from now on."""
        self.pending_state = None
        self.producer_epoch = fenced_epoch
        self.last_producer_epoch = NO_PRODUCER_EPOCH


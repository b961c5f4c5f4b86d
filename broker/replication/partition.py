"""One hosted partition: its role, epochs, ISR, high watermark and its log.

Kafka's words throughout: leader_epoch, partition_epoch, isr, high_watermark,
log_end_offset (LEO).  The high watermark is min LEO over the ISR (leader included)
and never moves backwards on a leader.  Consumers read below the high watermark;
followers (replica_id >= 0) read up to the LEO.

The ISR is a small immutable state (Kafka's PartitionState): ``CommittedIsr`` when no
change is in flight, ``PendingExpandIsr`` / ``PendingShrinkIsr`` while one AlterPartition
is.  Only ``Partition`` moves between them; the replica manager asks it for a proposal
(``maybe_expand_isr``, ``maybe_shrink_isr``), sends it to the controller, and reports the
outcome (``on_isr_change_committed`` / ``on_isr_change_failed``).

Size (about 700 lines): one class, Kafka's Partition, because role, epochs, ISR, high
watermark and log are read and moved together with no await between a check and its
change; the acks rules are in ``acks.py``, the ISR states in ``isr.py``, the follower
selection in ``replica_selector.py`` and the log itself in ``storage/``.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Literal, NamedTuple, TypeVar

from protocol.control import build_marker_batch
from protocol.errors import ErrorCode
from protocol.records import BatchHeader
from storage.errors import CorruptLog, OffsetOutOfRange, StorageIOError
from storage.file_records import FileRecords
from storage.log import AppendInfo, PartitionLog
from storage.producer_state import AbortedTxn, ProducerStateError

from ..logs import state_change
from .acks import not_enough_replicas
from .append_policy import AppendPolicy
from .isr import CommittedIsr, IsrState, PendingExpandIsr, PendingIsrChange, PendingShrinkIsr

log = logging.getLogger(__name__)

NO_EPOCH = -1
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4


class PartitionError(Exception):
    """A request on this partition is answered with ``code`` (no state changed)."""

    def __init__(self, code: ErrorCode, message: str = ""):
        super().__init__(message or code.name)
        self.code = code


@dataclass
class FollowerState:
    """The leader's view of one follower.

    ``last_caught_up_ms`` follows Kafka's rule: a fetch at or past the leader's LEO
    makes the follower caught up at that fetch; a fetch at or past the LEO the leader
    had at the follower's previous fetch makes it caught up as of that previous fetch.
    """

    replica_id: int
    log_end_offset: int = -1
    last_fetch_ms: int = 0
    last_caught_up_ms: int = 0
    leader_leo_at_last_fetch: int = -1
    # What its last fetch said its log starts at (-1: not known yet); DeleteRecords'
    # low watermark.
    log_start_offset: int = -1

    def on_fetch(self, fetch_offset: int, leader_leo: int, now_ms: int) -> None:
        if fetch_offset >= leader_leo:
            self.last_caught_up_ms = now_ms
        elif fetch_offset >= self.leader_leo_at_last_fetch >= 0:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.leader_leo_at_last_fetch = leader_leo
        self.last_fetch_ms = now_ms


# an ISR change a leader begins: the pending state it proposes
_Change = TypeVar("_Change", PendingExpandIsr, PendingShrinkIsr)

READ_UNCOMMITTED = 0
READ_COMMITTED = 1


class ReadResult(NamedTuple):
    records: bytes | memoryview | FileRecords  # FileRecords: read with zero_copy
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int
    #: read_committed only: AbortedTxn entries with records in the range read
    aborted_transactions: tuple[AbortedTxn, ...] = ()


@dataclass
class PartitionSettings:
    """Topic-level settings the replica layer needs besides the log's own."""

    min_insync_replicas: int = 1
    unclean_leader_election: bool = False
    append: AppendPolicy = field(default_factory=AppendPolicy)  # a client batch's rules


@dataclass
class Partition:
    """A partition this broker hosts. Event-loop only: the ReplicaManager (metadata
    images, produce, fetch, the ISR loop), the replica fetcher (follower side) and the
    request handlers call it; nothing else writes its state.

    Invariants: ``high_watermark`` <= LEO; on the leader it never decreases;
    ``isr`` always contains the leader while it leads.  The ISR state (``isr_state``)
    changes only here: at most one ISR change is in flight, proposed only by the
    leader, and the high watermark waits for ``maximal_isr``.  Once ``offline`` (its
    log directory failed, KIP-112) it leads and follows nothing, its log is closed and
    never written again, and produce/fetch/list-offsets answer KAFKA_STORAGE_ERROR.
    Every disk failure of its log is reported to ``storage_failure_listener`` (the
    ReplicaManager, which takes the whole directory offline) before it is raised.
    """

    topic: str
    index: int
    topic_id: str
    log: PartitionLog
    node_id: int
    settings: PartitionSettings = field(default_factory=PartitionSettings)
    leader_id: int = -1
    leader_epoch: int = NO_EPOCH
    replicas: list[int] = field(default_factory=list)
    followers: dict[int, FollowerState] = field(default_factory=dict)
    offline: bool = False
    adding_replicas: frozenset[int] = frozenset()
    _partition_epoch: int = field(default=0, init=False)
    _isr_state: IsrState = field(default=CommittedIsr(()), init=False)
    storage_failure_listener: Callable[[Partition, str, Exception], None] | None = \
        field(default=None, repr=False, compare=False)
    #: (topic, index): the partition's key in the replica manager and the purgatories
    key: tuple[str, int] = field(init=False, repr=False, compare=False)
    _guards: dict[str, _StorageGuard] = field(default_factory=dict, init=False, repr=False,
                                              compare=False)

    def __post_init__(self) -> None:
        self.key = (self.topic, self.index)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.index}"

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.node_id

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    def make_leader(self, leader_epoch: int, partition_epoch: int,
                    replicas: list[int], isr: list[int]) -> None:
        """Become leader in ``leader_epoch``; the epoch starts at the current LEO.  Any ISR
        change in flight is forgotten (its answer will be ignored)."""
        self.leader_id = self.node_id
        self.leader_epoch = leader_epoch
        self._partition_epoch = partition_epoch
        self.replicas = list(replicas)
        self._isr_state = CommittedIsr(tuple(isr))
        now_ms = _now_ms()
        self.followers = {r: FollowerState(r, last_caught_up_ms=now_ms)
                          for r in replicas if r != self.node_id}
        with self._storage_guard("assigning the leader epoch"):
            self.log.epoch_cache.assign(leader_epoch, self.log.log_end_offset)
        self.maybe_increment_high_watermark()
        log.info("[Partition %s broker=%d] leader in epoch %d, isr=%s, leo=%d, hw=%d",
                 self.name, self.node_id, leader_epoch, self.isr,
                 self.log_end_offset, self.high_watermark, extra=self._fields(
                     "became-leader", log_end_offset=self.log_end_offset,
                     high_watermark=self.high_watermark))

    def make_follower(self, leader_id: int, leader_epoch: int, partition_epoch: int,
                      replicas: list[int], isr: list[int]) -> None:
        """Follow ``leader_id`` (or nobody: -1) in ``leader_epoch``. The replica fetcher
        (data plane) reconciles the log with the leader's before fetching."""
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self._partition_epoch = partition_epoch
        self.replicas = list(replicas)
        self._isr_state = CommittedIsr(tuple(isr))
        self.followers = {}
        log.info("[Partition %s broker=%d] follower of %d in epoch %d, leo=%d, hw=%d",
                 self.name, self.node_id, leader_id, leader_epoch, self.log_end_offset,
                 self.high_watermark, extra=self._fields(
                     "became-follower", log_end_offset=self.log_end_offset,
                     high_watermark=self.high_watermark))

    # -- the ISR state (Kafka's maybeExpandIsr / maybeShrinkIsr / AlterPartition) ---------

    @property
    def partition_epoch(self) -> int:
        return self._partition_epoch

    @property
    def isr_state(self) -> IsrState:
        return self._isr_state

    @property
    def isr(self) -> list[int]:
        """The committed ISR (what acks=-1 admission and the controller know)."""
        return list(self._isr_state.isr)

    @property
    def maximal_isr(self) -> frozenset[int]:
        """What the high watermark waits for: the committed ISR plus a pending addition;
        during a pending shrink, the current (larger) ISR."""
        return self._isr_state.maximal_isr

    @property
    def pending_isr_additions(self) -> frozenset[int]:
        """The replica a pending expansion adds (empty otherwise)."""
        return self.maximal_isr - set(self._isr_state.isr)

    def update_replicas(self, replicas: list[int], adding: Iterable[int] = ()) -> None:
        """Take the image's replica list (a reassignment adds or removes replicas, KIP-455).
        A leader starts tracking a new follower (not caught up: it joins the ISR the usual
        way) and forgets a removed one.  ``adding``: the replicas still joining, whose
        fetches ``leader.replication.throttled.rate`` limits."""
        self.adding_replicas = frozenset(adding)
        if list(replicas) == self.replicas:
            return
        self.replicas = list(replicas)
        if self.is_leader:
            self.followers = {r: self.followers.get(r) or FollowerState(r)
                              for r in replicas if r != self.node_id}

    def update_isr_from_metadata(self, isr: list[int], partition_epoch: int) -> None:
        """Take the ISR and partition epoch of a metadata image (our own change or the
        controller's, e.g. a fencing).  The image is the authority: it replaces a pending
        change, whose answer is then ignored."""
        if self.is_leader and list(isr) != self.isr:
            log.info("[Partition %s broker=%d] isr %s -> %s (partition epoch %d)", self.name,
                     self.node_id, self.isr, list(isr), partition_epoch, extra=self._fields(
                         "isr-changed", previous_isr=self.isr, new_isr=list(isr),
                         new_partition_epoch=partition_epoch))
        self._isr_state = CommittedIsr(tuple(isr))
        self._partition_epoch = partition_epoch


    def maybe_expand_isr(self, replica_id: int) -> PendingExpandIsr | None:
        """After ``replica_id``'s fetch: propose adding it when this broker leads, no ISR
        change is in flight and ``can_join_isr`` holds.  Returns the new pending state (send
        its ``proposed_isr``, then report with ``on_isr_change_committed``/``_failed``) or
        None.  From now on the replica counts for the high watermark."""
        state = self._isr_state
        if not self.is_leader or not isinstance(state, CommittedIsr) \
                or not self.can_join_isr(replica_id):  # not leading, or a change in flight
            return None
        return self._begin_isr_change(PendingExpandIsr(
            state, self.leader_epoch, self._partition_epoch, replica_id))

    def maybe_shrink_isr(self, now_ms: int, lag_time_max_ms: int) -> PendingShrinkIsr | None:
        """Propose removing the ISR followers not caught up within ``lag_time_max_ms``, when
        this broker leads and no ISR change is in flight.  The HW keeps waiting for them
        until the controller commits the shrink."""
        state = self._isr_state
        if not self.is_leader or not isinstance(state, CommittedIsr):  # or one in flight
            return None
        lagging = self.out_of_sync_replicas(now_ms, lag_time_max_ms)
        if not lagging:
            return None
        log.info("[Partition %s broker=%d] followers %s out of sync (lag time %d ms)",
                 self.name, self.node_id, lagging, lag_time_max_ms, extra=self._fields(
                     "isr-shrink-proposed", out_of_sync=lagging))
        return self._begin_isr_change(PendingShrinkIsr(
            state, self.leader_epoch, self._partition_epoch, frozenset(lagging)))

    def _begin_isr_change(self, change: _Change) -> _Change:
        if self._isr_state.is_inflight:
            raise RuntimeError(f"{self.name}: an ISR change is already in flight")
        self._isr_state = change
        return change

    def on_isr_change_committed(self, change: PendingIsrChange, partition_epoch: int) -> bool:
        """The controller committed ``change`` in ``partition_epoch``.  Usually its image
        arrived first and replaced the pending state: then nothing happens.  Otherwise the
        proposed ISR becomes the committed one.  True when the ISR changed (the caller then
        re-checks the HW and the waiting produces)."""
        if self._isr_state is not change or partition_epoch <= self._partition_epoch:
            self.on_isr_change_failed(change)  # not newer: the next image decides
            return False
        self.update_isr_from_metadata([r for r in self.replicas if r in change.proposed_isr],
                                      partition_epoch)
        return True

    def on_isr_change_failed(self, change: PendingIsrChange) -> None:
        """The controller refused ``change`` (or its outcome is unknown): back to the last
        committed ISR, unless the state moved on meanwhile."""
        if self._isr_state is change:
            self._isr_state = change.last_committed

    # -- leader: followers ------------------------------------------------------------

    def update_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int,
                              log_start_offset: int = -1) -> bool:
        """A follower fetched at ``fetch_offset`` (its LEO), its log starting at
        ``log_start_offset`` (-1 from fetches that do not say). Returns True when that is
        a replica of ours (the caller then tries ISR expansion and the HW)."""
        state = self.followers.get(replica_id)
        if state is None:
            return False
        state.on_fetch(fetch_offset, self.log.log_end_offset, now_ms)
        if log_start_offset >= 0:
            state.log_start_offset = log_start_offset
        return True

    # -- DeleteRecords (Kafka's deleteRecordsOnLeader, lowWatermarkIfLeader) -------------

    def delete_records_on_leader(self, offset: int) -> int:
        """Move the log start to ``offset`` (-1: the high watermark); returns it.

        PartitionError: NOT_LEADER_OR_FOLLOWER; POLICY_VIOLATION when cleanup.policy has
        no ``delete``; OFFSET_OUT_OF_RANGE for an offset below -1 or above the HW.  An
        offset at or below the current start changes nothing and succeeds.  Followers
        take the new start from their next fetch answer."""
        self.check_online()
        if not self.is_leader:
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if not self.log.config.delete:
            raise PartitionError(ErrorCode.POLICY_VIOLATION,
                                 f"Records of partition {self.name} can not be deleted due to "
                                 f"the configured policy")
        target = self.log.high_watermark if offset == -1 else offset
        if target < 0:
            raise PartitionError(ErrorCode.OFFSET_OUT_OF_RANGE, f"offset {offset} is not valid")
        try:
            with self._storage_guard("deleting records"):
                self.log.maybe_increment_log_start_offset(target, "records deleted by a client")
        except OffsetOutOfRange as exc:
            raise PartitionError(ErrorCode.OFFSET_OUT_OF_RANGE, str(exc)) from exc
        return target

    def low_watermark(self, is_live: Callable[[int], bool]) -> int:
        """The lowest log start offset among this leader and its live followers (-1 for
        one that has not reported it since this leadership began)."""
        low = self.log.log_start_offset
        for replica_id, state in self.followers.items():
            if is_live(replica_id):
                low = min(low, state.log_start_offset)
        return low

    def maybe_follow_leader_log_start_offset(self, leader_log_start_offset: int) -> bool:
        """Follower: take the leader's log start (from a fetch answer), never beyond our
        own high watermark (Kafka's follower maybeIncrementLogStartOffset).  True when it
        moved."""
        target = min(leader_log_start_offset, self.log.high_watermark)
        if self.offline or target <= self.log.log_start_offset:
            return False
        with self._storage_guard("following the leader's log start"):
            return self.log.maybe_increment_log_start_offset(
                target, f"leader {self.leader_id} moved its log start")

    def can_join_isr(self, replica_id: int) -> bool:
        """Kafka's expansion rule: caught up to the HW and into the current epoch (and
        neither in the ISR nor being added)."""
        state = self.followers.get(replica_id)
        if state is None or replica_id in self.maximal_isr:
            return False
        epoch_start = self.epoch_start_offset()
        return state.log_end_offset >= self.high_watermark and state.log_end_offset >= epoch_start

    def epoch_start_offset(self) -> int:
        for epoch, start in reversed(self.epoch_entries()):
            if epoch == self.leader_epoch:
                return start
        return self.log.log_end_offset

    def out_of_sync_replicas(self, now_ms: int, lag_time_max_ms: int) -> list[int]:
        """ISR followers that have not caught up within ``lag_time_max_ms``."""
        return [r for r in self.isr if r != self.node_id and
                now_ms - self.followers.get(r, FollowerState(r)).last_caught_up_ms
                > lag_time_max_ms]

    # -- follower: the log mirrors the leader's ------------------------------------------

    def append_as_follower(self, records: bytes, leader_high_watermark: int) -> int:
        """Append batches fetched from the leader; HW := min(leader HW, own LEO).
        Returns the number of bytes appended."""
        if records:
            with self._storage_guard("follower append"):
                self.log.append_as_follower(records)
        hw = min(leader_high_watermark, self.log.log_end_offset)
        if hw > self.log.high_watermark:
            self.log.update_high_watermark(hw)
        return len(records) if records else 0

    def truncate_to(self, offset: int) -> None:
        """Cut our log at ``offset`` (divergence with the leader).

        Our epochs starting at or after ``offset`` are not the leader's history there and
        go too, even when no batch does: an epoch we were elected in but never wrote
        (6@LEO, say) would otherwise make every older-epoch batch the leader sends at
        ``offset`` look out of order, and the replica would never catch up.
        Skipped when offline: that log is never written again."""
        if self.offline:
            return
        if offset >= self.log.log_end_offset:
            with self._storage_guard("truncating the leader epochs"):
                self.log.epoch_cache.truncate_from_end(offset)
            return
        before = self.log.log_end_offset
        with self._storage_guard("truncation"):
            self.log.truncate_to(offset)
        log.info("[Partition %s broker=%d] truncated from %d to %d (leader %d epoch %d)",
                 self.name, self.node_id, before, self.log.log_end_offset, self.leader_id,
                 self.leader_epoch, extra=self._fields(
                     "truncated", truncated_from=before, log_end_offset=self.log.log_end_offset))

    def truncate_fully_and_start_at(self, offset: int) -> None:
        if self.offline:
            return
        with self._storage_guard("truncation"):
            self.log.truncate_fully_and_start_at(offset)
        log.info("[Partition %s broker=%d] log reset to start at %d", self.name, self.node_id,
                 offset, extra=self._fields("log-reset", log_start_offset=offset))

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320: a client's view of the epoch must match ours (-1 = not checked)."""
        if current_leader_epoch == NO_EPOCH:
            return
        if current_leader_epoch < self.leader_epoch:
            raise PartitionError(ErrorCode.FENCED_LEADER_EPOCH)
        if current_leader_epoch > self.leader_epoch:
            raise PartitionError(ErrorCode.UNKNOWN_LEADER_EPOCH)

    def _check_can_append(self, required_acks: int) -> None:
        self.check_online()
        if not self.is_leader:
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        refusal = not_enough_replicas(required_acks, self.isr, self.settings.min_insync_replicas)
        if refusal is not None:  # acks.py, rule 4
            raise PartitionError(ErrorCode.NOT_ENOUGH_REPLICAS, refusal)

    def append_as_leader(self, batch: bytearray, header: BatchHeader,
                         required_acks: int, *, check_sequence: bool = True
                         ) -> tuple[AppendInfo, bool]:
        """Append one validated client batch; offsets and our epoch are assigned in place.

        Returns (where it landed, whether it was a duplicate).  A duplicate of one of
        the producer's last five batches is not appended again: its original offsets
        are returned.  Refuses with NOT_ENOUGH_REPLICAS *before* appending when acks=all
        and the ISR is smaller than min.insync.replicas.  A disk failure is raised (and
        reported): then nothing was appended and nothing may be acknowledged.
        ``check_sequence`` False (a coordinator's own transactional write, which has no
        sequence numbers) checks only the producer epoch.
        """
        self._check_can_append(required_acks)
        # The log's producer state judges the batch; check and append run with no await
        # between them, so a retry of the same batch cannot be appended twice.
        try:
            duplicate = self.log.producer_state.check(header, check_sequence=check_sequence)
        except ProducerStateError as exc:
            raise PartitionError(ErrorCode[exc.code_name], str(exc)) from exc
        if duplicate is not None:
            return AppendInfo(duplicate.first_offset, duplicate.last_offset, -1, -1, 0), True
        with self._storage_guard("append"):
            info = self.log.append_as_leader(batch, self.leader_epoch, header)
            self.maybe_increment_high_watermark()
            self.log.maybe_flush()
        return info, False

    def append_marker_as_leader(self, producer_id: int, producer_epoch: int,
                                coordinator_epoch: int, commit: bool) -> AppendInfo:
        """Append the COMMIT or ABORT marker that ends ``producer_id``'s transaction here
        (WriteTxnMarkers; always acks=all).  PartitionError: NOT_LEADER_OR_FOLLOWER,
        NOT_ENOUGH_REPLICAS, INVALID_PRODUCER_EPOCH (an older producer epoch than the
        log's), TRANSACTION_COORDINATOR_FENCED (an older coordinator epoch)."""
        self._check_can_append(-1)
        try:
            self.log.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
        except ProducerStateError as exc:
            raise PartitionError(ErrorCode[exc.code_name], str(exc)) from exc
        batch = build_marker_batch(producer_id, producer_epoch, coordinator_epoch, commit,
                                   _now_ms())
        with self._storage_guard("marker append"):
            info = self.log.append_as_leader(batch, self.leader_epoch)
            self.maybe_increment_high_watermark()
            self.log.maybe_flush()
        return info

    def maybe_increment_high_watermark(self) -> bool:
        """HW := min LEO over the maximal ISR, if that is higher. Triggers: append,
        follower fetch, ISR change. Returns True when it moved."""
        new_hw = self.log.log_end_offset
        for replica_id in self.maximal_isr:
            if replica_id != self.node_id:
                state = self.followers.get(replica_id)
                new_hw = min(new_hw, state.log_end_offset if state else -1)
        if new_hw > self.log.high_watermark:
            self.log.update_high_watermark(new_hw)
            return True
        return False

    def read(self, fetch_offset: int, max_bytes: int, *, replica_id: int = -1,
             current_leader_epoch: int = NO_EPOCH, min_one_batch: bool = True,
             isolation_level: int = READ_UNCOMMITTED,
             follower_read: bool = False, zero_copy: bool = False) -> ReadResult:
        """Batches from ``fetch_offset``: below the HW for consumers (below the last
        stable offset for read_committed ones, with the aborted transactions in the range
        read), the LEO for followers.  ``follower_read``: a consumer may read from this
        replica while it follows (KIP-392), below its own high watermark, which trails
        the leader's; otherwise only the leader answers.  ``zero_copy``: the records may
        come back as ``storage.FileRecords`` (regions of the segment files, for the Fetch
        handler's sendfile; see ``PartitionLog.read``)."""
        self.check_online()
        if not self.is_leader and not (follower_read and replica_id < 0):
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self.check_leader_epoch(current_leader_epoch)
        upper_bound = self.available_to(replica_id, isolation_level)
        last_stable = self.log.last_stable_offset
        if fetch_offset == upper_bound:  # caught up: the common case of an idle partition
            return ReadResult(b"", self.log.high_watermark, self.log.log_start_offset,
                              self.log.log_end_offset, last_stable)
        try:
            records: bytes | memoryview | FileRecords
            if fetch_offset > upper_bound and fetch_offset <= self.log.log_end_offset:
                records = b""  # between HW and LEO: nothing visible yet, not an error
            else:
                with self._storage_guard("read"):
                    records = self.log.read(fetch_offset, max_bytes, max_offset=upper_bound,
                                            min_one_batch=min_one_batch, zero_copy=zero_copy)
        except OffsetOutOfRange as exc:
            raise PartitionError(ErrorCode.OFFSET_OUT_OF_RANGE, str(exc)) from exc
        aborted: tuple[AbortedTxn, ...] = ()
        if isolation_level == READ_COMMITTED and replica_id < 0 and records:
            aborted = tuple(self.log.aborted_transactions(fetch_offset, upper_bound))
        return ReadResult(records, self.log.high_watermark, self.log.log_start_offset,
                          self.log.log_end_offset, last_stable, aborted)

    def available_to(self, replica_id: int, isolation_level: int = READ_UNCOMMITTED) -> int:
        """The exclusive offset bound a reader of this kind may see."""
        if replica_id >= 0:
            return self.log.log_end_offset
        if isolation_level == READ_COMMITTED:
            return self.log.last_stable_offset
        return self.log.high_watermark

    def offset_for_timestamp(self, timestamp: int,
                             isolation_level: int = READ_UNCOMMITTED) -> tuple[int, int]:
        """ListOffsets for a consumer: (timestamp, offset), -1s when none qualifies.
        Under read_committed, "latest" is the last stable offset and nothing at or past it
        is found (Kafka's rule)."""
        self.check_online()
        if not self.is_leader:
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if self.log.high_watermark < self.epoch_start_offset():
            # A new leader whose HW has not yet reached the start of its epoch may be
            # behind what the old leader exposed: answer "retry" rather than a smaller
            # offset, so latest offsets never go backwards (Kafka does the same).
            raise PartitionError(ErrorCode.OFFSET_NOT_AVAILABLE)
        hw = self.available_to(-1, isolation_level)
        if timestamp == LATEST_TIMESTAMP:
            return -1, hw
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return -1, self.log.log_start_offset
        if timestamp == MAX_TIMESTAMP:
            with self._storage_guard("max timestamp lookup"):
                found = self.log.max_timestamp_and_offset()
            if found is None or found[1] >= hw:
                return -1, -1
            return found
        with self._storage_guard("timestamp lookup"):
            found = self.log.offset_for_timestamp(timestamp)
        if found is None or found[0] >= hw:
            return -1, -1
        offset, record_timestamp = found
        return record_timestamp, offset

    @property
    def latest_epoch(self) -> int | None:
        """The newest leader epoch of our log (None: the epoch cache is empty)."""
        return self.log.epoch_cache.latest_epoch

    def epoch_entries(self) -> list[tuple[int, int]]:
        """Our log's (leader epoch, start offset) pairs, oldest first."""
        return self.log.epoch_cache.epoch_entries()

    def epoch_for_offset(self, offset: int) -> int:
        """The leader epoch in which ``offset`` was (or will be) written."""
        epoch = -1
        for entry_epoch, start_offset in self.epoch_entries():
            if start_offset > offset:
                break
            epoch = entry_epoch
        return epoch

    def end_offset_for_epoch(self, requested_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset) from the epoch cache."""
        return self.log.epoch_cache.end_offset_for(requested_epoch, self.log.log_end_offset)

    # -- maintenance and storage failures (KIP-112) ----------------------------------------

    def enforce_retention(self, now_ms: int) -> int:
        """Delete expired segments (the log forgets the producer state below the new log
        start); returns how many went.  Nothing when offline."""
        if self.offline:
            return 0
        with self._storage_guard("retention"):
            return self.log.enforce_retention(now_ms)

    def checkpoint(self) -> None:
        """Flush if due, then write the offsets checkpoint. Nothing when offline."""
        if self.offline:
            return
        with self._storage_guard("flush and checkpoint"):
            self.log.maybe_flush()
            self.log.checkpoint()

    def flush_if_due(self) -> bool:
        """The loop's half of the checkpoint pass: flush if due; whether the offsets
        checkpoint is behind (a worker thread writes it: log_io.py)."""
        if self.offline:
            return False
        with self._storage_guard("flush and checkpoint"):
            self.log.maybe_flush()
        return self.log.checkpoint_pending()

    def close(self) -> None:
        """Shutdown: flush, checkpoint and close cleanly; offline, only close the files."""
        if self.offline:
            self.log.close_handlers()
            return
        with self._storage_guard("closing the log"):
            self.log.close()

    def check_online(self) -> None:
        """KAFKA_STORAGE_ERROR once the log directory went offline (KIP-112)."""
        if self.offline:
            raise PartitionError(ErrorCode.KAFKA_STORAGE_ERROR,
                                 f"{self.name}: its log directory is offline")

    def take_offline(self) -> None:
        """The log directory failed: lead and follow nothing, close the log without
        writing anything more.  Final for this process; a restart on a healthy disk
        recovers the log from its files."""
        if self.offline:
            return
        self.offline = True
        self.leader_id = -1
        self.followers = {}
        self._isr_state = CommittedIsr(self._isr_state.isr)
        self.log.close_handlers()
        log.warning("[Partition %s broker=%d] offline at log_end_offset %d, high_watermark %d",
                    self.name, self.node_id, self.log_end_offset, self.high_watermark,
                    extra=self._fields("offline", log_end_offset=self.log_end_offset,
                                       high_watermark=self.high_watermark))

    def _fields(self, reason: str, **more: object) -> dict[str, object]:
        """The structured fields of a state-change line (``log.format=json``)."""
        return state_change(partition=self.name, broker=self.node_id, leader=self.leader_id,
                            leader_epoch=self.leader_epoch,
                            partition_epoch=self._partition_epoch, isr=self.isr,
                            reason=reason, **more)

    def _storage_guard(self, what: str) -> _StorageGuard:
        """Around every call that touches the log's files: a disk failure (StorageIOError,
        CorruptLog) goes to ``storage_failure_listener(self, what, exc)`` first, then is
        raised unchanged.  One guard per ``what``, made once: appends and reads pass
        through here at every request."""
        guard = self._guards.get(what)
        if guard is None:
            guard = self._guards[what] = _StorageGuard(self, what)
        return guard


class _StorageGuard:
    """The context manager ``Partition._storage_guard`` returns (a plain class: a
    generator-based one costs several calls more on every append and read)."""

    __slots__ = ("partition", "what")

    def __init__(self, partition: Partition, what: str) -> None:
        self.partition = partition
        self.what = what

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> Literal[False]:
        if isinstance(exc, (StorageIOError, CorruptLog)):
            listener = self.partition.storage_failure_listener
            if listener is not None:
                listener(self.partition, self.what, exc)
        return False  # raised unchanged


def _now_ms() -> int:
    return int(time.time() * 1000)

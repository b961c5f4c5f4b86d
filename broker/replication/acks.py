"""The acks rules of a produce, in one place (Kafka's ReplicaManager.appendRecords,
Partition.appendRecordsToLeader, Partition.checkEnoughReplicasReachOffset,
DelayedProduce and KafkaApis.handleProduceRequest).

1. ``acks`` is 0, 1 or -1 (all); anything else answers INVALID_REQUIRED_ACKS for
   every partition and appends nothing (``valid_required_acks``).
2. acks=0: no response.  If any partition failed, the connection is closed so the
   producer notices and refreshes its metadata (``closes_connection``).
3. acks=1: answered right after the leader's append, whatever the followers have.
4. acks=-1, before the append: the committed ISR must hold at least
   min.insync.replicas replicas, leader included, else NOT_ENOUGH_REPLICAS and
   nothing is appended (``not_enough_replicas``, called by ``Partition``'s append
   check).  Transaction markers and the coordinators' own writes are always acks=-1.
5. acks=-1, after the append: the produce waits in the produce purgatory
   (``DelayedProduce``) until each appended partition is settled
   (``check_enough_replicas_reach_offset``):
   (A) it already failed at the append: nothing to wait for;
   (B) this broker no longer leads it → NOT_LEADER_OR_FOLLOWER; its log directory
       went offline → KAFKA_STORAGE_ERROR (also when that happened between its append
       and the wait, ``watch``);
   (C) its high watermark reached the batch's last offset + 1 with a maximal ISR of
       at least min.insync.replicas → NONE;
   (D) its high watermark reached that offset but the maximal ISR is then smaller
       than min.insync.replicas → NOT_ENOUGH_REPLICAS_AFTER_APPEND (a shrink to the
       leader alone moves the HW to the leader's LEO: one copy is no ack);
   (E) the request's ``timeout_ms`` ran out first → REQUEST_TIMED_OUT.
   While the HW is short, a small ISR is no reason to answer: it may grow back in time.
6. The triggers that re-check waiting produces (replica_manager.py): a high watermark
   move after an append (``on_append``: a leader alone in its ISR), a follower's fetch
   (``record_follower_fetches``), an ISR change (``on_isr_changed``), a leadership
   change (``leadership_changed``); a partition no longer hosted answers its waiting
   produces at once (``complete_all``, image_applier.py).

Event-loop only; the functions are pure but for the statuses they settle.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from protocol.errors import ErrorCode

from ..purgatory import DelayedOperation, Purgatory

if TYPE_CHECKING:
    from .partition import Partition

Key = tuple[str, int]
ACKS_NONE, ACKS_LEADER, ACKS_ALL = 0, 1, -1


def valid_required_acks(acks: int) -> bool:
    """Rule 1: Kafka accepts 0, 1 and -1 only."""
    return acks in (ACKS_NONE, ACKS_LEADER, ACKS_ALL)


def closes_connection(errors: Iterable[ErrorCode]) -> bool:
    """Rule 2: an acks=0 produce with any failed partition closes the connection."""
    return any(error != ErrorCode.NONE for error in errors)


def not_enough_replicas(required_acks: int, isr: Sequence[int],
                        min_insync_replicas: int) -> str | None:
    """Rule 4: why an acks=-1 append is refused with NOT_ENOUGH_REPLICAS before it
    is written, or None when it may go ahead (acks 0 and 1 never are)."""
    if required_acks == ACKS_ALL and len(isr) < min_insync_replicas:
        return f"isr {list(isr)} is smaller than min.insync.replicas={min_insync_replicas}"
    return None


@dataclass
class ProducePartitionStatus:
    """One partition of a produce: where its batch landed and, for acks=-1, the offset
    its high watermark must reach."""

    partition: Partition | None
    required_offset: int  # exclusive: done when high_watermark >= required_offset
    base_offset: int
    error: ErrorCode = ErrorCode.NONE
    acks_pending: bool = True
    log_append_time_ms: int = -1
    log_start_offset: int = -1


def check_enough_replicas_reach_offset(status: ProducePartitionStatus) -> bool:
    """Rule 5 for one partition: settle ``status`` (clear ``acks_pending``, set its
    error) if it is answerable now; True if this call settled it."""
    if not status.acks_pending:
        return False
    partition = status.partition
    if status.error != ErrorCode.NONE or partition is None:  # (A)
        pass
    elif partition.offline:  # (B) its log directory failed
        status.error = ErrorCode.KAFKA_STORAGE_ERROR
    elif not partition.is_leader:  # (B)
        status.error = ErrorCode.NOT_LEADER_OR_FOLLOWER
    elif partition.high_watermark >= status.required_offset:
        if len(partition.maximal_isr) < partition.settings.min_insync_replicas:  # (D)
            status.error = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        # else (C): NONE
    else:
        return False  # the HW is short: keep waiting, whatever the ISR's size
    status.acks_pending = False
    return True


Respond = Callable[[dict[Key, ProducePartitionStatus]], None]


class DelayedProduce(DelayedOperation):
    """An acks=-1 produce waiting for the high watermark of each partition (rule 5;
    its cases (A)-(D) in ``check_enough_replicas_reach_offset``, (E) here).

    Invariant: ``respond`` is called once, with every status settled, unless the
    operation was withdrawn (the connection is gone)."""

    def __init__(self, timeout_ms: int, statuses: dict[Key, ProducePartitionStatus],
                 respond: Respond):
        super().__init__(timeout_ms)
        self.statuses = statuses
        # the same dict, looked up by the purgatory's keys (any Hashable)
        self._by_key = cast("dict[Hashable, ProducePartitionStatus]", statuses)
        self._pending = sum(1 for status in statuses.values() if status.acks_pending)
        self._respond = respond

    def try_complete(self) -> bool:
        for status in self.statuses.values():
            self._check(status)
        return self._complete_if_done()

    def try_complete_after(self, key: Hashable) -> bool:
        """Only ``key``'s partition changed: check it alone (O(1) per waiting produce)."""
        status = self._by_key.get(key)
        if status is None:
            return self.try_complete()
        self._check(status)
        return self._complete_if_done()

    def watch_order(self, key: Hashable) -> int | None:
        """Sorted by the offset waited for on ``key``."""
        status = self._by_key.get(key)
        return None if status is None else status.required_offset

    def waits_in_order(self, key: Hashable) -> bool:
        """Still waiting for the HW on ``key``: every produce sorted after it on ``key``
        waits for a higher offset, so the trigger need not try them."""
        status = self._by_key.get(key)
        return status is not None and status.acks_pending

    def _check(self, status: ProducePartitionStatus) -> None:
        if check_enough_replicas_reach_offset(status):
            self._pending -= 1

    def _complete_if_done(self) -> bool:
        return self.force_complete() if self._pending == 0 else False

    def on_complete(self) -> None:
        for status in self.statuses.values():
            if status.acks_pending:  # (E)
                status.error, status.acks_pending = ErrorCode.REQUEST_TIMED_OUT, False
            if status.partition is not None:
                status.log_start_offset = status.partition.log_start_offset
        self._respond(self.statuses)


def watch(purgatory: Purgatory, statuses: dict[Key, ProducePartitionStatus],
          timeout_ms: int, respond: Respond) -> DelayedProduce:
    """Rule 5's wait: ``respond(statuses)`` once every partition is settled, maybe
    before this returns.  A partition whose log directory went offline after its append
    (a later partition of the same request failed) is settled KAFKA_STORAGE_ERROR at
    once, as in Kafka.  The operation's ``withdraw`` ends the wait without a response."""
    for status in statuses.values():
        if status.error == ErrorCode.NONE and status.partition is not None \
                and status.partition.offline:
            status.error = ErrorCode.KAFKA_STORAGE_ERROR
    operation = DelayedProduce(timeout_ms, statuses, respond)
    purgatory.try_complete_else_watch(operation, list(statuses))
    return operation

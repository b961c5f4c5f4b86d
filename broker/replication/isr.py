"""The leader's ISR as a small immutable state (Kafka's PartitionState, pure).

``CommittedIsr`` when no change is in flight; ``PendingExpandIsr`` / ``PendingShrinkIsr``
while one AlterPartition is.  Each knows its ``isr`` (the committed one, which acks=-1
admission uses) and its ``maximal_isr`` (what the high watermark waits for).  Only
``Partition`` moves between them.  States are immutable, so each computes its
``maximal_isr`` once: the high watermark asks for it at every append and follower fetch.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar


@dataclass(frozen=True)
class CommittedIsr:
    """The ISR the controller committed, no change in flight.  The HW waits for ``isr``."""

    isr: tuple[int, ...]
    is_inflight: ClassVar[bool] = False

    @cached_property
    def maximal_isr(self) -> frozenset[int]:
        return frozenset(self.isr)


@dataclass(frozen=True, eq=False)
class _PendingIsr:
    """One AlterPartition in flight, made from ``last_committed`` in ``leader_epoch`` and
    ``partition_epoch`` (and sent with them).  ``isr`` stays the committed one, which
    acks=-1 admission uses; identity, not equality, tells two proposals apart."""

    last_committed: CommittedIsr
    leader_epoch: int
    partition_epoch: int
    is_inflight: ClassVar[bool] = True

    @property
    def isr(self) -> tuple[int, ...]:
        return self.last_committed.isr


@dataclass(frozen=True, eq=False)
class PendingExpandIsr(_PendingIsr):
    """Adding ``new_in_sync_replica``: it counts for the HW already (Kafka's maximal
    ISR), so the HW never passes a replica that is in the ISR a moment later."""

    new_in_sync_replica: int

    @cached_property
    def maximal_isr(self) -> frozenset[int]:
        return frozenset(self.isr) | {self.new_in_sync_replica}

    @property
    def proposed_isr(self) -> tuple[int, ...]:
        return self.isr + (self.new_in_sync_replica,)


@dataclass(frozen=True, eq=False)
class PendingShrinkIsr(_PendingIsr):
    """Removing ``out_of_sync_replicas``: until that is committed the HW keeps waiting for
    the current, larger ISR (Kafka's rule), so a refused shrink has moved nothing."""

    out_of_sync_replicas: frozenset[int]

    @cached_property
    def maximal_isr(self) -> frozenset[int]:
        return frozenset(self.isr)

    @property
    def proposed_isr(self) -> tuple[int, ...]:
        return tuple(r for r in self.isr if r not in self.out_of_sync_replicas)


PendingIsrChange = PendingExpandIsr | PendingShrinkIsr
IsrState = CommittedIsr | PendingExpandIsr | PendingShrinkIsr

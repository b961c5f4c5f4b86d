"""Kafka's replica state machine: the states and every allowed transition, as a table.

A replica (one broker's copy of one partition) moves through these states as the
controller creates topics, loses and regains brokers, and deletes topics.  Anything
not in ``VALID_PREVIOUS`` is refused with IllegalReplicaTransition — the same table as
Kafka's ``ReplicaStateMachine``.
"""
from __future__ import annotations

import enum


class ReplicaState(str, enum.Enum):  # noqa: UP042  (StrEnum would change str() and format())
    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT = "NonExistentReplica"


S = ReplicaState

# target state -> the states it may be entered from
VALID_PREVIOUS: dict[ReplicaState, frozenset[ReplicaState]] = {
    S.NEW: frozenset({S.NON_EXISTENT}),
    S.ONLINE: frozenset({S.NEW, S.ONLINE, S.OFFLINE, S.DELETION_INELIGIBLE}),
    S.OFFLINE: frozenset({S.NEW, S.ONLINE, S.OFFLINE, S.DELETION_INELIGIBLE}),
    S.DELETION_STARTED: frozenset({S.OFFLINE}),
    S.DELETION_SUCCESSFUL: frozenset({S.DELETION_STARTED}),
    S.DELETION_INELIGIBLE: frozenset({S.OFFLINE, S.DELETION_STARTED}),
    S.NON_EXISTENT: frozenset({S.DELETION_SUCCESSFUL}),
}


class IllegalReplicaTransition(ValueError):
    def __init__(self, current: ReplicaState, target: ReplicaState):
        super().__init__(f"replica may not move from {current.value} to {target.value}")
        self.current = current
        self.target = target


def is_valid_transition(current: ReplicaState, target: ReplicaState) -> bool:
    return current in VALID_PREVIOUS[target]


def transition(current: ReplicaState, target: ReplicaState) -> ReplicaState:
    """Return ``target`` if the move is allowed, else raise IllegalReplicaTransition."""
    if not is_valid_transition(current, target):
        raise IllegalReplicaTransition(current, target)
    return target

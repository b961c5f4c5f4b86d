"""The replica state machine allows exactly Kafka's transitions, no more."""
import itertools

import pytest

from broker.controller.replica_state import (
    VALID_PREVIOUS,
    IllegalReplicaTransition,
    is_valid_transition,
    transition,
)
from broker.controller.replica_state import ReplicaState as S

ALLOWED = {
    (S.NON_EXISTENT, S.NEW),
    (S.NEW, S.ONLINE), (S.ONLINE, S.ONLINE), (S.OFFLINE, S.ONLINE),
    (S.DELETION_INELIGIBLE, S.ONLINE),
    (S.NEW, S.OFFLINE), (S.ONLINE, S.OFFLINE), (S.OFFLINE, S.OFFLINE),
    (S.DELETION_INELIGIBLE, S.OFFLINE),
    (S.OFFLINE, S.DELETION_STARTED),
    (S.DELETION_STARTED, S.DELETION_SUCCESSFUL),
    (S.OFFLINE, S.DELETION_INELIGIBLE), (S.DELETION_STARTED, S.DELETION_INELIGIBLE),
    (S.DELETION_SUCCESSFUL, S.NON_EXISTENT),
}
EVERY_EDGE = list(itertools.product(S, S))


def test_table_covers_every_state():
    assert set(VALID_PREVIOUS) == set(S)


@pytest.mark.parametrize("current,target", sorted(ALLOWED, key=str))
def test_allowed_edge_is_accepted(current, target):
    assert is_valid_transition(current, target)
    assert transition(current, target) is target


@pytest.mark.parametrize("current,target",
                         [e for e in EVERY_EDGE if e not in ALLOWED], ids=str)
def test_forbidden_edge_is_refused(current, target):
    assert not is_valid_transition(current, target)
    with pytest.raises(IllegalReplicaTransition):
        transition(current, target)


def test_deletion_path_runs_from_online_to_non_existent():
    state = S.ONLINE
    for target in (S.OFFLINE, S.DELETION_STARTED, S.DELETION_SUCCESSFUL, S.NON_EXISTENT):
        state = transition(state, target)
    assert state is S.NON_EXISTENT

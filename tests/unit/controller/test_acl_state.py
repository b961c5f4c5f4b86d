"""ACL bindings in the replicated metadata: replay-safe create and delete, plain-dict form."""
from __future__ import annotations

import pickle

from broker.controller.commands import CreateAcls, DeleteAcls, decode
from broker.controller.state import ClusterState

READ_ORDERS = [2, "orders", 3, "User:alice", "*", 3, 3]
DENY_PREFIX = [2, "pay-", 4, "User:*", "10.0.0.1", 4, 2]


def replay(commands) -> ClusterState:
    state = ClusterState()
    for command in commands:
        decode(*command.to_wire()).apply(state)
    return state


def test_a_binding_is_stored_once_however_often_it_is_created():
    state = ClusterState()
    assert state.apply_create_acls([READ_ORDERS, DENY_PREFIX, READ_ORDERS]) == 2
    version = state.version
    assert state.apply_create_acls([READ_ORDERS]) == 0
    assert state.version == version, "a creation that adds nothing is no change"
    assert state.acls == [READ_ORDERS, DENY_PREFIX]


def test_delete_removes_exactly_the_named_bindings_and_a_replay_removes_nothing_more():
    log = [CreateAcls([READ_ORDERS, DENY_PREFIX]), DeleteAcls([READ_ORDERS]),
           DeleteAcls([READ_ORDERS]), CreateAcls([READ_ORDERS])]
    state = replay(log)
    assert state.acls == [DENY_PREFIX, READ_ORDERS]
    assert vars(replay(log)) == vars(state), "replaying the journal rebuilds the same state"
    assert state.apply_delete_acls([[2, "nothing", 3, "User:x", "*", 3, 3]]) == []


def test_acls_survive_the_plain_dict_form_and_older_states_have_none():
    state = ClusterState()
    state.apply_create_acls([READ_ORDERS, DENY_PREFIX])
    assert ClusterState.from_dict(state.to_dict()).acls == state.acls
    old = state.to_dict()
    del old["acls"]  # a metadata file written before ACLs existed
    assert ClusterState.from_dict(old).acls == []


def test_a_state_pickled_before_acls_existed_accepts_them():
    state = ClusterState()
    del state.__dict__["acls"]
    revived = pickle.loads(pickle.dumps(state))
    assert revived.acls == ()
    revived.apply_create_acls([READ_ORDERS])
    assert revived.acls == [READ_ORDERS]

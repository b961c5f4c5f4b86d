"""Partition reassignment (KIP-455) as the controller applies it, on a ClusterState.

The rules under test (reassignment.py): starting lists target + old replicas with the
adding and removing ones; completion waits for every replica of the target in the ISR
(the adding ones and the kept ones, as Kafka), then drops the removed replicas (their
states walk to NonExistent) and moves leadership off a removed leader in a new epoch;
cancelling goes back to the original replicas; bad targets and cancels are refused with
Kafka's codes, changing nothing.
"""
from __future__ import annotations

from broker.controller.reassignment import ongoing
from broker.controller.state import ClusterState


def cluster(replicas=(1, 2, 3), brokers=(1, 2, 3, 4, 5)) -> ClusterState:
    state = ClusterState()
    for broker in brokers:
        state.apply_register_broker(broker, "h", 9000 + broker, f"inc-{broker}")
    state.apply_create_topic("t", "id-t", [list(replicas)], {})
    return state


def expand_isr(state: ClusterState, *members: int) -> None:
    p = state.topics["t"].partitions[0]
    state.apply_alter_partition("t", 0, p.leader, p.leader_epoch, p.partition_epoch,
                                sorted(set(p.isr) | set(members)))


def test_a_move_lists_the_target_first_and_completes_once_the_new_replicas_are_in_sync():
    state = cluster()
    p = state.topics["t"].partitions[0]
    epoch = p.partition_epoch
    assert state.apply_alter_reassignments([["t", 0, [2, 3, 4]]]) == [["t", 0, "NONE", None]]
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ([2, 3, 4, 1], (4,), (1,))
    assert p.partition_epoch == epoch + 1 and p.leader == 1, "the leader stays meanwhile"
    assert p.replica_states[4] == "OnlineReplica"
    assert ongoing(state, None) == [["t", 0, [2, 3, 4, 1], [4], [1]]]
    expand_isr(state, 4)
    assert (p.replicas, p.isr, p.adding_replicas, p.removing_replicas) == \
        ([2, 3, 4], [2, 3, 4], (), ())
    assert p.leader == 2 and p.leader_epoch == 1, "the removed leader handed over"
    assert 1 not in p.replica_states
    assert ongoing(state, None) == []


def test_a_target_already_in_sync_completes_at_once():
    state = cluster()
    p = state.topics["t"].partitions[0]
    state.apply_alter_reassignments([["t", 0, [3, 1]]])
    assert (p.replicas, p.isr, p.leader) == ([3, 1], [3, 1], 1)
    assert not p.adding_replicas and not p.removing_replicas


def test_cancel_goes_back_to_the_original_replicas_and_drops_the_new_ones():
    state = cluster()
    p = state.topics["t"].partitions[0]
    state.apply_alter_reassignments([["t", 0, [4, 5, 1]]])
    expand_isr(state, 4)  # 5 still catching up: not complete
    assert p.adding_replicas == (4, 5)
    assert state.apply_alter_reassignments([["t", 0, None]]) == [["t", 0, "NONE", None]]
    assert (sorted(p.replicas), sorted(p.isr), p.adding_replicas) == ([1, 2, 3], [1, 2, 3], ())
    assert 4 not in p.replica_states and 5 not in p.replica_states


def test_refusals_change_nothing():
    state = cluster()
    p = state.topics["t"].partitions[0]
    before = (list(p.replicas), p.partition_epoch)
    results = state.apply_alter_reassignments([
        ["t", 0, []], ["t", 0, [1, 1]], ["t", 0, [1, 9]], ["t", 0, None], ["nope", 0, [1]]])
    assert [r[2] for r in results] == ["INVALID_REPLICA_ASSIGNMENT"] * 3 + [
        "NO_REASSIGNMENT_IN_PROGRESS", "UNKNOWN_TOPIC_OR_PARTITION"]
    assert (p.replicas, p.partition_epoch) == before


def test_a_new_target_replaces_the_one_in_progress():
    state = cluster()
    p = state.topics["t"].partitions[0]
    state.apply_alter_reassignments([["t", 0, [4, 5, 1]]])
    state.apply_alter_reassignments([["t", 0, [1, 2, 5]]])
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ([1, 2, 5, 3], (5,), (3,))
    assert 4 not in p.replica_states
    expand_isr(state, 5)
    assert (p.replicas, p.leader) == ([1, 2, 5], 1)


def test_the_state_with_a_reassignment_survives_the_metadata_file():
    state = cluster()
    state.apply_alter_reassignments([["t", 0, [2, 3, 4]]])
    again = ClusterState.from_dict(state.to_dict())
    assert again.topics["t"].partitions[0] == state.topics["t"].partitions[0]


def test_a_kept_replica_out_of_sync_holds_the_move_until_it_is_back():
    """Kafka completes a move only when every replica of the target is in the ISR
    (PartitionReassignmentReplicas.maybeCompleteReassignment), not only the adding
    ones: [1, 2, 3] -> [2, 4] with 2 fenced must keep 1 and 3, still in sync, until 2
    is back, rather than leave 4 as the only in-sync copy."""
    state = cluster()
    p = state.topics["t"].partitions[0]
    state.apply_fence_brokers([2], {})
    assert p.isr == [1, 3]
    state.apply_alter_reassignments([["t", 0, [2, 4]]])
    expand_isr(state, 4)  # the new replica caught up; 2 is still down
    assert (p.replicas, p.isr, p.adding_replicas, p.removing_replicas) == \
        ([2, 4, 1, 3], [4, 1, 3], (4,), (1, 3))
    assert ongoing(state, None) == [["t", 0, [2, 4, 1, 3], [4], [1, 3]]]
    state.apply_register_broker(2, "h", 9002, "inc-2-again")
    expand_isr(state, 2)  # 2 back in sync: now the move completes
    assert (p.replicas, p.isr, p.adding_replicas, p.removing_replicas) == \
        ([2, 4], [2, 4], (), ())
    assert p.leader in (2, 4) and 1 not in p.replica_states and 3 not in p.replica_states


def test_a_reordering_with_a_replica_out_of_sync_waits_for_it():
    """No adding replica at all, still not complete while a target replica is out of
    the ISR (Kafka lists it as moving until then)."""
    state = cluster()
    p = state.topics["t"].partitions[0]
    state.apply_fence_brokers([3], {})
    state.apply_alter_reassignments([["t", 0, [3, 1]]])
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ([3, 1, 2], (), (2,))
    state.apply_register_broker(3, "h", 9003, "inc-3-again")
    expand_isr(state, 3)
    assert (p.replicas, p.isr, p.removing_replicas) == ([3, 1], [3, 1], ())

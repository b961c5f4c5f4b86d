"""KIP-848 member reconciliation (Kafka's CurrentAssignmentBuilder): a partition is never
given to a member while another may still own it; epochs advance on convergence."""
from __future__ import annotations

from broker.groups.consumer_group import ConsumerGroupState, ConsumerMember, MemberState, reconcile


def group_of(*members) -> ConsumerGroupState:
    state = ConsumerGroupState()
    for member in members:
        state.members[member.member_id] = member
    return state


def step(group, member, epoch, target, owned=None):
    reconcile(member, epoch, target, owned,
              lambda t, p: group.owner_of(t, p, member.member_id) is not None)


def test_a_new_member_gets_its_whole_target_and_the_target_epoch():
    m = ConsumerMember("m1")
    group = group_of(m)
    step(group, m, 1, {"t": {0, 1}})
    assert (m.member_epoch, m.state, m.assigned) == (1, MemberState.STABLE, {"t": {0, 1}})


def test_revocation_keeps_the_epoch_until_the_member_reports_it_released():
    m1 = ConsumerMember("m1", member_epoch=1, assigned={"t": {0, 1, 2, 3}})
    m2 = ConsumerMember("m2")
    group = group_of(m1, m2)
    target1, target2 = {"t": {0, 1}}, {"t": {2, 3}}
    step(group, m1, 2, target1)
    assert (m1.state, m1.member_epoch) == (MemberState.UNREVOKED_PARTITIONS, 1)
    assert (m1.assigned, m1.pending_revocation) == ({"t": {0, 1}}, {"t": {2, 3}})
    # m2 joins at the new epoch but 2 and 3 are still m1's: nothing yet.
    step(group, m2, 2, target2)
    assert (m2.state, m2.member_epoch, m2.assigned) == \
        (MemberState.UNRELEASED_PARTITIONS, 2, {})
    # m1 still reports owning 2: it stays.
    step(group, m1, 2, target1, owned={"t": {0, 1, 2}})
    assert m1.state is MemberState.UNREVOKED_PARTITIONS
    step(group, m1, 2, target1, owned={"t": {0, 1}})
    assert (m1.state, m1.member_epoch, m1.previous_member_epoch, m1.pending_revocation) == \
        (MemberState.STABLE, 2, 1, {})
    step(group, m2, 2, target2, owned={})
    assert (m2.state, m2.assigned) == (MemberState.STABLE, {"t": {2, 3}})


def test_a_member_already_without_the_revoked_partitions_moves_on_at_once():
    m = ConsumerMember("m1", member_epoch=3, assigned={"t": {0, 1}})
    step(group_of(m), m, 4, {"t": {0}}, owned={"t": {0}})
    assert (m.state, m.member_epoch, m.assigned) == (MemberState.STABLE, 4, {"t": {0}})


def test_a_stable_member_at_the_target_epoch_does_not_change():
    m = ConsumerMember("m1", member_epoch=5, assigned={"t": {0}})
    step(group_of(m), m, 5, {"t": {0, 1}})
    assert (m.member_epoch, m.assigned) == (5, {"t": {0}})


def test_group_state_names():
    group = ConsumerGroupState(group_epoch=2, assignment_epoch=2)
    assert group.state_name() == "Empty"
    group.members["m"] = ConsumerMember("m", member_epoch=1)
    assert group.state_name() == "Reconciling"
    group.members["m"].member_epoch = 2
    assert group.state_name() == "Stable"
    assert group.chosen_assignor("uniform") == "uniform"
    group.members["m"].server_assignor = "range"
    assert group.chosen_assignor("uniform") == "range"

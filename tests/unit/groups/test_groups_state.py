"""The classic group state machine (Kafka's GroupState table) and the rules on a group's
members, protocols and offset expiry.  Pure: no event loop, no I/O."""
from __future__ import annotations

import itertools

import pytest

from broker.groups.consumer_protocol import encode_subscription
from broker.groups.state import (
    VALID_PREVIOUS_STATES,
    CommittedOffset,
    GroupMetadata,
    GroupState,
    IllegalGroupTransition,
    MemberMetadata,
    can_transition,
)

E, P, C, S, D = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE,
                 GroupState.COMPLETING_REBALANCE, GroupState.STABLE, GroupState.DEAD)

# Kafka's GroupState.validPreviousStates, written out independently of the module.
KAFKA_EDGES = {
    (P, E),
    (S, P), (C, P), (E, P),
    (P, C),
    (C, S),
    (E, D), (P, D), (C, D), (S, D), (D, D),
}


def member(member_id: str, protocols=(("range", b"r"),), rebalance_ms=1000) -> MemberMetadata:
    return MemberMetadata(member_id, None, "client", "/127.0.0.1", rebalance_ms, 1000,
                          "consumer", list(protocols))


def group_in(state: GroupState) -> GroupMetadata:
    group = GroupMetadata("g", 0)
    group.state = state
    return group


def test_the_table_is_kafkas():
    assert {(old, new) for new, olds in VALID_PREVIOUS_STATES.items() for old in olds} \
        == KAFKA_EDGES


@pytest.mark.parametrize("old,new", list(itertools.product(GroupState, repeat=2)),
                         ids=lambda s: s.value)
def test_every_transition_is_allowed_exactly_when_kafka_allows_it(old, new):
    group = group_in(old)
    if (old, new) in KAFKA_EDGES:
        group.transition_to(new, now_ms=123)
        assert (group.state, group.state_timestamp_ms) == (new, 123)
    else:
        with pytest.raises(IllegalGroupTransition):
            group.transition_to(new, now_ms=123)
        assert group.state is old
    assert can_transition(old, new) == ((old, new) in KAFKA_EDGES)


def test_only_stable_completing_and_empty_groups_can_start_a_rebalance():
    assert {s for s in GroupState if group_in(s).can_rebalance()} == {S, C, E}


def test_first_member_leads_and_fixes_the_protocol_type_and_leadership_passes_on_removal():
    group = GroupMetadata("g", 0)
    group.add(member("a"))
    group.add(member("b"))
    assert (group.leader_id, group.protocol_type) == ("a", "consumer")
    group.remove("a")
    assert group.leader_id == "b"
    group.remove("b")
    assert group.leader_id is None


def test_all_members_joined_needs_every_member_waiting_and_no_pending_id():
    group = GroupMetadata("g", 0)
    a, b = member("a"), member("b")
    group.add(a)
    group.add(b)
    a.awaiting_join = object()
    assert not group.all_members_joined()
    assert [m.member_id for m in group.not_yet_rejoined()] == ["b"]
    b.awaiting_join = object()
    assert group.all_members_joined()
    group.pending_members["c"] = None
    assert not group.all_members_joined()


def test_rebalance_timeout_is_the_longest_of_the_members():
    group = GroupMetadata("g", 0)
    group.add(member("a", rebalance_ms=300))
    group.add(member("b", rebalance_ms=900))
    assert group.rebalance_timeout_ms() == 900


def test_an_empty_group_accepts_any_protocols_a_busy_one_only_compatible_ones():
    group = GroupMetadata("g", 0)
    assert group.supports_protocols("consumer", ["range"])
    assert not group.supports_protocols("", ["range"])
    assert not group.supports_protocols("consumer", [])
    group.add(member("a", protocols=[("range", b""), ("roundrobin", b"")]))
    group.transition_to(P, 0)
    assert group.supports_protocols("consumer", ["roundrobin"])
    assert not group.supports_protocols("consumer", ["sticky"])
    assert not group.supports_protocols("connect", ["range"])


def test_the_protocol_with_most_first_choice_votes_wins_ties_go_to_the_leader():
    group = GroupMetadata("g", 0)
    group.add(member("a", protocols=[("range", b""), ("roundrobin", b"")]))
    group.add(member("b", protocols=[("roundrobin", b""), ("range", b"")]))
    assert group.select_protocol() == "range"      # 1:1, the leader prefers range
    group.add(member("c", protocols=[("roundrobin", b""), ("sticky", b"")]))
    assert group.select_protocol() == "roundrobin"  # sticky is not common; 2 votes to 1


def test_next_generation_with_members_completes_the_rebalance_without_them_empties():
    group = GroupMetadata("g", 0)
    group.add(member("a", protocols=[("range", encode_subscription(["t1", "t2"]))]))
    group.transition_to(P, 0)
    group.init_next_generation(now_ms=5)
    assert (group.state, group.generation_id, group.protocol_name) == (C, 1, "range")
    assert group.subscribed_topics == {"t1", "t2"}
    assert group.current_member_metadata() == [("a", None, encode_subscription(["t1", "t2"]))]
    group.transition_to(P, 6)
    group.remove("a")
    group.init_next_generation(now_ms=7)
    assert (group.state, group.generation_id, group.protocol_name) == (E, 2, None)


def test_member_matches_only_the_same_protocols_and_metadata_in_order():
    m = member("a", protocols=[("range", b"x"), ("roundrobin", b"y")])
    assert m.matches([("range", b"x"), ("roundrobin", b"y")])
    assert not m.matches([("roundrobin", b"y"), ("range", b"x")])
    assert not m.matches([("range", b"changed"), ("roundrobin", b"y")])


def test_an_offset_only_replaces_one_written_before_it():
    group = GroupMetadata("g", 0)
    group.maybe_put_offset(("t", 0), CommittedOffset(10, record_offset=7))
    assert not group.maybe_put_offset(("t", 0), CommittedOffset(5, record_offset=3))
    assert group.offsets[("t", 0)].offset == 10
    assert group.maybe_put_offset(("t", 0), CommittedOffset(12, record_offset=9))
    assert group.offsets[("t", 0)].offset == 12


DAY = 24 * 3600 * 1000


def test_offsets_of_an_empty_consumer_group_expire_from_when_it_became_empty():
    group = GroupMetadata("g", 0, protocol_type="consumer", state_timestamp_ms=10 * DAY)
    group.offsets[("t", 0)] = CommittedOffset(1, commit_timestamp_ms=0)
    assert group.expired_offsets(now_ms=10 * DAY + 6 * DAY, retention_ms=7 * DAY) == []
    assert group.expired_offsets(now_ms=10 * DAY + 7 * DAY, retention_ms=7 * DAY) == [("t", 0)]


def test_a_stable_consumer_group_keeps_offsets_of_subscribed_topics_only():
    group = GroupMetadata("g", 0, state=S, protocol_type="consumer")
    group.subscribed_topics = {"kept"}
    group.offsets[("kept", 0)] = CommittedOffset(1, commit_timestamp_ms=0)
    group.offsets[("dropped", 0)] = CommittedOffset(1, commit_timestamp_ms=0)
    assert group.expired_offsets(now_ms=8 * DAY, retention_ms=7 * DAY) == [("dropped", 0)]


def test_simple_group_offsets_expire_from_their_commit_and_a_rebalancing_group_keeps_all():
    simple = GroupMetadata("g", 0)
    simple.offsets[("t", 0)] = CommittedOffset(1, commit_timestamp_ms=DAY)
    simple.offsets[("t", 1)] = CommittedOffset(1, commit_timestamp_ms=3 * DAY)
    assert simple.expired_offsets(now_ms=8 * DAY, retention_ms=7 * DAY) == [("t", 0)]
    busy = GroupMetadata("g", 0, state=P, protocol_type="consumer")
    busy.offsets[("t", 0)] = CommittedOffset(1, commit_timestamp_ms=0)
    assert busy.expired_offsets(now_ms=100 * DAY, retention_ms=DAY) == []


def test_a_commit_with_its_own_expiry_expires_then():
    simple = GroupMetadata("g", 0)
    simple.offsets[("t", 0)] = CommittedOffset(1, commit_timestamp_ms=0, expire_timestamp_ms=50)
    assert simple.expired_offsets(now_ms=49, retention_ms=7 * DAY) == []
    assert simple.expired_offsets(now_ms=50, retention_ms=7 * DAY) == [("t", 0)]


def static(member_id: str, instance: str) -> MemberMetadata:
    m = member(member_id)
    m.group_instance_id = instance
    return m


def test_the_instance_map_follows_adds_removes_and_replacements():
    group = GroupMetadata("g", 0)
    group.add(static("a", "i1"))
    group.add(member("b"))
    group.add(static("c", "i3"))
    assert group.static_members == {"i1": "a", "i3": "c"}
    group.pending_sync_members = {"a", "b"}
    replaced = group.replace_static_member("i1", "a", "a2")
    assert (replaced.member_id, group.leader_id) == ("a2", "a2")  # the lead moves with it
    assert list(group.members) == ["b", "c", "a2"] and group.static_members["i1"] == "a2"
    assert group.pending_sync_members == {"a2", "b"}
    assert group.is_static_member_fenced("i1", "a")
    assert not group.is_static_member_fenced("i1", "a2")
    assert not group.is_static_member_fenced(None, "a")  # dynamic: never fenced
    assert not group.is_static_member_fenced("i9", "a")  # unknown instance: not fenced
    group.remove("c")
    assert group.static_members == {"i1": "a2"}


def test_a_leader_that_did_not_rejoin_hands_the_lead_to_one_that_did():
    group = GroupMetadata("g", 0)
    group.add(static("a", "i1"))
    group.add(member("b"))
    assert group.maybe_elect_new_joined_leader() is False  # nobody rejoined
    group.members["b"].awaiting_join = object()
    assert group.maybe_elect_new_joined_leader() is True and group.leader_id == "b"
    assert GroupMetadata("empty", 0).maybe_elect_new_joined_leader() is True

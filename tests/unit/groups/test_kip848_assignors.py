"""KIP-848's server-side assignors (uniform, range): every partition of a subscribed
topic to exactly one subscribed member, balance, stickiness, determinism."""
from __future__ import annotations

import pytest

from broker.groups.assignors import UnknownAssignor, assign

TOPICS = {"a": ("id-a", 6), "b": ("id-b", 3)}


def flatten(assignment):
    return sorted((member, topic, p) for member, topics in assignment.items()
                  for topic, parts in topics.items() for p in parts)


def owners(assignment):
    result = {}
    for member, topic, p in flatten(assignment):
        assert (topic, p) not in result, f"{topic}-{p} assigned twice"
        result[(topic, p)] = member
    return result


@pytest.mark.parametrize("name", ["uniform", "range"])
def test_every_partition_goes_to_exactly_one_subscribed_member(name):
    subs = {"m1": {"a", "b"}, "m2": {"a"}, "m3": {"b"}}
    result = assign(name, subs, TOPICS, {})
    placed = owners(result)
    assert set(placed) == {("id-a", p) for p in range(6)} | {("id-b", p) for p in range(3)}
    for (topic, _), member in placed.items():
        assert {"id-a": "a", "id-b": "b"}[topic] in subs[member]
    assert assign(name, subs, TOPICS, {}) == result  # deterministic


def test_uniform_balances_identical_subscriptions():
    subs = {f"m{i}": {"a", "b"} for i in range(4)}
    counts = sorted(len(flatten({m: t})) for m, t in assign("uniform", subs, TOPICS, {}).items())
    assert counts == [2, 2, 2, 3]


def test_uniform_moves_only_the_partitions_of_a_member_that_left():
    subs = {"m1": {"a"}, "m2": {"a"}, "m3": {"a"}}
    topics = {"a": ("id-a", 6)}
    before = assign("uniform", subs, topics, {})
    del subs["m2"]
    after = assign("uniform", subs, topics, before)
    for member in ("m1", "m3"):
        assert before[member]["id-a"] <= after[member]["id-a"]
    assert sorted(len(after[m]["id-a"]) for m in after) == [3, 3]


def test_uniform_new_member_takes_only_what_balance_needs():
    topics = {"a": ("id-a", 6)}
    before = assign("uniform", {"m1": {"a"}, "m2": {"a"}}, topics, {})
    after = assign("uniform", {"m1": {"a"}, "m2": {"a"}, "m3": {"a"}}, topics, before)
    assert [len(after[m]["id-a"]) for m in ("m1", "m2", "m3")] == [2, 2, 2]
    for member in ("m1", "m2"):
        assert after[member]["id-a"] <= before[member]["id-a"]


def test_range_gives_contiguous_ranges_in_member_order():
    result = assign("range", {"m2": {"a"}, "m1": {"a"}, "m3": {"a"}},
                    {"a": ("id-a", 7)}, {})
    assert [sorted(result[m]["id-a"]) for m in ("m1", "m2", "m3")] == \
        [[0, 1, 2], [3, 4], [5, 6]]


def test_a_topic_nobody_subscribes_to_and_a_member_without_topics():
    result = assign("uniform", {"m1": {"a"}, "m2": {"missing"}}, TOPICS, {})
    assert result["m2"] == {} and len(result["m1"]["id-a"]) == 6
    assert "id-b" not in result["m1"]


def test_unknown_assignor():
    with pytest.raises(UnknownAssignor):
        assign("sticky", {}, {}, {})

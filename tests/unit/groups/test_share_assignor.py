"""Kafka's simple share-group assignor (broker/groups/share_assignor.py): every subscribed
partition goes to ceil(members / partitions) members, members' counts differ by at most
one, and members keep what they had as far as those two rules allow."""
from __future__ import annotations

import itertools

import pytest

from broker.groups.share_assignor import assign_simple

TOPIC = "orders"
TOPIC_ID = "00000000-0000-0000-0000-00000000000a"


def assign(members: list[str], partitions: int, current=None):
    return assign_simple({m: {TOPIC} for m in members}, {TOPIC: (TOPIC_ID, partitions)},
                         current or {})


def owned(target) -> dict[str, set[int]]:
    return {m: set(a.get(TOPIC_ID, set())) for m, a in target.items()}


@pytest.mark.parametrize("members,partitions",
                         list(itertools.product(range(1, 8), range(1, 8))))
def test_every_partition_is_shared_by_ceil_members_over_partitions_and_counts_balance(
        members, partitions):
    names = [f"m{i}" for i in range(members)]
    result = owned(assign(names, partitions))
    assert set(result) == set(names), "every member gets an entry"
    sharing = -(-members // partitions)
    owners = [sum(p in parts for parts in result.values()) for p in range(partitions)]
    assert owners == [sharing] * partitions
    counts = [len(parts) for parts in result.values()]
    assert max(counts) - min(counts) <= 1


def test_a_new_member_takes_partitions_only_from_the_fullest_and_the_rest_stay():
    before = owned(assign(["a", "b"], 4))
    after = owned(assign(["a", "b", "c"], 4, {m: {TOPIC_ID: p} for m, p in before.items()}))
    assert sorted(len(p) for p in after.values()) == [1, 1, 2]
    moved = sum(len(before[m] - after[m]) for m in before)
    assert moved == 1, "one partition moves to the new member, none between the old ones"


def test_a_leaving_member_s_partitions_go_to_the_others_who_keep_theirs():
    before = owned(assign(["a", "b", "c"], 6))
    current = {m: {TOPIC_ID: p} for m, p in before.items() if m != "c"}
    after = owned(assign(["a", "b"], 6, current))
    assert before["a"] <= after["a"] and before["b"] <= after["b"]
    assert after["a"] | after["b"] == set(range(6))


def test_unsubscribed_and_missing_topics_get_nothing():
    target = assign_simple({"a": {TOPIC, "missing"}, "b": set()},
                           {TOPIC: (TOPIC_ID, 2)}, {"b": {TOPIC_ID: {0, 1}}})
    assert owned(target) == {"a": {0, 1}, "b": set()}


def test_partitions_beyond_a_shrunk_count_are_dropped():
    target = assign(["a"], 2, {"a": {TOPIC_ID: {0, 1, 5}}})
    assert owned(target) == {"a": {0, 1}}

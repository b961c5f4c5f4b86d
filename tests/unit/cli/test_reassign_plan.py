"""The balanced reassignment plan (broker/cli/reassign_plan.py)."""
from __future__ import annotations

from collections import Counter

import pytest

from broker.cli.reassign_plan import PlanError, moves, plan, replace_broker

THREE = {("t", p): [1 + p % 3, 1 + (p + 1) % 3, 1 + (p + 2) % 3] for p in range(6)}


def load(assignment) -> Counter:
    return Counter(b for replicas in assignment.values() for b in replicas)


def test_growing_from_three_to_four_brokers_evens_the_load_and_moves_little():
    proposed = plan(THREE, [1, 2, 3, 4])
    assert all(len(set(r)) == 3 for r in proposed.values())
    assert max(load(proposed).values()) - min(load(proposed).values()) <= 1
    assert set(load(proposed)) == {1, 2, 3, 4}
    kept = sum(len(set(THREE[k]) & set(proposed[k])) for k in THREE)
    assert kept >= 18 - 5, "only the replicas broker 4 takes over move (18 / 4 -> 5)"


def test_decommissioning_a_broker_moves_every_replica_off_it():
    four = plan(THREE, [1, 2, 3, 4])
    proposed = plan(four, [1, 2, 3])
    assert load(proposed) == Counter({1: 6, 2: 6, 3: 6})
    assert all(len(set(r)) == 3 for r in proposed.values())


def test_a_kept_leader_stays_first_and_an_unchanged_plan_moves_nothing():
    proposed = plan(THREE, [1, 2, 3])
    assert proposed == THREE and moves(THREE, proposed) == {}


def test_racks_spread_a_partitions_replicas():
    current = {("t", 0): [1, 2]}
    racks = {1: "a", 2: "a", 3: "b", 4: "a"}
    proposed = plan(current, [3, 4], racks)
    assert sorted(proposed[("t", 0)]) == [3, 4]
    assert plan({("t", 0): [1]}, [1, 2, 3], racks)[("t", 0)] == [1]
    grown = plan({("t", 0): [5, 6]}, [1, 2, 3], racks)[("t", 0)]
    assert {racks[b] for b in grown} == {"a", "b"}, "a second rack before a second copy in a"


def test_too_few_brokers_is_refused():
    with pytest.raises(PlanError):
        plan(THREE, [1, 2][:1])


def test_decommission_replaces_only_the_leaving_broker_with_the_least_loaded_one():
    current = {("t", 0): [3, 1], ("t", 1): [1, 2], ("u", 0): [2, 4]}
    targets = replace_broker(current, 1, [2, 3, 4])
    assert set(targets) == {("t", 0), ("t", 1)}, "u-0 does not hold broker 1"
    assert targets[("t", 0)] == [3, 4] and targets[("t", 1)] == [3, 2]
    with pytest.raises(PlanError):
        replace_broker({("t", 0): [1, 2]}, 1, [2])

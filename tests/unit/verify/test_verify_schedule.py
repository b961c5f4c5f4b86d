"""raftwood verify's fault schedule: a seed names one schedule, forever (replays depend
on it), every chosen kind appears, and the plan fits the duration."""
from __future__ import annotations

import pytest

from broker.verify.schedule import (
    FAULT_KINDS,
    HOLD_RANGES_S,
    RECOVERY_ESTIMATE_S,
    FaultStep,
    format_schedule,
    generate_schedule,
    parse_fault_kinds,
)


def test_the_same_seed_gives_the_same_schedule():
    assert generate_schedule(42, 120) == generate_schedule(42, 120)
    assert generate_schedule(42, 120, ("pause", "cut"), 4) == \
        generate_schedule(42, 120, ("pause", "cut"), 4)


def test_different_seeds_give_different_schedules():
    schedules = {tuple(generate_schedule(seed, 120)) for seed in range(20)}
    assert len(schedules) == 20


def test_a_seed_is_a_stable_contract_across_versions():
    """Pinned: changing the generator silently would break every recorded replay."""
    first = generate_schedule(1, 60)[:3]
    assert [(s.kind, s.role, s.partition, s.hold_s, s.variant, s.at_s) for s in first] == [
        ("pause", "follower", 1, 2.7, None, 2.0),
        ("cut", "follower", 4, 4.7, "pair", 6.7),
        ("kill-follower", "follower", 1, 1.2, None, 14.1),
    ]


def test_every_chosen_kind_appears_in_a_long_enough_schedule():
    for seed in range(10):
        kinds = {s.kind for s in generate_schedule(seed, 60)}
        assert kinds == set(FAULT_KINDS), (seed, set(FAULT_KINDS) - kinds)


def test_a_sixty_second_schedule_has_at_least_ten_faults():
    for seed in range(50):
        assert len(generate_schedule(seed, 60)) >= 10, seed


def test_the_plan_fits_the_duration_and_steps_never_overlap():
    for seed in range(20):
        steps = generate_schedule(seed, 90)
        end = 0.0
        for step in steps:
            assert step.at_s >= end - 0.1, "a step planned before the previous one ended"
            end = step.at_s + step.hold_s + RECOVERY_ESTIMATE_S[step.kind]
            assert end <= 90 + 0.1
            low, high = HOLD_RANGES_S[step.kind]
            assert low <= step.hold_s <= high
        assert [s.index for s in steps] == list(range(1, len(steps) + 1))


def test_roles_variants_and_partitions_follow_the_kind():
    steps = generate_schedule(7, 600, partitions=4)
    for step in steps:
        assert 0 <= step.partition < 4
        if step.kind.startswith("kill-"):
            assert step.role == step.kind[len("kill-"):]
        else:
            assert step.role in ("leader", "follower", "controller")
        assert (step.variant is not None) == (step.kind in ("cut", "corrupt-tail"))


def test_only_the_chosen_kinds_are_scheduled():
    steps = generate_schedule(3, 120, ("pause", "restart-hard"))
    assert steps and {s.kind for s in steps} <= {"pause", "restart-hard"}


def test_max_faults_bounds_the_count_and_a_tiny_duration_schedules_nothing():
    assert len(generate_schedule(3, 600, max_faults=4)) == 4
    assert generate_schedule(3, 1.0) == []
    assert "no faults" in format_schedule([])


def test_fault_lists_parse_with_aliases_and_refuse_unknown_names():
    assert parse_fault_kinds(None) == FAULT_KINDS
    assert parse_fault_kinds("kill") == ("kill-leader", "kill-follower", "kill-controller")
    assert parse_fault_kinds("cut, pause") == ("pause", "cut")
    assert parse_fault_kinds("storage,restart") == ("restart-clean", "restart-hard",
                                                    "corrupt-tail")
    with pytest.raises(ValueError, match="unknown fault 'explode'"):
        parse_fault_kinds("pause,explode")
    with pytest.raises(ValueError):
        parse_fault_kinds(" , ")
    with pytest.raises(ValueError):
        generate_schedule(1, 60, ("explode",))


def test_the_printed_schedule_names_partitions_and_what_each_step_does():
    step = FaultStep(index=3, at_s=12.5, kind="corrupt-tail", role="leader", partition=1,
                     pick=9, hold_s=0.0, variant="truncate")
    line = step.describe(["t-0", "t-1"])
    assert line.startswith("#3")
    assert "12.5s" in line and "corrupt-tail" in line
    assert "the leader of t-1" in line and "truncate" in line
    text = format_schedule(generate_schedule(5, 60), ["p0", "p1", "p2", "p3", "p4", "p5"])
    assert len(text.splitlines()) == len(generate_schedule(5, 60))


# -- the netns kinds -------------------------------------------------------------------------

def test_netns_kinds_parse_only_in_netns_mode_and_network_includes_them():
    from broker.verify.schedule import ALL_FAULT_KINDS, NETNS_FAULT_KINDS
    assert parse_fault_kinds(None, "netns") == ALL_FAULT_KINDS
    assert parse_fault_kinds("network", "netns") == ("cut",) + NETNS_FAULT_KINDS
    assert parse_fault_kinds("network") == ("cut",)
    assert parse_fault_kinds("flap,zombie-leader", "netns") == ("zombie-leader", "flap")
    with pytest.raises(ValueError, match="needs --network netns"):
        parse_fault_kinds("zombie-leader", "proxy")


def test_long_controller_isolations_are_rare_and_outlast_raft_compaction():
    from broker.verify.schedule import ALL_FAULT_KINDS, LONG_HOLD_RANGE_S
    counts, longs = [], 0
    for seed in range(20):
        steps = generate_schedule(seed, 600, ALL_FAULT_KINDS)
        counts.append(len(steps))
        for step in steps:
            if step.variant == "long":
                longs += 1
                assert step.kind == "isolate-controller" and step.hold_s > 60
                assert LONG_HOLD_RANGE_S[0] <= step.hold_s <= LONG_HOLD_RANGE_S[1]
        assert sum(s.variant == "long" for s in steps) <= 2
    assert 0 < longs <= 40 and min(counts) >= 70, (longs, counts)
    assert not any(s.variant == "long" for seed in range(20)
                   for s in generate_schedule(seed, 120, ALL_FAULT_KINDS))


def test_netns_steps_have_their_roles_and_derived_parameters():
    from broker.verify.schedule import ALL_FAULT_KINDS, flap_cycles, netem_params
    for step in generate_schedule(11, 600, ALL_FAULT_KINDS):
        if step.kind in ("zombie-leader", "leader-from-followers"):
            assert step.role == "leader"
        elif step.kind == "isolate-controller":
            assert step.role == "controller" and step.variant in ("short", "blind", "long")
        elif step.kind.startswith("split-"):
            assert step.role in ("leader", "controller")
        elif step.kind == "flap":
            cycles = flap_cycles(step)
            assert 3 <= len(cycles) <= 6
            assert abs(sum(c + u for c, u in cycles) - step.hold_s) < 0.1
        elif step.kind == "netem":
            delay, jitter, loss = netem_params(step)
            assert 50 <= delay <= 200 and 0 < jitter <= delay // 4 and 5 <= loss <= 20
            assert netem_params(step) == (delay, jitter, loss)
        assert step.kind in step.describe()

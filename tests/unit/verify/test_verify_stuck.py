"""The progress verdict: the longest time a transactional id or group could not move on,
its open gap included, fails a run beyond the bound; the fault that pauses a follower
of the probe's coordinator partition runs by default with transactions only."""
from __future__ import annotations

from broker.verify.checker import CheckResult, ViolationLog
from broker.verify.report import Report
from broker.verify.schedule import (
    FAULT_KINDS,
    TXN_FAULT_KINDS,
    default_kinds,
    generate_schedule,
    parse_fault_kinds,
)
from broker.verify.stuck import ProgressClock, ProgressWatch, progress_line, stuck_summary


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_longest_gap_between_progress_counts_the_open_one():
    time = FakeTime()
    clock = ProgressClock(time)
    clock.watch("a")
    time.now += 3
    clock.mark("a")          # gap 3
    time.now += 1
    clock.mark("a")          # gap 1
    assert clock.longest() == {"a": 3}
    time.now += 7            # nothing since: the open gap is the longest
    assert clock.longest() == {"a": 7}


def test_a_retired_name_stops_accumulating():
    time = FakeTime()
    clock = ProgressClock(time)
    clock.watch("worker")
    time.now += 2
    clock.retire("worker")
    time.now += 100
    assert clock.longest() == {"worker": 2}


def test_a_name_over_the_bound_is_a_stuck_violation():
    time = FakeTime()
    watch = ProgressWatch("127.0.0.1:1", bound_s=60.0)
    watch.clock = ProgressClock(time)
    watch.probe.clock = watch.clock
    watch.clock.watch("transactional.id t")
    watch.clock.watch("group g")
    time.now += 61
    watch.clock.mark("group g")
    violations = ViolationLog()
    summary = watch.check(violations)
    assert summary["stuck"] == ["group g", "transactional.id t"]
    assert violations.count("stuck") == 2
    assert not CheckResult(violations=violations).passed


def test_the_report_prints_the_longest_stall_and_the_bound():
    summary = stuck_summary({"transactional.id t": 4.24, "group g": 1.0}, 60.0)
    assert summary["worst"] == "transactional.id t" and summary["stuck"] == []
    line = progress_line(summary)
    assert line.startswith("  progress    longest without progress 4.2s "
                           "(transactional.id t; bound 60s)")
    report = Report(1, 3, 60, 0, result=CheckResult(violations=ViolationLog()),
                    progress=summary)
    rendered = report.render()
    assert " ".join(line.split()) in " ".join(rendered.split())
    assert all(len(row) <= 100 for row in rendered.splitlines()), "wrapped at 100 columns"


def test_the_coordinator_fault_is_a_default_only_with_transactions():
    assert default_kinds("proxy", ("records",)) == FAULT_KINDS
    assert default_kinds("proxy", ("records", "txn")) == FAULT_KINDS + TXN_FAULT_KINDS
    assert "pause-coordinator-follower" not in parse_fault_kinds("all")
    assert parse_fault_kinds("pause-coordinator-follower") == TXN_FAULT_KINDS
    steps = generate_schedule(3, 200, TXN_FAULT_KINDS, 6)
    assert steps and {s.kind for s in steps} == set(TXN_FAULT_KINDS)
    assert {s.role for s in steps} == {"follower"}
    assert {s.variant for s in steps} <= {"txn", "group"}
    assert all(6.0 <= s.hold_s <= 10.0 for s in steps)
    assert "while its client times out" in steps[0].describe()


def test_a_fault_held_longer_than_the_bound_raises_it():
    time = FakeTime()
    watch = ProgressWatch("127.0.0.1:1", bound_s=60.0)
    watch.clock = ProgressClock(time)
    watch.clock.watch("transactional.id t")
    time.now += 90           # a controller isolated for 70 s kept the coordinator away
    violations = ViolationLog()
    summary = watch.check(violations, longest_hold_s=70.0)
    assert summary["bound_s"] == 100.0 and summary["stuck"] == []
    assert violations.count("stuck") == 0

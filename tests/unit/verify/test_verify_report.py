"""The summary line is the contract scripts read: its exact form on PASS, FAIL with
every count, extra fields only when they matter."""
from __future__ import annotations

import re

import pytest

from broker.verify.checker import CheckResult, ViolationLog
from broker.verify.report import AppliedFault, Report, parse_summary_line, summary_line

PASS_LINE = re.compile(r"^verify: PASS faults=\d+ acked=\d+ lost=0 duplicates=\d+ "
                       r"hw_regressions=0 divergent=0$")


def test_the_pass_line_has_exactly_the_documented_form():
    line = summary_line(True, 12, 5210, 0, 3, 0, 0, {"committed_changed": 0})
    assert line == "verify: PASS faults=12 acked=5210 lost=0 duplicates=3 " \
                   "hw_regressions=0 divergent=0"
    assert PASS_LINE.match(line)


def test_a_fail_line_carries_the_counts_and_non_zero_extras():
    line = summary_line(False, 10, 900, 4, 0, 1, 2,
                        {"committed_changed": 0, "out_of_isr_elections": 1})
    assert line == ("verify: FAIL faults=10 acked=900 lost=4 duplicates=0 hw_regressions=1 "
                    "divergent=2 out_of_isr_elections=1")
    assert parse_summary_line(line) == (False, {
        "faults": 10, "acked": 900, "lost": 4, "duplicates": 0, "hw_regressions": 1,
        "divergent": 2, "out_of_isr_elections": 1})


def test_parse_refuses_other_lines():
    for line in ("verify: MAYBE faults=1", "hello", "verify: PASS faults"):
        with pytest.raises(ValueError):
            parse_summary_line(line)


def report_with(violations: ViolationLog, **result) -> Report:
    report = Report(seed=7, brokers=3, duration_s=60, planned=2)
    report.applied = [AppliedFault(1, "pause", 2, "SIGSTOP broker 2", 3.0, 2.0),
                      AppliedFault(2, "corrupt-tail", None, "", 9.0, 0.0,
                                   skipped="cluster not healthy")]
    report.result = CheckResult(violations=violations, **result)
    report.workload = {"failed": 1, "pending": 0}
    report.final = {"min_hw": 10, "max_hw": 20}
    return report


def test_the_rendered_report_ends_with_the_summary_line_and_counts_only_applied_faults():
    report = report_with(ViolationLog(), acked=100, partitions=6)
    text = report.render()
    assert text.splitlines()[-1] == \
        "verify: PASS faults=1 acked=100 lost=0 duplicates=0 hw_regressions=0 divergent=0"
    assert "skipped: cluster not healthy" in text
    assert "replay" not in text
    assert report.to_dict()["passed"] is True


def test_a_failing_report_lists_examples_and_how_to_replay():
    violations = ViolationLog()
    violations.add("lost", "t-0@3: acknowledged b'x', the log absent")
    violations.add("committed_changed", "t-0@1 changed")
    report = report_with(violations, acked=100, lost=1, partitions=6)
    text = report.render()
    lines = text.splitlines()
    assert lines[-1] == ("verify: FAIL faults=1 acked=100 lost=1 duplicates=0 "
                         "hw_regressions=0 divergent=0 committed_changed=1")
    assert "lost: t-0@3" in text
    assert "raftwood verify --seed 7 --brokers 3 --duration 60" in text
    assert report.to_dict()["counts"]["lost"] == 1


def test_report_lines_fit_100_columns_but_the_summary_and_replay_stay_whole():
    violations = ViolationLog()
    violations.add("lost", "t-0@3: " + "acknowledged and then absent " * 12)
    report = report_with(violations, acked=100, lost=1, partitions=6)
    report.faults_chosen = tuple(f"kind-number-{i}" for i in range(12))
    lines = report.render().splitlines()
    replay = next(line for line in lines if line.lstrip().startswith("replay "))
    assert "--faults kind-number-0," in replay and replay.endswith("kind-number-11")
    assert all(len(line) <= 100 for line in lines if line is not replay), lines
    assert parse_summary_line(lines[-1])[1]["lost"] == 1
    wrapped = [line for line in lines if line.startswith("     ") and "absent" in line]
    assert wrapped, "the long violation continues on indented lines"

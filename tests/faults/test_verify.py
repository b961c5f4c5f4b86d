"""``raftwood verify`` as a test: a short fault schedule on a real 3-broker cluster, with
real clients, must end in PASS — every acknowledged record at its offset, committed
data unchanged, no HW or ListOffsets regression, replicas identical below the HW, no
out-of-ISR election.

The seed is fixed so CI replays the same schedule (``RAFTWOOD_VERIFY_SEED`` picks
another one; ``RAFTWOOD_VERIFY_DURATION`` a longer run).  The long schedule is a
documented command, not a test: ``raftwood verify --duration 300``.
"""
from __future__ import annotations

import io
import os
import re
import subprocess
import sys

import pytest

from broker.verify import VerifyOptions, VerifyRun
from broker.verify.report import Progress, parse_summary_line

SEED = int(os.environ.get("RAFTWOOD_VERIFY_SEED", "20261122"))
DURATION_S = float(os.environ.get("RAFTWOOD_VERIFY_DURATION", "40"))
PASS_LINE = re.compile(r"^verify: PASS faults=(\d+) acked=(\d+) lost=0 duplicates=(\d+) "
                       r"hw_regressions=0 divergent=0$")


@pytest.mark.slow
def test_a_short_fault_schedule_keeps_every_invariant(tmp_path):
    """~6 faults in 40 s (every kind once, as far as they fit): kill -9 of a leader, a
    follower and the controller, SIGSTOP, clean and hard restarts, a network cut, a
    damaged log tail."""
    out = io.StringIO()
    run = VerifyRun(VerifyOptions(duration_s=DURATION_S, seed=SEED, data_dir=str(tmp_path),
                                  keep_data=True), Progress(out))
    report = run.execute()
    text = out.getvalue() + "\n" + report.render()
    assert report.passed, text
    match = PASS_LINE.match(report.summary())
    assert match, report.summary()
    assert int(match.group(1)) >= 5 and int(match.group(2)) > 1_000, text
    assert report.faults == report.planned, text
    assert f"seed {SEED}" in text and "schedule (" in text


@pytest.mark.slow
def test_the_command_prints_the_schedule_progress_and_the_summary_last(tmp_path):
    """The command line: exit code 0 with PASS as the very last line; the seed and the
    schedule come first so a failure can be replayed."""
    completed = subprocess.run(
        [sys.executable, "-m", "broker.cli", "verify", "--duration", "14", "--seed", "3",
         "--faults", "pause,cut", "--data-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=240)
    lines = completed.stdout.strip().splitlines()
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    assert lines[0].startswith("raftwood verify: seed 3, 3 brokers")
    assert lines[1].startswith("schedule (")
    passed, counts = parse_summary_line(lines[-1])
    assert passed and PASS_LINE.match(lines[-1]), lines[-1]
    assert counts["faults"] >= 2
    assert not list(tmp_path.iterdir()), "a passing run removes its data"


def test_usage_errors_exit_2_without_starting_anything():
    completed = subprocess.run(
        [sys.executable, "-m", "broker.cli", "verify", "--faults", "explode"],
        capture_output=True, text=True, timeout=60)
    assert completed.returncode == 2
    assert "unknown fault 'explode'" in completed.stderr


@pytest.mark.slow
def test_voters_leaving_and_rejoining_the_metadata_quorum_keep_every_invariant(tmp_path):
    """The opt-in ``voter`` fault, with controller kills between: the quorum leader and
    followers leave the voters and come back while the load runs; every fault converges
    only once every broker sees all three voters again."""
    out = io.StringIO()
    run = VerifyRun(VerifyOptions(duration_s=25, seed=SEED, data_dir=str(tmp_path),
                                  faults=("kill-controller", "voter"),
                                  workloads=("records",)), Progress(out))
    report = run.execute()
    text = out.getvalue() + "\n" + report.render()
    assert report.passed and PASS_LINE.match(report.summary()), text
    voter_steps = [a for a in report.applied if a.kind == "voter"]
    assert voter_steps and all(a.action.count("(done)") == 2 for a in voter_steps), text
    assert all(a.converged_s is not None for a in report.applied), text

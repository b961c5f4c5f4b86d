"""``raftwood verify --network netns`` as a test: every broker in a network namespace of
its own, links cut with nftables (Raft included), a short schedule of the netns fault
kinds — a zombie leader, a leader cut from its followers, the controller isolated,
the Kafka ports cut with Raft up, a split with the controller or a leader on the
minority side, a flapping link — must end in PASS, with every check: nothing
acknowledged lost, no leader epoch with two acknowledging leaders, every fault
converged within the bound.

Skips, with netns_available()'s reason, where namespaces cannot be made (not root, no
iproute2 or nftables).  ``RAFTWOOD_VERIFY_SEED`` picks another seed.  Whatever
happens, the namespaces, bridge and veths of the run are gone afterwards.
"""
from __future__ import annotations

import io
import os
import subprocess

import pytest

from broker.harness.netns import netns_available
from broker.verify import VerifyOptions, VerifyRun
from broker.verify.report import Progress

USABLE, WHY = netns_available()
pytestmark = pytest.mark.skipif(not USABLE, reason=f"network namespaces: {WHY}")
SEED = int(os.environ.get("RAFTWOOD_VERIFY_SEED", "20261122"))
KINDS = ("isolate-controller", "zombie-leader", "leader-from-followers", "kafka-ports",
         "split-minority", "flap")


def run_names() -> str:
    return (subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
            + subprocess.run(["ip", "-o", "link", "show"], capture_output=True,
                             text=True).stdout)


@pytest.mark.slow
def test_a_short_netns_schedule_keeps_every_invariant(tmp_path):
    out = io.StringIO()
    run = VerifyRun(VerifyOptions(duration_s=60, seed=SEED, faults=KINDS, network="netns",
                                  data_dir=str(tmp_path), keep_data=True), Progress(out))
    try:
        report = run.execute()
    finally:
        run._close_cluster()  # idempotent: already done unless execute() itself broke
    text = out.getvalue() + "\n" + report.render()
    prefix = run.vc.net.prefix if run.vc is not None and run.vc.net is not None else None
    assert prefix and prefix not in run_names(), f"{prefix} left behind\n{text}"
    assert report.network == "netns" and "network     netns" in report.render(), text
    assert "network netns" in out.getvalue().splitlines()[0]
    assert report.passed, text
    assert report.faults == report.planned >= 6, text
    assert {f.kind for f in report.applied} == set(KINDS), text
    assert report.recovery["kinds"] and all(
        k["unconverged"] == 0 for k in report.recovery["kinds"].values()), text
    assert report.result.epochs["epochs"] > 0, text

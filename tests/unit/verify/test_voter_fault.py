"""The ``voter`` fault of raftwood verify: opt-in, scheduled with its roles, described."""
from __future__ import annotations

from broker.verify.reassign import default_brokers
from broker.verify.schedule import generate_schedule, parse_fault_kinds


def test_the_voter_fault_is_opt_in_and_described():
    assert "voter" not in parse_fault_kinds(None) + parse_fault_kinds("all", "netns")
    assert parse_fault_kinds("voter,kill") == ("kill-leader", "kill-follower",
                                                "kill-controller", "voter")
    steps = generate_schedule(5, 120, ("voter",), 6)
    assert steps and {s.role for s in steps} <= {"controller", "follower"}
    assert "out of the metadata quorum's voters" in steps[0].describe()
    assert default_brokers(("voter",)) == 3

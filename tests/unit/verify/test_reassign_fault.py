"""raftwood verify's ``reassign`` fault, without a cluster: the plan of a move (pure), the
schedule's steps, the cluster size it asks for, the fault's bounded waits and cancels
against a fake controller, the ledger's two checks and the report's counts."""
from __future__ import annotations

import pytest

from broker.verify import VerifyOptions, VerifyRun
from broker.verify import reassign as reassign_module
from broker.verify.checker import CheckResult, ViolationLog
from broker.verify.reassign import (
    CANCEL_DELAY_RANGE_S,
    Move,
    Reassigner,
    ReassignLedger,
    cancel_delay_s,
    default_brokers,
    plan_move,
)
from broker.verify.report import Report
from broker.verify.schedule import FAULT_KINDS, FaultStep, generate_schedule, parse_fault_kinds
from protocol.errors import ErrorCode

TP = ("verify-a", 1)


# -- planning ------------------------------------------------------------------------------

def test_with_a_spare_broker_the_role_replica_is_replaced_in_place():
    assert plan_move([1, 2, 3], 1, [1, 2, 3, 4], pick=7) == [4, 2, 3]
    assert plan_move([2, 3, 4], 3, [1, 2, 3, 4], pick=0) == [2, 1, 4]
    # several brokers outside the set: pick chooses among them
    targets = {tuple(plan_move([1, 2, 3], 2, [1, 2, 3, 4, 5], pick)) for pick in range(4)}
    assert targets == {(1, 4, 3), (1, 5, 3)}


def test_a_role_broker_outside_the_replicas_falls_back_to_a_picked_replica():
    target = plan_move([1, 2, 3], 9, [1, 2, 3, 4], pick=4)
    assert sorted(target) != [1, 2, 3] and 4 in target and len(target) == 3
    assert len(set(target) & {1, 2, 3}) == 2


def test_without_a_spare_broker_the_list_is_reordered_and_the_preferred_leader_changes():
    for pick in range(6):
        for replaced in (1, 2, 3):
            target = plan_move([1, 2, 3], replaced, [1, 2, 3], pick)
            assert sorted(target) == [1, 2, 3] and target[0] != 1
    assert plan_move([1, 2, 3], 3, [1, 2, 3], 0) == [3, 1, 2]
    with pytest.raises(ValueError):
        plan_move([1], 1, [1, 2, 3], 0)


def test_the_cancel_delay_comes_from_pick():
    delays = {cancel_delay_s(pick) for pick in range(50)}
    assert len(delays) > 10
    assert all(CANCEL_DELAY_RANGE_S[0] <= d <= CANCEL_DELAY_RANGE_S[1] for d in delays)
    assert cancel_delay_s(12) == cancel_delay_s(12)


# -- the schedule and the cluster size --------------------------------------------------------

def test_reassign_is_opt_in_and_parses_in_both_network_modes():
    assert "reassign" not in FAULT_KINDS
    assert "reassign" not in parse_fault_kinds(None) + parse_fault_kinds("all")
    assert "reassign" not in parse_fault_kinds(None, "netns") + parse_fault_kinds("all", "netns")
    assert parse_fault_kinds("reassign,kill") == ("kill-leader", "kill-follower",
                                                  "kill-controller", "reassign")
    assert parse_fault_kinds("reassign", "netns") == ("reassign",)
    with pytest.raises(ValueError, match="reassign"):  # listed among the choices
        parse_fault_kinds("explode")


def test_reassign_steps_are_seeded_with_a_role_a_variant_and_no_hold():
    steps = generate_schedule(11, 300, ("reassign", "pause"), 6)
    moves = [s for s in steps if s.kind == "reassign"]
    assert moves and steps == generate_schedule(11, 300, ("reassign", "pause"), 6)
    assert {s.role for s in moves} == {"leader", "follower"}
    assert {s.variant for s in moves} == {"move", "cancel"}
    assert all(s.hold_s == 0.0 for s in moves)
    line = moves[0].describe(["verify-a-0"] * 6)
    assert "AlterPartitionReassignments" in line and "verify-a-0" in line


def test_runs_with_reassign_start_four_brokers_unless_told_otherwise():
    assert default_brokers(FAULT_KINDS) == 3 and default_brokers(("reassign",)) == 4

    def brokers(**options):
        run = VerifyRun(VerifyOptions(network="proxy", workloads=("records",), **options))
        return run.options.brokers, run.report.brokers

    assert brokers() == (3, 3)
    assert brokers(faults=("reassign", "kill-leader")) == (4, 4)
    assert brokers(faults=("reassign",), brokers=3) == (3, 3)
    with pytest.raises(ValueError, match="at least 3"):
        brokers(brokers=2)


# -- the fault against a fake controller ------------------------------------------------------

class FakeCluster:
    node_ids = [1, 2, 3, 4]


class FakeController(Reassigner):
    """A controller whose moves complete after ``polls_to_complete`` listings (never
    when None); cancel refused when ``cancel_code`` says so."""

    def __init__(self, polls_to_complete=2, cancel_code=ErrorCode.NONE):
        super().__init__(FakeCluster(), ReassignLedger())
        self.replicas = {TP: [1, 2, 3]}
        self.moving: dict = {}
        self.polls_to_complete = polls_to_complete
        self.cancel_code = cancel_code
        self.sent: list = []

    def _send_alter(self, tp, target):
        self.sent.append((tp, target))
        if target is None:
            if tp not in self.moving:
                return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
            if self.cancel_code == ErrorCode.NONE:
                self.replicas[tp] = self.moving.pop(tp)[0]
            return self.cancel_code
        self.moving[tp] = (list(self.replicas[tp]), list(target), 0)
        return ErrorCode.NONE

    def _ongoing_or_none(self):
        for tp, (original, target, polls) in list(self.moving.items()):
            if self.polls_to_complete is not None and polls >= self.polls_to_complete:
                del self.moving[tp]
                self.replicas[tp] = target
            else:
                self.moving[tp] = (original, target, polls + 1)
        return {tp: (target + original, [], []) for tp, (original, target, _) in
                self.moving.items()}

    def _replicas(self, tp):
        return list(self.replicas[tp])


@pytest.fixture
def quick(monkeypatch):
    monkeypatch.setattr(reassign_module, "POLL_S", 0.0)
    monkeypatch.setattr(reassign_module, "MOVE_WAIT_S", 0.05)
    monkeypatch.setattr(reassign_module, "CANCEL_WAIT_S", 0.05)
    monkeypatch.setattr(reassign_module, "cancel_delay_s", lambda pick: 0.0)


def step(variant="move", role="leader"):
    return FaultStep(index=1, at_s=2.0, kind="reassign", role=role, partition=1, pick=3,
                     hold_s=0.0, variant=variant)


def test_a_move_that_completes_is_counted_completed(quick):
    fake = FakeController(polls_to_complete=2)
    action = fake.run(step(), 1, TP)
    move = fake.ledger.moves[0]
    assert move.outcome == "completed" and move.target == [4, 2, 3]
    assert fake.replicas[TP] == [4, 2, 3]
    assert "completed" in action and "[1, 2, 3] -> [4, 2, 3]" in action


def test_the_cancel_variant_goes_back_to_the_old_replicas(quick):
    fake = FakeController(polls_to_complete=None)
    action = fake.run(step("cancel"), 2, TP)
    move = fake.ledger.moves[0]
    assert move.outcome == "cancelled" and move.cancel_sent and fake.replicas[TP] == [1, 2, 3]
    assert "cancelled" in action


def test_a_cancel_after_completion_counts_as_completed(quick):
    fake = FakeController(polls_to_complete=0)
    fake._ongoing_or_none()   # nothing moves yet; the move completes at the first listing
    fake._send_alter = (lambda original: lambda tp, target: (
        original(tp, target), fake._ongoing_or_none())[0] if target else original(tp, target)
    )(fake._send_alter)
    fake.run(step("cancel"), 2, TP)
    move = fake.ledger.moves[0]
    assert move.outcome == "completed" and move.cancel_late and not move.cancel_sent


def test_a_move_that_cannot_complete_is_cancelled_within_the_bound(quick):
    fake = FakeController(polls_to_complete=None)
    action = fake.run(step(), 1, TP)
    assert fake.ledger.moves[0].outcome == "cancelled"
    assert [target for _, target in fake.sent] == [[4, 2, 3], None]
    assert "cancelled" in action


def test_a_refused_cancel_leaves_the_move_pending_for_the_heal(quick):
    fake = FakeController(polls_to_complete=None,
                          cancel_code=ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    action = fake.run(step(), 1, TP)
    move = fake.ledger.moves[0]
    assert move.outcome == "pending" and "INVALID_REPLICA_ASSIGNMENT" in move.note
    assert "left for the heal" in action
    # the heal: the move completes once its broker is back
    fake.polls_to_complete = 0
    fake.settle(bound_s=1.0)
    assert move.outcome == "completed" and fake.ledger.ongoing_after_heal == []
    violations = ViolationLog()
    fake.ledger.check(violations)
    assert sum(violations.counts.values()) == 0


def test_settle_reports_what_is_still_moving_and_the_checks_count_it(quick):
    fake = FakeController(polls_to_complete=None,
                          cancel_code=ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    fake.run(step(), 1, TP)
    done = fake.settle(bound_s=0.05)
    assert any("INVALID_REPLICA_ASSIGNMENT" in d for d in done)
    violations = ViolationLog()
    fake.ledger.check(violations)
    assert violations.count("reassign-stuck") == 1
    assert violations.count("reassign-ongoing") == 1
    assert "verify-a-1 still moving" in fake.ledger.ongoing_after_heal[0]


def test_a_refused_start_is_no_move(quick):
    fake = FakeController()
    fake._send_alter = lambda tp, target: ErrorCode.INVALID_REPLICA_ASSIGNMENT
    action = fake.run(step(), 1, TP)
    assert not fake.ledger.moves and len(fake.ledger.refused) == 1
    assert "not started" in action


def test_unlisted_after_the_heal_is_a_violation():
    ledger = ReassignLedger()
    ledger.settled = True
    violations = ViolationLog()
    ledger.check(violations)
    assert violations.count("reassign-ongoing") == 1


# -- the report --------------------------------------------------------------------------------

def test_the_report_counts_moves_and_the_summary_names_the_new_checks():
    ledger = ReassignLedger()
    ledger.moves = [Move(1, "t", 0, [1, 2, 3], [4, 2, 3], "completed"),
                    Move(2, "t", 1, [1, 2, 3], [1, 4, 3], "cancelled", cancel_sent=True),
                    Move(3, "t", 2, [1, 2, 3], [1, 2, 4], "pending")]
    ledger.ongoing_after_heal = []
    summary = ledger.summary()
    assert (summary["started"], summary["completed"], summary["cancelled"],
            summary["pending"]) == (3, 1, 1, 1)
    violations = ViolationLog()
    ledger.check(violations)
    report = Report(1, 4, 30.0, 3, reassignments=summary,
                    result=CheckResult(violations=violations))
    text = report.render()
    assert "reassign    3 moves started: 1 completed, 1 cancelled, 1 neither" in text
    assert report.summary().startswith("verify: FAIL")
    assert "reassign_stuck=1" in report.summary()
    assert report.to_dict()["reassignments"]["completed"] == 1


def test_a_partition_still_moving_from_an_earlier_step_is_not_moved_again(quick):
    fake = FakeController(polls_to_complete=None,
                          cancel_code=ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    fake.run(step(), 1, TP)
    action = fake.run(step(), 2, TP)
    assert len(fake.ledger.moves) == 1 and "still moving" in action
    assert len(fake.ledger.refused) == 1


def test_a_cancel_that_restores_the_set_in_another_order_counts_as_cancelled(quick):
    """The controller rebuilds the old list as replicas minus adding ones (target
    first), so [1, 2, 3] -> [1, 4, 3] cancelled comes back as [1, 3, 2]."""
    fake = FakeController(polls_to_complete=None)
    original_send = fake._send_alter

    def send(tp, target):
        code = original_send(tp, target)
        if target is None and code == ErrorCode.NONE:
            fake.replicas[tp] = [1, 3, 2]
        return code

    fake._send_alter = send
    fake.run(step("cancel", role="follower"), 2, TP)
    assert fake.ledger.moves[0].outcome == "cancelled"

"""raftwood verify's transactional checks (broker/verify/txncheck.py) fire on each
crafted violation — a committed transaction lost, an aborted record visible (along the
run or at the end), an unknown transaction seen in part, a record read twice, a value
nobody wrote, a partition never read to its end, an LSO going back — and stay quiet on
a clean history (unknown transactions read whole or not at all included)."""
from __future__ import annotations

import random

from broker.verify.checker import ViolationLog
from broker.verify.payload import encode_value
from broker.verify.txncheck import LsoAudit, Sighting, Txn, check_transactions
from broker.verify.txnload import plan_transaction

TOPIC = "verify-txn"
PARTS = [0, 1, 2]


def txn(txn_id: int, outcome: str, count: int = 4, **extra) -> Txn:
    records = [(i % 3, encode_value("tx-0", txn_id * 100 + i)) for i in range(count)]
    return Txn(txn_id, records, outcome, **extra)


def log_of(*txns: Txn) -> list[Sighting]:
    """What read_committed serves for ``txns`` (in order): each record at its own offset
    per partition, a marker after each transaction on every partition it touched."""
    next_offset = dict.fromkeys(PARTS, 0)
    out = []
    for t in txns:
        for p, v in t.records:
            out.append(Sighting(p, next_offset[p], v))
            next_offset[p] += 1
        for p in t.partitions():
            next_offset[p] += 1
    return out


HISTORY = [txn(0, "committed"), txn(1, "aborted", planned_abort=True), txn(2, "committed"),
           txn(3, "unknown"), txn(4, "unknown"), txn(5, "committed", end=True)]
VISIBLE = [HISTORY[0], HISTORY[2], HISTORY[3], HISTORY[5]]   # unknown 3 committed, 4 not


def check(history=HISTORY, live=None, final=None, completed=PARTS, lso=None):
    violations = ViolationLog()
    final = log_of(*VISIBLE) if final is None else final
    result = check_transactions(TOPIC, history, live or [], final, set(completed), PARTS,
                                violations, lso)
    return result, violations


def test_a_clean_history_passes_with_unknowns_whole_or_absent():
    result, violations = check(live=log_of(*VISIBLE)[:5])
    assert not violations.counts, violations.examples
    assert result.outcomes == {"committed": 3, "aborted": 1, "unknown": 2}
    assert (result.unknown_visible, result.unknown_invisible, result.unjudged) == (1, 1, 0)
    assert result.final_complete and result.planned_aborts == 1


def test_a_committed_transaction_missing_at_the_end_is_lost():
    final = [s for s in log_of(*VISIBLE) if s.value != HISTORY[2].records[1][1]]
    _, violations = check(final=final)
    assert dict(violations.counts) == {"txn-lost": 1}
    assert "transaction 2 was committed" in violations.examples[0].detail


def test_an_aborted_record_visible_at_the_end_or_along_the_run_is_caught():
    leaked = Sighting(1, 40, HISTORY[1].records[1][1])
    _, at_end = check(final=log_of(*VISIBLE) + [leaked])
    assert dict(at_end.counts) == {"aborted-visible": 1}
    _, along = check(live=[leaked])
    assert dict(along.counts) == {"aborted-visible": 1}
    assert "transaction 1 was aborted" in along.examples[0].detail


def test_an_unknown_transaction_seen_in_part_is_partial():
    half = log_of(*VISIBLE) + [Sighting(0, 50, HISTORY[4].records[0][1])]
    _, violations = check(final=half)
    assert dict(violations.counts) == {"txn-partial": 1}
    assert "transaction 4" in violations.examples[0].detail


def test_a_record_read_at_two_positions_is_a_duplicate():
    twice = log_of(*VISIBLE)
    first = twice[0]
    _, violations = check(final=twice + [Sighting(first.partition, 77, first.value)])
    assert dict(violations.counts) == {"txn-duplicate": 1}
    # the same position read twice (a consumer re-reading after a reconnect) is not
    _, quiet = check(live=[first, first])
    assert not quiet.counts, quiet.examples


def test_a_value_no_transaction_wrote_is_a_stranger():
    _, violations = check(final=log_of(*VISIBLE) + [Sighting(2, 99, b"rw1 who 1 x 0")])
    assert dict(violations.counts) == {"txn-stranger": 1}


def test_a_partition_not_read_to_its_end_is_unread_and_not_judged_lost():
    final = [s for s in log_of(*VISIBLE) if s.partition != 2]
    result, violations = check(final=final, completed=[0, 1])
    assert dict(violations.counts) == {"txn-unread": 1}
    assert result.unjudged == 2 and not result.final_complete


def test_the_lso_never_goes_back():
    violations = ViolationLog()
    audit = LsoAudit(violations)
    for offset in (0, 5, 5, 9):
        assert audit.observe((TOPIC, 0), offset, "broker 1") is None
    assert audit.observe((TOPIC, 1), 3, "broker 2") is None   # per partition
    assert audit.observe((TOPIC, 0), 8, "broker 3") is not None
    assert dict(violations.counts) == {"lso-backwards": 1}
    assert "went back to 8" in violations.examples[0].detail
    result, _ = check(lso=audit)
    assert result.lso_observations == 6


def test_empty_attempts_are_not_counted():
    result, violations = check(history=HISTORY + [Txn(9, [], "aborted")])
    assert not violations.counts and result.outcomes["aborted"] == 1


def test_the_plan_is_a_function_of_the_seed():
    plans = [[plan_transaction(random.Random(7), n, 3) for n in range(3)] for _ in range(2)]
    assert plans[0] == plans[1]
    rng = random.Random(11)
    many = [plan_transaction(rng, n, 3) for n in range(400)]
    assert all(3 <= len(parts) <= 10 and len(set(parts)) >= 2 for parts, _ in many)
    aborts = sum(abort for _, abort in many)
    assert 40 < aborts < 130, aborts


def test_a_transaction_still_open_is_judged_as_unknown():
    stuck = txn(7, "open")
    result, violations = check(history=HISTORY + [stuck])
    assert not violations.counts and result.outcomes["unknown"] == 3
    _, partial = check(history=HISTORY + [stuck],
                       final=log_of(*VISIBLE) + [Sighting(0, 60, stuck.records[0][1])])
    assert dict(partial.counts) == {"txn-partial": 1}
    assert "still open when checked" in partial.examples[0].detail


def test_the_report_has_a_transactions_line_and_fails_with_their_counts():
    import json

    from broker.verify.checker import CheckResult
    from broker.verify.report import Report

    violations = ViolationLog()
    result, _ = check()
    report = Report(seed=7, brokers=3, duration_s=60, planned=0)
    report.result = CheckResult(violations=violations, acked=10, partitions=6)
    report.transactions = {**result.to_dict(), "topic": TOPIC}
    text = report.render()
    flat = " ".join(text.split())   # lines are wrapped at 100 columns
    assert "transactions 3 committed, 1 aborted (1 planned), 2 unknown (1 read whole, " \
           "1 not at all); 24 records on verify-txn" in flat
    assert text.splitlines()[-1].startswith("verify: PASS ")
    assert json.loads(json.dumps(report.to_dict()))["transactions"]["committed"] == 3

    violations.add("aborted-visible", "verify-txn: transaction 1 was aborted but ...")
    violations.add("lso-backwards", "verify-txn-0: went back")
    report.transactions.update(aborted_visible=1, lso_backwards=1)
    text = report.render()
    assert text.splitlines()[-1] == ("verify: FAIL faults=0 acked=10 lost=0 duplicates=0 "
                                     "hw_regressions=0 divergent=0 aborted_visible=1 "
                                     "lso_backwards=1")
    flat = " ".join(text.split())
    assert "aborted visible 1" in flat and "aborted-visible: verify-txn" in flat
    assert report.to_dict()["extra"]["aborted_visible"] == 1


def test_a_skipped_workload_says_why():
    from broker.verify.checker import CheckResult
    from broker.verify.report import Report

    report = Report(seed=7, brokers=3, duration_s=60, planned=0)
    report.result = CheckResult(violations=ViolationLog())
    report.transactions = {"skipped": "confluent-kafka is not installed"}
    assert "transactions skipped: confluent-kafka is not installed" in report.render()

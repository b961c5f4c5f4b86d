"""check_share, the verify share workload's invariants, on evidence written by hand.

The worker's evidence is fed through its own recording methods (no consumer thread is
started): a record acknowledged to the producer and never acknowledged by the group is
``share-missing``; deliveries beyond the first pass while no more than the records in
flight at faults plus refused commits, and are ``share-duplicates`` past that bound.
"""
from __future__ import annotations

from broker.verify.checker import ViolationLog
from broker.verify.shareload import ShareWorker, check_share

WANTED = {("t", 0, offset) for offset in range(4)}


def worker() -> ShareWorker:
    return ShareWorker("127.0.0.1:1", ["t"])


def deliver(w: ShareWorker, offsets, count: int = 1, refused=frozenset()) -> None:
    keys = [("t", 0, o) for o in offsets]
    for key in keys:
        w._delivered(key, count)
    w._committed(keys, set(refused))


def test_every_record_acknowledged_once_passes():
    w, violations = worker(), ViolationLog()
    deliver(w, range(4))
    summary = check_share(w, WANTED, violations)
    assert not violations.counts
    assert summary["acknowledged"] == 4 and summary["duplicates"] == 0


def test_a_record_never_delivered_to_the_group_is_missing():
    w, violations = worker(), ViolationLog()
    deliver(w, range(3))
    summary = check_share(w, WANTED, violations)
    assert violations.counts["share-missing"] == 1
    assert summary["missing"] == 1


def test_a_delivered_record_whose_commit_answer_was_lost_is_counted_not_missing():
    w, violations = worker(), ViolationLog()
    deliver(w, range(3))
    deliver(w, [3], refused={("t", 0)})  # delivered, its commit's answer lost
    summary = check_share(w, WANTED, violations)
    assert not violations.counts
    assert summary["unconfirmed_not_redelivered"] == 1 and summary["commits_refused"] == 1


def test_a_record_below_the_group_start_offset_is_acknowledged():
    w, violations = worker(), ViolationLog()
    deliver(w, range(4), refused={("t", 0)})  # the broker took it, its answer was lost
    w.starts = {("t", 0): 4}
    summary = check_share(w, WANTED, violations)
    assert not violations.counts
    assert summary["outcome_unknown_to_client"] == 4 and summary["missing"] == 0


def test_redeliveries_are_bounded_by_the_records_in_flight_at_faults():
    w, violations = worker(), ViolationLog()
    w.fault_begun()
    for key in [("t", 0, 0), ("t", 0, 1)]:
        w._delivered(key, 1)  # in flight when the fault hits: their commit never came
    w.fault_ended()
    deliver(w, range(4), count=2)
    summary = check_share(w, WANTED, violations)
    assert not violations.counts, violations.examples
    assert summary["duplicates"] == 2 and summary["duplicate_bound"] == 2
    deliver(w, [2], count=3)  # one more redelivery nothing accounts for
    check_share(w, WANTED, violations)
    assert violations.counts["share-duplicates"] == 1


def test_share_is_a_default_workload_of_verify_and_its_command():
    """``raftwood verify`` runs the share workload unless ``--workloads`` leaves it out."""
    import argparse

    from broker.cli.verify import add_command
    from broker.verify import VerifyOptions

    assert "share" in VerifyOptions().workloads
    parser = argparse.ArgumentParser()
    add_command(parser.add_subparsers())
    assert parser.parse_args(["verify"]).workloads.split(",") == ["records", "txn", "share"]


def test_a_record_delivered_again_after_its_acceptance_committed_is_a_lost_acknowledgement():
    """A commit that carried a record's ACCEPT succeeded, so the broker may never hand
    the record out again: a redelivery after it is an acknowledgement the broker lost."""
    w, violations = worker(), ViolationLog()
    deliver(w, range(4))
    w.fault_begun()
    deliver(w, [1])  # delivered again after its ACCEPT was committed
    w.fault_ended()
    summary = check_share(w, WANTED, violations)
    assert summary["lost_acknowledgements"] == 1
    assert violations.counts["share-lost-acknowledgement"] == 1
    assert summary["duplicates"] == 1 and not violations.counts["share-duplicates"]

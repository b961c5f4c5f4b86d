"""raftwood verify's per-fault measures and the one-leader-per-epoch audit: pure code fed
with made-up observations."""
from __future__ import annotations

from collections import Counter

from broker.testing import build_batch, read_records
from broker.verify.checker import (
    AckedRecord,
    CommittedSnapshots,
    EpochAudit,
    FinalPartition,
    ViolationLog,
    check_final,
)
from broker.verify.payload import encode_value
from broker.verify.recovery import RecoveryStats, longest_gap, stalls
from protocol.records import assign_offset_and_epoch

TP = ("t", 0)


def stored_batch(records, base_offset: int, leader_epoch: int) -> bytes:
    """A batch as a leader stores it: base offset and partitionLeaderEpoch assigned."""
    batch = bytearray(build_batch([(key, value, 0, []) for key, value in records]))
    assign_offset_and_epoch(batch, 0, base_offset, leader_epoch)
    return bytes(batch)


def test_the_longest_gap_is_clipped_to_the_window():
    times = [1.0, 2.0, 2.5, 6.0, 7.0]
    assert longest_gap(times, 2.0, 7.0) == 3.5          # 2.5 -> 6.0
    assert longest_gap(times, 3.0, 5.0) == 2.0          # nothing inside: the whole window
    assert longest_gap(times, 0.0, 1.5) == 1.0          # start -> the first ack
    assert longest_gap([], 4.0, 4.0) == 0.0


def test_stalls_name_the_worst_partition_and_the_cluster_wide_gap():
    times = {("t", 0): [0.0, 1.0, 2.0, 3.0, 4.0], ("t", 1): [0.0, 4.0]}
    overall, worst, worst_tp = stalls(times, 0.0, 4.0)
    assert overall == 1.0 and worst == 4.0 and worst_tp == ("t", 1)


def test_recovery_stats_keep_the_slowest_convergence_and_count_the_unconverged():
    stats = RecoveryStats(bound_s=60)
    stats.add("zombie-leader", 1.5, 3.0, 6.0)
    stats.add("zombie-leader", None, 9.0, 9.0)
    stats.add("flap", 0.2, 0.1, 0.5)
    summary = stats.to_dict()
    assert summary["converged_max_s"] == 1.5 and summary["bound_s"] == 60
    zombie = summary["kinds"]["zombie-leader"]
    assert zombie["faults"] == 2 and zombie["unconverged"] == 1 and zombie["stall_max_s"] == 9.0


def test_two_brokers_advancing_their_hw_in_one_leader_epoch_is_a_conflict():
    violations = ViolationLog()
    audit = EpochAudit(violations)
    assert audit.observe_claim(1, TP, 5, 10) is None
    assert audit.observe_claim(1, TP, 5, 14) is None       # one leader acknowledging
    assert audit.observe_claim(2, TP, 5, 12) is None       # a second claim, no ack yet
    assert audit.observe_claim(2, TP, 5, 13) is not None   # it acknowledges too
    assert violations.count("epoch_conflict") == 1
    assert audit.acknowledgers(TP, 5) == [1, 2]
    assert audit.observe_claim(2, TP, 5, 15) is None       # reported once
    assert "brokers [1, 2] claimed it" in audit.shared_claims()[0]


def test_one_offset_of_one_epoch_never_holds_two_batches():
    violations = ViolationLog()
    audit = EpochAudit(violations)
    assert audit.record_batch(TP, 3, 10, 14, "aaaa", "served by broker 1") is None
    assert audit.record_batch(TP, 3, 10, 14, "aaaa", "broker 2's final log") is None
    assert audit.record_batch(TP, 4, 10, 12, "bbbb", "served by broker 2") is None  # new epoch
    assert audit.record_batch(TP, 3, 10, 14, "cccc", "served by broker 2") is not None
    assert audit.record_batch(TP, 3, 12, 13, "dddd", "served by broker 3") is not None  # overlap
    assert audit.record_batch(TP, 3, 15, 16, "eeee", "served by broker 1") is None
    assert violations.count("epoch_conflict") == 2


def test_acknowledged_records_are_attributed_to_the_epoch_of_their_stored_batch():
    values = [encode_value("kp-0", i) for i in range(4)]
    log = (stored_batch([(b"0", values[0]), (b"1", values[1])], 0, 1)
           + stored_batch([(b"2", values[2]), (b"3", values[3])], 2, 2))
    violations = ViolationLog()
    audit = EpochAudit(violations)
    audit.observe_claim(1, TP, 1, 0)
    audit.observe_claim(1, TP, 1, 2)
    acked = [AckedRecord("t", 0, i, b"%d" % i, values[i]) for i in range(4)]
    partition = FinalPartition(TP, 4, {1: log, 2: log})
    result = check_final(acked, [partition], CommittedSnapshots(violations), violations,
                         lambda data: [(r[0], r[1], r[2]) for r in read_records(data)], audit)
    assert result.lost == 0 and violations.count("epoch_conflict") == 0, violations.examples
    assert result.epochs == {"epochs": 2, "records": 4, "one_leader": 1, "unobserved": 1,
                             "several_claimants": 0}
    assert set(audit.batches) == {(TP, 1), (TP, 2)}
    assert Counter(len(b) for b in audit.batches.values()) == Counter({1: 2})


def test_an_acknowledgement_without_an_offset_is_checked_by_its_value():
    values = [encode_value("ck-1", i) for i in range(3)]
    log = stored_batch([(b"0", values[0]), (b"1", values[1])], 0, 1)
    violations = ViolationLog()
    acked = [AckedRecord("t", 0, 0, b"0", values[0]),
             AckedRecord("t", 0, None, b"1", values[1]),    # found at offset 1
             AckedRecord("t", 0, None, b"2", values[2])]    # nowhere: lost
    result = check_final(acked, [FinalPartition(TP, 2, {1: log})],
                         CommittedSnapshots(violations), violations,
                         lambda data: [(r[0], r[1], r[2]) for r in read_records(data)],
                         EpochAudit(violations))
    assert result.lost == 1 and "t-0@None" in violations.examples[0].detail
    assert any("2 acknowledgements carried no offset" in n and "t-0@1" in n
               for n in result.notes), result.notes
    assert result.epochs["records"] == 2

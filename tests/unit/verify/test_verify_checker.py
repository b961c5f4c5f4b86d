"""raftwood verify's checker catches each kind of violation it exists for — fed
synthetic evidence: a lost acknowledged record, a changed committed byte, an HW or
ListOffsets regression, divergent replicas, an out-of-ISR election, a damaged value —
and stays quiet on a clean run."""
from __future__ import annotations

from broker.testing import build_batch, read_records
from broker.verify.checker import (
    AckedRecord,
    CommittedSnapshots,
    ElectionAudit,
    FinalPartition,
    OffsetAudit,
    PartitionState,
    ViolationLog,
    batch_digest,
    batches_below,
    check_final,
    compare_replicas,
)
from broker.verify.payload import encode_value
from protocol.records import assign_offset_and_epoch, iter_headers

TP = ("t", 0)


def batch(values: list[bytes], base_offset: int, epoch: int = 0) -> bytes:
    data = bytearray(build_batch([(b"k", v, 1_700_000_000_000, []) for v in values]))
    assign_offset_and_epoch(data, 0, base_offset, epoch)
    return bytes(data)


def log_of(*groups: list[bytes], epoch: int = 0) -> bytes:
    """Batches of consecutive offsets from 0, one per group of values."""
    out, offset = b"", 0
    for values in groups:
        out += batch(values, offset, epoch)
        offset += len(values)
    return out


def decode(data: bytes):
    return [(r[0], r[1], r[2]) for r in read_records(data)]


VALUES = [encode_value("kp-0", n) for n in range(6)]
GOOD_LOG = log_of(VALUES[:3], VALUES[3:])
ACKED = [AckedRecord("t", 0, n, b"k", VALUES[n]) for n in range(6)]


def run_check(replicas: dict[int, bytes], acked=ACKED, high_watermark: int = 6,
              snapshots: CommittedSnapshots | None = None, violations=None):
    violations = violations or ViolationLog()
    snapshots = snapshots or CommittedSnapshots(violations)
    partition = FinalPartition(TP, high_watermark, replicas)
    return check_final(list(acked), [partition], snapshots, violations, decode)


def test_a_clean_run_passes():
    result = run_check({1: GOOD_LOG, 2: GOOD_LOG, 3: GOOD_LOG})
    assert result.passed, result.violations.examples
    assert (result.acked, result.lost, result.duplicates, result.divergent) == (6, 0, 0, 0)
    assert result.present == 6 and result.unacked_present == 0


def test_bytes_above_the_high_watermark_may_differ():
    longer = GOOD_LOG + batch([encode_value("kp-0", 99)], 6)
    result = run_check({1: longer, 2: GOOD_LOG, 3: GOOD_LOG})
    assert result.passed, result.violations.examples


def test_a_lost_acknowledged_record_is_detected():
    short = log_of(VALUES[:3])
    result = run_check({1: short, 2: short, 3: short}, high_watermark=3)
    assert not result.passed
    assert result.lost == 3
    assert result.violations.count("lost") == 3
    assert "t-0@3" in result.violations.examples[0].detail


def test_an_acknowledged_record_at_another_offset_counts_as_lost():
    swapped = log_of([VALUES[1], VALUES[0], VALUES[2]], VALUES[3:])
    result = run_check({1: swapped, 2: swapped, 3: swapped})
    assert result.lost == 2


def test_divergent_replicas_are_detected_even_with_equal_lengths():
    other = log_of(VALUES[:3], VALUES[3:], epoch=1)   # same records, another leader epoch
    result = run_check({1: GOOD_LOG, 2: GOOD_LOG, 3: other})
    assert not result.passed
    assert result.divergent == 1
    assert "broker 3" in result.violations.examples[0].detail


def test_a_replica_short_of_the_high_watermark_is_divergent():
    result = run_check({1: GOOD_LOG, 2: GOOD_LOG, 3: log_of(VALUES[:3])})
    assert result.divergent == 1
    assert "end at 3, HW 6" in result.violations.examples[0].detail


def test_a_corrupt_batch_below_the_high_watermark_is_divergent():
    damaged = bytearray(GOOD_LOG)
    damaged[-5] ^= 0xFF                           # CRC now fails on the second batch
    result = run_check({1: bytes(damaged), 2: GOOD_LOG, 3: GOOD_LOG})
    assert result.divergent == 1


def test_a_changed_committed_byte_is_detected():
    violations = ViolationLog()
    snapshots = CommittedSnapshots(violations)
    for header in iter_headers(GOOD_LOG):            # what consumers were served
        snapshots.record_batch(TP, header.base_offset, header.last_offset,
                               batch_digest(GOOD_LOG[header.position:header.position
                                                     + header.size]),
                               header.partition_leader_epoch)
    changed_values = VALUES[:3] + [encode_value("kp-0", 3)[:-1] + b"0"] + VALUES[4:]
    changed = log_of(changed_values[:3], changed_values[3:])
    result = run_check({1: changed, 2: changed, 3: changed}, snapshots=snapshots,
                       violations=violations)
    assert not result.passed
    assert violations.count("committed_changed") == 1
    assert "3..5" in next(v.detail for v in violations.examples
                          if v.kind == "committed_changed")


def test_a_value_read_by_a_consumer_must_stay():
    violations = ViolationLog()
    snapshots = CommittedSnapshots(violations)
    snapshots.record_value(TP, 4, b"k", VALUES[4])
    snapshots.record_value(TP, 5, b"k", b"not what is stored")
    result = run_check({1: GOOD_LOG, 2: GOOD_LOG, 3: GOOD_LOG}, snapshots=snapshots,
                       violations=violations)
    assert violations.count("committed_changed") == 1
    assert not result.passed


def test_a_batch_served_twice_differently_during_the_run_is_detected_at_once():
    violations = ViolationLog()
    snapshots = CommittedSnapshots(violations)
    assert snapshots.record_batch(TP, 10, 12, "aaaa", 1) is None
    assert snapshots.record_batch(TP, 10, 12, "aaaa", 1) is None
    assert snapshots.record_batch(TP, 10, 12, "bbbb", 1).kind == "committed_changed"
    assert snapshots.record_value(TP, 3, None, b"x") is None
    assert snapshots.record_value(TP, 3, None, b"y").kind == "committed_changed"


def test_listoffsets_latest_going_backwards_is_a_regression_across_leaders():
    violations = ViolationLog()
    audit = OffsetAudit(violations)
    assert audit.observe_latest(TP, 10, "broker 1") is None
    assert audit.observe_latest(TP, 12, "broker 2") is None
    assert audit.observe_latest(TP, 12, "broker 2") is None
    found = audit.observe_latest(TP, 11, "broker 3")
    assert found.kind == "hw_regression" and "went back to 11" in found.detail
    assert audit.observe_latest(("t", 1), 0, "broker 3") is None  # another partition
    assert violations.count("hw_regression") == 1


def test_a_leader_hw_going_backwards_within_its_epoch_is_a_regression():
    violations = ViolationLog()
    audit = OffsetAudit(violations)
    assert audit.observe_leader_hw(1, TP, 3, 100) is None
    assert audit.observe_leader_hw(1, TP, 3, 120) is None
    assert audit.observe_leader_hw(1, TP, 3, 119).kind == "hw_regression"
    # a new leader (or epoch) may start below its predecessor's HW: Kafka's rule too
    assert audit.observe_leader_hw(2, TP, 4, 90) is None
    assert audit.observe_leader_hw(1, TP, 5, 80) is None
    assert violations.count("hw_regression") == 1


def test_an_election_from_outside_the_isr_is_detected():
    violations = ViolationLog()
    audit = ElectionAudit(violations)
    assert audit.observe(TP, PartitionState(1, 0, 0, (1, 2, 3))) is None
    assert audit.observe(TP, PartitionState(1, 0, 1, (1, 2))) is None      # ISR shrink
    found = audit.observe(TP, PartitionState(3, 1, 2, (3,)))               # 3 was out
    assert found.kind == "out_of_isr_election" and "broker 3" in found.detail
    assert audit.elections_checked == 1


def test_clean_elections_pass_and_unseen_transitions_are_not_guessed():
    violations = ViolationLog()
    audit = ElectionAudit(violations)
    audit.observe(TP, PartitionState(1, 0, 0, (1, 2, 3)))
    audit.observe(TP, PartitionState(2, 1, 1, (2, 3)))          # clean: 2 was in the ISR
    audit.observe(TP, PartitionState(3, 3, 5, (3,)))            # epochs 2..4 never seen
    # observed out of order (another broker's older image): still paired correctly
    audit.observe(TP, PartitionState(2, 1, 1, (2, 3)))
    audit.observe(TP, PartitionState(-1, 2, 3, (2,)))           # offline: no leader
    assert violations.count("out_of_isr_election") == 0
    assert audit.elections_checked == 1
    assert audit.elections_seen() == 3


def test_an_election_seen_before_its_predecessor_is_still_checked():
    violations = ViolationLog()
    audit = ElectionAudit(violations)
    audit.observe(TP, PartitionState(3, 2, 7, (3,)))
    audit.observe(TP, PartitionState(1, 1, 6, (1, 2)))
    assert violations.count("out_of_isr_election") == 1


def test_duplicates_are_counted_but_do_not_fail_the_run():
    values = VALUES + [VALUES[2]]
    log = log_of(values[:3], values[3:])
    result = run_check({1: log, 2: log, 3: log}, high_watermark=7)
    assert result.duplicates == 1
    assert result.passed


def test_a_damaged_or_foreign_value_in_the_log_fails_the_run():
    values = VALUES + [b"not written by the workload"]
    log = log_of(values[:3], values[3:])
    result = run_check({1: log, 2: log, 3: log}, high_watermark=7)
    assert result.violations.count("bad_value") == 1
    assert not result.passed


def test_unacknowledged_records_in_the_log_are_fine():
    result = run_check({1: GOOD_LOG, 2: GOOD_LOG, 3: GOOD_LOG}, acked=ACKED[:4])
    assert result.passed and result.unacked_present == 2


def test_batches_below_keeps_whole_batches_under_the_high_watermark():
    prefix, headers = batches_below(GOOD_LOG, 5)   # the second batch ends at 5
    assert [h.base_offset for h in headers] == [0]
    prefix, headers = batches_below(GOOD_LOG, 6)
    assert prefix == GOOD_LOG and len(headers) == 2


def test_only_the_first_examples_of_a_kind_are_kept_but_all_are_counted():
    violations = ViolationLog()
    for n in range(50):
        violations.add("lost", f"#{n}")
    assert violations.count("lost") == 50
    assert len(violations.examples) == 5


def test_compare_replicas_returns_the_common_prefix():
    violations = ViolationLog()
    common = compare_replicas(FinalPartition(TP, 6, {1: GOOD_LOG, 2: GOOD_LOG}), violations)
    assert common == GOOD_LOG and not violations.examples

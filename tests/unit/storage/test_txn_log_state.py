"""Transactions in one partition log: the last stable offset, the aborted list, markers.

Kafka's rules (KIP-98) on a real PartitionLog: a transactional batch holds the last stable
offset (LSO) at its first offset until its COMMIT/ABORT marker is below the high
watermark; every ABORT adds (producer, first, last) to the aborted list a read_committed
fetch reports; markers older than the producer's epoch, or than the coordinator epoch of
a previous marker, are refused.  All of it survives a clean close, a crash (no
snapshot written at the end), a truncation that cuts a marker, and retention.
"""
from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from protocol.control import ABORT, COMMIT, build_marker_batch, read_marker
from protocol.records import parse_header, validate_produce_records
from storage import LogConfig, PartitionLog
from storage.producer_state import AbortedTxn, ProducerStateError


def txn_batch(producer_id: int, sequence: int, count: int = 2, epoch: int = 0,
              transactional: bool = True) -> bytearray:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0,
                                        is_transactional=transactional,
                                        producer_id=producer_id, producer_epoch=epoch,
                                        base_sequence=sequence, batch_size=1 << 20)
    for i in range(count):
        builder.append(i, timestamp=1_000 + i, key=b"k%d" % i, value=b"v" * 40, headers=[])
    return validate_produce_records(bytes(builder.build()))[0]


def marker(producer_id: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0):
    return build_marker_batch(producer_id, epoch, coordinator_epoch, commit, 5_000)


@pytest.fixture
def directory(tmp_path):
    return tmp_path / "t-0"


@pytest.fixture
def open_log(directory):
    logs = []

    def _open(**config) -> PartitionLog:
        config.setdefault("segment_bytes", 1024)
        log = PartitionLog.open(directory, LogConfig(**config))
        logs.append(log)
        return log

    yield _open
    for log in logs:
        log.close_handlers()


def append(log: PartitionLog, batch) -> int:
    """Append as leader and let the HW follow (a leader alone in its ISR)."""
    info = log.append_as_leader(batch, 0)
    log.update_high_watermark(log.log_end_offset)
    return info.first_offset


def test_a_marker_batch_decodes_as_kafka_writes_it():
    batch = marker(42, commit=True, epoch=3, coordinator_epoch=9)
    header = parse_header(batch)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.records_count) == (42, 3, 1)
    assert read_marker(batch, header) == (COMMIT, 9)
    assert read_marker(marker(42, commit=False), parse_header(marker(42, False)))[0] == ABORT


def test_an_open_transaction_holds_the_last_stable_offset_until_its_marker_is_replicated(
        open_log):
    log = open_log()
    append(log, txn_batch(1, 0, transactional=False))          # offsets 0-1, plain
    first = append(log, txn_batch(7, 0))                        # 2-3, producer 7's txn
    append(log, txn_batch(8, 0))                                # 4-5, producer 8's txn
    assert log.high_watermark == 6 and log.last_stable_offset == first == 2
    end = log.append_as_leader(marker(7, commit=True), 0).first_offset   # 6
    assert log.last_stable_offset == 2, "the marker is not below the HW yet"
    log.update_high_watermark(end + 1)
    assert log.last_stable_offset == 4, "producer 8's transaction is still open"
    append(log, marker(8, commit=False))                        # 7
    assert log.last_stable_offset == log.high_watermark == 8
    assert log.aborted_transactions(0, 8) == [AbortedTxn(8, 4, 7, 8)]
    assert log.aborted_transactions(8, 8) == []


def test_aborted_lookup_returns_only_transactions_with_records_in_the_range(open_log):
    log = open_log()
    for producer_id in (1, 2, 3):
        append(log, txn_batch(producer_id, 0))
        append(log, marker(producer_id, commit=producer_id != 2))
    # producer 1: 0-1 + marker 2; producer 2: 3-4 + marker 5 (aborted); producer 3: 6-8
    assert [t.producer_id for t in log.aborted_transactions(0, 9)] == [2]
    assert log.aborted_transactions(6, 9) == []
    assert log.aborted_transactions(0, 3) == [], "its records start at 3"


def test_markers_from_an_older_producer_or_coordinator_epoch_are_refused(open_log):
    log = open_log()
    append(log, txn_batch(7, 0, epoch=2))
    append(log, marker(7, commit=True, epoch=2, coordinator_epoch=5))
    state = log.producer_state
    with pytest.raises(ProducerStateError) as fenced:
        state.check_marker(7, 1, 5)
    assert fenced.value.code_name == "INVALID_PRODUCER_EPOCH"
    with pytest.raises(ProducerStateError) as old_coordinator:
        state.check_marker(7, 2, 4)
    assert old_coordinator.value.code_name == "TRANSACTION_COORDINATOR_FENCED"
    state.check_marker(7, 3, 5)  # a bumped epoch (the coordinator fenced the producer)


def test_a_marker_with_a_bumped_epoch_ends_the_transaction_and_fences_old_batches(open_log):
    log = open_log()
    append(log, txn_batch(7, 0, epoch=0))
    append(log, marker(7, commit=False, epoch=1))   # the coordinator aborted on timeout
    assert log.last_stable_offset == log.high_watermark
    with pytest.raises(ProducerStateError) as fenced:
        log.producer_state.check(parse_header(txn_batch(7, 2, epoch=0)))
    assert fenced.value.code_name == "INVALID_PRODUCER_EPOCH"


@pytest.mark.parametrize("close", ["clean", "crash"])
def test_open_and_aborted_transactions_survive_a_reopen(open_log, directory, close):
    log = open_log()
    for n in range(12):  # several segments (1 KiB each), so the reopen uses a snapshot
        append(log, txn_batch(100 + n, 0))
        append(log, marker(100 + n, commit=n % 3 != 0))
    open_first = append(log, txn_batch(7, 0))
    aborted, lso = list(log.producer_state.aborted), log.last_stable_offset
    assert len(aborted) == 4 and lso == open_first
    if close == "clean":
        log.close()
    else:
        log.close_handlers()
    again = open_log()
    assert again.producer_state.aborted == aborted
    assert again.producer_state.ongoing_txns == {7: open_first}
    again.update_high_watermark(again.log_end_offset)
    assert again.last_stable_offset == open_first
    append(again, marker(7, commit=True))
    assert again.last_stable_offset == again.log_end_offset


def test_a_truncation_that_cuts_a_marker_reopens_its_transaction(open_log):
    log = open_log()
    first = append(log, txn_batch(7, 0))
    cut_at = append(log, marker(7, commit=False))
    assert log.producer_state.aborted and not log.producer_state.ongoing_txns
    log.truncate_to(cut_at)
    assert log.producer_state.aborted == []
    assert log.producer_state.ongoing_txns == {7: first}


def test_retention_forgets_aborted_transactions_below_the_log_start(open_log):
    log = open_log()
    for n in range(10):
        append(log, txn_batch(100 + n, 0))
        append(log, marker(100 + n, commit=False))
    middle = log.segments[len(log.segments) // 2].base_offset
    log.maybe_increment_log_start_offset(middle, "test")
    assert log.producer_state.aborted
    assert all(t.last_offset >= middle for t in log.producer_state.aborted)


def test_a_truncation_above_every_marker_keeps_the_last_stable_offset_at_the_hw(open_log):
    """A follower truncating its uncommitted tail (above every marker) replays its producer
    state; the transactions that replay closes are below the high watermark, so the last
    stable offset stays at it instead of falling back to the first replayed transaction
    (a new leader would answer read_committed ListOffsets with it: the LSO went back)."""
    log = open_log()
    append(log, txn_batch(7, 0))                                # 0-1, producer 7's txn
    append(log, marker(7, commit=True))                         # 2
    append(log, txn_batch(8, 0))                                # 3-4, producer 8's txn
    append(log, marker(8, commit=False))                        # 5
    high_watermark = log.high_watermark
    assert log.last_stable_offset == high_watermark == 6
    log.append_as_leader(txn_batch(1, 0, transactional=False), 0)   # 6-7, above the HW
    log.truncate_to(high_watermark)
    assert log.log_end_offset == log.high_watermark == 6
    assert log.last_stable_offset == 6, "the LSO went back to a closed transaction"


@pytest.mark.parametrize("close", ["clean", "crash"])
def test_a_reopened_log_keeps_the_last_stable_offset_at_its_high_watermark(open_log, close):
    """A broker restarted with closed transactions below its checkpointed high watermark
    answers that high watermark as the LSO at once, not the first replayed transaction's
    offset until the high watermark next moves (the LSO went back after a restart)."""
    log = open_log()
    append(log, txn_batch(7, 0))                                # 0-1
    append(log, marker(7, commit=True))                         # 2
    append(log, txn_batch(8, 0))                                # 3-4
    append(log, marker(8, commit=False))                        # 5
    assert log.last_stable_offset == log.high_watermark == 6
    log.checkpoint()
    if close == "clean":
        log.close()
    else:
        log.close_handlers()
    again = open_log()
    assert again.high_watermark == 6
    assert again.last_stable_offset == 6, "the LSO went back to a closed transaction"

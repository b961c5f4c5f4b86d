"""Idempotent-producer state (storage/producer_state.py) and how a partition uses it.

The first part feeds ProducerStateManager batch headers directly: Kafka's rules for
duplicates (the last five batches), sequence gaps, epochs, the 2^31 wrap, truncation
(reload, then replay of what is left) and retention.  The second part drives
broker.replication.partition.Partition over a real log in tmp_path: a leader answers a
retry with the original offsets, the log restores the state when the partition is opened
again, a follower's log builds it from replicated batches so a new leader still
recognises a retry, and a follower's truncation forgets the batches it cut.  Snapshots
and every other way the log keeps the state in step: tests/unit/storage/.
"""
from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from broker.replication.partition import Partition, PartitionError
from protocol.errors import ErrorCode
from protocol.records import CONTROL_FLAG, BatchHeader, validate_produce_records
from storage import LogConfig, PartitionLog
from storage.producer_state import (
    BATCHES_KEPT,
    MAX_SEQUENCE,
    BatchMetadata,
    ProducerStateError,
    ProducerStateManager,
    in_sequence,
    last_sequence_of,
)

PID = 4000


def header(sequence: int, count: int = 1, *, producer_id: int = PID, epoch: int = 0,
           base_offset: int = 0, control: bool = False) -> BatchHeader:
    return BatchHeader(position=0, base_offset=base_offset, batch_length=49 + 10 * count,
                       partition_leader_epoch=0, magic=2, crc=0,
                       attributes=CONTROL_FLAG if control else 0,
                       last_offset_delta=count - 1, base_timestamp=0, max_timestamp=0,
                       producer_id=producer_id, producer_epoch=epoch,
                       base_sequence=sequence, records_count=count)


class Log:
    """A manager plus the headers "in the log": ``append`` checks, then records like a
    leader; ``truncate_to`` reloads and replays like PartitionLog (no snapshots here)."""

    def __init__(self):
        self.state = ProducerStateManager()
        self.next_offset = 0
        self.headers: list[BatchHeader] = []

    def truncate_to(self, offset: int) -> None:
        self.headers = [h for h in self.headers if h.last_offset < offset]
        self.next_offset = self.headers[-1].next_offset if self.headers else 0
        start = self.state.truncate_and_reload(0, self.next_offset)
        for h in self.headers:
            if h.base_offset >= start:
                self.state.update(h)

    def append(self, sequence: int, count: int = 1, **kwargs):
        """None when appended (offsets assigned), the original BatchMetadata for a
        duplicate; ProducerStateError propagates."""
        h = header(sequence, count, **kwargs)
        duplicate = self.state.check(h)
        if duplicate is not None:
            return duplicate
        h = h._replace(base_offset=self.next_offset)
        self.state.update(h)
        self.headers.append(h)
        self.next_offset += count
        return None


def refused(log: Log, sequence: int, count: int = 1, **kwargs) -> str:
    with pytest.raises(ProducerStateError) as info:
        log.append(sequence, count, **kwargs)
    return info.value.code_name


# -- the rules ------------------------------------------------------------------------------

def test_batches_without_producer_id_are_never_checked_or_tracked():
    log = Log()
    for _ in range(3):
        assert log.append(-1, 5, producer_id=-1, epoch=-1) is None
    assert log.state.producers == {}


def test_an_unknown_producer_may_start_at_any_sequence():
    log = Log()
    assert log.append(1234, 2) is None
    assert log.state.producers[PID].last_sequence == 1235


def test_in_sequence_batches_are_appended_and_a_gap_is_refused():
    log = Log()
    assert log.append(0, 3) is None
    assert log.append(3, 2) is None
    assert refused(log, 6) == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert refused(log, 4) == "OUT_OF_ORDER_SEQUENCE_NUMBER"  # overlaps, not a duplicate
    assert log.next_offset == 5
    assert log.append(5, 1) is None


def test_a_retry_of_each_of_the_last_five_batches_gets_its_original_offsets():
    log = Log()
    for n in range(7):
        log.append(2 * n, 2)
    kept = log.state.producers[PID].batches
    assert len(kept) == BATCHES_KEPT
    for n in range(2, 7):
        assert log.append(2 * n, 2) == BatchMetadata(2 * n, 2 * n + 1, 2 * n, 2 * n + 1)
    for n in (0, 1):  # evicted from the window: an out-of-order sequence now
        assert refused(log, 2 * n, 2) == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert log.next_offset == 14


def test_a_duplicate_must_match_first_and_last_sequence():
    log = Log()
    log.append(0, 4)
    assert log.append(0, 4) == BatchMetadata(0, 3, 0, 3)
    assert refused(log, 0, 3) == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert refused(log, 0, 5) == "OUT_OF_ORDER_SEQUENCE_NUMBER"


def test_an_older_epoch_is_fenced_even_for_an_exact_retry():
    log = Log()
    log.append(0, 2, epoch=3)
    assert log.append(0, 2, epoch=4) is None       # a bumped epoch starts at 0
    assert refused(log, 0, 2, epoch=3) == "INVALID_PRODUCER_EPOCH"
    assert refused(log, 2, 1, epoch=3) == "INVALID_PRODUCER_EPOCH"
    assert log.state.producers[PID].producer_epoch == 4


def test_a_new_epoch_must_start_at_sequence_zero():
    log = Log()
    log.append(0, 5, epoch=0)
    assert refused(log, 5, 1, epoch=1) == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert log.append(0, 1, epoch=1) is None
    # the new epoch forgets the old one's batches: a retry of one is fenced
    assert len(log.state.producers[PID].batches) == 1
    assert refused(log, 0, 5, epoch=0) == "INVALID_PRODUCER_EPOCH"


def test_producers_are_independent():
    log = Log()
    log.append(0, 2, producer_id=1)
    log.append(100, 2, producer_id=2)
    assert log.append(2, 1, producer_id=1) is None
    assert refused(log, 2, 1, producer_id=2) == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert log.append(0, 2, producer_id=1) == BatchMetadata(0, 1, 0, 1)


def test_control_batches_do_not_change_the_state():
    log = Log()
    log.append(0, 2)
    log.state.update(header(-1, 1, base_offset=2, control=True))
    assert log.state.producers[PID].last_sequence == 1


# -- wraparound at 2^31 - 1 -----------------------------------------------------------------

@pytest.mark.parametrize("first, count, last", [
    (0, 1, 0), (5, 10, 14), (MAX_SEQUENCE, 1, MAX_SEQUENCE), (MAX_SEQUENCE, 2, 0),
    (MAX_SEQUENCE - 1, 5, 2),
])
def test_last_sequence_wraps_at_max_int(first, count, last):
    assert last_sequence_of(header(first, count)) == last


def test_in_sequence_after_max_int_is_zero_only():
    assert in_sequence(MAX_SEQUENCE, 0)
    assert in_sequence(MAX_SEQUENCE - 1, MAX_SEQUENCE)
    assert not in_sequence(MAX_SEQUENCE, MAX_SEQUENCE)
    assert not in_sequence(MAX_SEQUENCE, 1)


def test_a_producer_goes_on_across_the_wrap():
    log = Log()
    assert log.append(MAX_SEQUENCE - 2, 2) is None      # ..-2, ..-1
    assert log.append(MAX_SEQUENCE, 3) is None          # 2^31-1, 0, 1 (wraps inside)
    assert log.state.producers[PID].last_sequence == 1
    assert log.append(2, 1) is None
    assert log.append(MAX_SEQUENCE, 3) == BatchMetadata(MAX_SEQUENCE, 1, 2, 4)
    assert refused(log, 0, 1) == "OUT_OF_ORDER_SEQUENCE_NUMBER"


# -- truncation and retention ---------------------------------------------------------------

def test_truncate_to_forgets_batches_at_and_after_the_offset():
    log = Log()
    for n in range(4):
        log.append(3 * n, 3)                           # offsets 0-2, 3-5, 6-8, 9-11
    log.truncate_to(6)
    entry = log.state.producers[PID]
    assert [b.first_offset for b in entry.batches] == [0, 3]
    assert entry.last_sequence == 5
    assert log.state.map_end_offset == log.next_offset == 6
    assert log.append(6, 3) is None                    # the cut batch is new again
    assert log.state.producers[PID].batches[-1] == BatchMetadata(6, 8, 6, 8)


def test_truncate_to_below_every_batch_forgets_the_producer():
    log = Log()
    log.append(10, 2)
    log.truncate_to(0)
    assert PID not in log.state.producers
    assert log.append(500, 1) is None                  # unknown again: any sequence


def test_truncation_brings_back_batches_that_had_left_the_window():
    """Kafka reloads rather than cuts: after truncation the producer keeps its last five
    batches *of the shorter log*, so a retry of one that had been pushed out of the
    window is still answered as a duplicate."""
    log = Log()
    for n in range(7):
        log.append(n, 1)                               # offsets 0..6
    log.truncate_to(5)
    assert [b.first_offset for b in log.state.producers[PID].batches] == [0, 1, 2, 3, 4]
    assert log.append(0, 1) == BatchMetadata(0, 0, 0, 0)


def test_truncate_before_forgets_producers_wholly_below_the_log_start():
    log = Log()
    log.append(0, 5, producer_id=1)                    # offsets 0-4
    log.append(0, 5, producer_id=2)                    # offsets 5-9
    log.state.truncate_before(5)
    assert set(log.state.producers) == {2}
    log.state.truncate_before(10)
    assert log.state.producers == {}


# -- a partition over a real log --------------------------------------------------------------

def client_batch(producer_id: int, epoch: int, sequence: int, count: int):
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=producer_id, producer_epoch=epoch,
                                        base_sequence=sequence, batch_size=1 << 20)
    for i in range(count):
        builder.append(i, timestamp=1_000 + i, key=None, value=b"v%d" % (sequence + i),
                       headers=[])
    return validate_produce_records(bytes(builder.build()))


def open_partition(tmp_path, name: str, node_id: int) -> Partition:
    log = PartitionLog.open(tmp_path / name, LogConfig())
    return Partition(topic="t", index=0, topic_id="AAAAAAAAAAAAAAAAAAAAAA", log=log,
                     node_id=node_id)


def leader_append(partition: Partition, sequence: int, count: int, epoch: int = 0):
    """(first offset, last offset, duplicate?) of one client batch appended with acks=1."""
    batch, h = client_batch(PID, epoch, sequence, count)
    info, duplicate = partition.append_as_leader(batch, h, 1)
    return info.first_offset, info.last_offset, duplicate


def test_leader_answers_a_retry_with_the_original_offsets(tmp_path):
    leader = open_partition(tmp_path, "t-0", 1)
    leader.make_leader(0, 0, [1], [1])
    assert leader_append(leader, 0, 3) == (0, 2, False)
    assert leader_append(leader, 3, 2) == (3, 4, False)
    assert leader_append(leader, 0, 3) == (0, 2, True)
    assert leader.log_end_offset == 5
    with pytest.raises(PartitionError) as info:
        leader_append(leader, 9, 1)
    assert info.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert leader_append(leader, 0, 1, epoch=1) == (5, 5, False)
    with pytest.raises(PartitionError) as info:
        leader_append(leader, 5, 1, epoch=0)
    assert info.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert leader.log_end_offset == 6
    leader.log.close()


def test_state_is_rebuilt_from_the_log_when_the_partition_opens(tmp_path):
    leader = open_partition(tmp_path, "t-0", 1)
    leader.make_leader(0, 0, [1], [1])
    for n in range(7):
        leader_append(leader, 2 * n, 2)
    before = {pid: (e.producer_epoch, list(e.batches))
              for pid, e in leader.log.producer_state.producers.items()}
    leader.log.close()
    reopened = open_partition(tmp_path, "t-0", 1)
    after = {pid: (e.producer_epoch, list(e.batches))
             for pid, e in reopened.log.producer_state.producers.items()}
    assert after == before
    reopened.make_leader(1, 1, [1], [1])
    assert leader_append(reopened, 12, 2) == (12, 13, True)
    assert leader_append(reopened, 14, 1) == (14, 14, False)
    reopened.log.close()


def test_a_follower_builds_the_state_so_a_new_leader_recognises_retries(tmp_path):
    leader = open_partition(tmp_path, "leader-0", 1)
    follower = open_partition(tmp_path, "follower-0", 2)
    leader.make_leader(0, 0, [1, 2], [1, 2])
    follower.make_follower(1, 0, 0, [1, 2], [1, 2])
    leader_append(leader, 0, 3)
    leader_append(leader, 3, 3)
    fetched = leader.read(0, 1 << 20, replica_id=2)
    follower.append_as_follower(fetched.records, fetched.log_end_offset)
    assert follower.log_end_offset == 6
    # the leader dies before answering the second batch; the client retries on the follower
    follower.make_leader(1, 1, [1, 2], [2])
    assert leader_append(follower, 3, 3) == (3, 5, True)
    assert leader_append(follower, 6, 1) == (6, 6, False)
    leader.log.close()
    follower.log.close()


def test_a_follower_truncation_forgets_the_batches_it_cut(tmp_path):
    leader = open_partition(tmp_path, "leader-0", 1)
    follower = open_partition(tmp_path, "follower-0", 2)
    leader.make_leader(0, 0, [1, 2], [1, 2])
    follower.make_follower(1, 0, 0, [1, 2], [1, 2])
    leader_append(leader, 0, 2)
    leader_append(leader, 2, 2)
    fetched = leader.read(0, 1 << 20, replica_id=2)
    follower.append_as_follower(fetched.records, fetched.log_end_offset)
    follower.truncate_to(2)                            # divergence found at offset 2
    follower.make_leader(1, 1, [1, 2], [2])
    # the cut batch was never committed: its retry is appended again, not "duplicate"
    assert leader_append(follower, 2, 2) == (2, 3, False)
    leader.log.close()
    follower.log.close()

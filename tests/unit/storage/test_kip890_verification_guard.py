"""The partition side of KIP-890 part 1 in the producer state: which transactional
batches need the coordinator's confirmation, and the guard a marker voids."""
from __future__ import annotations

from protocol.control import ABORT, COMMIT
from protocol.records import CONTROL_FLAG, TRANSACTIONAL_FLAG, BatchHeader
from storage.producer_state import ProducerStateManager

PID = 7000


def header(*, epoch: int = 0, base_offset: int = 0, transactional: bool = True,
           control: bool = False, producer_id: int = PID) -> BatchHeader:
    attributes = (TRANSACTIONAL_FLAG if transactional else 0) | (CONTROL_FLAG if control else 0)
    return BatchHeader(position=0, base_offset=base_offset, batch_length=59,
                       partition_leader_epoch=0, magic=2, crc=0, attributes=attributes,
                       last_offset_delta=0, base_timestamp=0, max_timestamp=0,
                       producer_id=producer_id, producer_epoch=epoch, base_sequence=0,
                       records_count=1)


def test_only_a_transactional_batch_that_opens_a_transaction_needs_verification():
    state = ProducerStateManager()
    assert not state.needs_verification(header(transactional=False))
    assert not state.needs_verification(header(producer_id=-1))
    assert state.needs_verification(header())
    state.update(header())  # the transaction is open here now
    assert not state.needs_verification(header(base_offset=1))
    assert state.needs_verification(header(epoch=1, base_offset=1))  # a newer epoch
    state.update(header(base_offset=1, control=True), marker=(COMMIT, 0))
    assert state.needs_verification(header(base_offset=2))  # the next transaction


def test_a_marker_for_the_producer_voids_its_verification():
    state = ProducerStateManager()
    guard = state.start_verification(PID)
    other = state.start_verification(PID + 1)
    assert state.verification_holds(PID, guard)
    state.update(header(control=True), marker=(ABORT, 0))
    assert not state.verification_holds(PID, guard)
    assert state.verification_holds(PID + 1, other)  # another producer's stays
    newer = state.start_verification(PID)
    assert state.verification_holds(PID, newer) and not state.verification_holds(PID, guard)


def test_pipelined_writes_of_one_transaction_share_the_guard():
    """A second write verified while the first is still being verified must not void the
    first one's answer (a producer has up to five requests in flight)."""
    state = ProducerStateManager()
    first = state.start_verification(PID)
    second = state.start_verification(PID)
    assert first is second and state.verification_holds(PID, first)


def test_a_reset_log_forgets_every_guard():
    state = ProducerStateManager()
    guard = state.start_verification(PID)
    state.reset(0)
    assert not state.verification_holds(PID, guard)

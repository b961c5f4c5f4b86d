"""__share_group_state records: snapshots round-trip, the loader keeps the newest of
each key by (leader epoch, sequence), and a tombstone or a foreign value is handled."""
from __future__ import annotations

import pytest

from broker.coordinator.batches import build_batch
from broker.share.coordinator import _Loader
from broker.share.partition import RecordState, StateBatch
from broker.share.records import (
    ShareSnapshot,
    ShareStateError,
    decode_value,
    encode_value,
    share_key,
)

KEY = share_key("g:with:colons", "8c7d1f3e-0000-4000-8000-000000000001", 3)


def snapshot(leader_epoch: int, seq: int, start: int = 10) -> ShareSnapshot:
    return ShareSnapshot(leader_epoch, seq, start,
                         (StateBatch(start, start + 1, RecordState.ACKNOWLEDGED, 1),
                          StateBatch(start + 2, start + 2, RecordState.AVAILABLE, 3)))


def test_a_snapshot_round_trips():
    assert decode_value(encode_value(snapshot(2, 7))) == snapshot(2, 7)
    with pytest.raises(ShareStateError):
        decode_value(b'{"leader_epoch": 1}')
    with pytest.raises(ShareStateError):
        decode_value(b"\xff not json")


def at(batch: bytes, base_offset: int) -> bytes:
    """``batch`` as the log holds it, at ``base_offset``."""
    return base_offset.to_bytes(8, "big") + batch[8:]


def test_the_loader_keeps_the_newest_snapshot_and_honours_tombstones():
    other = share_key("h", "8c7d1f3e-0000-4000-8000-000000000001", 0)
    first = build_batch([(KEY.encode(), encode_value(snapshot(1, 5, start=20))),
                         (KEY.encode(), encode_value(snapshot(2, 1, start=30))),
                         (KEY.encode(), encode_value(snapshot(1, 9, start=40))),
                         (other.encode(), encode_value(snapshot(1, 1)))], 0)
    second = at(build_batch([(other.encode(), None), (b"junk", b"not a snapshot")], 0), 4)
    loader = _Loader(0)
    assert loader.apply(first + second, 0) == 6
    assert loader.snapshots == {KEY: snapshot(2, 1, start=30)}, \
        "epoch 2 beats a later-written epoch 1; the tombstone removed the other key"

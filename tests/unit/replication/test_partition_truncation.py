"""A follower reconciling with its leader drops its epochs the leader does not have —
also an epoch it was elected in but never wrote (found by ``raftwood verify --seed 11``).

Broker 1, follower in epoch 5 at LEO 2550, is elected leader in epoch 6 (its epoch
cache records 6@2550) and killed before writing anything; broker 2, still leading
epoch 5 until it hears of the change, has epoch-5 batches beyond 2550 and leads epoch
7.  Broker 1 restarts as a follower: OffsetForLeaderEpoch(6) is answered with epoch 5
ending past 2550, so the divergence point is 2550 = its LEO.  No byte is cut — and if
the epoch-6 entry stays, every epoch-5 batch fetched at 2550 is refused as older than
the latest epoch, forever (the replica never catches up).
"""
from __future__ import annotations

from broker.replication.partition import Partition, PartitionSettings
from broker.testing import build_batch
from protocol.records import assign_offset_and_epoch
from storage.config import LogConfig
from storage.log import PartitionLog


def leader_batch(values: list[bytes], base_offset: int, epoch: int) -> bytes:
    data = bytearray(build_batch([(None, v, 1_000, []) for v in values]))
    assign_offset_and_epoch(data, 0, base_offset, epoch)
    return bytes(data)


def test_truncation_at_the_log_end_drops_an_epoch_that_wrote_nothing(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    partition = Partition("t", 0, "topic-id", log, 1, PartitionSettings())
    partition.make_follower(2, 5, 1, [1, 2, 3], [1, 2, 3])
    partition.append_as_follower(leader_batch([b"a", b"b"], 0, 5), 0)
    partition.make_leader(6, 2, [1, 2, 3], [1, 2, 3])      # elected, writes nothing
    assert log.epoch_cache.epoch_entries()[-1] == (6, 2)
    partition.make_follower(2, 7, 3, [1, 2, 3], [2, 3])

    # OffsetForLeaderEpoch(6) -> the leader's epoch 5 ends at 4: diverge at min(4, 2) = 2
    partition.truncate_to(2)

    assert log.log_end_offset == 2
    assert log.epoch_cache.latest_epoch == 5
    partition.append_as_follower(leader_batch([b"c", b"d"], 2, 5), 4)   # accepted now
    assert log.log_end_offset == 4


def test_truncation_at_the_log_end_keeps_epochs_that_start_below_it(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    partition = Partition("t", 0, "topic-id", log, 1, PartitionSettings())
    partition.make_follower(2, 5, 1, [1, 2, 3], [1, 2, 3])
    partition.append_as_follower(leader_batch([b"a"], 0, 3), 0)
    partition.append_as_follower(leader_batch([b"b"], 1, 5), 0)
    partition.truncate_to(2)
    assert log.epoch_cache.epoch_entries() == [(3, 0), (5, 1)]
    assert log.log_end_offset == 2

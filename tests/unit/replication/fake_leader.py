"""A leader broker in the test process, for the replica fetcher (Kafka's MockLeaderEndPoint).

``FakeLeaderEndpoint`` answers Fetch and OffsetForLeaderEpoch from real ``Partition``
objects that lead in ``tmp_path``, the way the broker's handlers do
(``broker/api/fetch.py``, ``broker/api/log_offsets.py``; ``ReplicaManager.fetch`` records
the follower's fetch offset first, which may move the leader's high watermark).  It
counts its calls and can be told to be unreachable, unaddressable, to answer a
request-level error, to rewrite its answers, or to run a hook while a fetch is "on the
wire".

``replica_with_history`` builds a replica whose log holds given batches with given
leader epochs, so leaders and followers can start from any divergent history.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from broker.replication.leader_endpoint import (
    EpochEndOffset,
    EpochQuery,
    FetchedData,
    FetchResult,
    LeaderUnavailable,
    PartitionFetch,
)
from broker.replication.partition import Partition, PartitionError, PartitionSettings
from broker.testing import build_batch
from protocol.errors import ErrorCode
from protocol.records import assign_offset_and_epoch, iter_headers, validate_produce_records
from storage.config import LogConfig
from storage.log import PartitionLog

Key = tuple[str, int]


class FakeLeaderEndpoint:
    """The leader ``Partition`` objects of one broker, reached without a network.

    ``replica_id``: the follower asking (its fetches are recorded on the leader).
    ``long_poll_s``: how long a fetch that finds no bytes and no error waits before
    answering (a real leader waits ``max_wait_ms``); keeps a fetcher loop from spinning.
    """

    def __init__(self, replica_id: int, *leaders: Partition, long_poll_s: float = 0.01):
        self.replica_id = replica_id
        self.leaders: dict[Key, Partition] = {p.key: p for p in leaders}
        self.long_poll_s = long_poll_s
        self.addressable = True
        self.unreachable = False
        self.request_error = ErrorCode.NONE
        self.during_fetch: Callable[[], None] | None = None
        self.rewrite: Callable[[FetchedData], FetchedData] | None = None
        self.fetches: list[list[PartitionFetch]] = []
        self.epoch_queries: list[list[EpochQuery]] = []
        self.closed = 0

    def ready(self) -> bool:
        return self.addressable

    async def fetch(self, partitions: list[PartitionFetch], session=None) -> FetchResult:
        """A leader without fetch sessions: every answer says session 0, so the
        fetcher keeps listing every partition."""
        self.fetches.append(list(partitions))
        await asyncio.sleep(0)  # a network round trip always yields to the loop
        if self.unreachable:
            raise LeaderUnavailable("fake leader: connection refused")
        if self.request_error != ErrorCode.NONE:
            return FetchResult(self.request_error, {})
        answers = self._read_all(partitions)
        if not any(a.records or a.error_code for a in answers.values()):
            await asyncio.sleep(self.long_poll_s)
            answers = self._read_all(partitions)
        if self.during_fetch is not None:
            self.during_fetch()  # the answer is already on its way back
        return FetchResult(ErrorCode.NONE, answers)

    async def offsets_for_leader_epoch(self, partitions: list[EpochQuery]
                                       ) -> dict[Key, EpochEndOffset]:
        self.epoch_queries.append(list(partitions))
        await asyncio.sleep(0)
        if self.unreachable:
            raise LeaderUnavailable("fake leader: connection refused")
        return {(q.topic, q.partition): self._end_offset(q) for q in partitions}

    async def close(self) -> None:
        self.closed += 1

    def _read_all(self, partitions: list[PartitionFetch]) -> dict[Key, FetchedData]:
        rewrite = self.rewrite or (lambda data: data)
        return {(p.topic, p.partition): rewrite(self._read(p)) for p in partitions}

    def _read(self, p: PartitionFetch) -> FetchedData:
        leader = self.leaders.get((p.topic, p.partition))
        if leader is None:
            return FetchedData(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if leader.is_leader and leader.update_follower_fetch(
                self.replica_id, p.fetch_offset, int(time.time() * 1000)):
            leader.maybe_increment_high_watermark()
        try:
            read = leader.read(p.fetch_offset, p.max_bytes, replica_id=self.replica_id,
                               current_leader_epoch=p.current_leader_epoch)
        except PartitionError as exc:
            hw = leader.high_watermark if exc.code == ErrorCode.OFFSET_OUT_OF_RANGE else -1
            return FetchedData(exc.code, hw, leader.log_start_offset)
        return FetchedData(ErrorCode.NONE, read.high_watermark, read.log_start_offset,
                           bytes(read.records))

    def _end_offset(self, q: EpochQuery) -> EpochEndOffset:
        leader = self.leaders.get((q.topic, q.partition))
        try:
            if leader is None:
                raise PartitionError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            leader.check_online()
            if not leader.is_leader:
                raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            leader.check_leader_epoch(q.current_leader_epoch)
            epoch, end_offset = leader.end_offset_for_epoch(q.leader_epoch)
            return EpochEndOffset(ErrorCode.NONE, epoch, end_offset)
        except PartitionError as exc:
            return EpochEndOffset(exc.code, -1, -1)


# -- replicas with a given history ------------------------------------------------------

def open_replica(tmp_path, node_id: int, start_offset: int = 0) -> Partition:
    """Partition t-0 of broker ``node_id`` in ``tmp_path/broker-<id>``, empty, neither
    leading nor following; its log starts at ``start_offset``."""
    log = PartitionLog.open(tmp_path / f"broker-{node_id}" / "t-0", LogConfig())
    partition = Partition("t", 0, "topic-id", log, node_id, PartitionSettings())
    if start_offset:
        partition.truncate_fully_and_start_at(start_offset)
    return partition


def epoch_batch(base_offset: int, epoch: int, count: int) -> bytes:
    """A batch of ``count`` records written at ``base_offset`` in leader epoch ``epoch``;
    its values name both, so the same history gives the same bytes."""
    values = [f"e{epoch}@{base_offset + i}".encode() for i in range(count)]
    data = bytearray(build_batch([(None, v, 1_000, []) for v in values]))
    assign_offset_and_epoch(data, 0, base_offset, epoch)
    return bytes(data)


def replica_with_history(tmp_path, node_id: int, batches: list[tuple[int, int]], *,
                         high_watermark: int = 0, start_offset: int = 0) -> Partition:
    """A replica whose log holds one batch per (leader epoch, record count), in order.
    Where a leader's and a follower's histories agree they must agree batch by batch
    too: batches replicate whole, and a fetch returns the batch holding its offset."""
    partition = open_replica(tmp_path, node_id, start_offset)
    offset = start_offset
    for epoch, count in batches:
        partition.append_as_follower(epoch_batch(offset, epoch, count), high_watermark)
        offset += count
    return partition


def produce(leader: Partition, count: int) -> None:
    """A client's batch of ``count`` records, appended by the leader in its epoch."""
    batch, header = validate_produce_records(
        build_batch([(None, b"new-%d" % i, 2_000, []) for i in range(count)]))
    leader.append_as_leader(batch, header, 1)


def batches_of(partition: Partition) -> list[tuple[int, int, int]]:
    """(base offset, last offset, leader epoch) of every batch in the log."""
    return [(h.base_offset, h.last_offset, h.partition_leader_epoch)
            for h in iter_headers(log_bytes(partition))]


def log_bytes(partition: Partition) -> bytes:
    """The whole log, batch by batch, as a follower would fetch it."""
    if partition.log_end_offset == partition.log_start_offset:
        return b""
    return bytes(partition.log.read(partition.log_start_offset, 1 << 24))

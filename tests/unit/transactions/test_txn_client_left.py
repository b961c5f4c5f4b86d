"""The transaction coordinator in-process: a client that leaves drops only its answer.

The broker around the coordinator is a stand-in: a real PartitionLog for the one
``__transaction_state`` partition, whose acks wait on an event the test releases (the
paused follower of the issue).  Cancelling the caller while a write waits (what a lost
connection does to the request's task) must not skip the write's state transition nor
leave its pending state behind; a pending state older than its write timeout that
nothing will clear (a lost write) is dropped with a WARNING naming the id.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from broker import config as config_module
from broker.controller.state import BrokerInfo, ClusterState, PartitionInfo, TopicInfo
from broker.replication.acks import ProducePartitionStatus
from broker.replication.origin import AppendOrigin
from broker.transactions import TransactionCoordinator
from broker.transactions.coordinator import STALE_PENDING_MS
from broker.transactions.manager import TRANSACTION_STATE_TOPIC
from broker.transactions.metadata import TransactionState
from protocol.errors import ErrorCode
from storage.config import LogConfig
from storage.log import PartitionLog

NONE = ErrorCode.NONE
TID = "t1"


@dataclass
class FakePartition:
    topic: str
    index: int
    log: PartitionLog
    leader_epoch: int = 0
    is_leader: bool = True


class FakeReplicaManager:
    """One transaction-state partition on disk; acks wait for ``acks_open``."""

    def __init__(self, directory):
        log = PartitionLog.open(directory / f"{TRANSACTION_STATE_TOPIC}-0", LogConfig())
        self.partition = FakePartition(TRANSACTION_STATE_TOPIC, 0, log)
        self.listeners = []
        self.acks_open = asyncio.Event()
        self.acks_open.set()
        self.waiting = 0

    def add_leadership_listener(self, listener):
        self.listeners.append(listener)

    def get_partition(self, topic, index):
        return self.partition if (topic, index) == (TRANSACTION_STATE_TOPIC, 0) else None

    def append_one(self, topic, index, records, acks, max_bytes, *, origin):
        assert origin is AppendOrigin.COORDINATOR
        info = self.partition.log.append_as_leader(bytearray(records), 0)
        return ProducePartitionStatus(self.partition, info.last_offset + 1, info.first_offset)

    async def wait_for_acks(self, statuses, timeout_ms):
        self.waiting += 1
        try:
            await self.acks_open.wait()
        finally:
            self.waiting -= 1
        self.partition.log.update_high_watermark(self.partition.log.log_end_offset)
        return statuses


class FakeProducerIds:
    def __init__(self):
        self.next = 1000

    async def next_producer_id(self):
        self.next += 1
        return self.next


class FakeBroker:
    def __init__(self, directory):
        self.config = config_module.build({"node.id": "1",
                                           "transaction.state.log.num.partitions": "1"})
        self.image = ClusterState()
        self.image.brokers[1] = BrokerInfo(1, "127.0.0.1", 9092, 1, "x")
        self.image.topics[TRANSACTION_STATE_TOPIC] = TopicInfo(
            TRANSACTION_STATE_TOPIC, "id0", {}, {0: PartitionInfo([1], 1, 0, 0, [1])})
        self.replica_manager = FakeReplicaManager(directory)


class Clock:
    def __init__(self):
        self.now_ms = 1_000_000

    def __call__(self) -> int:
        return self.now_ms


async def until(condition, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition never held"
        await asyncio.sleep(0.005)


async def started(tmp_path):
    broker = FakeBroker(tmp_path)
    clock = Clock()
    coordinator = TransactionCoordinator(broker, FakeProducerIds(), clock_ms=clock)
    for listener in broker.replica_manager.listeners:
        listener(broker.replica_manager.partition)
    await until(lambda: coordinator.manager.status_for(TID) == NONE)
    return broker, coordinator, clock


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 20))


async def cancelled_while_acks_wait(broker, call):
    """Start ``call`` (a coroutine), cancel it while its write waits for acks, then let
    the acks come; returns once nothing waits any more."""
    rm = broker.replica_manager
    rm.acks_open.clear()
    caller = asyncio.get_running_loop().create_task(call)
    await until(lambda: rm.waiting == 1)
    caller.cancel()
    await asyncio.gather(caller, return_exceptions=True)
    assert caller.cancelled()
    rm.acks_open.set()
    await until(lambda: rm.waiting == 0)
    await asyncio.sleep(0.01)


def test_an_add_partitions_whose_client_left_is_applied(tmp_path):
    async def scenario():
        broker, c, _clock = await started(tmp_path)
        init = await c.init_producer_id(TID, 60_000, None)
        assert init.error == NONE
        await cancelled_while_acks_wait(broker, c.add_partitions(
            TID, init.producer_id, init.producer_epoch, {("data", 0)}))
        metadata = c.manager.transactions[TID]
        assert metadata.state is TransactionState.ONGOING
        assert metadata.pending_state is None
        assert metadata.topic_partitions == {("data", 0)}
        again = await c.init_producer_id(TID, 60_000, None)  # fences: CONCURRENT, then on
        assert again.error in (NONE, ErrorCode.CONCURRENT_TRANSACTIONS)
        await c.shutdown()

    run(scenario())


def test_an_end_txn_whose_client_left_still_completes(tmp_path):
    async def scenario():
        broker, c, _clock = await started(tmp_path)
        init = await c.init_producer_id(TID, 60_000, None)
        assert await c.add_partitions(TID, init.producer_id, init.producer_epoch,
                                      {("gone", 0)}) == NONE
        await cancelled_while_acks_wait(broker, c.end_transaction(
            TID, init.producer_id, init.producer_epoch, True))
        metadata = c.manager.transactions[TID]
        # The topic is not in the image: no marker to write, Complete* follows at once.
        await until(lambda: metadata.state is TransactionState.COMPLETE_COMMIT)
        assert metadata.pending_state is None
        await c.shutdown()

    run(scenario())


def test_a_pending_state_past_its_write_timeout_is_dropped_with_a_warning(tmp_path, caplog):
    async def scenario():
        _broker, c, clock = await started(tmp_path)
        init = await c.init_producer_id(TID, 60_000, None)
        metadata = c.manager.transactions[TID]
        metadata.prepare_add_partitions({("data", 0)}, clock())  # its write was lost
        refused = await c.init_producer_id(TID, 60_000, None)
        assert refused.error == ErrorCode.CONCURRENT_TRANSACTIONS
        clock.now_ms += STALE_PENDING_MS + 1
        again = await c.init_producer_id(TID, 60_000, None)
        assert again.error == NONE and again.producer_epoch == init.producer_epoch + 1
        await c.shutdown()

    with caplog.at_level(logging.WARNING, logger="broker.transactions.coordinator"):
        run(scenario())
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(TID in w and "Ongoing" in w for w in warnings), warnings

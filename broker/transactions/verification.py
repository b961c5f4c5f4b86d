"""Asking a transaction's coordinator whether partitions are in it (KIP-890 part 1).

A partition leader that gets a producer's first transactional write for a partition
(no transaction of that producer open there) asks the coordinator of the write's
transactional id before appending: AddPartitionsToTxn v4 with ``VerifyOnly`` set, the
inter-broker batched form, over the inter-broker listener.  When this broker is that
coordinator the question is answered in place, without a request.

The answer is one error per partition: NONE when the partition is in the ongoing
transaction; INVALID_TXN_STATE when it is not (a write delayed past its transaction's
end, which would otherwise open a transaction nobody ends: a hanging transaction);
the transaction's own error otherwise.  A coordinator that cannot be reached, or is
not known yet, answers COORDINATOR_NOT_AVAILABLE.

One connection per coordinator broker, one request at a time on it; a request waits for
the connection at most as long as the round trip may take, so a stalled coordinator
costs each write one timeout, not the queue's.  Cancellation (the producer's connection
closed) is safe at any point: a round trip cancelled midway makes the next one
reconnect.  Event-loop only.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from kafka.protocol.producer import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse

from protocol.errors import ErrorCode

from ..client.kafka_client import AsyncConnection, ConnectionFailed
from ..security.client import inter_broker_security
from .manager import TRANSACTION_STATE_TOPIC

if TYPE_CHECKING:
    from ..coordinator.context import CoordinatorContext
    from .coordinator import TransactionCoordinator

log = logging.getLogger(__name__)

VERIFY_VERSION = 4  # the first batched (inter-broker) version of AddPartitionsToTxn
VERIFY_REQUEST_TIMEOUT_S = 15.0

TopicPartition = tuple[str, int]


class _Channel:
    def __init__(self, address: tuple[str, int], security, client_id: str):
        self.address = address
        self.connection = AsyncConnection(address[0], address[1], client_id=client_id,
                                          timeout_s=VERIFY_REQUEST_TIMEOUT_S, security=security)
        self.lock = asyncio.Lock()


class TransactionVerifier:
    """Verifies partitions with the coordinator of a transactional id (module doc)."""

    def __init__(self, context: CoordinatorContext, coordinator: TransactionCoordinator):
        self.context = context
        self.coordinator = coordinator
        self.node_id = context.config.node_id
        self.listener = context.config.listener_plan.inter_broker_name
        self.security = inter_broker_security(context.config)
        self.channels: dict[int, _Channel] = {}
        self._prefix = f"[TransactionVerifier broker={self.node_id}]"

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: set[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """{partition: error} for every partition of ``partitions`` (module doc)."""
        leader = self._coordinator_of(transactional_id)
        if leader is None:
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if leader == self.node_id:
            return self.coordinator.verify_partitions(transactional_id, producer_id,
                                                      producer_epoch, partitions)
        return await self._ask(leader, transactional_id, producer_id, producer_epoch,
                               partitions)

    def _coordinator_of(self, transactional_id: str) -> int | None:
        image = self.context.image
        topic = image.topics.get(TRANSACTION_STATE_TOPIC)
        if topic is None:
            return None
        info = topic.partitions.get(self.coordinator.manager.partition_for(transactional_id))
        if info is None or info.leader is None or info.leader < 0:
            return None
        return info.leader

    def _channel(self, broker_id: int) -> _Channel | None:
        info = self.context.image.brokers.get(broker_id)
        address = info.endpoint(self.listener) if info is not None else None
        if address is None:
            return None
        channel = self.channels.get(broker_id)
        if channel is None or channel.address != tuple(address):
            channel = _Channel(tuple(address), self.security,
                               f"raftwood-txn-verify-{self.node_id}")
            self.channels[broker_id] = channel
        return channel

    async def _ask(self, broker_id: int, transactional_id: str, producer_id: int,
                   producer_epoch: int, partitions: set[TopicPartition]
                   ) -> dict[TopicPartition, ErrorCode]:
        unavailable = dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        channel = self._channel(broker_id)
        if channel is None:
            return unavailable
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(partitions):
            by_topic.setdefault(topic, []).append(index)
        Request = AddPartitionsToTxnRequest[VERIFY_VERSION]
        Transaction = Request.AddPartitionsToTxnTransaction
        request = Request(transactions=[Transaction(
            transactional_id=transactional_id, producer_id=producer_id,
            producer_epoch=producer_epoch, verify_only=True,
            topics=[Transaction.AddPartitionsToTxnTopic(name=t, partitions=p)
                    for t, p in by_topic.items()])])
        try:  # waiting for the channel counts too: a stalled peer must not queue requests
            await asyncio.wait_for(channel.lock.acquire(), VERIFY_REQUEST_TIMEOUT_S)
        except TimeoutError:
            return unavailable
        try:
            response = await channel.connection.request(request, AddPartitionsToTxnResponse)
        except ConnectionFailed as exc:
            log.info("%s AddPartitionsToTxn to broker %d failed: %s", self._prefix, broker_id,
                     exc)
            return unavailable
        finally:
            channel.lock.release()
        return _errors_of(response, transactional_id, partitions)

    async def shutdown(self) -> None:
        channels, self.channels = list(self.channels.values()), {}
        for channel in channels:
            await channel.connection.close()


def _errors_of(response, transactional_id: str,
               partitions: set[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
    """The per-partition errors of a v4+ answer; the top-level error answers every
    partition; a partition left out is COORDINATOR_NOT_AVAILABLE."""
    if response.error_code != ErrorCode.NONE:
        return dict.fromkeys(partitions, _code(response.error_code))
    answered: dict[TopicPartition, ErrorCode] = {}
    for txn in response.results_by_transaction:
        if txn.transactional_id != transactional_id:
            continue
        for topic in txn.topic_results:
            for p in topic.results_by_partition:
                answered[(topic.name, p.partition_index)] = _code(p.partition_error_code)
    return {tp: answered.get(tp, ErrorCode.COORDINATOR_NOT_AVAILABLE) for tp in partitions}


def _code(code: int) -> ErrorCode:
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR

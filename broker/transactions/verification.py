"""Asking a transaction's coordinator whether partitions are in it (KIP-890 part 1).

A partition leader that gets a producer's first transactional write for a partition
(no transaction of that producer open there) asks the coordinator of the write's
transactional id before appending: AddPartitionsToTxn v4 with ``VerifyOnly`` set, the
inter-broker batched form, over the inter-broker listener.  When this broker is that
coordinator the question is answered in place, without a request.

Transaction version 2 (KIP-890 part 2: Produce v12+, TxnOffsetCommit v5+, whose client
sends no AddPartitionsToTxn) asks the coordinator to add the partitions instead
(AddPartitionsToTxn v5 without ``VerifyOnly``; in place, ``add_partitions``), with the
same answers: NONE once added.

The answer is one error per partition: NONE when the partition is in the ongoing
transaction; INVALID_TXN_STATE when it is not (a write delayed past its transaction's
end, which would otherwise open a transaction nobody ends: a hanging transaction);
the transaction's own error otherwise.  A coordinator that cannot be reached, or is
not known yet, answers COORDINATOR_NOT_AVAILABLE.

One connection per coordinator broker, one request at a time on it
(``broker/client/interbroker.py``); a request waits for the connection at most as long as
the round trip may take, so a stalled coordinator costs each write one timeout, not the
queue's.  Cancellation (the producer's connection closed) is safe at any point: a round
trip cancelled midway makes the next one reconnect.  Event-loop only.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from kafka.protocol.producer import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse

from protocol.errors import ErrorCode

from ..client.interbroker import InterBrokerChannels
from ..security.client import inter_broker_security
from .manager import TRANSACTION_STATE_TOPIC
from .metadata import TV_2

if TYPE_CHECKING:
    from ..coordinator.context import CoordinatorContext
    from .coordinator import TransactionCoordinator

VERIFY_VERSION = 4  # the first batched (inter-broker) version of AddPartitionsToTxn
ADD_VERSION = 5  # a transaction version 2 client's partition, added by its leader
VERIFY_REQUEST_TIMEOUT_S = 15.0

TopicPartition = tuple[str, int]


class TransactionVerifier:
    """Verifies partitions with the coordinator of a transactional id (module doc)."""

    def __init__(self, context: CoordinatorContext, coordinator: TransactionCoordinator):
        self.context = context
        self.coordinator = coordinator
        self.node_id = context.config.node_id
        self._prefix = f"[TransactionVerifier broker={self.node_id}]"
        self.channels = InterBrokerChannels(
            lambda: context.image, inter_broker_security(context.config),
            f"raftwood-txn-verify-{self.node_id}", VERIFY_REQUEST_TIMEOUT_S, self._prefix)

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: set[TopicPartition],
                     add: bool = False) -> dict[TopicPartition, ErrorCode]:
        """{partition: error} for every partition of ``partitions`` (module doc); ``add``:
        transaction version 2's implicit add instead of the check."""
        leader = self._coordinator_of(transactional_id)
        if leader is None:
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if leader == self.node_id and add:
            error = await self.coordinator.add_partitions(
                transactional_id, producer_id, producer_epoch, partitions, TV_2)
            return dict.fromkeys(partitions, error)
        if leader == self.node_id:
            return self.coordinator.verify_partitions(transactional_id, producer_id,
                                                      producer_epoch, partitions)
        return await self._ask(leader, transactional_id, producer_id, producer_epoch,
                               partitions, add)

    def _coordinator_of(self, transactional_id: str) -> int | None:
        image = self.context.image
        topic = image.topics.get(TRANSACTION_STATE_TOPIC)
        if topic is None:
            return None
        info = topic.partitions.get(self.coordinator.manager.partition_for(transactional_id))
        if info is None or info.leader is None or info.leader < 0:
            return None
        return info.leader

    async def _ask(self, broker_id: int, transactional_id: str, producer_id: int,
                   producer_epoch: int, partitions: set[TopicPartition], add: bool
                   ) -> dict[TopicPartition, ErrorCode]:
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(partitions):
            by_topic.setdefault(topic, []).append(index)
        Request = AddPartitionsToTxnRequest[ADD_VERSION if add else VERIFY_VERSION]
        Transaction = Request.AddPartitionsToTxnTransaction
        request = Request(transactions=[Transaction(
            transactional_id=transactional_id, producer_id=producer_id,
            producer_epoch=producer_epoch, verify_only=not add,
            topics=[Transaction.AddPartitionsToTxnTopic(name=t, partitions=p)
                    for t, p in by_topic.items()])])
        # Waiting for the connection counts too: a stalled peer must not queue requests.
        response = await self.channels.request(broker_id, request, AddPartitionsToTxnResponse,
                                               wait_s=VERIFY_REQUEST_TIMEOUT_S)
        if response is None:  # no address, busy, or a failed exchange (logged)
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return _errors_of(response, transactional_id, partitions)

    async def shutdown(self) -> None:
        await self.channels.shutdown()


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

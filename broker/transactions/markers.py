"""Writing a transaction's markers on its partitions (Kafka's TransactionMarkerChannelManager).

After PrepareCommit/PrepareAbort is acknowledged, the coordinator has every partition of
the transaction get a COMMIT/ABORT control batch: a WriteTxnMarkers request (v1) to the
current leader of each, grouped by leader, over the inter-broker listener (this broker
included, by the same path).  Each marker carries the producer id and epoch and the
coordinator epoch, which lets a partition refuse a stale coordinator.

Per partition, as Kafka's TransactionMarkerRequestCompletionHandler:
  * NONE: written, the partition leaves the transaction's pending set;
  * NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
    REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR, and a failed connection or an unreadable
    answer (a broker that does not serve WriteTxnMarkers yet): retried after a backoff,
    at the leader the newest metadata image names;
  * INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED: this coordinator is stale;
    the whole transaction is abandoned here (its current coordinator completes it);
  * UNSUPPORTED_FOR_MESSAGE_FORMAT: no marker can be written there; skipped.
A partition whose topic was deleted is dropped.  Sending stops when the tenure that
started it ends (``still_current`` turns False): the next leader loads the transaction
in its Prepare state and sends the markers again (markers are idempotent for a partition).

One connection per destination broker, one request at a time on it
(``broker/client/interbroker.py``).  Event-loop only.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kafka.protocol.producer import WriteTxnMarkersRequest, WriteTxnMarkersResponse

from protocol.errors import ErrorCode

from ..client.interbroker import InterBrokerChannels
from ..security.client import inter_broker_security

if TYPE_CHECKING:
    from ..coordinator.context import CoordinatorContext

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS_VERSION = 1
# v2 names the transaction version of each marker (KIP-890 part 2); sent for version 2
# transactions only, so a version 1 cluster's markers stay v1.
WRITE_TXN_MARKERS_TV2_VERSION = 2
RETRY_BACKOFF_S = 0.1
MAX_RETRY_BACKOFF_S = 2.0
# Longer than the leader's wait for the markers' replication (30 s, WriteTxnMarkers'
# handler), so its REQUEST_TIMED_OUT answer arrives instead of a dropped connection.
MARKER_REQUEST_TIMEOUT_S = 40.0

RETRIABLE = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.REQUEST_TIMED_OUT, ErrorCode.KAFKA_STORAGE_ERROR,
})
FENCED = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})

TopicPartition = tuple[str, int]


class TransactionMarkerChannelManager:
    """Sends the transaction coordinator's markers; ``context`` gives the config and the
    newest image (whose brokers lead which partition, and where they listen)."""

    def __init__(self, context: CoordinatorContext):
        self.context = context
        self.node_id = context.config.node_id
        self._prefix = f"[TransactionMarkerChannelManager broker={self.node_id}]"
        self.channels = InterBrokerChannels(
            lambda: context.image, inter_broker_security(context.config),
            f"raftwood-txn-markers-{self.node_id}", MARKER_REQUEST_TIMEOUT_S, self._prefix)

    async def write_markers(self, transactional_id: str, producer_id: int, producer_epoch: int,
                            commit: bool, coordinator_epoch: int,
                            pending: set[TopicPartition],
                            still_current: Callable[[], bool],
                            transaction_version: int = 0) -> bool:
        """Write the markers on every partition of ``pending``, removing each from it once
        written (or dropped).  True when none is left; False when the transaction was
        abandoned here (fenced, or the tenure ended)."""
        backoff = RETRY_BACKOFF_S
        while pending:
            if not still_current():
                return False
            routes = self._route(transactional_id, pending)
            results = await asyncio.gather(*(
                self._send(broker_id, producer_id, producer_epoch, commit, coordinator_epoch,
                           partitions, transaction_version)
                for broker_id, partitions in routes.items()))
            for outcome in results:
                for tp, error in outcome.items():
                    if error in (ErrorCode.NONE, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT):
                        pending.discard(tp)
                    elif error in FENCED:
                        log.info("%s markers of %s abandoned: %s-%d answered %s (a newer "
                                 "coordinator or producer epoch)", self._prefix,
                                 transactional_id, *tp, ErrorCode(error).name)
                        return False
                    elif error not in RETRIABLE:
                        log.warning("%s marker of %s on %s-%d: unexpected %s; retrying",
                                    self._prefix, transactional_id, *tp, _name(error))
            if pending:  # what is left failed, or waits for a leader: retry
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MAX_RETRY_BACKOFF_S)
        return True

    def _route(self, transactional_id: str, pending: set[TopicPartition]
               ) -> dict[int, list[TopicPartition]]:
        """Pending partitions by leader; those of deleted topics leave ``pending``, those
        without a live leader wait for a later round."""
        image = self.context.image
        routes: dict[int, list[TopicPartition]] = {}
        for tp in sorted(pending):
            topic = image.topics.get(tp[0])
            info = topic.partitions.get(tp[1]) if topic is not None else None
            if info is None:
                log.info("%s %s-%d of %s no longer exists: no marker", self._prefix, *tp,
                         transactional_id)
                pending.discard(tp)
                continue
            broker = image.brokers.get(info.leader)
            if broker is not None and not broker.fenced:
                routes.setdefault(info.leader, []).append(tp)
        return routes

    async def _send(self, broker_id: int, producer_id: int, producer_epoch: int, commit: bool,
                    coordinator_epoch: int, partitions: list[TopicPartition],
                    transaction_version: int = 0) -> dict[TopicPartition, int]:
        """{partition: error code}; a failed exchange answers REQUEST_TIMED_OUT for all."""
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        Marker = WriteTxnMarkersRequest.WritableTxnMarker
        fields = {"transaction_version": transaction_version} if transaction_version >= 2 \
            else {}
        version = WRITE_TXN_MARKERS_TV2_VERSION if fields else WRITE_TXN_MARKERS_VERSION
        request = WriteTxnMarkersRequest[version](markers=[Marker(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
            coordinator_epoch=coordinator_epoch, topics=[
                Marker.WritableTxnMarkerTopic(name=t, partition_indexes=p)
                for t, p in by_topic.items()], **fields)])
        response = await self.channels.request(broker_id, request, WriteTxnMarkersResponse)
        if response is None:  # no address, or a failed exchange (logged): retried
            return dict.fromkeys(partitions, ErrorCode.REQUEST_TIMED_OUT)
        answered = {}
        for marker in response.markers:
            if marker.producer_id != producer_id:
                continue
            for topic in marker.topics:
                for p in topic.partitions:
                    answered[(topic.name, p.partition_index)] = p.error_code
        return {tp: answered.get(tp, ErrorCode.REQUEST_TIMED_OUT) for tp in partitions}

    async def shutdown(self) -> None:
        await self.channels.shutdown()


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"

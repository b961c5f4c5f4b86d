"""Produce: acks 0 (no response), 1 (after the leader's append), all (after the HW);
the acks rules (min.insync.replicas, the acks=all wait and its answers) are in
broker/replication/acks.py.

Authorization (Kafka's): Write on each topic (TOPIC_AUTHORIZATION_FAILED per partition);
a transactional produce (``transactional_id`` set) also needs Write on that
TransactionalId, else every partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED.

Client quotas (KIP-546): the request's bytes count against the client's
producer_byte_rate; over it, the answer carries throttle_time_ms and the connection
stops reading for that time (client_quotas.throttle).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kafka.protocol.producer import ProduceResponse

from protocol.errors import ErrorCode
from protocol.hot_requests import encode_produce_response
from protocol.messages import Framed, Request

from ..quotas.rates import PRODUCER_BYTE_RATE
from ..replication import acks
from ..replication.acks import ProducePartitionStatus
from ..replication.origin import AppendOrigin
from ..security.acls import AclOperation, ResourceType
from .client_quotas import throttle
from .outcome import CLOSE, Answer, Later

if TYPE_CHECKING:
    from .context import ApiContext

log = logging.getLogger(__name__)

TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = TopicResponse.PartitionProduceResponse
WRITE = AclOperation.WRITE


def handle_produce(ctx: ApiContext, request: Request) -> Answer:
    """The body, None (acks=0), CLOSE (a failed acks=0 produce), or for acks=all a
    ``Later`` resolved when every appended partition's high watermark passed its batch
    (or the wait ended).  A plain ``def``: the hot path runs without a task."""
    body = request.body
    required_acks = body.acks
    if request.api_version < request.spec.refused_below:
        # Advertised for old librdkafka's sake, never served (message format v0/v1).
        return _uniform(body, ErrorCode.UNSUPPORTED_VERSION)
    if not acks.valid_required_acks(required_acks):
        return _uniform(body, ErrorCode.INVALID_REQUIRED_ACKS)
    if body.transactional_id is not None and not ctx.authorizer.allows(
            request, WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
        return _uniform(body, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    statuses = {}
    max_batch = ctx.config["message.max.bytes"]
    denied = ctx.authorizer.refused(request, WRITE, (t.name for t in body.topic_data))
    for topic in body.topic_data:
        for data in topic.partition_data:
            if topic.name in denied:  # Write on the topic (checked before any append)
                statuses[(topic.name, data.index)] = ProducePartitionStatus(
                    None, -1, -1, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                continue
            statuses[(topic.name, data.index)] = ctx.replica_manager.append_one(
                topic.name, data.index, data.records, required_acks, max_batch,
                origin=AppendOrigin.CLIENT)
    throttle(ctx, request, PRODUCER_BYTE_RATE, request.size_bytes)
    if required_acks == acks.ACKS_NONE:
        if acks.closes_connection(s.error for s in statuses.values()):
            return CLOSE
        return None
    if required_acks == acks.ACKS_LEADER:
        return _response(request, statuses)
    later = Later()
    operation = ctx.replica_manager.watch_acks(
        statuses, body.timeout_ms,
        lambda done: later.resolve(lambda: _response(request, done)))
    if later.resolved:  # every partition was done at once (failed, or an ISR of one)
        return _response(request, statuses)
    later.on_cancel = operation.withdraw  # the connection is gone: stop watching
    return later


def _response(request: Request,
              statuses: dict[tuple[str, int], ProducePartitionStatus]) -> Framed:
    """Encoded by hand (protocol/hot_requests.py): one per produce request, the hot path."""
    by_topic: dict[str, list] = {}
    for (topic, index), status in statuses.items():
        ok = status.error == ErrorCode.NONE
        by_topic.setdefault(topic, []).append((
            index, status.error, status.base_offset if ok else -1,
            status.log_append_time_ms, status.log_start_offset,
            None if ok else status.error.name))
    return Framed([encode_produce_response(request.api_version, request.correlation_id,
                                           list(by_topic.items()), request.throttle_ms)])


def _uniform(body: Any, code: ErrorCode) -> ProduceResponse:
    return ProduceResponse(
        responses=[TopicResponse(name=topic.name, partition_responses=[
            PartitionResponse(index=data.index, error_code=code, base_offset=-1,
                              log_append_time_ms=-1, log_start_offset=-1, record_errors=[],
                              error_message=code.name)
            for data in topic.partition_data]) for topic in body.topic_data],
        throttle_time_ms=0)

"""InitProducerId for idempotent producers (transactions are not served).

Authorization (Kafka's, KIP-679): IdempotentWrite on the cluster, or Write on at least
one topic; else CLUSTER_AUTHORIZATION_FAILED.

A producer that re-initialises with its current id and epoch (KIP-360) gets the epoch
bumped; at the epoch limit it gets a new id from the broker's ProducerIdManager
(``broker/replication/producer_ids.py``).
"""
from __future__ import annotations

from kafka.protocol.producer import InitProducerIdResponse

from protocol.errors import ErrorCode

from ..controller.metadata_client import MetadataUnavailable
from ..security.acls import AclOperation, ResourceType

MAX_PRODUCER_EPOCH = 32767
# Kafka's TRANSACTIONAL_ID_AUTHORIZATION_FAILED: non-retriable, so a transactional
# producer fails fast with a clear error instead of retrying forever.
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53


def _response(error_code: int, producer_id: int = -1, producer_epoch: int = -1):
    return InitProducerIdResponse(throttle_time_ms=0, error_code=error_code,
                                  producer_id=producer_id, producer_epoch=producer_epoch)


async def handle_init_producer_id(ctx, request):
    body = request.body
    if body.transactional_id is not None:
        return _response(TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    authorizer = ctx.authorizer
    if not (authorizer.allows_cluster(request, AclOperation.IDEMPOTENT_WRITE, log_denial=False)
            or authorizer.allows_any(request, AclOperation.WRITE, ResourceType.TOPIC)):
        return _response(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    producer_id, epoch = body.producer_id, body.producer_epoch
    if producer_id >= 0 and 0 <= epoch < MAX_PRODUCER_EPOCH - 1:
        return _response(ErrorCode.NONE, producer_id, epoch + 1)
    try:
        return _response(ErrorCode.NONE, await ctx.producer_ids.next_producer_id(), 0)
    except MetadataUnavailable:
        return _response(ErrorCode.COORDINATOR_NOT_AVAILABLE)

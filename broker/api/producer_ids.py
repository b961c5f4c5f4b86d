"""InitProducerId: idempotent producers here, transactional ones at the coordinator.

Without a transactional id (Kafka's KIP-679 authorization): IdempotentWrite on the
cluster, or Write on at least one topic; else CLUSTER_AUTHORIZATION_FAILED.  A producer
that re-initialises with its current id and epoch (KIP-360) gets the epoch bumped; at
the epoch limit it gets a new id from the broker's ProducerIdManager
(``broker/replication/producer_ids.py``).

With a transactional id: Write on it, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED; then
the transaction coordinator (``broker/transactions/``) answers.  From v3 the request
may carry the producer's id and epoch (KIP-360): both or neither, else INVALID_REQUEST.
PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH below v4 (KIP-588), as Kafka does.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from kafka.protocol.producer import InitProducerIdResponse

from protocol.errors import ErrorCode

from ..controller.metadata_client import MetadataUnavailable
from ..security.acls import AclOperation, ResourceType
from .transactions import fenced_for_version

if TYPE_CHECKING:
    from protocol.messages import Request

    from .context import ApiContext

MAX_PRODUCER_EPOCH = 32767
NO_PRODUCER_ID = NO_PRODUCER_EPOCH = -1
# The first InitProducerId version that knows PRODUCER_FENCED.
PRODUCER_FENCED_SINCE_VERSION = 4


def _response(error_code: int, producer_id: int = -1,
              producer_epoch: int = -1) -> InitProducerIdResponse:
    return InitProducerIdResponse(throttle_time_ms=0, error_code=error_code,
                                  producer_id=producer_id, producer_epoch=producer_epoch)


async def handle_init_producer_id(ctx: ApiContext, request: Request) -> InitProducerIdResponse:
    body = request.body
    if body.transactional_id is not None:
        return await _init_transactional(ctx, request)
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


async def _init_transactional(ctx: ApiContext, request: Request) -> InitProducerIdResponse:
    body = request.body
    if not ctx.authorizer.allows(request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                 body.transactional_id):
        return _response(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    expected = None
    if request.api_version >= 3:
        producer_id, epoch = body.producer_id, body.producer_epoch
        if (producer_id == NO_PRODUCER_ID) != (epoch == NO_PRODUCER_EPOCH):
            return _response(ErrorCode.INVALID_REQUEST)
        if producer_id != NO_PRODUCER_ID:
            expected = (producer_id, epoch)
    result = await ctx.transactions.init_producer_id(body.transactional_id,
                                                     body.transaction_timeout_ms, expected)
    error = fenced_for_version(result.error, request.api_version, PRODUCER_FENCED_SINCE_VERSION)
    return _response(error, result.producer_id, result.producer_epoch)

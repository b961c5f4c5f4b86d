"""InitProducerId for idempotent producers (transactions are not served).

Producer ids come from blocks reserved in the cluster metadata, so they stay unique
across restarts; a block is used up in memory, one metadata write per block.  A
producer that re-initialises with its current id and epoch (KIP-360) gets the epoch
bumped; at the epoch limit it gets a new id.
"""
from __future__ import annotations

from kafka.protocol.producer import InitProducerIdResponse

from protocol.errors import ErrorCode

PRODUCER_ID_BLOCK_SIZE = 1000
MAX_PRODUCER_EPOCH = 32767
# Kafka's TRANSACTIONAL_ID_AUTHORIZATION_FAILED: non-retriable, so a transactional
# producer fails fast with a clear error instead of retrying forever.
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53


class ProducerIdManager:
    """Hands out producer ids from reserved blocks. Event-loop only."""

    def __init__(self, metadata):
        self.metadata = metadata
        self._next = 0
        self._end = 0

    def next_producer_id(self) -> int:
        if self._next >= self._end:
            self._next = self.metadata.allocate_producer_id_block(PRODUCER_ID_BLOCK_SIZE)
            self._end = self._next + PRODUCER_ID_BLOCK_SIZE
        producer_id = self._next
        self._next += 1
        return producer_id


async def handle_init_producer_id(broker, request):
    body = request.body
    if body.transactional_id is not None:
        return InitProducerIdResponse(throttle_time_ms=0,
                                      error_code=TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                      producer_id=-1, producer_epoch=-1)
    producer_id, epoch = body.producer_id, body.producer_epoch
    if producer_id >= 0 and 0 <= epoch < MAX_PRODUCER_EPOCH - 1:
        return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                      producer_id=producer_id, producer_epoch=epoch + 1)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                  producer_id=broker.producer_ids.next_producer_id(),
                                  producer_epoch=0)

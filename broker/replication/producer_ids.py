"""The producer-id manager: ids for idempotent producers, unique across the cluster.

Producer ids come from blocks reserved through the cluster metadata
(``allocate_producer_ids``), so they are unique across brokers and restarts; a block
is used up in memory, one metadata command per block.  InitProducerId itself is
answered in ``broker/api/producer_ids.py``.
"""
from __future__ import annotations

import asyncio

PRODUCER_ID_BLOCK_SIZE = 1000


class ProducerIdManager:
    """Hands out producer ids from reserved blocks. Event-loop only."""

    def __init__(self, store):
        self.store = store
        self._next = 0
        self._end = 0
        self._lock = asyncio.Lock()

    async def next_producer_id(self) -> int:
        async with self._lock:  # one block request at a time
            if self._next >= self._end:
                first = await self.store.submit("allocate_producer_ids", PRODUCER_ID_BLOCK_SIZE)
                self._next, self._end = first, first + PRODUCER_ID_BLOCK_SIZE
            producer_id = self._next
            self._next += 1
            return producer_id

"""The producer-id manager: ids for idempotent producers, unique across the cluster.

Producer ids come from blocks reserved through the cluster metadata
(``allocate_producer_ids``), so they are unique across brokers and restarts; a block
is used up in memory, one metadata command per block.  InitProducerId itself is
answered in ``broker/api/producer_ids.py``.
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ..controller.metadata_client import MetadataClient

if TYPE_CHECKING:
    from ..controller.store import LocalStore, RaftStore

PRODUCER_ID_BLOCK_SIZE = 1000


class ProducerIdManager:
    """Hands out producer ids from reserved blocks. Event-loop only.

    Invariant: ids handed out lie in blocks the metadata reserved for this process
    (``[_next, _end)`` is the rest of the current one), so no id is given twice in the
    cluster.  ``metadata``: a MetadataClient (or a store, wrapped in one).
    """

    def __init__(self, metadata: MetadataClient | LocalStore | RaftStore) -> None:
        self.metadata = MetadataClient.wrap(metadata)
        self._next = 0
        self._end = 0
        self._lock = asyncio.Lock()

    async def next_producer_id(self) -> int:
        async with self._lock:  # one block request at a time
            if self._next >= self._end:
                first = await self.metadata.allocate_producer_ids(PRODUCER_ID_BLOCK_SIZE)
                self._next, self._end = first, first + PRODUCER_ID_BLOCK_SIZE
            producer_id = self._next
            self._next += 1
            return producer_id

"""SharePersister: how a partition leader reads and writes its share partitions' state.

Kafka's leader calls the share coordinator of each share-partition key with the
ReadShareGroupState / WriteShareGroupState RPCs.  Here the leader calls the share
coordinator (coordinator.py) directly when this broker leads the key's state
partition, and through ``remote`` (an RPC client, ``remote.read(key)`` and
``remote.write(key, snapshot)`` to the state partition's leader) otherwise.  Without a
remote, a key whose state partition another broker leads is not persisted: it reads as
never written and writes succeed in memory only (logged once per key at WARNING), as
before persistence existed.  The state topic is created on first use.  Retries cover a
coordinator still loading or moving (bounded in count).

Event-loop only.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from protocol.errors import ErrorCode

from .coordinator import ShareCoordinator
from .records import ShareSnapshot

log = logging.getLogger(__name__)

ATTEMPTS = 20
BACKOFF_S = 0.25
RETRIABLE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                       ErrorCode.COORDINATOR_NOT_AVAILABLE})


class SharePersister:
    def __init__(self, coordinator: ShareCoordinator, remote: Any = None) -> None:
        self.coordinator = coordinator
        self.remote = remote
        self._unpersisted: set[str] = set()

    def _memory_only(self, key: str) -> bool:
        """No remote, and another broker leads ``key``'s state partition."""
        if self.remote is not None:
            return False
        leader = self.coordinator.leader_for(key)
        if leader in (-1, self.coordinator.node_id):
            return False
        if key not in self._unpersisted:
            self._unpersisted.add(key)
            log.warning("%s share state %s is not persisted: its state partition is led by "
                        "broker %d", self.coordinator.prefix, key, leader)
        return True

    async def _ensure_topic(self) -> ErrorCode:
        if self.coordinator.topic_exists():
            return ErrorCode.NONE
        problem = await self.coordinator.lookup.ensure_topic()
        if problem is not None:
            log.warning("%s %s", self.coordinator.prefix, problem)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.NONE

    async def read(self, key: str) -> tuple[ErrorCode, ShareSnapshot | None]:
        """The newest snapshot of ``key`` (None: none written yet), or the error."""
        error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        for attempt in range(ATTEMPTS):
            if attempt:
                await asyncio.sleep(BACKOFF_S)
            error = await self._ensure_topic()
            if error != ErrorCode.NONE:
                continue
            if self._memory_only(key):
                return ErrorCode.NONE, None
            error, snapshot = self.coordinator.read(key)
            if error == ErrorCode.NOT_COORDINATOR and self.remote is not None:
                error, snapshot = await self.remote.read(key)
            if error not in RETRIABLE:
                return error, snapshot
        return error, None

    async def write(self, key: str, snapshot: ShareSnapshot | None) -> ErrorCode:
        """Write ``snapshot`` (None: delete) of ``key``; NONE once it is replicated."""
        error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        for attempt in range(ATTEMPTS):
            if attempt:
                await asyncio.sleep(BACKOFF_S)
            error = await self._ensure_topic()
            if error != ErrorCode.NONE:
                continue
            if self._memory_only(key):
                return ErrorCode.NONE
            if self.coordinator.status_for(key) != ErrorCode.NOT_COORDINATOR \
                    or self.remote is None:
                error = await self.coordinator.write(key, snapshot)
            else:
                error = await self.remote.write(key, snapshot)
            if error not in RETRIABLE:
                return error
        return error

"""SharePersister: how a partition leader reads and writes its share partitions' state.

Kafka's leader calls the share coordinator of each share-partition key with the
ReadShareGroupState / WriteShareGroupState RPCs.  Here the leader calls the share
coordinator (coordinator.py) directly when this broker leads the key's state
partition, and through ``remote`` (an RPC client, ``remote.read(key)`` and
``remote.write(key, snapshot)`` to the state partition's leader) otherwise.  Without a
remote, a key whose state partition another broker leads is not persisted: it reads as
never written and writes succeed in memory only (logged once per key at WARNING), as
before persistence existed.  The state topic is created on first use.  Retries cover a
coordinator still loading or moving (bounded in count, one loop for every call).
``read_summary`` is the group coordinator's read (DescribeShareGroupOffsets): the start
offset, through ReadShareGroupStateSummary when another broker is the coordinator.

Event-loop only.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from protocol.errors import ErrorCode

from .coordinator import ShareCoordinator
from .records import ShareSnapshot, ShareSummary

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

    async def _retrying(self, attempt: Callable[[], Awaitable[tuple[ErrorCode, Any]]]
                        ) -> tuple[ErrorCode, Any]:
        """``attempt()`` once the state topic exists, again (at most ATTEMPTS times,
        BACKOFF_S apart) while it answers a RETRIABLE error; its last answer."""
        result: tuple[ErrorCode, Any] = (ErrorCode.COORDINATOR_NOT_AVAILABLE, None)
        for n in range(ATTEMPTS):
            if n:
                await asyncio.sleep(BACKOFF_S)
            error = await self._ensure_topic()
            if error != ErrorCode.NONE:
                result = (error, None)
                continue
            result = await attempt()
            if result[0] not in RETRIABLE:
                return result
        return result

    async def read(self, key: str) -> tuple[ErrorCode, ShareSnapshot | None]:
        """The newest snapshot of ``key`` (None: none written yet), or the error."""
        async def attempt() -> tuple[ErrorCode, ShareSnapshot | None]:
            if self._memory_only(key):
                return ErrorCode.NONE, None
            error, snapshot = self.coordinator.read(key)
            if error == ErrorCode.NOT_COORDINATOR and self.remote is not None:
                error, snapshot = await self.remote.read(key)
            return error, snapshot
        error, snapshot = await self._retrying(attempt)
        return error, (snapshot if error == ErrorCode.NONE else None)

    async def read_summary(self, key: str) -> tuple[ErrorCode, ShareSummary | None]:
        """The start offset of ``key`` and what is finished past it (None: no state), as
        the share coordinator answers ReadShareGroupStateSummary, or the error."""
        async def attempt() -> tuple[ErrorCode, ShareSummary | None]:
            if self._memory_only(key):
                return ErrorCode.NONE, None
            error, snapshot = self.coordinator.read(key)
            if error == ErrorCode.NOT_COORDINATOR and self.remote is not None:
                return await self.remote.read_summary(key)
            return error, (ShareSummary.of(snapshot) if snapshot is not None else None)
        error, summary = await self._retrying(attempt)
        return error, (summary if error == ErrorCode.NONE else None)

    async def write(self, key: str, snapshot: ShareSnapshot | None) -> ErrorCode:
        """Write ``snapshot`` (None: delete) of ``key``; NONE once it is replicated."""
        async def attempt() -> tuple[ErrorCode, None]:
            if self._memory_only(key):
                return ErrorCode.NONE, None
            if self.coordinator.status_for(key) != ErrorCode.NOT_COORDINATOR \
                    or self.remote is None:
                return await self.coordinator.write(key, snapshot), None
            return await self.remote.write(key, snapshot), None
        return (await self._retrying(attempt))[0]

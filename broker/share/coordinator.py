"""The share coordinator: share partitions' state on ``__share_group_state`` (KIP-932).

A coordinator on the coordinator core (broker/coordinator/): the key
``"group:topicId:partition"`` (records.py) picks a partition of ``__share_group_state``
(Kafka's placement); the broker leading that partition loads it (the newest snapshot
of each key) and serves ``read`` and ``write`` for its keys.  A write is appended as
leader and answered once the high watermark passes it (acks=all), so an acknowledged
write survives the coordinator's failover: the new leader loads it.

Invariant: ``snapshots`` holds, for each key of a LOADED partition, the newest snapshot
(by leader epoch, then sequence) its log holds; a write older than the one in place is
not appended: refused with FENCED_STATE_EPOCH when a newer leader epoch wrote, taken as
written when a newer snapshot of the same leader (which includes it) is in place.  A
snapshot of a newer leader epoch whose sequence is not past the one in place is refused
too (FENCED_STATE_EPOCH): its leader loaded an older state than the log holds.
Event-loop only.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from protocol.errors import ErrorCode
from protocol.records import iter_headers

from ..coordinator import CoordinatorLookup, CoordinatorRuntime, InternalTopic, Ownership
from ..coordinator.batches import iter_records
from ..coordinator.runtime import APPEND_ERRORS
from ..tasks import TaskSupervisor
from .records import ShareSnapshot, ShareStateError, decode_value, encode_value

log = logging.getLogger(__name__)

STATE_TOPIC = "__share_group_state"
WRITE_TIMEOUT_MS = 5_000


def state_topic_configs(replication_factor: int = 0) -> dict[str, str]:
    """Kafka's configs of ``__share_group_state``: compacted, kept forever."""
    return {"cleanup.policy": "compact", "retention.ms": "-1", "retention.bytes": "-1",
            "min.insync.replicas": str(min(2, max(1, replication_factor)))}


def state_topic(config) -> InternalTopic:
    return InternalTopic(STATE_TOPIC, config["share.coordinator.state.topic.num.partitions"],
                         config["share.coordinator.state.topic.replication.factor"],
                         state_topic_configs)


class _Loader:
    """Replays one state partition into {key: newest snapshot} (pure)."""

    def __init__(self, partition: int):
        self.partition = partition
        self.snapshots: dict[str, ShareSnapshot] = {}

    def apply(self, chunk: bytes, position: int) -> int:
        next_position = position
        for header in iter_headers(chunk):
            next_position = max(next_position, header.next_offset)
        for offset, key, value in iter_records(chunk):
            if offset < position or key is None:
                continue
            name = key.decode("utf-8", "replace")
            if value is None:
                self.snapshots.pop(name, None)
                continue
            try:
                snapshot = decode_value(value)
            except ShareStateError as exc:
                log.warning("[ShareCoordinator] %s-%d offset %d skipped: %s", STATE_TOPIC,
                            self.partition, offset, exc)
                continue
            if snapshot.supersedes(self.snapshots.get(name)):
                self.snapshots[name] = snapshot
        return next_position


class ShareCoordinator:
    """Reads and writes share-partition snapshots of the state partitions led here."""

    def __init__(self, config, replica_manager, image: Callable[[], Any],
                 create_topic=None) -> None:
        self.node_id = config.node_id
        self.prefix = f"[ShareCoordinator broker={self.node_id}]"
        self._image = image
        self.topic = state_topic(config)
        self.snapshots: dict[str, ShareSnapshot] = {}
        self._partition_of: dict[str, int] = {}
        self.tasks = TaskSupervisor(self.prefix)
        self.runtime = CoordinatorRuntime(self.topic, config, replica_manager, image, self,
                                          _Loader, lambda: int(time.time() * 1000),
                                          self.prefix)
        self.lookup = CoordinatorLookup(self.topic, image, create_topic, self.tasks,
                                        self.prefix)

    # -- the runtime's shard -------------------------------------------------------------

    def on_loaded(self, ownership: Ownership, loader: _Loader) -> str | None:
        for key, snapshot in loader.snapshots.items():
            self.snapshots[key] = snapshot
            self._partition_of[key] = ownership.partition
        return f"{len(loader.snapshots)} share partition states" if loader.snapshots else None

    def on_unloaded(self, partition: int) -> str | None:
        dropped = [k for k, p in self._partition_of.items() if p == partition]
        for key in dropped:
            del self._partition_of[key]
            self.snapshots.pop(key, None)
        return f"{len(dropped)} share partition states" if dropped else None

    # -- serving -------------------------------------------------------------------------

    def topic_exists(self) -> bool:
        return self.topic.name in self._image().topics

    def status_for(self, key: str) -> ErrorCode:
        return self.runtime.status_for(key)

    def leader_for(self, key: str) -> int:
        """The broker leading ``key``'s state partition in the image (-1: none known)."""
        topic = self._image().topics.get(self.topic.name)
        if topic is None:
            return -1
        info = topic.partitions.get(self.runtime.partition_for(key))
        return info.leader if info is not None else -1

    def read(self, key: str) -> tuple[ErrorCode, ShareSnapshot | None]:
        """The newest snapshot of ``key`` (None: never written); NOT_COORDINATOR or
        COORDINATOR_LOAD_IN_PROGRESS when this broker does not serve it now."""
        status = self.status_for(key)
        if status != ErrorCode.NONE:
            return status, None
        return ErrorCode.NONE, self.snapshots.get(key)

    async def write(self, key: str, snapshot: ShareSnapshot | None) -> ErrorCode:
        """Append ``snapshot`` (None: delete the state) for ``key`` and wait for its acks."""
        status = self.status_for(key)
        if status != ErrorCode.NONE:
            return status
        current = self.snapshots.get(key)
        if snapshot is not None and current is not None and not snapshot.supersedes(current):
            # A newer snapshot of the same leader includes this one's changes; one of a
            # newer leader fences this writer.
            return ErrorCode.NONE if current.leader_epoch == snapshot.leader_epoch \
                else ErrorCode.FENCED_STATE_EPOCH
        if snapshot is not None and current is not None \
                and snapshot.leader_epoch > current.leader_epoch and snapshot.seq <= current.seq:
            # A new leader's first write continues the sequence it loaded; a lower one
            # means an older leader wrote after that read (acknowledgements it answered):
            # refused, so the new leader loads again instead of writing over them.
            return ErrorCode.FENCED_STATE_EPOCH
        index = self.runtime.partition_for(key)
        value = None if snapshot is None else encode_value(snapshot)
        pending = self.runtime.append_now(index, [(key.encode(), value)])
        if isinstance(pending, ErrorCode):
            return APPEND_ERRORS.get(pending, pending)
        # Memory follows the log at once (no await between the check and this), so a
        # later write of the same key is checked against this one.
        if snapshot is None:
            self.snapshots.pop(key, None)
        else:
            self.snapshots[key] = snapshot
        self._partition_of[key] = index
        error = await self.runtime.wait_for_acks(pending, WRITE_TIMEOUT_MS)
        return APPEND_ERRORS.get(error, error)

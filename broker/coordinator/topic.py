"""A coordinator's internal topic: what it is, which partition coordinates a key, and
FindCoordinator's answer for a key (creating the topic on first use).

``InternalTopic`` is the topic as the coordinator's settings describe it; its partition
count is the existing topic's once it exists (the mapping of keys to partitions must
never change under a running cluster), the configured one before.

``CoordinatorLookup.find_coordinator(key)`` answers with the leader of the key's
partition and that broker's address, or COORDINATOR_NOT_AVAILABLE with the reason: the
topic does not exist yet (it is created first, one creation at a time, with
min(replication factor, live brokers) replicas; an answer waits for the creation at
most ``TOPIC_CREATION_TIMEOUT_S``), or the partition has no live leader.  The listener
the client came in on is the handler's to pick (``broker/api/groups.py``).

Topic creation is a callable the broker wires in (``CreateTopic``: the metadata
client's), so the coordinators never reach up into the request handlers.

Event-loop only.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from protocol.errors import ErrorCode

from ..controller.metadata_client import ApplyError, MetadataUnavailable
from ..tasks import TaskSupervisor
from .placement import partition_for

log = logging.getLogger(__name__)

TOPIC_CREATION_TIMEOUT_S = 15.0

# (name, partitions, replication factor, topic configs) -> the new topic's id; raises
# ApplyError (refused, e.g. TOPIC_ALREADY_EXISTS) or MetadataUnavailable.
CreateTopic = Callable[[str, int, int, dict[str, str]], Awaitable[str]]


@dataclass(frozen=True)
class InternalTopic:
    """One coordinator's internal topic, as its settings describe it (pure).

    ``configs(replication_factor)`` gives the topic configs it is created with;
    ``reload_on_new_epoch``: whether a new leader epoch of a partition this broker
    already leads ends the tenure (the partition is loaded again) or only moves it to
    the new epoch (``runtime.py``)."""

    name: str
    configured_partitions: int
    replication_factor: int
    configs: Callable[[int], dict[str, str]]
    reload_on_new_epoch: bool = False

    def num_partitions(self, image) -> int:
        """The existing topic's partition count in ``image``, else the configured one."""
        topic = image.topics.get(self.name)
        return len(topic.partitions) if topic is not None else self.configured_partitions

    def partition_for(self, image, key: str) -> int:
        return partition_for(key, self.num_partitions(image))


@dataclass
class CoordinatorAnswer:
    error: ErrorCode
    message: str | None = None
    node_id: int = -1
    host: str = ""
    port: int = -1


class CoordinatorLookup:
    """FindCoordinator for one internal topic, and its creation on first use.

    Invariant: at most one creation task runs at a time (``_creating``); callers that
    arrive meanwhile wait for the same task."""

    def __init__(self, topic: InternalTopic, image: Callable[[], object],
                 create_topic: CreateTopic | None, tasks: TaskSupervisor, prefix: str):
        self.topic = topic
        self._image = image
        self._create_topic = create_topic
        self._tasks = tasks
        self._prefix = prefix
        self._creating: asyncio.Task | None = None

    async def find_coordinator(self, key: str) -> CoordinatorAnswer:
        """The leader of ``key``'s partition, creating the topic first if it is missing."""
        name = self.topic.name
        if name not in self._image().topics:
            problem = await self.ensure_topic()
            if problem is not None:
                return CoordinatorAnswer(ErrorCode.COORDINATOR_NOT_AVAILABLE, problem)
        image = self._image()
        topic = image.topics.get(name)
        if topic is None:
            return CoordinatorAnswer(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                     f"{name} is not in the metadata yet")
        index = partition_for(key, len(topic.partitions))
        leader = topic.partitions[index].leader
        info = image.brokers.get(leader)
        if info is None or info.fenced:
            return CoordinatorAnswer(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                     f"{name}-{index} has no live leader")
        return CoordinatorAnswer(ErrorCode.NONE, None, leader, info.host, info.port)

    async def ensure_topic(self) -> str | None:
        """Create the topic unless a creation is under way; None once it exists, else
        why not."""
        if self._creating is None or self._creating.done():
            self._creating = self._tasks.spawn(f"create {self.topic.name}", self._create())
        try:
            return await asyncio.wait_for(asyncio.shield(self._creating),
                                          TOPIC_CREATION_TIMEOUT_S)
        except TimeoutError:
            return f"creating {self.topic.name} is taking long"

    async def _create(self) -> str | None:
        name = self.topic.name
        if self._create_topic is None:
            return f"{name} does not exist and this broker creates no topics"
        replication = min(self.topic.replication_factor, len(self._image().live_brokers()))
        partitions = self.topic.configured_partitions
        if replication < 1:
            return "no live broker"
        try:
            await self._create_topic(name, partitions, replication,
                                     self.topic.configs(replication))
        except ApplyError as exc:
            return None if exc.code == "TOPIC_ALREADY_EXISTS" else f"creating {name}: {exc}"
        except MetadataUnavailable as exc:
            return f"creating {name}: {exc}"
        log.info("%s created %s with %d partitions, replication factor %d", self._prefix,
                 name, partitions, replication)
        return None

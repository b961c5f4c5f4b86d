"""The replica fetcher: followers pull from their leaders (Kafka's design).

One ``ReplicaFetcher`` task per source leader fetches every partition this broker
follows from that leader in a single Fetch (replica_id = our node id, current leader
epoch set), appends the batches exactly as received, and moves the follower's high
watermark to min(leader HW, own LEO).

Before fetching a partition in a new leader epoch it reconciles the log with the
leader's (KIP-101/279): OffsetForLeaderEpoch for our latest epoch, truncate to the
divergence point, repeat while the leader's answer names an epoch we do not share.
So a leader change A→B→A never leaves divergent logs.

Loop header (``ReplicaFetcher.run``): reacts to Fetch responses (the leader long-polls
them for ``replica.fetch.wait.max.ms``) and to partitions being added; backs off
``replica.fetch.backoff.ms`` after errors; never sleeps on a fixed tick otherwise;
exits when it follows no partition any more or on cancellation.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from kafka.protocol.consumer import (
    FetchRequest, FetchResponse, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
)

from protocol.errors import ErrorCode
from storage.errors import StorageError

from ..network.kafka_client import BrokerConnection, ConnectionFailed
from .partition import Partition

log = logging.getLogger(__name__)

FETCH_VERSION = 11
EPOCH_VERSION = 3
MAX_TRUNCATION_ROUNDS = 8
FetchTopic = FetchRequest.FetchTopic
FetchPartition = FetchTopic.FetchPartition
EpochTopic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
EpochPartition = EpochTopic.OffsetForLeaderPartition


@dataclass
class FollowedPartition:
    partition: Partition
    leader_epoch: int
    needs_truncation: bool = True
    backoff_until: float = 0.0


class ReplicaFetcher:
    """Fetches from one leader for every partition we follow there. Event-loop only."""

    def __init__(self, manager: ReplicaFetcherManager, leader_id: int):
        self.manager = manager
        self.leader_id = leader_id
        self.partitions: dict[tuple[str, int], FollowedPartition] = {}
        self.connection: BrokerConnection | None = None
        self.task: asyncio.Task | None = None
        self._prefix = f"[ReplicaFetcher broker={manager.node_id} leader={leader_id}]"

    async def run(self) -> None:
        try:
            while self.partitions:
                if not await self._ensure_connection():
                    await asyncio.sleep(self.manager.backoff_s)
                    continue
                try:
                    await self._truncate_where_needed()
                    if not await self._fetch_once():
                        await self._sleep_until_ready()
                except ConnectionFailed as exc:
                    log.info("%s %s; retrying", self._prefix, exc)
                    await asyncio.sleep(self.manager.backoff_s)
        finally:
            if self.connection is not None:
                await self.connection.close()

    async def _ensure_connection(self) -> bool:
        address = self.manager.broker_address(self.leader_id)
        if address is None:
            return False
        host, port = address
        conn = self.connection
        if conn is None or (conn.host, conn.port) != (host, port):
            if conn is not None:
                await conn.close()
            self.connection = BrokerConnection(host, port, f"raftwood-fetcher-{self.manager.node_id}",
                                               timeout_s=self.manager.request_timeout_s)
        return True

    def _ready(self) -> list[FollowedPartition]:
        now = time.monotonic()
        return [f for f in self.partitions.values() if f.backoff_until <= now]

    async def _sleep_until_ready(self) -> None:
        now = time.monotonic()
        waits = [f.backoff_until - now for f in self.partitions.values()]
        await asyncio.sleep(max(0.01, min(waits, default=self.manager.backoff_s)))

    def _back_off(self, followed: FollowedPartition, reason: str) -> None:
        followed.backoff_until = time.monotonic() + self.manager.backoff_s
        log.info("%s %s: %s; backing off", self._prefix, followed.partition.name, reason)

    # -- truncation (KIP-101/279) ---------------------------------------------------

    async def _truncate_where_needed(self) -> None:
        for _ in range(MAX_TRUNCATION_ROUNDS):
            pending = [f for f in self._ready() if f.needs_truncation]
            if not pending:
                return
            asks = {}
            for followed in pending:
                latest = followed.partition.log.epoch_cache.latest_epoch
                if latest is None:
                    followed.needs_truncation = False  # nothing of ours to reconcile
                else:
                    asks[followed.partition.key] = (followed, latest)
            if not asks:
                return
            response = await self.connection.request(self._epoch_request(asks), OffsetForLeaderEpochResponse)
            for topic in response.topics:
                for answer in topic.partitions:
                    entry = asks.get((topic.topic, answer.partition))
                    if entry is not None:
                        self._apply_epoch_answer(entry[0], answer)

    def _epoch_request(self, asks):
        by_topic: dict[str, list] = {}
        for (topic, index), (followed, latest) in asks.items():
            by_topic.setdefault(topic, []).append(EpochPartition(
                partition=index, current_leader_epoch=followed.leader_epoch, leader_epoch=latest))
        return OffsetForLeaderEpochRequest[EPOCH_VERSION](
            replica_id=self.manager.node_id,
            topics=[EpochTopic(topic=t, partitions=ps) for t, ps in by_topic.items()])

    def _apply_epoch_answer(self, followed: FollowedPartition, answer) -> None:
        partition = followed.partition
        if answer.error_code != ErrorCode.NONE:
            self._back_off(followed, f"OffsetForLeaderEpoch {ErrorCode(answer.error_code).name}")
            return
        if answer.end_offset < 0:
            self._drop_latest_epoch(followed)
            return
        own_epoch, own_end = partition.log.epoch_cache.end_offset_for(
            answer.leader_epoch, partition.log_end_offset)
        if own_epoch != answer.leader_epoch:
            # We never had the leader's epoch: cut to where our older epoch ends and ask
            # again with the epoch that is now our latest.
            partition.truncate_to(min(own_end, partition.log_end_offset))
            return
        partition.truncate_to(min(answer.end_offset, own_end))
        followed.needs_truncation = False

    def _drop_latest_epoch(self, followed: FollowedPartition) -> None:
        """The leader answered UNDEFINED for our latest epoch: its log holds no epoch as
        new as ours (a leader's current epoch is the newest of the partition, and its
        log's epochs only grow), so nothing we wrote in that epoch is in the leader's
        log.  Cut the epoch away and ask again with the one before it; our high
        watermark is no evidence here (it may have been computed in that very epoch).
        Each round removes one epoch, so the loop ends; with no epoch left there is
        nothing of ours to reconcile."""
        partition = followed.partition
        entries = partition.log.epoch_cache.epoch_entries()
        epoch, start = entries[-1]
        log.warning("%s %s: leader %d has no epoch %d or newer; truncating from %d to %d",
                    self._prefix, partition.name, self.leader_id, epoch,
                    partition.log_end_offset, start)
        partition.truncate_to(start)  # also drops the epoch when it wrote nothing
        followed.needs_truncation = partition.log.epoch_cache.latest_epoch is not None

    # -- fetching ---------------------------------------------------------------------

    async def _fetch_once(self) -> bool:
        ready = [f for f in self._ready() if not f.needs_truncation]
        if not ready:
            return False
        request = self._fetch_request(ready)
        response = await self.connection.request(request, FetchResponse)
        if response.error_code != ErrorCode.NONE:
            for followed in ready:
                self._back_off(followed, f"fetch {ErrorCode(response.error_code).name}")
            return True
        by_key = {f.partition.key: f for f in ready}
        appended = False
        for topic in response.responses:
            for data in topic.partitions:
                followed = by_key.get((topic.topic, data.partition_index))
                if followed is not None and self.partitions.get(followed.partition.key) is followed:
                    appended |= self._apply_fetched(followed, data)
        if appended:
            self.manager.on_follower_progress()
        return True

    def _fetch_request(self, ready: list[FollowedPartition]):
        by_topic: dict[str, list] = {}
        for followed in ready:
            partition = followed.partition
            by_topic.setdefault(partition.topic, []).append(FetchPartition(
                partition=partition.index, current_leader_epoch=followed.leader_epoch,
                fetch_offset=partition.log_end_offset, log_start_offset=partition.log_start_offset,
                partition_max_bytes=self.manager.fetch_max_bytes))
        return FetchRequest[FETCH_VERSION](
            replica_id=self.manager.node_id, max_wait_ms=self.manager.fetch_wait_max_ms,
            min_bytes=1, max_bytes=self.manager.fetch_response_max_bytes, isolation_level=0,
            session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
            topics=[FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()])

    def _apply_fetched(self, followed: FollowedPartition, data) -> bool:
        partition = followed.partition
        code = data.error_code
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if partition.log_end_offset < data.log_start_offset:
                partition.truncate_fully_and_start_at(data.log_start_offset)
            else:
                followed.needs_truncation = True
            return False
        if code != ErrorCode.NONE:
            self._back_off(followed, ErrorCode(code).name)
            return False
        try:
            return partition.append_as_follower(data.records or b"", data.high_watermark) > 0
        except StorageError as exc:
            if partition.offline:  # a disk failure: the replica manager took its log dir offline
                return False
            log.warning("%s %s: append refused (%s); reconciling with the leader again",
                        self._prefix, partition.name, exc)
            followed.needs_truncation = True
            followed.backoff_until = time.monotonic() + self.manager.backoff_s  # no busy loop
            return False


class ReplicaFetcherManager:
    """Which partitions we follow, grouped into one fetcher per leader. Event-loop only."""

    def __init__(self, node_id: int, config, broker_address):
        self.node_id = node_id
        self.broker_address = broker_address  # broker id -> (host, port) | None
        self.fetch_wait_max_ms = config["replica.fetch.wait.max.ms"]
        self.fetch_max_bytes = config["replica.fetch.max.bytes"]
        self.fetch_response_max_bytes = config["replica.fetch.response.max.bytes"]
        self.backoff_s = config["replica.fetch.backoff.ms"] / 1000.0
        self.request_timeout_s = max(5.0, self.fetch_wait_max_ms / 1000.0 + 5.0)
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.on_progress = None

    def follow(self, partition: Partition) -> None:
        """Fetch ``partition`` from its current leader, reconciling first."""
        self.unfollow(partition.key)
        if partition.leader_id < 0 or partition.leader_id == self.node_id:
            return
        fetcher = self.fetchers.get(partition.leader_id)
        if fetcher is None:
            fetcher = self.fetchers[partition.leader_id] = ReplicaFetcher(self, partition.leader_id)
        fetcher.partitions[partition.key] = FollowedPartition(partition, partition.leader_epoch)
        if fetcher.task is None or fetcher.task.done():
            self._restart(fetcher)

    def unfollow(self, key: tuple[str, int]) -> None:
        for fetcher in self.fetchers.values():
            fetcher.partitions.pop(key, None)

    def _fetcher_done(self, fetcher: ReplicaFetcher, task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("[ReplicaFetcher leader=%d] stopped by an error", fetcher.leader_id,
                      exc_info=task.exception())
        if self.fetchers.get(fetcher.leader_id) is fetcher and fetcher.partitions \
                and not task.cancelled():
            # Restart after a pause, so a persistent bug cannot spin the loop.
            asyncio.get_running_loop().call_later(self.backoff_s, self._restart, fetcher)
        elif self.fetchers.get(fetcher.leader_id) is fetcher and not fetcher.partitions:
            del self.fetchers[fetcher.leader_id]

    def _restart(self, fetcher: ReplicaFetcher) -> None:
        if self.fetchers.get(fetcher.leader_id) is fetcher and fetcher.partitions \
                and (fetcher.task is None or fetcher.task.done()):
            fetcher.task = asyncio.get_running_loop().create_task(fetcher.run())
            fetcher.task.add_done_callback(lambda t, f=fetcher: self._fetcher_done(f, t))

    def on_follower_progress(self) -> None:
        if self.on_progress is not None:
            self.on_progress()

    async def shutdown(self) -> None:
        tasks = [f.task for f in self.fetchers.values() if f.task is not None]
        for fetcher in self.fetchers.values():
            fetcher.partitions.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.fetchers.clear()

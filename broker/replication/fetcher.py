"""The replica fetcher: followers pull from their leaders (Kafka's design).

One ``ReplicaFetcher`` task per source leader fetches every partition this broker
follows from that leader in a single Fetch (replica_id = our node id, current leader
epoch set), appends the batches exactly as received, and moves the follower's high
watermark to min(leader HW, own LEO).

Before fetching a partition in a new leader epoch it reconciles the log with the
leader's (KIP-101/279): OffsetForLeaderEpoch for our latest epoch, truncate to the
divergence point, repeat while the leader's answer names an epoch we do not share.
So a leader change A→B→A never leaves divergent logs.

The leader is reached through a ``LeaderEndpoint`` (``leader_endpoint.py``; the Kafka
protocol by default, a fake in tests): this module decides what to ask and what the
answers mean, the endpoint only carries them.  Fetches run in a fetch session with
the leader (KIP-227, ``fetch_sessions.FollowerSession``): once caught up, a Fetch names
only the partitions whose log end or log start moved, and the answer only those with
news; the leader still reads every partition of the session.
"""
from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from protocol.errors import ErrorCode
from storage.errors import StorageError

from ..security.client import inter_broker_security
from .fetch_sessions import FollowerSession
from .leader_endpoint import (
    EndpointFactory,
    EpochEndOffset,
    EpochQuery,
    FetchedData,
    FetchSettings,
    KafkaLeaderEndpoint,
    Key,
    LeaderEndpoint,
    LeaderUnavailable,
    PartitionFetch,
    SessionFetch,
)
from .partition import Partition
from .throttle import UNLIMITED, ReplicationThrottle

if TYPE_CHECKING:
    from ..config import BrokerConfig

log = logging.getLogger(__name__)

MAX_TRUNCATION_ROUNDS = 8
#: answers after which the follower starts a new fetch session at once (no backoff)
_SESSION_ERRORS = (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH)
#: answers of a leader that has not yet applied the metadata that made it our leader (a
#: topic just created, a leader just elected: both brokers apply the same image, the
#: follower first by a few milliseconds).  The partition is asked again after
#: FIRST_RETRY_S, doubling at each repeat up to replica.fetch.backoff.ms; Kafka waits
#: the whole backoff at once, which held every acks=all produce to a new topic or a new
#: leader for a second.
LEADER_BEHIND = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                 ErrorCode.UNKNOWN_LEADER_EPOCH)
FIRST_RETRY_S = 0.025


@dataclass
class FollowedPartition:
    """One partition as its fetcher sees it: the leader epoch it follows in, whether its
    log must be reconciled with the leader's before the next fetch, and until when (a
    ``time.monotonic()`` instant) it is left alone after an error."""

    partition: Partition
    leader_epoch: int
    needs_truncation: bool = True
    backoff_until: float = 0.0
    retries: int = 0  # LEADER_BEHIND answers in a row (the next retry waits longer)
    lag: int = 0  # the leader's HW minus our LEO at the last fetch (metrics' MaxLag)
    # Our LEO reached the leader's HW at the last fetch (Kafka's isReplicaInSync): the
    # follower throttle leaves such a partition alone.  False until a fetch says so.
    caught_up: bool = False
    #: ``partition.key``, kept: every fetch reads it, and the property builds a tuple
    key: tuple[str, int] = field(init=False)
    #: what the last fetch asked of this partition; the next one asks with the same
    #: object while nothing in it moved (no new object, and the session's comparison
    #: is an identity test: most partitions of a busy follower are idle at any time)
    request: PartitionFetch | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.key = self.partition.key


class ReplicaFetcher:
    """Fetches from one leader for every partition we follow there. Event-loop only.

    Only its ``ReplicaFetcherManager`` adds and removes partitions (``partitions``) and
    starts ``run``.  Invariants: a partition is fetched only once ``needs_truncation`` is
    off; an answer for a partition that was removed or re-followed (another
    ``FollowedPartition``) while the request was out is ignored; a partition that got an
    error is not asked again before its ``backoff_until``.
    """

    def __init__(self, manager: ReplicaFetcherManager, leader_id: int):
        self.manager = manager
        self.leader_id = leader_id
        self.partitions: dict[tuple[str, int], FollowedPartition] = {}
        self.endpoint: LeaderEndpoint | None = None
        self.task: asyncio.Task[None] | None = None
        #: the fetch session with the leader (KIP-227): a caught-up follower's Fetch
        #: then names only the partitions whose log end moved
        self.session = FollowerSession()
        self._prefix = f"[ReplicaFetcher broker={manager.node_id} leader={leader_id}]"

    def _endpoint(self) -> LeaderEndpoint:
        """The leader's endpoint, made on first use (unit tests set ``endpoint``)."""
        if self.endpoint is None:
            self.endpoint = self.manager.endpoint_factory(self.leader_id)
        return self.endpoint

    async def run(self) -> None:
        """The fetch loop.  Reacts to Fetch responses (the leader long-polls them for
        ``replica.fetch.wait.max.ms``) and to partitions being added; backs off
        ``replica.fetch.backoff.ms`` while the leader is unknown or unreachable, and a
        partition after its errors; never sleeps on a fixed tick otherwise.  Exits when
        it follows no partition any more, or on cancellation; the endpoint is closed."""
        endpoint = self._endpoint()
        try:
            while self.partitions:
                if not endpoint.ready():
                    await asyncio.sleep(self.manager.backoff_s)
                    continue
                try:
                    await self._truncate_where_needed()
                    if not await self._fetch_once():
                        await self._sleep_until_ready()
                except LeaderUnavailable as exc:
                    log.info("%s %s; retrying", self._prefix, exc)
                    await asyncio.sleep(self.manager.backoff_s)
        finally:
            await endpoint.close()

    async def _sleep_until_ready(self) -> None:
        now = time.monotonic()
        waits = [f.backoff_until - now for f in self.partitions.values()]
        await asyncio.sleep(max(0.01, min(waits, default=self.manager.backoff_s)))

    def _back_off(self, followed: FollowedPartition, reason: str,
                  code: int = ErrorCode.NONE) -> None:
        """Leave ``followed`` alone for replica.fetch.backoff.ms; after a LEADER_BEHIND
        answer (``code``) only for FIRST_RETRY_S, doubled per answer in a row."""
        delay = self.manager.backoff_s
        if code in LEADER_BEHIND:
            delay = min(delay, FIRST_RETRY_S * 2 ** followed.retries)
            followed.retries += 1
        followed.backoff_until = time.monotonic() + delay
        log.info("%s %s: %s; backing off %.0f ms", self._prefix, followed.partition.name,
                 reason, delay * 1000)

    # -- truncation (KIP-101/279) ---------------------------------------------------

    async def _truncate_where_needed(self) -> None:
        """Rounds of OffsetForLeaderEpoch for the ready partitions that need it, until none
        does or after MAX_TRUNCATION_ROUNDS (the loop comes back to the rest)."""
        for _ in range(MAX_TRUNCATION_ROUNDS):
            now = time.monotonic()  # ready (backoff over) and pending, in one pass
            pending = [f for f in self.partitions.values()
                       if f.needs_truncation and f.backoff_until <= now]
            if not pending:
                return
            asks = {}
            for followed in pending:
                latest = followed.partition.latest_epoch
                if latest is None:
                    followed.needs_truncation = False  # nothing of ours to reconcile
                else:
                    asks[followed.partition.key] = (followed, latest)
            if not asks:
                return
            answers = await self._endpoint().offsets_for_leader_epoch([
                EpochQuery(topic, index, followed.leader_epoch, latest)
                for (topic, index), (followed, latest) in asks.items()])
            for key, answer in answers.items():
                entry = asks.get(key)
                if entry is not None:
                    self._apply_epoch_answer(entry[0], answer)

    def _apply_epoch_answer(self, followed: FollowedPartition, answer: EpochEndOffset) -> None:
        """The leader's OffsetForLeaderEpoch answer for ``followed``."""
        partition = followed.partition
        if answer.error_code != ErrorCode.NONE:
            self._back_off(followed, f"OffsetForLeaderEpoch {ErrorCode(answer.error_code).name}",
                           answer.error_code)
            return
        if answer.end_offset < 0:
            self._drop_latest_epoch(followed)
            return
        own_epoch, own_end = partition.end_offset_for_epoch(answer.leader_epoch)
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
        epoch, start = partition.epoch_entries()[-1]
        log.warning("%s %s: leader %d has no epoch %d or newer; truncating from %d to %d",
                    self._prefix, partition.name, self.leader_id, epoch,
                    partition.log_end_offset, start)
        partition.truncate_to(start)  # also drops the epoch when it wrote nothing
        followed.needs_truncation = partition.latest_epoch is not None

    # -- fetching ---------------------------------------------------------------------

    async def _fetch_once(self) -> bool:
        """One Fetch for every ready, reconciled partition; False when there was none to
        ask for (the caller then sleeps until a backoff ends).

        Once per acknowledged batch on a caught-up follower, so it reads each partition
        once into the request and the lookup of its answer, and sorts only when a
        throttle applies."""
        now = time.monotonic()
        ready = [f for f in self.partitions.values()
                 if f.backoff_until <= now and not f.needs_truncation]
        if not ready:
            return False
        manager = self.manager
        throttle = manager.throttle
        throttled = self._throttled(ready)
        allowance = throttle.allowance() if throttled else 0
        if throttled and allowance == 0:
            # Kafka's follower leaves a throttled partition out of the fetch while the
            # quota is used up; with nothing else to ask for, wait for the bucket (not
            # much longer than a long poll, so a removed throttle is noticed).
            ready = [f for f in ready if f.key not in throttled]
            if not ready:
                await asyncio.sleep(min(throttle.delay_s(),
                                        max(0.1, manager.fetch_wait_max_ms / 1000)))
                return True
            throttled = set()
        if throttled:
            # Throttled partitions first and capped at the bucket: the leader returns at
            # least one batch only for the first partition of a response (KIP-74).
            ready.sort(key=lambda f: f.key not in throttled)
        max_bytes = manager.fetch_max_bytes
        wanted = {}
        asked = {}  # key -> the FollowedPartition the answer is for
        for f in ready:
            key = f.key
            partition_log = f.partition.log
            fetch_offset = partition_log.log_end_offset
            log_start_offset = partition_log.log_start_offset
            limit = min(max_bytes, allowance) if throttled and key in throttled else max_bytes
            request = f.request
            if request is None or request.fetch_offset != fetch_offset \
                    or request.log_start_offset != log_start_offset \
                    or request.max_bytes != limit \
                    or request.current_leader_epoch != f.leader_epoch:
                request = f.request = PartitionFetch(key[0], key[1], f.leader_epoch,
                                                     fetch_offset, log_start_offset, limit)
            wanted[key] = request
            asked[key] = f
        session = self.session
        listed, forgotten = session.build(wanted)
        try:
            result = await self._endpoint().fetch(
                [wanted[key] for key in listed],
                SessionFetch(session.session_id, session.epoch, forgotten))
        except LeaderUnavailable:
            session.on_failure()
            raise
        session.on_answer(result.error_code, result.session_id)
        if result.error_code in _SESSION_ERRORS:
            log.info("%s fetch session %s; starting a new one", self._prefix,
                     ErrorCode(result.error_code).name)
            return True
        if result.error_code != ErrorCode.NONE:
            for followed in ready:
                self._back_off(followed, f"fetch {ErrorCode(result.error_code).name}")
            return True
        partitions = self.partitions
        for key, data in result.partitions.items():
            answered = asked.get(key)
            if answered is not None and partitions.get(key) is answered:
                partition_log = answered.partition.log
                high_watermark = partition_log.high_watermark
                if throttled and key in throttled:
                    throttle.record(len(data.records or b""))
                if self._apply_fetched(answered, data) or \
                        partition_log.high_watermark != high_watermark:
                    manager.on_follower_progress(key)
        return True

    def _throttled(self, ready: list[FollowedPartition]) -> set[Key]:
        """Keys of the ``ready`` partitions ``follower.replication.throttled.rate`` limits:
        listed for this broker in their topic's follower.replication.throttled.replicas
        and behind the leader (Kafka's shouldFollowerThrottle)."""
        manager = self.manager
        if not manager.throttle.enabled or manager.follower_throttles is None:
            return set()
        return {f.partition.key for f in ready
                if not f.caught_up and manager.follower_throttles(f.partition)}

    def _apply_fetched(self, followed: FollowedPartition, data: FetchedData) -> bool:
        """The leader's answer for ``followed``; True when bytes were appended."""
        partition = followed.partition
        code = data.error_code
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if partition.log_end_offset < data.log_start_offset:
                partition.truncate_fully_and_start_at(data.log_start_offset)
            else:
                followed.needs_truncation = True
            return False
        if code != ErrorCode.NONE:
            self._back_off(followed, ErrorCode(code).name, code)
            return False
        followed.retries = 0
        try:
            appended = partition.append_as_follower(data.records or b"", data.high_watermark)
            partition_log = partition.log
            lag = data.high_watermark - partition_log.log_end_offset
            followed.lag = lag = lag if lag > 0 else 0
            followed.caught_up = lag == 0
            # DeleteRecords on the leader.  A leader's log start at or below ours moves
            # nothing (the partition would answer False), so it is not asked.
            if data.log_start_offset > partition_log.log_start_offset:
                partition.maybe_follow_leader_log_start_offset(data.log_start_offset)
            return appended > 0
        except StorageError as exc:
            if partition.offline:  # a disk failure: the replica manager took its log dir offline
                return False
            log.warning("%s %s: append refused (%s); reconciling with the leader again",
                        self._prefix, partition.name, exc)
            followed.needs_truncation = True
            followed.backoff_until = time.monotonic() + self.manager.backoff_s  # no busy loop
            return False


class ReplicaFetcherManager:
    """Which partitions we follow, grouped into one fetcher per leader. Event-loop only;
    the ReplicaManager is its only caller (``follow``/``unfollow`` on metadata images,
    ``shutdown``).  Invariant: a partition is in at most one fetcher, that of its
    current leader; a fetcher with partitions has a running (or restarting) task.

    ``endpoint_factory(leader_id)`` makes the endpoint a new fetcher talks to; the
    default speaks the Kafka protocol to the address ``broker_address`` gives."""

    def __init__(self, node_id: int, config: BrokerConfig,
                 broker_address: Callable[[int], tuple[str, int] | None],
                 endpoint_factory: EndpointFactory | None = None) -> None:
        self.node_id = node_id
        self.broker_address = broker_address  # broker id -> (host, port) | None
        self.fetch_wait_max_ms = config["replica.fetch.wait.max.ms"]
        self.fetch_max_bytes = config["replica.fetch.max.bytes"]
        self.fetch_response_max_bytes = config["replica.fetch.response.max.bytes"]
        self.backoff_s = config["replica.fetch.backoff.ms"] / 1000.0
        self.request_timeout_s = max(5.0, self.fetch_wait_max_ms / 1000.0 + 5.0)
        self.endpoint_factory: EndpointFactory = endpoint_factory or self._kafka_endpoint
        self.security = inter_broker_security(config) if endpoint_factory is None else None
        self.fetchers: dict[int, ReplicaFetcher] = {}
        #: follower.replication.throttled.rate, and which partitions it applies to (the
        #: replica manager sets both from the broker settings and the topic configs)
        self.throttle = ReplicationThrottle(UNLIMITED)
        self.follower_throttles: Callable[[Partition], bool] | None = None
        #: called with a partition's key when its log or high watermark moved here (the
        #: replica manager wakes consumers long-polling this follower, KIP-392)
        self.on_progress: Callable[[Key], object] | None = None

    def _kafka_endpoint(self, leader_id: int) -> KafkaLeaderEndpoint:
        return KafkaLeaderEndpoint(self.node_id, leader_id, self.broker_address, FetchSettings(
            self.fetch_wait_max_ms, self.fetch_response_max_bytes, self.request_timeout_s,
            self.security))

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

    def _fetcher_done(self, fetcher: ReplicaFetcher, task: asyncio.Task[None]) -> None:
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
            fetcher.task.add_done_callback(functools.partial(self._fetcher_done, fetcher))

    def on_follower_progress(self, key: tuple[str, int]) -> None:
        if self.on_progress is not None:
            self.on_progress(key)

    async def shutdown(self) -> None:
        tasks = [f.task for f in self.fetchers.values() if f.task is not None]
        for fetcher in self.fetchers.values():
            fetcher.partitions.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.fetchers.clear()

"""SharePartitionManager: the share partitions this broker leads, and their lock timers.

Event-loop only.  Invariants:
- A SharePartition exists only while this broker leads its topic partition: losing
  the leadership (or the partition) drops every group's state of it, and its timer.
- Each SharePartition has at most one armed timer, at its earliest lock deadline;
  every caller that changes a SharePartition calls ``touched`` so the timer follows.
- A long-polling ShareFetch watches its share partitions (``watch``): ``touched`` wakes
  it once one of them has AVAILABLE records again (a RELEASE, a lock expiry, a member's
  session closed), so records handed back are handed out without waiting for new ones.
- A share partition starts, on its first fetch, at the log's high watermark
  (``share.auto.offset.reset`` latest, Kafka's default) or its log start offset
  (earliest).

- A share partition is loaded from the persister (persister.py: its last snapshot on
  ``__share_group_state``) before its first fetch on this leader and written back under
  this leader's epoch before it is used (a new one's start; for an old one the fence
  against the previous leader's late writes); ``persist`` writes a snapshot (the caller answers an
  acknowledgement only after it); a lock expiry or a member's release is written in the
  background (``_write_later``), as Kafka's leader writes them.  Snapshots of one key
  carry (leader epoch, sequence), increasing.

Group settings come from the group side (``settings_of(group_id)``, S1's
``ShareGroups.settings``); without it Kafka's defaults apply.  Locks run on the
monotonic clock: they never outlive this process (a snapshot records a lock as
AVAILABLE, with its delivery count as of the last write).
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from protocol.errors import ErrorCode

from .coordinator import ShareCoordinator
from .partition import RecordState, ShareLimits, SharePartition
from .persister import SharePersister
from .records import ShareSnapshot, share_key
from .remote import ShareStateClient
from .sessions import ShareSessionCache

log = logging.getLogger(__name__)

#: (group id, topic name, partition index)
ShareKey = tuple[str, str, int]


@dataclass(frozen=True)
class DefaultShareSettings:
    """Kafka's defaults for what the partition side reads of a share group."""

    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    partition_max_record_locks: int = 2000
    auto_offset_reset: str = "latest"
    isolation_level: str = "read_uncommitted"


DEFAULTS = DefaultShareSettings()


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


class SharePartitionManager:
    """Share partitions by (group, topic, partition), on the partitions' leader."""

    def __init__(self, replica_manager: Any = None,
                 settings_of: Callable[[str], Any] | None = None,
                 clock: Callable[[], int] = monotonic_ms, persister: Any = None) -> None:
        self.settings_of = settings_of or (lambda group_id: DEFAULTS)
        self.clock = clock
        self.persister = persister
        self.partitions: dict[ShareKey, SharePartition] = {}
        self._timers: dict[ShareKey, asyncio.TimerHandle] = {}
        self._loading: dict[ShareKey, asyncio.Task] = {}
        self._seq: dict[ShareKey, int] = {}  # the last snapshot's sequence number
        self._leader_epochs: dict[ShareKey, int] = {}
        self._state_keys: dict[ShareKey, str] = {}  # "group:topicId:partition"
        self._watchers: dict[ShareKey, set[asyncio.Future[None]]] = {}
        self._writes: set[asyncio.Task] = set()  # background writes (_write_later)
        if replica_manager is not None:
            replica_manager.add_leadership_listener(self.on_leadership_changed)

    def settings(self, group_id: str) -> Any:
        try:
            return self.settings_of(group_id)
        except Exception:  # the group side's lookup must never fail a fetch
            log.exception("[Share group %s] settings lookup failed; Kafka's defaults apply",
                          group_id)
            return DEFAULTS

    def limits(self, group_id: str) -> ShareLimits:
        s = self.settings(group_id)
        return ShareLimits(s.record_lock_duration_ms, s.delivery_count_limit,
                           s.partition_max_record_locks)

    def get(self, key: ShareKey) -> SharePartition | None:
        return self.partitions.get(key)

    async def load(self, key: ShareKey, topic_id: str, partition: Any
                   ) -> tuple[ErrorCode, SharePartition | None]:
        """The share partition of ``key`` on its leader ``partition``: in memory, else
        loaded from the persister (its last snapshot), else new at the offset
        ``share.auto.offset.reset`` names (and that start written, so a new leader
        starts there too).  One load per key at a time; the others wait for it."""
        share = self.partitions.get(key)
        if share is not None:
            share.limits = self.limits(key[0])
            return ErrorCode.NONE, share
        loading = self._loading.get(key)
        if loading is None or loading.done():
            loading = asyncio.get_running_loop().create_task(
                self._load(key, topic_id, partition))
            self._loading[key] = loading
        return await asyncio.shield(loading)

    async def _load(self, key: ShareKey, topic_id: str, partition: Any
                    ) -> tuple[ErrorCode, SharePartition | None]:
        try:
            leader_epoch = partition.leader_epoch
            limits = self.limits(key[0])
            snapshot = None
            self._state_keys[key] = share_key(key[0], topic_id, key[2])
            if self.persister is not None:
                error, snapshot = await self.persister.read(self._state_keys[key])
                if error != ErrorCode.NONE:
                    return error, None
            if not partition.is_leader or partition.leader_epoch != leader_epoch:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
            if key in self.partitions:  # never, as loads of one key do not overlap
                return ErrorCode.NONE, self.partitions[key]
            share = self._new(key, partition, snapshot, limits)
            # Written under this leader's epoch before anything is handed out: a new
            # share partition's start, and the fence that refuses an older leader's
            # writes from now on.  The coordinator refuses it if such a write got in
            # after the read (acknowledgements that leader answered): loaded again then.
            error = await self._write(key, share)
            if error != ErrorCode.NONE:
                log.info("[Share group %s] %s-%d: state not written at load (%s); loaded "
                         "again on the next fetch", key[0], key[1], key[2], error.name)
                return error, None
            if not partition.is_leader or partition.leader_epoch != leader_epoch:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
            self.partitions[key] = share
            self.touched(key)
            return ErrorCode.NONE, share
        finally:
            self._loading.pop(key, None)

    def _new(self, key: ShareKey, partition: Any, snapshot: ShareSnapshot | None,
             limits: ShareLimits) -> SharePartition:
        if snapshot is not None:
            share = SharePartition.restore(snapshot.start_offset, snapshot.batches, limits)
            self._seq[key] = snapshot.seq  # (leader epoch, seq) keeps increasing
            log.info("[Share group %s] %s-%d loaded at offset %d, %d in flight", key[0], key[1],
                     key[2], share.start_offset, share.end_offset - share.start_offset)
        else:
            earliest = self.settings(key[0]).auto_offset_reset == "earliest"
            start = partition.log_start_offset if earliest else partition.high_watermark
            share = SharePartition(start, limits)
            log.info("[Share group %s] %s-%d starts at offset %d", key[0], key[1], key[2],
                     start)
        share.maybe_follow_log_start(partition.log_start_offset)
        self._leader_epochs[key] = partition.leader_epoch
        return share

    async def persist(self, key: ShareKey) -> ErrorCode:
        """Write ``key``'s state now; NONE once it is durable (or nothing persists)."""
        share = self.partitions.get(key)
        if share is None:
            return ErrorCode.NONE
        return await self._write(key, share)

    async def _write(self, key: ShareKey, share: SharePartition) -> ErrorCode:
        if self.persister is None:
            return ErrorCode.NONE
        seq = self._seq[key] = self._seq.get(key, 0) + 1
        snapshot = ShareSnapshot(self._leader_epochs.get(key, -1), seq, share.start_offset,
                                 tuple(share.state_batches()))
        return await self.persister.write(self._state_keys[key], snapshot)

    def _write_later(self, key: ShareKey) -> None:
        """Write ``key``'s state in the background: a lock expiry or a member's release
        changed it and nobody waits for an answer.  Kafka's leader writes on these too,
        so delivery counts (and records archived at the limit) survive a leader change.
        A failed write is logged; the next write carries the whole window anyway."""
        if self.persister is None or key not in self.partitions:
            return
        task = asyncio.get_running_loop().create_task(self.persist(key))
        self._writes.add(task)
        task.add_done_callback(lambda done: self._written(key, done))

    def _written(self, key: ShareKey, task: asyncio.Task) -> None:
        self._writes.discard(task)
        if task.cancelled():
            return
        error = task.exception() or task.result()
        if error != ErrorCode.NONE:
            log.warning("[Share group %s] %s-%d: released records not written (%s)", key[0],
                        key[1], key[2], error)

    def touched(self, key: ShareKey) -> None:
        """Re-arm ``key``'s lock timer at its earliest deadline (none when no lock), and
        wake the fetches watching ``key`` if it has AVAILABLE records."""
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        share = self.partitions.get(key)
        self._maybe_wake(key, share)
        deadline = share.next_deadline_ms() if share is not None else None
        if deadline is None:
            return
        delay_s = max(0, deadline - self.clock()) / 1000
        self._timers[key] = asyncio.get_running_loop().call_later(delay_s, self._expire, key)

    def watch(self, keys: Iterable[ShareKey]) -> asyncio.Future[None]:
        """A future done once one of ``keys`` has AVAILABLE records after a change
        (``touched``); the caller ``unwatch``es it whether or not it is done."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for key in keys:
            self._watchers.setdefault(key, set()).add(waiter)
        return waiter

    def unwatch(self, waiter: asyncio.Future[None], keys: Iterable[ShareKey]) -> None:
        for key in keys:
            waiters = self._watchers.get(key)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del self._watchers[key]

    def _maybe_wake(self, key: ShareKey, share: SharePartition | None) -> None:
        waiters = self._watchers.get(key)
        if not waiters or share is None or not share.has_available():
            return
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _expire(self, key: ShareKey) -> None:
        """The lock timer of ``key``: release what has expired, arm the next one."""
        self._timers.pop(key, None)
        share = self.partitions.get(key)
        if share is not None:
            released = share.expire_locks(self.clock())
            if released:
                log.debug("[Share group %s] %s-%d: %d record locks expired", key[0], key[1],
                          key[2], released)
                self._write_later(key)
        self.touched(key)

    def release_member(self, group_id: str, member_id: str,
                       partitions: Iterable[tuple[str, int]]) -> int:
        """Release ``member_id``'s locks on ``partitions`` (its session closed), and
        write the partitions that changed; how many records were released."""
        released = 0
        for topic, index in partitions:
            key = (group_id, topic, index)
            share = self.partitions.get(key)
            if share is not None:
                count = share.release_member(member_id)
                released += count
                if count:
                    self._write_later(key)
                self.touched(key)
        return released

    def on_leadership_changed(self, partition: Any) -> None:
        """A replica manager's leadership listener: not the leader any more, no state."""
        if partition.is_leader:
            return
        topic, index = partition.key
        for key in [k for k in self.partitions if k[1] == topic and k[2] == index]:
            del self.partitions[key]
            self._seq.pop(key, None)
            timer = self._timers.pop(key, None)
            if timer is not None:
                timer.cancel()

    # -- what the group side's admin APIs read --------------------------------------------

    def start_offsets(self, group_id: str) -> dict[tuple[str, int], int]:
        """{(topic, partition): SPSO} of ``group_id``'s share partitions led here."""
        return {(k[1], k[2]): share.start_offset for k, share in self.partitions.items()
                if k[0] == group_id}

    def describe(self) -> list[dict]:
        """Every share partition led here, as the status request shows it: its start
        and end offsets and how many records of its window are ACQUIRED (in flight),
        finished past the start offset (ACKNOWLEDGED or ARCHIVED) and AVAILABLE."""
        described = []
        for (group_id, topic, index), share in sorted(self.partitions.items()):
            described.append({
                "group": group_id, "topic": topic, "partition": index,
                "start_offset": share.start_offset, "end_offset": share.end_offset,
                "acquired": share.count(RecordState.ACQUIRED),
                "finished": share.count(RecordState.ACKNOWLEDGED)
                + share.count(RecordState.ARCHIVED),
                "available": share.count(RecordState.AVAILABLE)})
        return described

    def delete_state(self, group_id: str, topics: Iterable[str] | None = None) -> int:
        """Forget ``group_id``'s share partitions (of ``topics``, or all); how many."""
        names = None if topics is None else set(topics)
        doomed = [k for k in self.partitions
                  if k[0] == group_id and (names is None or k[1] in names)]
        for key in doomed:
            del self.partitions[key]
            self.touched(key)
        return len(doomed)


@dataclass
class ShareState:
    """What ShareFetch and ShareAcknowledge use: the share sessions and partitions."""

    sessions: ShareSessionCache
    partitions: SharePartitionManager
    coordinator: ShareCoordinator | None = None

    @classmethod
    def for_broker(cls, replica_manager: Any, groups: Any, config: Any,
                   metadata: Any) -> ShareState:
        """The broker's: settings from the group side's ``groups.share.settings`` once
        it has one, else the broker's ``group.share.*`` settings; state persisted through
        the share coordinator of each key on ``__share_group_state`` (this broker's, or
        another's over ReadShareGroupState / WriteShareGroupState)."""
        fallback = DefaultShareSettings(
            config["group.share.record.lock.duration.ms"],
            config["group.share.delivery.count.limit"],
            config["group.share.partition.max.record.locks"])

        def settings_of(group_id: str) -> Any:
            share_groups = getattr(groups, "share", None)
            if share_groups is None or not hasattr(share_groups, "settings"):
                return fallback
            return share_groups.settings(group_id)
        coordinator = ShareCoordinator(config, replica_manager, lambda: metadata.image,
                                       metadata.create_topic_on_live_brokers)
        remote = ShareStateClient(config, lambda: metadata.image, coordinator.leader_for)
        persister = SharePersister(coordinator, remote)
        manager = SharePartitionManager(replica_manager, settings_of, persister=persister)
        return cls(ShareSessionCache(), manager, coordinator)

    async def start_offset(self, group_id: str, topic_id: str, partition: int
                           ) -> tuple[ErrorCode, int]:
        """The persisted share-partition start offset of (group, topic id, partition):
        -1 when the group never fetched it (DescribeShareGroupOffsets' answer), or the
        error reading it."""
        persister = self.partitions.persister
        if persister is None:
            return ErrorCode.NONE, -1
        error, snapshot = await persister.read(share_key(group_id, topic_id, partition))
        return error, (snapshot.start_offset if snapshot is not None else -1)

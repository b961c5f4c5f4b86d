"""SharePartitionManager: the share partitions this broker leads, and their lock timers.

Event-loop only.  Invariants:
- A SharePartition exists only while this broker leads its topic partition: losing
  the leadership (or the partition) drops every group's state of it, and its timer.
- Each SharePartition has at most one armed timer, at its earliest lock deadline;
  every caller that changes a SharePartition calls ``touched`` so the timer follows.
- A share partition starts, on its first fetch, at the log's high watermark
  (``share.auto.offset.reset`` latest, Kafka's default) or its log start offset
  (earliest).

Group settings come from the group side (``settings_of(group_id)``, S1's
``ShareGroups.settings``); without it Kafka's defaults apply.  Locks run on the
monotonic clock: they never outlive this process.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .partition import ShareLimits, SharePartition
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
                 clock: Callable[[], int] = monotonic_ms) -> None:
        self.settings_of = settings_of or (lambda group_id: DEFAULTS)
        self.clock = clock
        self.partitions: dict[ShareKey, SharePartition] = {}
        self._timers: dict[ShareKey, asyncio.TimerHandle] = {}
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

    def get_or_create(self, key: ShareKey, log_start_offset: int,
                      high_watermark: int) -> SharePartition:
        """The share partition of ``key``, created on first use at the offset
        ``share.auto.offset.reset`` names; its limits follow the group's settings."""
        limits = self.limits(key[0])
        share = self.partitions.get(key)
        if share is None:
            earliest = self.settings(key[0]).auto_offset_reset == "earliest"
            start = log_start_offset if earliest else high_watermark
            share = self.partitions[key] = SharePartition(start, limits)
            log.info("[Share group %s] %s-%d starts at offset %d", key[0], key[1], key[2],
                     start)
        else:
            share.limits = limits
        return share

    def touched(self, key: ShareKey) -> None:
        """Re-arm ``key``'s lock timer at its earliest deadline (none when no lock)."""
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        share = self.partitions.get(key)
        deadline = share.next_deadline_ms() if share is not None else None
        if deadline is None:
            return
        delay_s = max(0, deadline - self.clock()) / 1000
        self._timers[key] = asyncio.get_running_loop().call_later(delay_s, self._expire, key)

    def _expire(self, key: ShareKey) -> None:
        """The lock timer of ``key``: release what has expired, arm the next one."""
        self._timers.pop(key, None)
        share = self.partitions.get(key)
        if share is not None:
            released = share.expire_locks(self.clock())
            if released:
                log.debug("[Share group %s] %s-%d: %d record locks expired", key[0], key[1],
                          key[2], released)
        self.touched(key)

    def release_member(self, group_id: str, member_id: str,
                       partitions: Iterable[tuple[str, int]]) -> int:
        """Release ``member_id``'s locks on ``partitions`` (its session closed)."""
        released = 0
        for topic, index in partitions:
            key = (group_id, topic, index)
            share = self.partitions.get(key)
            if share is not None:
                released += share.release_member(member_id)
                self.touched(key)
        return released

    def on_leadership_changed(self, partition: Any) -> None:
        """A replica manager's leadership listener: not the leader any more, no state."""
        if partition.is_leader:
            return
        topic, index = partition.key
        for key in [k for k in self.partitions if k[1] == topic and k[2] == index]:
            del self.partitions[key]
            timer = self._timers.pop(key, None)
            if timer is not None:
                timer.cancel()

    # -- what the group side's admin APIs read --------------------------------------------

    def start_offsets(self, group_id: str) -> dict[tuple[str, int], int]:
        """{(topic, partition): SPSO} of ``group_id``'s share partitions led here."""
        return {(k[1], k[2]): share.start_offset for k, share in self.partitions.items()
                if k[0] == group_id}

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

    @classmethod
    def for_broker(cls, replica_manager: Any, groups: Any, config: Any) -> ShareState:
        """The broker's: settings from the group side's ``groups.share.settings`` once
        it has one, else the broker's ``group.share.*`` settings."""
        fallback = DefaultShareSettings(
            config["group.share.record.lock.duration.ms"],
            config["group.share.delivery.count.limit"],
            config["group.share.partition.max.record.locks"])

        def settings_of(group_id: str) -> Any:
            share_groups = getattr(groups, "share", None)
            if share_groups is None or not hasattr(share_groups, "settings"):
                return fallback
            return share_groups.settings(group_id)
        return cls(ShareSessionCache(), SharePartitionManager(replica_manager, settings_of))

"""The log cleaner's schedule: which hosted log to compact next, and the one thread that
does it (Kafka's LogCleaner and LogCleanerManager).

The loop (``run``) reacts to a timer only: it picks the filthiest compacted log — a
partition whose ``cleanup.policy`` includes ``compact``, leader or follower alike (each
replica cleans its own log, as in Kafka) — whose dirty ratio reaches
``min.cleanable.dirty.ratio`` or whose oldest dirty record passed
``max.compaction.lag.ms``; cleans it in the cleaner thread (``storage.cleaner.clean``:
only new ``.cleaned`` files are written there, the log is not touched); then, back on the
event loop, swaps the result in (``storage.cleaner.commit``, no ``await`` inside).  After
a pass it looks again at once; when nothing needs cleaning it sleeps
``log.cleaner.backoff.ms``.  It exits when cancelled (broker shutdown); a pass in the
thread then finishes writing and its files are dropped (or, after a crash, removed by
recovery).

Failures: a disk error (OSError in the thread, StorageIOError in the swap) takes the log
directory offline, as every storage failure does; a log whose batches do not decode
(``CleaningAborted``: bad content, not a bad disk) is marked uncleanable, with a
WARNING, and skipped until the broker restarts (Kafka's uncleanable partitions).  Event-loop only,
except ``clean`` in the thread.
"""
from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from storage import cleaner
from storage.errors import LogClosed, StorageError, StorageIOError

if TYPE_CHECKING:
    from ..config import BrokerConfig
    from .partition import Partition
    from .replica_manager import ReplicaManager

log = logging.getLogger(__name__)


class LogCleanerManager:
    """Owns the cleaner thread; ``replica_manager`` supplies the partitions and takes the
    log directory offline on a disk failure."""

    def __init__(self, replica_manager: ReplicaManager, config: BrokerConfig) -> None:
        self.replica_manager = replica_manager
        self.enabled = config["log.cleaner.enable"]
        self.backoff_s = config["log.cleaner.backoff.ms"] / 1000.0
        self._executor: ThreadPoolExecutor | None = None
        self.uncleanable: set[tuple[str, int]] = set()
        self.passes = 0
        self._prefix = f"[LogCleaner broker={replica_manager.node_id}]"

    def start(self) -> None:
        if not self.enabled:
            log.info("%s log.cleaner.enable=false: compacted topics are not cleaned",
                     self._prefix)
            return
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="log-cleaner")
        self.replica_manager.tasks.spawn("log-cleaner", self.run())

    def shutdown(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)

    async def run(self) -> None:
        """Clean the filthiest log, again and again; sleep when none needs it."""
        while True:
            try:
                cleaned = await self.clean_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s cleaning pass failed", self._prefix)
                cleaned = False
            if not cleaned:
                await asyncio.sleep(self.backoff_s)

    def _candidates(self, now_ms: int) -> list[tuple[cleaner.CleaningPlan, Partition]]:
        """(plan, partition) of every compacted log that needs cleaning now."""
        found: list[tuple[cleaner.CleaningPlan, Partition]] = []
        for partition in list(self.replica_manager.partitions.values()):
            if partition.offline or partition.key in self.uncleanable \
                    or not partition.log.config.compact:
                continue
            try:
                plan = cleaner.plan_cleaning(partition.log, now_ms)
            except LogClosed:
                continue
            if plan is not None and cleaner.needs_cleaning(
                    plan, partition.log.config.min_cleanable_dirty_ratio):
                found.append((plan, partition))
        return found

    async def clean_once(self) -> bool:
        """One pass over the filthiest log; False when no log needed cleaning."""
        now_ms = int(time.time() * 1000)
        candidates = self._candidates(now_ms)
        if not candidates:
            return False
        plan, partition = max(candidates, key=lambda c: (c[0].forced, c[0].dirty_ratio))
        loop = asyncio.get_running_loop()
        try:
            result = await loop.run_in_executor(self._executor, cleaner.clean, plan)
        except (cleaner.CleaningAborted, OSError) as exc:
            if self._changed(partition, plan):
                log.info("%s %s: the log changed under the pass (%s); trying again later",
                         self._prefix, partition.name, exc)
            elif isinstance(exc, cleaner.CleaningAborted):
                # Kafka's uncleanable partition: its segments stay as they are, the
                # directory stays online, the partition goes on serving.
                self.uncleanable.add(partition.key)
                log.warning("%s %s is uncleanable until restart: %s", self._prefix,
                            partition.name, exc)
            else:
                self.replica_manager.take_log_dir_offline(f"cleaning {partition.name}: {exc}")
            return False
        return self._commit(partition, result)

    def _changed(self, partition: Partition, plan: cleaner.CleaningPlan) -> bool:
        """True if the partition left, or a segment the pass read is gone or resized
        (retention, a truncation, the topic's deletion)."""
        if self.replica_manager.partitions.get(partition.key) is not partition \
                or partition.offline:
            return True
        current = {id(s): s.size_bytes for s in partition.log.segments}
        return any(current.get(id(source.segment)) != source.size_bytes
                   for source in plan.sources)

    def _commit(self, partition: Partition, result: cleaner.CleaningResult) -> bool:
        """Swap the cleaned segments in; no ``await`` here."""
        if self.replica_manager.partitions.get(partition.key) is not partition \
                or partition.offline:
            _discard(result)
            return False
        try:
            swapped = cleaner.commit(partition.log, result)
        except LogClosed:
            _discard(result)
            return False
        except StorageIOError as exc:
            self.replica_manager.take_log_dir_offline(f"cleaning {partition.name}: {exc}")
            return False
        except StorageError as exc:
            self.uncleanable.add(partition.key)
            log.error("%s %s is uncleanable until restart: %s", self._prefix, partition.name, exc)
            return False
        self.passes += 1
        stats = result.stats
        plan = result.plan
        log.info("%s cleaned %s: offsets [%d, %d) dirty ratio %.2f%s, %d → %d bytes, "
                 "%d of %d records kept, %d tombstones and %d batches dropped, %d of %d "
                 "segments swapped, %.0f ms in the cleaner thread", self._prefix,
                 partition.name, plan.first_dirty_offset, result.first_dirty_offset,
                 plan.dirty_ratio, " (max.compaction.lag.ms)" if plan.forced else "",
                 stats.bytes_read, stats.bytes_written, stats.records_kept, stats.records_read,
                 stats.tombstones_dropped, stats.batches_dropped, swapped, len(result.groups),
                 stats.elapsed_ms)
        return swapped > 0


def _discard(result: cleaner.CleaningResult) -> None:
    try:
        result.discard()
    except OSError:
        pass  # the directory went with its partition

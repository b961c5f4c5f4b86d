"""The partition logs' bulk writes, run in worker threads instead of the event loop.

Two passes touch many partitions and mostly wait on fsync: the periodic offsets
checkpoint (two fsyncs per partition whose offsets moved: 20,000 on each broker after a
produce over 10,000 partitions) and the close at shutdown (flush, checkpoint, producer
snapshot per partition).  On the event loop, the first stopped every request for tens
of seconds (longer than ``replica.lag.time.max.ms``, so leaders shrank their ISRs) and
the second kept a broker with thousands of partitions from stopping within 30 s of
SIGTERM.  Here each pass is split over ``WORKERS`` threads: fsync releases the GIL, and
concurrent fsyncs share the file system's journal commits.

Thread rules (``storage.PartitionLog``): ``checkpoint`` may run in a worker while the
loop keeps using the same log (the log's checkpoint lock orders the writes, and a
closed or deleted log raises LogClosed, skipped here); ``close`` runs in a worker only
at shutdown, after the checkpoint pass in flight finished and once the loop no longer
touches the logs.  A storage failure in a worker is returned, never handled there: the
caller reports it on the loop.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from storage.errors import LogClosed, StorageError

if TYPE_CHECKING:
    from .partition import Partition

#: threads per broker for these passes (they wait on the disk, not the CPU)
WORKERS = 8

Failures = list[tuple["Partition", StorageError]]


class LogWriter:
    """Runs the checkpoint pass and the shutdown close in worker threads.  Event-loop
    side only; at most one checkpoint pass at a time (the periodic task awaits it)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._pool: ThreadPoolExecutor | None = None
        self._pass: asyncio.Future[Failures] | None = None

    async def checkpoint(self, partitions: Sequence[Partition]) -> Failures:
        """Write the offsets checkpoint of ``partitions`` (those whose offsets moved);
        the (partition, error) that failed.  Cancelling the caller does not stop the
        writes: ``close`` waits for them."""
        if not partitions:
            return []
        self._pass = asyncio.ensure_future(self._run(_checkpoint_logs, partitions))
        return await asyncio.shield(self._pass)

    async def close(self, partitions: Sequence[Partition]) -> Failures:
        """Shutdown: wait for the checkpoint pass in flight, then close every log (an
        offline one without writing); the (partition, error) that failed.  The threads
        end with it."""
        if self._pass is not None and not self._pass.done():
            await asyncio.wait([self._pass])
        try:
            return await self._run(_close_logs, partitions)
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=False)
                self._pool = None

    async def _run(self, work: Callable[[Sequence[Partition]], Failures],
                   partitions: Sequence[Partition]) -> Failures:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(WORKERS, thread_name_prefix=self._name)
        loop = asyncio.get_running_loop()
        slices = [partitions[i::WORKERS] for i in range(min(WORKERS, len(partitions)))]
        results = await asyncio.gather(*(loop.run_in_executor(self._pool, work, part)
                                         for part in slices))
        return [failure for result in results for failure in result]


def _checkpoint_logs(partitions: Sequence[Partition]) -> Failures:
    """Worker: each log's ``checkpoint``; a log closed, deleted or taken offline
    meanwhile has nothing to write."""
    failed: Failures = []
    for partition in partitions:
        try:
            partition.log.checkpoint()
        except LogClosed:
            pass
        except StorageError as exc:
            failed.append((partition, exc))
    return failed


def _close_logs(partitions: Sequence[Partition]) -> Failures:
    """Worker, at shutdown: close each log cleanly, an offline one's files only."""
    failed: Failures = []
    for partition in partitions:
        try:
            if partition.offline:
                partition.log.close_handlers()
            else:
                partition.log.close()
        except StorageError as exc:
            failed.append((partition, exc))
    return failed

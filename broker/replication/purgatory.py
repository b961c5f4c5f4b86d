"""Delayed operations watched per partition (Kafka's purgatory, on one event loop).

A delayed operation is a request that cannot be answered yet: an acks=all produce
waiting for the high watermark, a fetch waiting for data.  It is watched under the
keys of the partitions it depends on; an append or a high watermark move on a
partition calls ``check_and_complete(key)``, which re-tries every operation watching
that key.  A timer (``loop.call_later``) forces completion when the wait runs out.

Why no "try, watch, try again": Kafka needs it because appends run on other threads
between the first try and the watch.  Here everything runs on one event loop and
``try_complete_else_watch`` contains no ``await``, so no trigger can slip in between.
"""
from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Hashable, Iterable


class DelayedOperation:
    """A request waiting for a condition or a timeout.

    Invariant: ``on_complete`` runs exactly once, whichever of (a) ``try_complete``
    finding the condition met, (b) the timer expiring, or (c) ``force_complete`` from
    a lost connection or a leadership change, happens first.  Event-loop only.
    Subclasses implement ``try_complete`` (return ``self.force_complete()`` when the
    condition holds, else False) and ``on_complete``; ``on_expiration`` is optional.
    """

    def __init__(self, timeout_ms: int):
        self.timeout_ms = max(0, timeout_ms)
        self.completed = False
        self.expired = False
        self._timer: asyncio.TimerHandle | None = None
        self._keys: tuple[Hashable, ...] = ()
        self._purgatory: Purgatory | None = None

    def try_complete(self) -> bool:
        raise NotImplementedError

    def try_complete_after(self, key: Hashable) -> bool:
        """``try_complete`` when only ``key`` changed since the last try.  An operation
        over many partitions may check just that one (every other key has its own
        triggers); the default re-checks everything."""
        return self.try_complete()

    def on_complete(self) -> None:
        raise NotImplementedError

    def on_expiration(self) -> None:
        """Called after ``on_complete`` when completion came from the timer."""

    def force_complete(self) -> bool:
        """Complete now unless already completed; True if this call completed it."""
        if self.completed:
            return False
        self.completed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._purgatory is not None:
            self._purgatory._unwatch(self)
        self.on_complete()
        return True

    def _expire(self) -> None:
        self._timer = None
        self.expired = True
        if self.force_complete():
            self.on_expiration()


class Purgatory:
    """Delayed operations keyed by partition (``(topic, partition)`` tuples)."""

    def __init__(self, name: str, loop: asyncio.AbstractEventLoop | None = None):
        self.name = name
        self._loop = loop
        self._watchers: dict[Hashable, set[DelayedOperation]] = defaultdict(set)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    def try_complete_else_watch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> bool:
        """Complete ``op`` now if it can; otherwise watch it under ``keys`` with its timer.

        Returns True if the operation completed during this call.
        """
        if op.try_complete():
            return True
        op._keys = tuple(keys)
        op._purgatory = self
        for key in op._keys:
            self._watchers[key].add(op)
        op._timer = self.loop.call_later(op.timeout_ms / 1000.0, op._expire)
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Trigger: something changed on ``key``; retry its watchers. Returns completions."""
        watchers = self._watchers.get(key)
        if not watchers:
            return 0
        completed = 0
        for op in list(watchers):
            if not op.completed and op.try_complete_after(key):
                completed += 1
        return completed

    def complete_all(self, key: Hashable) -> None:
        """Force every watcher of ``key`` to answer now (leadership lost, partition gone)."""
        for op in list(self._watchers.get(key, ())):
            op.force_complete()

    def watched(self, key: Hashable | None = None) -> int:
        if key is not None:
            return len(self._watchers.get(key, ()))
        return len({op for ops in self._watchers.values() for op in ops})

    def shutdown(self) -> None:
        """Answer every waiting operation (used on broker shutdown)."""
        for op in {op for ops in self._watchers.values() for op in ops}:
            op.force_complete()

    def _unwatch(self, op: DelayedOperation) -> None:
        for key in op._keys:
            ops = self._watchers.get(key)
            if ops is not None:
                ops.discard(op)
                if not ops:
                    del self._watchers[key]

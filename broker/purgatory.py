"""Delayed operations watched per key (Kafka's DelayedOperation and its purgatory, on
one event loop).

A delayed operation is a request that cannot be answered yet: an acks=all produce
waiting for the high watermark, a fetch waiting for data, a DeleteRecords waiting for
the replicas (replication/), a CreateTopics waiting for every broker to apply the new
metadata (controller/propagation.py).  It is watched under the keys it depends on
(``(topic, partition)`` for the partition operations); a change on a key calls
``check_and_complete(key)``, which re-tries the operations watching that key.  A timer
(``loop.call_later``) forces completion when the wait runs out.

This module sits on the lowest floor of broker/ (it imports only the stdlib), so both
the controller and the replication layer can build on it.

Watchers of a key are kept sorted by the operation's ``watch_order(key)`` (watch order
when it has none).  An acks=all produce orders itself by the offset it waits for, so a
high watermark move tries the produces from the lowest offset up and stops at the first
one still above the high watermark (``waits_in_order``): a trigger costs the produces it
completes plus one, however many wait behind them.

Why no "try, watch, try again": Kafka needs it because appends run on other threads
between the first try and the watch.  Here everything runs on one event loop and
``try_complete_else_watch`` contains no ``await``, so no trigger can slip in between.
"""
from __future__ import annotations

import asyncio
import bisect
import itertools
from collections import defaultdict
from collections.abc import Hashable, Iterable

# A watch-list entry: (order, sequence, operation); lists are kept sorted on the first two.
Entry = tuple[int, int, "DelayedOperation"]


class DelayedOperation:
    """A request waiting for a condition or a timeout.

    Invariant: ``on_complete`` runs exactly once, whichever of (a) ``try_complete``
    finding the condition met, (b) the timer expiring, or (c) ``force_complete`` from
    a leadership change, happens first, unless ``withdraw`` (a lost connection) came
    before them all: then it never runs.  Event-loop only.
    Subclasses implement ``try_complete`` (return ``self.force_complete()`` when the
    condition holds, else False) and ``on_complete``; ``on_expiration`` is optional.
    """

    def __init__(self, timeout_ms: int) -> None:
        self.timeout_ms = max(0, timeout_ms)
        self.completed = False
        self.expired = False
        self._timer: asyncio.TimerHandle | None = None
        self._entries: dict[Hashable, Entry] = {}  # key -> its entry in that key's list
        self._purgatory: Purgatory | None = None

    def try_complete(self) -> bool:
        raise NotImplementedError

    def try_complete_after(self, key: Hashable) -> bool:
        """``try_complete`` when only ``key`` changed since the last try.  An operation
        over many partitions may check just that one (every other key has its own
        triggers); the default re-checks everything."""
        return self.try_complete()

    def watch_order(self, key: Hashable) -> int | None:
        """Where this operation sorts among the watchers of ``key`` (None: after every
        operation watched before it)."""
        return None

    def waits_in_order(self, key: Hashable) -> bool:
        """True if, on ``key``, this operation still waits for a condition that every
        watcher sorted after it also waits for (an acks=all produce below the high
        watermark: those after it wait for higher offsets).  A trigger then stops at it
        instead of trying the rest.  Asked only right after a ``try_complete_after(key)``
        that did not complete."""
        return False

    def on_complete(self) -> None:
        raise NotImplementedError

    def on_expiration(self) -> None:
        """Called after ``on_complete`` when completion came from the timer."""

    def force_complete(self) -> bool:
        """Complete now unless already completed; True if this call completed it."""
        if not self._stop_waiting():
            return False
        self.on_complete()
        return True

    def withdraw(self) -> None:
        """Stop waiting without answering: the requester is gone (its connection was
        lost).  Counts as completed; ``on_complete`` never runs."""
        self._stop_waiting()

    def _stop_waiting(self) -> bool:
        """Mark completed, stop the timer and leave every watch list; False if the
        operation was completed already."""
        if self.completed:
            return False
        self.completed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._purgatory is not None:
            self._purgatory._unwatch(self)
        return True

    def _expire(self) -> None:
        self._timer = None
        self.expired = True
        if self.force_complete():
            self.on_expiration()


class Purgatory:
    """Delayed operations keyed by what they wait on (``(topic, partition)`` tuples for
    the partition operations; any hashable key)."""

    def __init__(self, name: str, loop: asyncio.AbstractEventLoop | None = None):
        self.name = name
        self._loop = loop
        # key -> [(order, sequence, op)], sorted; the sequence breaks ties by watch order
        self._watchers: dict[Hashable, list[Entry]] = defaultdict(list)
        self._sequence = itertools.count()

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
        op._purgatory = self
        for key in keys:
            sequence = next(self._sequence)
            order = op.watch_order(key)
            entry = (sequence if order is None else order, sequence, op)
            op._entries[key] = entry
            watchers = self._watchers[key]
            if not watchers or entry[:2] > watchers[-1][:2]:
                watchers.append(entry)  # the usual case: no search
            else:
                watchers.insert(bisect.bisect_left(watchers, entry[:2]), entry)
        op._timer = self.loop.call_later(op.timeout_ms / 1000.0, op._expire)
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Trigger: something changed on ``key``; retry its watchers in order, up to the
        first that ``waits_in_order``. Returns how many completed."""
        watchers = self._watchers.get(key)
        if not watchers:
            return 0
        completed = 0
        for _, _, op in list(watchers):  # completions edit the list
            if op.completed:
                continue
            if op.try_complete_after(key):
                completed += 1
            elif op.waits_in_order(key):
                break
        return completed

    def complete_all(self, key: Hashable) -> None:
        """Force every watcher of ``key`` to answer now (leadership lost, partition gone)."""
        for _, _, op in list(self._watchers.get(key, ())):
            op.force_complete()

    def watched(self, key: Hashable | None = None) -> int:
        if key is not None:
            return len(self._watchers.get(key, ()))
        return len({entry[2] for entries in self._watchers.values() for entry in entries})

    def shutdown(self) -> None:
        """Answer every waiting operation (used on broker shutdown)."""
        for op in {entry[2] for entries in self._watchers.values() for entry in entries}:
            op.force_complete()

    def _unwatch(self, op: DelayedOperation) -> None:
        for key, entry in op._entries.items():
            watchers = self._watchers.get(key)
            if watchers is None:
                continue
            index = bisect.bisect_left(watchers, entry[:2])
            if index < len(watchers) and watchers[index][2] is op:
                del watchers[index]
            if not watchers:
                del self._watchers[key]
        op._entries = {}

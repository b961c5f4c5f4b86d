"""Supervised background tasks: named, tracked, never ending silently.

Every component that runs work in the background (the Broker, the ReplicaManager, the
GroupCoordinator) owns one ``TaskSupervisor``:

* ``spawn(name, coro)`` runs a one-off task (an ISR change, a group write); the task
  is kept in ``tasks`` until it is done, and one that ends with an exception is logged
  at ERROR with its name;
* ``periodic(name, interval_s, fn)`` runs ``fn`` every ``interval_s``: an exception is
  logged with the loop's name and the loop goes on at the next tick (the first
  failure with its traceback, repeats at most once per ``REPEAT_LOG_INTERVAL_S``, and a
  line when the loop recovers), so one bad tick neither kills the loop nor floods the log;
* ``outlive(name, coro)`` runs work a client asked for that changes broker state (a
  coordinator's log write and the transition after it, an offset commit, an admin
  operation) as a task of its own and returns its result.  When the caller is
  cancelled (its connection was lost, which cancels the request's task) the work runs
  on to its end; only its answer is dropped;
* ``fatal(reason)`` is for failures the broker cannot run on (its only log directory
  failed): it logs at ERROR and calls the stop callback the owner was given, once.

``shutdown()`` lets the work of ``outlive`` finish (for at most ``WORK_GRACE_S``), then
cancels every task and waits for them, which is how every loop exits.
"""
from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)

REPEAT_LOG_INTERVAL_S = 60.0
# How long ``shutdown`` waits for the work of ``outlive`` before cancelling it; its
# writes wait at most 30 s for their acks, but a stopping broker must not wait that long.
WORK_GRACE_S = 3.0

T = TypeVar("T")

StopCallback = Callable[[str], None]


class TaskSupervisor:
    """The background tasks of one owner, and what happens when they fail.

    Invariants: every task spawned here is in ``tasks`` until it is done (then it
    leaves the set); no task ends with an exception without an ERROR line naming it
    (or, for ``outlive``, without the exception reaching its caller);
    a task of ``outlive`` is cancelled by ``shutdown`` only, never by its caller's
    cancellation; ``on_fatal`` is called at most once, with the first fatal reason.
    Who may call: the owner, on the event loop (``spawn``/``periodic`` need a running
    loop); ``fatal`` from anywhere on the loop, including inside a task of this one.
    """

    def __init__(self, name: str, on_fatal: StopCallback | None = None) -> None:
        self.name = name
        self.on_fatal = on_fatal
        self.tasks: set[asyncio.Task[Any]] = set()
        self.work: set[asyncio.Task[Any]] = set()  # the tasks of ``outlive``, also in ``tasks``
        self.fatal_reason: str | None = None

    def spawn(self, name: str, coro: Coroutine[Any, Any, T], *, fatal: bool = False
              ) -> asyncio.Task[T]:
        """Run ``coro`` as a task named ``name``; with ``fatal`` an exception it ends
        with stops the broker (``fatal``), otherwise it is logged."""
        task = asyncio.get_running_loop().create_task(coro, name=f"{self.name} {name}")
        self.tasks.add(task)
        task.add_done_callback(lambda t: self._on_done(name, t, fatal))
        return task

    async def outlive(self, name: str, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` as a task named ``name`` and return its result (or raise its
        exception).  If the caller is cancelled meanwhile, the task is not: it runs to
        its end, and an exception it ends with is logged at ERROR (nobody else hears of
        it); the caller's ``CancelledError`` propagates at once."""
        task = asyncio.get_running_loop().create_task(work, name=f"{self.name} {name}")
        self.tasks.add(task)
        self.work.add(task)
        task.add_done_callback(self._on_work_done)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():  # the caller is gone, not the work: nobody awaits it now
                task.add_done_callback(lambda t: self._on_done(name, t, False))
            raise

    def _on_work_done(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        self.work.discard(task)

    def _on_done(self, name: str, task: asyncio.Task[Any], fatal: bool) -> None:
        self.tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is None:
            return
        if fatal:
            self.fatal(f"task {name!r} failed: {exc!r}", exc)
        else:
            log.error("%s task %r failed", self.name, name, exc_info=exc)

    def periodic(self, name: str, interval_s: float, fn: Callable[[], object], *,
                 fatal_on: tuple[type[BaseException], ...] = ()) -> asyncio.Task[None]:
        """Call ``fn`` (plain or async) every ``interval_s`` seconds, forever.

        The loop reacts to its timer only; it exits on cancellation (``shutdown``), or
        when ``fn`` raises one of ``fatal_on`` (then ``fatal`` is called).  Any other
        exception is logged with ``name`` and the loop continues at the next tick.
        """
        return self.spawn(name, self._run_periodic(name, interval_s, fn, fatal_on))

    async def _run_periodic(self, name: str, interval_s: float, fn: Callable[[], object],
                            fatal_on: tuple[type[BaseException], ...]) -> None:
        noise = _FailureLog(f"{self.name} loop {name!r}")
        while True:
            await asyncio.sleep(interval_s)
            try:
                result = fn()
                if inspect.isawaitable(result):
                    await result
            except asyncio.CancelledError:
                raise
            except fatal_on as exc:
                self.fatal(f"loop {name!r} failed: {exc!r}", exc)
                return
            except Exception as exc:
                noise.failed(exc)
            else:
                noise.succeeded()

    def fatal(self, reason: str, exc: BaseException | None = None) -> None:
        """The broker cannot go on: log ``reason`` at ERROR and call the stop callback
        (the first time only).  Without a callback (a component driven alone, as in
        unit tests) the failure is only logged."""
        if self.fatal_reason is not None:
            return
        self.fatal_reason = reason
        log.error("%s fatal: %s", self.name, reason, exc_info=exc)
        if self.on_fatal is not None:
            self.on_fatal(reason)
        else:
            log.error("%s no stop callback: nothing stops the broker", self.name)

    async def shutdown(self, grace_s: float = WORK_GRACE_S) -> None:
        """Let the work of ``outlive`` finish (``grace_s`` at most), then cancel every
        task and wait until all have ended."""
        if self.work:
            _done, late = await asyncio.wait(list(self.work), timeout=grace_s)
            if late:
                log.warning("%s %d task(s) of client work still running after %.1f s at "
                            "shutdown; cancelled", self.name, len(late), grace_s)
        tasks = list(self.tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def __len__(self) -> int:
        return len(self.tasks)


class _FailureLog:
    """Bounded logging of a loop's consecutive failures (one loop's, event-loop only)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.consecutive = 0
        self.last_logged = 0.0

    def failed(self, exc: Exception) -> None:
        self.consecutive += 1
        now = time.monotonic()
        if self.consecutive == 1:
            log.error("%s failed; it runs again at its next tick", self.what, exc_info=exc)
            self.last_logged = now
        elif now - self.last_logged >= REPEAT_LOG_INTERVAL_S:
            log.error("%s failed %d times in a row, last: %r", self.what, self.consecutive, exc)
            self.last_logged = now

    def succeeded(self) -> None:
        if self.consecutive:
            log.info("%s recovered after %d failures", self.what, self.consecutive)
            self.consecutive = 0

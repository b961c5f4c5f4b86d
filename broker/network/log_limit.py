"""Log lines a peer can cause, rate-limited so that no peer can flood the log.

A malformed request, a refused one, or a handler that fails on what a client sent logs
at most one line per kind per interval; the next line of that kind after the interval
says how many were suppressed meanwhile.  The first failure of each kind keeps its
traceback (a bug of ours deserves one); its repeats do not.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable

DEFAULT_INTERVAL_S = 10.0
# Kinds are named by our code (an API, an error type, a source line), so they are few;
# the cap only bounds memory should a caller name them from peer input by mistake.
MAX_KINDS = 1024


class RateLimitedLog:
    """At most one line per kind every ``interval_s`` seconds. Event-loop only.

    Invariants: a kind's first line is always written (with its traceback when asked);
    within ``interval_s`` of the last written line of a kind, further lines of it are only
    counted; the next written line of that kind carries the count, which then restarts.
    """

    def __init__(self, logger: logging.Logger, interval_s: float = DEFAULT_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic):
        self.logger = logger
        self.interval_s = interval_s
        self.clock = clock
        self._kinds: dict[object, list] = {}  # kind -> [time last written, suppressed]

    def log(self, level: int, kind: object, msg: str, *args,
            first_traceback: bool = False) -> bool:
        """Log ``msg % args`` at ``level`` unless a line of ``kind`` was written within the
        interval; True when written.  ``first_traceback``: the first line of this kind
        carries the exception being handled."""
        now = self.clock()
        state = self._kinds.get(kind)
        if state is None:
            if len(self._kinds) >= MAX_KINDS:
                self._kinds.clear()
            self._kinds[kind] = [now, 0]
            self.logger.log(level, msg, *args, exc_info=first_traceback)
            return True
        if now - state[0] < self.interval_s:
            state[1] += 1
            return False
        suppressed, elapsed_s = state[1], now - state[0]
        state[0], state[1] = now, 0
        if suppressed:
            self.logger.log(level, msg + " (%d more like it in the last %.0f s not logged)",
                            *args, suppressed, elapsed_s)
        else:
            self.logger.log(level, msg, *args)
        return True

    def warning(self, kind: object, msg: str, *args) -> bool:
        return self.log(logging.WARNING, kind, msg, *args)

    def suppressed(self, kind: object) -> int:
        """How many lines of ``kind`` were counted but not written since its last line."""
        state = self._kinds.get(kind)
        return state[1] if state else 0

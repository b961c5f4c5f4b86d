"""RateLimitedLog: one line per kind per interval, the count of the rest on the next one,
and the first traceback of each kind kept."""
from __future__ import annotations

import logging

from broker.network.log_limit import RateLimitedLog


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def _limited(caplog, interval_s=10.0):
    clock = Clock()
    logger = logging.getLogger("test.log_limit")
    caplog.set_level(logging.INFO, logger="test.log_limit")
    return RateLimitedLog(logger, interval_s, clock), clock


def test_one_line_per_kind_per_interval_and_the_count_of_the_rest(caplog):
    limited, clock = _limited(caplog)
    for _ in range(1000):
        limited.warning("corrupt", "bad %s", "frame")
    assert [r.getMessage() for r in caplog.records] == ["bad frame"]
    assert limited.suppressed("corrupt") == 999
    clock.now = 10.0
    limited.warning("corrupt", "bad %s", "frame")
    assert caplog.records[-1].getMessage() == \
        "bad frame (999 more like it in the last 10 s not logged)"
    assert limited.suppressed("corrupt") == 0


def test_kinds_are_limited_separately(caplog):
    limited, _clock = _limited(caplog)
    assert limited.warning("a", "first a")
    assert limited.warning("b", "first b")
    assert not limited.warning("a", "second a")
    assert [r.getMessage() for r in caplog.records] == ["first a", "first b"]


def test_only_the_first_line_of_a_kind_carries_the_traceback(caplog):
    limited, clock = _limited(caplog, interval_s=1.0)
    for step in range(3):
        clock.now = step * 2.0
        try:
            raise TypeError("boom")
        except TypeError:
            limited.log(logging.ERROR, "failed", "handler failed", first_traceback=True)
    assert len(caplog.records) == 3
    assert caplog.records[0].exc_info is not None
    assert all(not r.exc_info for r in caplog.records[1:])

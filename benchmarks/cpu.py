"""CPU time of broker processes, read from /proc (Linux). Pure reads; no process control.

A broker here is a process group (each `BrokerProcess` starts a new session). Its CPU time
is the sum, over every live member of the group, of utime + stime from /proc/<pid>/stat
(a process's line covers all its threads), plus cutime + cstime of each member: the time
of children that already exited and were reaped. So a sample taken before and after a
phase gives the CPU seconds the broker and all its children spent in that phase.

With it goes each member's *run-queue wait*: how long its main thread was ready to run
while every core was busy with something else (/proc/<pid>/schedstat, Linux with
schedstats; 0.0 where missing).  A broker's main thread runs its event loop, so a wait
close to its CPU time says the host, not the broker, set the pace.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat_fields(stat_text: str) -> list[str]:
    """Fields after the ")" closing the command name: field 3 (state) is index 0."""
    return stat_text[stat_text.rfind(")") + 2:].split()


def group_usage(pgids: list[int]) -> tuple[float, float]:
    """(CPU seconds, user + system with reaped children, of every live process whose
    process group is in `pgids`; seconds the main threads of those processes waited on a
    run queue for a CPU).  (0.0, 0.0) where /proc is missing."""
    wanted = set(pgids)
    ticks = 0
    wait_ns = 0
    if not PROC.is_dir():
        return 0.0, 0.0
    for stat_path in PROC.glob("[0-9]*/stat"):
        try:
            fields = _stat_fields(stat_path.read_text())
        except OSError:
            continue
        # index: 0 state, 2 pgrp, 11 utime, 12 stime, 13 cutime, 14 cstime
        if len(fields) > 14 and int(fields[2]) in wanted:
            ticks += sum(int(fields[i]) for i in (11, 12, 13, 14))
            try:  # ns on a CPU, ns waiting on a run queue, timeslices
                wait_ns += int((stat_path.parent / "schedstat").read_text().split()[1])
            except (OSError, ValueError, IndexError):
                pass
    return ticks / CLOCK_TICKS_PER_S, wait_ns / 1e9


@dataclass
class CpuSample:
    cpu_s: float
    wall_s: float
    wait_s: float = 0.0  # run-queue wait of the processes' main threads


class CpuMeter:
    """Samples the CPU time of a fixed set of process groups. Main thread only.

    `mark()` then `since(mark)` gives (cpu seconds, wall seconds) between the two calls.
    """

    def __init__(self, pgids: list[int]) -> None:
        self.pgids = list(pgids)

    def mark(self) -> CpuSample:
        cpu_s, wait_s = group_usage(self.pgids)
        return CpuSample(cpu_s, time.monotonic(), wait_s)

    def since(self, start: CpuSample) -> CpuSample:
        now = self.mark()
        return CpuSample(now.cpu_s - start.cpu_s, now.wall_s - start.wall_s,
                         now.wait_s - start.wait_s)


def cpu_s_per_gb(cpu_s: float, value_bytes: int) -> float | None:
    """Broker CPU seconds per 10^9 bytes of record values; None for no bytes."""
    return cpu_s / (value_bytes / 1e9) if value_bytes > 0 else None

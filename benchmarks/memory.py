"""Resident memory and open files of broker processes, read from /proc (Linux). Pure reads.

A broker is a process group (see cpu.py). Its resident set is the sum of VmRSS over the
live members of the group (/proc/<pid>/status), its open files the sum of the entries of
/proc/<pid>/fd. Both are 0 where /proc is missing or a member is gone mid-read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass
class MemorySample:
    rss_kib: int
    open_fds: int

    @property
    def rss_mib(self) -> float:
        return self.rss_kib / 1024


def _members(pgid: int) -> list[Path]:
    """The /proc/<pid> directories of the live processes of group `pgid`."""
    found = []
    if not PROC.is_dir():
        return found
    for stat_path in PROC.glob("[0-9]*/stat"):
        try:
            text = stat_path.read_text()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2:].split()
        if len(fields) > 2 and int(fields[2]) == pgid:
            found.append(stat_path.parent)
    return found


def vm_rss_kib(status_text: str) -> int:
    """VmRSS in KiB from the text of /proc/<pid>/status; 0 if the line is missing."""
    for line in status_text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def group_memory(pgid: int) -> MemorySample:
    """Resident KiB and open file descriptors of every live process of group `pgid`."""
    rss = fds = 0
    for proc_dir in _members(pgid):
        try:
            rss += vm_rss_kib((proc_dir / "status").read_text())
            fds += len(os.listdir(proc_dir / "fd"))
        except OSError:
            continue
    return MemorySample(rss, fds)

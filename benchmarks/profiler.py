"""py-spy on Raftwood broker processes during one benchmark phase (`bench.py --profile`).

`Profiler.during(phase, pids)` is a context manager: when `phase` is the one asked for,
it starts `py-spy record --pid P` for each pid (output format from the file name: .svg
flamegraph, .txt raw collapsed stacks, anything else speedscope JSON), and at the end of
the block sends SIGINT, which makes py-spy write its file, and waits for it. With several
brokers each gets its own file: PATH with `.broker-<i>` before the suffix.
Main thread only. py-spy needs ptrace rights on the broker (root, or
kernel.yama.ptrace_scope=0 for a process of the same user).
"""

from __future__ import annotations

import contextlib
import select
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

PYSPY_STOP_TIMEOUT_S = 60.0
PYSPY_ATTACH_TIMEOUT_S = 10.0  # until py-spy says "Sampling process ..."
SAMPLE_RATE_HZ = 100
FORMATS = {".svg": "flamegraph", ".txt": "raw", ".json": "speedscope"}


def pyspy_binary() -> str | None:
    """py-spy next to the running Python (the venv's bin), else on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.is_file() else shutil.which("py-spy")


class Profiler:
    """Records the brokers during the phase named `phase`; does nothing for other phases."""

    def __init__(self, output: Path | None, phase: str, say: Callable[[str], None]) -> None:
        self.output = output
        self.phase = phase
        self.say = say
        self.written: list[Path] = []
        self.failures: list[str] = []

    @property
    def enabled(self) -> bool:
        return self.output is not None

    def check(self) -> str | None:
        """Why profiling cannot run, or None."""
        if self.enabled and pyspy_binary() is None:
            return "py-spy not found: pip install py-spy (or make bench, which installs .[bench])"
        return None

    @contextlib.contextmanager
    def during(self, phase: str, pids: list[int]) -> Iterator[None]:
        if not self.enabled or phase != self.phase:
            yield
            return
        paths = self._paths(len(pids))
        fmt = FORMATS.get(self.output.suffix, "speedscope")
        spies = [(self._start(pid, path, fmt), path) for pid, path in zip(pids, paths)]
        self.say(f"profiling {phase}: py-spy on pid(s) {', '.join(map(str, pids))}")
        try:
            yield
        finally:
            for spy, path in spies:
                self._stop(spy, path)

    def _paths(self, count: int) -> list[Path]:
        if count == 1:
            return [self.output]
        return [self.output.with_name(f"{self.output.stem}.broker-{i}{self.output.suffix}")
                for i in range(1, count + 1)]

    def _start(self, pid: int, path: Path, fmt: str) -> subprocess.Popen:
        path.parent.mkdir(parents=True, exist_ok=True)
        argv = [pyspy_binary(), "record", "--pid", str(pid), "--output", str(path),
                "--format", fmt, "--rate", str(SAMPLE_RATE_HZ), "--nonblocking"]
        spy = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
        _wait_attached(spy)
        return spy

    def _stop(self, spy: subprocess.Popen, path: Path) -> None:
        if spy.poll() is None:
            spy.send_signal(signal.SIGINT)
        try:
            out, _ = spy.communicate(timeout=PYSPY_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            spy.kill()
            out, _ = spy.communicate()
        if path.is_file() and path.stat().st_size > 0:
            self.written.append(path)
            self.say(f"profile written: {path}")
        else:
            tail = " | ".join((out or "").strip().splitlines()[-3:])
            self.failures.append(f"{path}: py-spy exit {spy.returncode}: {tail}")
            self.say(f"profile NOT written to {path} (py-spy exit {spy.returncode}): {tail}")


def _wait_attached(spy: subprocess.Popen) -> None:
    """Return once py-spy printed its first line (it is sampling, or it failed), so the
    phase does not start before sampling does; at most PYSPY_ATTACH_TIMEOUT_S."""
    ready, _, _ = select.select([spy.stdout], [], [], PYSPY_ATTACH_TIMEOUT_S)
    if ready:
        spy.stdout.readline()

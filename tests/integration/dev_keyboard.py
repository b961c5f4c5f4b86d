"""Shared by the tests that drive ``raftwood dev`` through its keyboard and its fault
commands (``test_cli_dev_faults.py``, ``test_dev_isolate.py``): a two-broker dev with a
pseudo terminal as stdin, its table rows, its fault record and the replication view's
event stream."""
from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from tests.integration.test_cli import START_TIMEOUT_S, DevRun, cli_env

# A broker's row of dev's table: id, address, pid (group 1), state (group 2), ...
ROW = r"^\s*{id}\s+127\.0\.0\.1:\d+\s+(\d+)\s+({state})\s.*\s(\d+)\s*$"
FEED_TIMEOUT_S = 30.0


class KeyedDevRun(DevRun):
    """``raftwood dev --brokers 2 --voters 1 [options] --port port`` with a pseudo
    terminal as stdin (its stdout still a pipe read line by line): ``press`` types keys
    into it."""

    def __init__(self, tmp_path: Path, port: int, options: tuple[str, ...] = ()):
        self.brokers = 2
        self.port = port
        self.data_dir = tmp_path / "data"
        self.stderr_path = tmp_path / "dev.stderr"
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self.terminal, keyboard = os.openpty()
        try:
            with open(self.stderr_path, "w") as stderr:
                self.process = subprocess.Popen(
                    [sys.executable, "-m", "broker.cli", "dev", "--brokers", "2",
                     "--voters", "1", *options, "--port", str(self.port),
                     "--data-dir", str(self.data_dir), "--start-timeout",
                     str(START_TIMEOUT_S)],
                    stdout=subprocess.PIPE, stderr=stderr, stdin=keyboard, text=True,
                    env=cli_env(), start_new_session=True)
        finally:
            os.close(keyboard)
        threading.Thread(target=self._read, daemon=True).start()

    def press(self, keys: str) -> None:
        os.write(self.terminal, keys.encode())

    def close(self) -> None:
        if self.process.poll() is None:
            self.interrupt()
        self.kill_all()
        os.close(self.terminal)


def row(dev: DevRun, node_id: int, state: str, timeout_s: float = 60) -> re.Match:
    """The next table row showing broker ``node_id`` in ``state`` (a regex)."""
    return dev.wait_for_line(ROW.format(id=node_id, state=state), timeout_s)


def recorded(dev: DevRun) -> list[tuple[str, int, str]]:
    """(action, broker, by) of every fault dev recorded, in order."""
    lines = (dev.data_dir / "faults.jsonl").read_text().splitlines()
    return [(r["action"], r["broker"], r["by"]) for r in map(json.loads, lines)]


def first_feed_message(port: int) -> dict:
    """The first message of the replication view's event stream on ``port``."""
    url = f"http://127.0.0.1:{port}/replication/events"
    with urllib.request.urlopen(url, timeout=FEED_TIMEOUT_S) as stream:
        deadline = time.monotonic() + FEED_TIMEOUT_S
        while time.monotonic() < deadline:
            line = stream.readline()
            assert line, "the event stream ended"
            if line.startswith(b"data:"):
                return json.loads(line[len(b"data:"):])
    raise AssertionError(f"no message on {url} within {FEED_TIMEOUT_S} s")

"""Injected faults, read for the replication view from the JSON-lines file ``raftwood dev``
appends to (``broker/cli/dev_faults.py`` writes it; its path reaches every dev broker in
the environment variable ``FAULTS_FILE_ENV``).

One line per fault::

    {"ts": ms, "action": "kill" | "pause" | "resume" | "restart" | "isolate" | "heal",
     "broker": id,
     "pid": pid, "by": "key" | "command"}

``FaultReader.new_events`` turns the lines appended since its last call into view events
(kind ``FAULT``, no topic or partition, plus ``action`` and ``broker``) so the page can
mark them on its timeline beside the elections and ISR changes they cause.

Invariants: reading never raises (a missing, unreadable or truncated file is no faults;
a line that is not a fault object is skipped); a line still being written (no newline
yet) is read once it is complete; the first read takes at most ``FIRST_READ_BYTES`` from
the end, so a long dev session does not flood a page that opens late.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

FAULTS_FILE_ENV = "RAFTWOOD_DEV_FAULTS_FILE"
FAULT = "fault"
ACTIONS = {"kill": "kill -9", "pause": "pause (SIGSTOP)", "resume": "resume (SIGCONT)",
           "restart": "restart", "isolate": "isolate (network)",
           "heal": "heal (network)"}
FIRST_READ_BYTES = 64 * 1024
MAX_READ_BYTES = 256 * 1024


def fault_event(record: dict) -> dict | None:
    """The view event of one fault line; None when it is not one."""
    if not isinstance(record, dict):
        return None
    action, broker, ts = record.get("action"), record.get("broker"), record.get("ts")
    if action not in ACTIONS or not isinstance(broker, int) or not isinstance(ts, int):
        return None
    by = " (key)" if record.get("by") == "key" else ""
    return {"ts": ts, "kind": FAULT, "topic": None, "partition": None,
            "action": action, "broker": broker,
            "text": f"fault: {ACTIONS[action]} broker {broker}{by}"}


class FaultReader:
    """Follows one fault file by offset.  Not thread-safe; the feed's poller calls it."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.offset: int | None = None   # None: not read yet

    def new_events(self) -> list[dict]:
        """Events of the complete lines appended since the last call (oldest first)."""
        try:
            with open(self.path, "rb") as file:
                size = os.fstat(file.fileno()).st_size
                if self.offset is None or size < self.offset:   # first read, or truncated
                    self.offset = max(0, size - FIRST_READ_BYTES) if self.offset is None else 0
                    skip_partial = self.offset > 0
                else:
                    skip_partial = False
                file.seek(self.offset)
                data = file.read(MAX_READ_BYTES)
        except OSError:
            return []
        end = data.rfind(b"\n") + 1
        chunk, self.offset = data[:end], self.offset + end
        lines = chunk.split(b"\n")
        if skip_partial and lines:
            lines = lines[1:]
        events = []
        for line in lines:
            try:
                event = fault_event(json.loads(line)) if line.strip() else None
            except ValueError:
                event = None
            if event is not None:
                events.append(event)
        return events


def reader_from_environment() -> FaultReader | None:
    """The reader of the file ``raftwood dev`` named for this broker, if any."""
    path = os.environ.get(FAULTS_FILE_ENV, "")
    return FaultReader(path) if path else None

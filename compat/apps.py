"""Stream-processing apps as subprocesses, and reading what they wrote, for the tests.

``AppProcess`` starts one app (Faust, Quix Streams, Flink) with its own environment,
its output in a log file, and stops it by its pid: SIGTERM, then SIGKILL after a bound.
``last_values`` reads a topic to its end (read_committed) and gives the last value per
key, which is how a test reads a table's changelog or an app's windowed results.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from kafka import KafkaConsumer, TopicPartition

STOP_TIMEOUT_S = 20.0


class AppProcess:
    """One app run: ``argv`` started in ``cwd`` with ``env`` added, output to ``log_path``."""

    def __init__(self, argv: list[str], log_path: Path, env: dict[str, str] | None = None,
                 cwd: Path | None = None):
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 (closed in stop())
        self.popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self._log,
                                      stderr=subprocess.STDOUT, cwd=cwd,
                                      env={**os.environ, **(env or {})},
                                      start_new_session=True)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def running(self) -> bool:
        return self.popen.poll() is None

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM the app (its process group: the JVM a Python app starts goes too), then
        SIGKILL after ``timeout_s``; the exit code (None if it would not die)."""
        for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 10.0)):
            if self.popen.poll() is not None:
                break
            try:
                os.killpg(self.popen.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.popen.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                continue
        self._log.close()
        return self.popen.poll()

    def kill(self) -> None:
        """SIGKILL the app's process group at once (a crash)."""
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=10)

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def last_values(bootstrap: str, topic: str, timeout_s: float = 30.0) -> dict[bytes, bytes]:
    """key -> last value of every partition of ``topic``, read_committed to its end."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","),
                             isolation_level="read_committed", enable_auto_commit=False,
                             request_timeout_ms=15_000)
    try:
        partitions = consumer.partitions_for_topic(topic) or set()
        assignment = [TopicPartition(topic, p) for p in sorted(partitions)]
        if not assignment:
            return {}
        consumer.assign(assignment)
        consumer.seek_to_beginning(*assignment)
        ends = consumer.end_offsets(assignment)
        values: dict[bytes, bytes] = {}
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and any(
                consumer.position(tp) < ends[tp] for tp in assignment):
            for records in consumer.poll(timeout_ms=500).values():
                for record in records:
                    values[record.key] = record.value
        return values
    finally:
        consumer.close()


def committed_offset(bootstrap: str, group: str, topic: str, partition: int = 0) -> int:
    """The offset ``group`` has committed for ``topic``-``partition`` (-1001: none yet)."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as Partition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    try:
        [answer] = consumer.committed([Partition(topic, partition)], timeout=15)
        return answer.offset
    finally:
        consumer.close()


def wait_while_running(predicate, timeout_s: float, what: str, app: AppProcess,
                       interval_s: float = 0.5) -> None:
    """Poll ``predicate()`` until it returns True, for at most ``timeout_s``; anything else
    it returns is kept as "the last result".  AssertionError (with the app's log) when the
    app exits first or the time is up."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        assert app.running(), f"the app exited while waiting for {what}\n{app.log_tail()}"
        last = predicate()
        if last is True:
            return
        time.sleep(interval_s)
    raise AssertionError(f"not {what} in {timeout_s} s (last: {last})\n{app.log_tail()}")

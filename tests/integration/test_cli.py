"""The ``raftwood`` command line against real broker processes.

``raftwood dev`` runs as a subprocess on free ports in a temporary directory; the client
commands (``topics``, ``cluster``) run as subprocesses against it, as a user would.  Every
wait is bounded; every process started here is killed at teardown (``dev`` itself also
SIGKILLs its brokers through PR_SET_PDEATHSIG if it dies).
"""
from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60.0
COMMAND_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 40.0   # dev waits up to 15 s per broker set, then SIGKILLs


def ports_free(ports) -> bool:
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def free_port_block(count: int, raft: bool) -> int:
    """A port P with P..P+count-1, P+300.. (dev's metrics ports) and, when ``raft``,
    P+100.. free a moment ago."""
    for _ in range(200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            base = sock.getsockname()[1]
        if base + 300 + count > 65535:
            continue
        wanted = list(range(base, base + count)) + list(range(base + 300, base + 300 + count))
        if raft:
            wanted += list(range(base + 100, base + 100 + count))
        if ports_free(wanted):
            return base
    raise RuntimeError("no free block of ports")


def cli_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def raftwood(*args, timeout_s: float = COMMAND_TIMEOUT_S) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "broker.cli", *args], capture_output=True,
                          text=True, timeout=timeout_s, env=cli_env(), stdin=subprocess.DEVNULL)


class DevRun:
    """``raftwood dev`` as a subprocess in its own process group; its stdout read line by
    line on a thread.  ``command`` is how ``raftwood`` is run (default: this checkout's,
    as ``python -m broker.cli``; the wheel test passes an installed one, with its own
    ``env`` and ``cwd``)."""

    def __init__(self, tmp_path: Path, brokers: int, port: int | None = None,
                 data_dir: Path | None = None, name: str = "dev",
                 command: list[str] | None = None, env: dict | None = None,
                 cwd: Path | None = None):
        self.brokers = brokers
        self.port = free_port_block(brokers, raft=brokers > 1) if port is None else port
        self.data_dir = tmp_path / "data" if data_dir is None else data_dir
        self.stderr_path = tmp_path / f"{name}.stderr"
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        command = [sys.executable, "-m", "broker.cli"] if command is None else command
        with open(self.stderr_path, "w") as stderr:
            self.process = subprocess.Popen(
                [*command, "dev", "--brokers", str(brokers),
                 "--port", str(self.port), "--data-dir", str(self.data_dir),
                 "--start-timeout", str(START_TIMEOUT_S)],
                stdout=subprocess.PIPE, stderr=stderr, stdin=subprocess.DEVNULL, text=True,
                env=cli_env() if env is None else env, cwd=cwd, start_new_session=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for_line(self, pattern: str, timeout_s: float) -> re.Match:
        deadline = time.monotonic() + timeout_s
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                break
            if line is None:
                raise AssertionError(f"dev exited ({self.process.poll()}) before printing "
                                     f"{pattern!r}\n{self.output()}")
            self.lines.append(line)
            match = re.search(pattern, line)
            if match:
                return match
        raise AssertionError(f"no line matching {pattern!r} in {timeout_s} s\n{self.output()}")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def broker_pids(self) -> list[int]:
        return [int(m.group(1)) for line in self.lines
                for m in [re.search(r"starting broker \d+/\d+ \(\S+, pid (\d+)\)", line)] if m]

    def output(self) -> str:
        logs = "\n".join(f"--- {p}\n{p.read_text(errors='replace')[-3000:]}"
                         for p in sorted(self.data_dir.glob("broker-*/broker.log")))
        stderr = self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""
        return "stdout:\n" + "\n".join(self.lines) + f"\nstderr:\n{stderr}\n{logs}"

    def interrupt(self) -> int:
        """SIGINT, as Ctrl-C; the exit code (AssertionError if dev does not exit in time)."""
        self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"dev still running {STOP_TIMEOUT_S} s after SIGINT\n"
                                 f"{self.output()}") from None

    def kill_all(self) -> None:
        """SIGKILL dev, its process group and every broker pid it printed."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.process.kill()
            self.process.wait(timeout=10)
        restarted = [int(m.group(1)) for line in self.lines
                     for m in [re.search(r"restarting broker \d+ \(\S+, pid (\d+)\)", line)] if m]
        for pid in self.broker_pids() + restarted:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


@pytest.fixture
def dev_cluster(tmp_path):
    runs: list[DevRun] = []

    def start(brokers: int) -> DevRun:
        run = DevRun(tmp_path, brokers)
        runs.append(run)
        run.wait_for_line(r"^bootstrap servers: ", START_TIMEOUT_S * brokers + 10)
        return run

    yield start
    for run in runs:
        run.kill_all()


def process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # Still in the table: only a zombie (not reaped yet) counts as gone.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except (OSError, IndexError):
        return True


def assert_ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.mark.slow
def test_dev_one_broker_serves_topic_and_cluster_commands_and_stops_cleanly_on_sigint(
        dev_cluster):
    """One dev broker for every client command a lone broker answers (a dev start costs
    two interpreters): topics create/list/delete/describe, cluster, users list."""
    dev = dev_cluster(1)
    assert dev.lines[-1] == f"bootstrap servers: {dev.bootstrap}"
    pids = dev.broker_pids()
    assert len(pids) == 1
    assert (dev.data_dir / "broker-1" / "broker.log").exists()
    dev.wait_for_line(r"^ID\s+ADDRESS\s+PID\s+STATE", 15)   # the status table follows
    server = ["--bootstrap-server", dev.bootstrap]

    out = assert_ok(raftwood("topics", "create", "cli-orders", "--partitions", "3",
                             "--config", "retention.ms=600000", *server))
    assert "created topic cli-orders" in out and "partitions: 3" in out
    again = raftwood("topics", "create", "cli-orders", *server)
    assert again.returncode == 1 and "TOPIC_ALREADY_EXISTS" in again.stderr
    assert "cli-orders" in assert_ok(raftwood("topics", "list", *server)).split()

    assert "deleted topic cli-orders" in assert_ok(raftwood("topics", "delete", "cli-orders",
                                                            *server))
    assert "cli-orders" not in assert_ok(raftwood("topics", "list", *server)).split()
    missing = raftwood("topics", "delete", "cli-orders", *server)
    assert missing.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr

    assert_describe_and_cluster_show_a_lone_broker(server)
    assert dev.interrupt() == 0, dev.output()
    assert all(process_gone(pid) for pid in pids), f"brokers left running: {pids}"


def test_dev_reports_a_broker_that_dies_as_down_and_does_not_restart_it_by_itself(
        dev_cluster):
    dev = dev_cluster(1)
    (pid,) = dev.broker_pids()
    os.kill(pid, signal.SIGKILL)
    dev.wait_for_line(r"^broker 1 exited with -9", 15)
    dev.wait_for_line(r"^\s*1\s+127\.0\.0\.1:\d+\s+\d+\s+down", 15)
    assert dev.interrupt() == 0, dev.output()


def test_client_commands_without_a_broker_exit_2_with_a_message():
    port = free_port_block(1, raft=False)
    result = raftwood("cluster", "--bootstrap-server", f"127.0.0.1:{port}")
    assert result.returncode == 2
    assert f"cannot connect to 127.0.0.1:{port}" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "--bootstrap-server" in result.stderr
    assert "Traceback" not in result.stderr


def assert_describe_and_cluster_show_a_lone_broker(server: list[str]) -> None:
    assert_ok(raftwood("topics", "create", "cli-described", "--partitions", "2", *server))
    out = assert_ok(raftwood("topics", "describe", "cli-described", *server))
    rows = [line.split() for line in out.splitlines() if line.startswith("cli-described ")]
    partitions = [r for r in rows if len(r) >= 9]
    assert [r[1] for r in partitions] == ["0", "1"]
    for row in partitions:
        assert row[2] == "1" and row[5] == "1" and row[6] == "1"    # leader, replicas, ISR
        assert row[8].startswith("1:Online:")
    cluster = assert_ok(raftwood("cluster", *server))
    assert "controller: 1" in cluster and "offline partitions: 0" in cluster
    users = assert_ok(raftwood("users", "list", *server))
    assert users.startswith("no SCRAM users"), "an empty list says so"


@pytest.mark.slow
def test_dev_three_brokers_form_a_quorum_with_replicated_topics(dev_cluster):
    dev = dev_cluster(3)
    assert dev.lines[-1] == ("bootstrap servers: " + ",".join(
        f"127.0.0.1:{dev.port + i}" for i in range(3)))
    pids = dev.broker_pids()
    assert len(pids) == 3
    server = ["--bootstrap-server", f"127.0.0.1:{dev.port + 1}"]   # any broker will do
    assert_ok(raftwood("topics", "create", "cli-replicated", "--partitions", "3",
                       "--replication-factor", "3", "--config", "min.insync.replicas=2",
                       *server))
    deadline = time.monotonic() + 30
    while True:   # replicas join the ISR once they fetch
        out = assert_ok(raftwood("topics", "describe", "cli-replicated", *server))
        rows = [line.split() for line in out.splitlines()
                if line.startswith("cli-replicated ") and len(line.split()) >= 11]
        if len(rows) == 3 and all(len(r[6].split(",")) == 3 for r in rows):
            break
        assert time.monotonic() < deadline, f"ISR never reached 3 replicas:\n{out}"
        time.sleep(0.5)
    for row in rows:
        assert sorted(row[5].split(",")) == ["1", "2", "3"]
        assert all(cell.split(":")[1] == "Online" for cell in row[8:11])
    assert sorted(r[2] for r in rows) == ["1", "2", "3"], "leaders spread over the brokers"
    cluster = assert_ok(raftwood("cluster", *server))
    assert "under-replicated partitions: 0" in cluster and "offline partitions: 0" in cluster
    assert re.search(r"controller: [123]\b", cluster)
    assert dev.interrupt() == 0, dev.output()
    assert all(process_gone(pid) for pid in pids), f"brokers left running: {pids}"

"""One broker process (on 127.0.0.1 unless told otherwise): launched through the
parent-death launcher, waited ready, stopped, killed, paused and restarted by its pid,
its output appended to one log file.

``raftwood dev``, ``raftwood verify`` and the pytest plugin all start brokers through
:class:`BrokerProcess`; :func:`broker_command` is the one place a broker's command line
is built.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import weakref
from pathlib import Path

from kafka.protocol.metadata import ApiVersionsRequest

from broker.client.kafka_client import BlockingConnection, ConnectionFailed

DEFAULT_START_TIMEOUT_S = 20.0
DEFAULT_STOP_TIMEOUT_S = 15.0
LOCALHOST = "127.0.0.1"
# Settings BrokerProcess owns: passing them would make port/data_dir lie.
_MANAGED_SETTINGS = frozenset({"listeners", "log.dirs"})
_PACKAGE_PARENT = Path(__file__).resolve().parent.parent.parent

# Started through this launcher, a broker gets SIGKILL when the thread that started it
# dies (PR_SET_PDEATHSIG survives exec), so even a SIGKILLed pytest leaves nothing behind.
PDEATHSIG_LAUNCHER = (
    "import ctypes, os, signal, sys\n"
    "try:\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))\n"
    "    if os.getppid() != int(sys.argv[1]): os._exit(1)\n"
    "except (OSError, AttributeError): pass\n"
    "os.execv(sys.executable, [sys.executable] + sys.argv[2:])\n"
)


def broker_command(settings: dict[str, str], python: str = sys.executable) -> list[str]:
    """``<python> -m broker.cli start --set key=value ...``, one ``--set`` per setting in
    the order given."""
    argv = [python, "-m", "broker.cli", "start"]
    for key, value in settings.items():
        argv += ["--set", f"{key}={value}"]
    return argv


def with_parent_death_signal(argv: list[str]) -> list[str]:
    """``argv`` (``python ...``) run through PDEATHSIG_LAUNCHER on Linux, so the process
    gets SIGKILL when this one dies; unchanged elsewhere."""
    if not sys.platform.startswith("linux"):
        return list(argv)
    return [argv[0], "-c", PDEATHSIG_LAUNCHER, str(os.getpid())] + argv[1:]


def broker_environment(env: dict | None = None) -> dict[str, str]:
    """``env`` (default: ours) with this checkout first on PYTHONPATH and unbuffered
    output, so a broker runs the same code as its launcher and its log is current."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(_PACKAGE_PARENT), env.get("PYTHONPATH")) if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def log_tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a broker's log, for error messages."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as exc:
        return f"(no log at {path}: {exc})"
    return f"--- last lines of {path} ---\n" + "\n".join(text.splitlines()[-lines:])


class BrokerError(RuntimeError):
    """A broker process did not start, did not stop, or stopped badly (message has its log)."""


def free_port(host: str = LOCALHOST) -> int:
    """A TCP port that was free a moment ago (bound to port 0, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def settings_from_kwargs(settings: dict) -> dict[str, str]:
    """Kafka config names from keyword arguments: ``log_segment_bytes`` -> ``log.segment.bytes``.

    Keys that already contain a dot are kept as they are; values become strings (booleans
    as ``true``/``false``, Kafka's spelling).
    """
    result = {}
    for key, value in settings.items():
        name = key if "." in key else key.replace("_", ".")
        if isinstance(value, bool):
            value = "true" if value else "false"
        result[name] = str(value)
    return result


def _kill_quietly(popen: subprocess.Popen) -> None:
    """Safety net (weakref.finalize / interpreter exit): SIGKILL a leftover broker."""
    if popen.poll() is None:
        try:
            popen.kill()
            popen.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass


class BrokerProcess:
    """One ``raftwood start`` subprocess on 127.0.0.1 with its own port and data directory.

    ``host`` replaces 127.0.0.1 (the listener and what clients connect to) and
    ``command_prefix`` goes in front of the launch command, e.g. ``["ip", "netns", "exec",
    NAME]`` to run the broker in a network namespace whose address is ``host``; the
    process is still the launcher's (see PDEATHSIG_LAUNCHER), stopped by its pid.

    Invariants: ``port`` and ``data_dir`` never change, so ``restart()`` brings back the
    same broker; at most one process runs per instance; ``log_path`` accumulates the output
    of every run (each run starts with a ``### <log_marker>:`` line naming the command;
    verify's corrupt-tail fault finds the latest run by it).
    ``extra_settings`` go to ``--set`` as they are (a cluster helper passes the
    controller quorum there).  Not thread-safe: call from one thread, which should outlive
    the broker (see PDEATHSIG_LAUNCHER).
    """

    def __init__(self, data_dir, *, node_id: int = 1, port: int | None = None,
                 log_path=None, extra_settings: dict | None = None,
                 start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
                 python: str = sys.executable, env: dict | None = None,
                 host: str = LOCALHOST, command_prefix: list[str] | None = None,
                 log_marker: str = "raftwood-testing"):
        self.data_dir = Path(data_dir)
        self._host = host
        self.command_prefix = list(command_prefix or [])
        self.node_id = node_id
        self.port = port if port is not None else free_port()
        self.log_path = (Path(log_path) if log_path
                         else self.data_dir.parent / f"broker-{node_id}.log")
        self.extra_settings = settings_from_kwargs(extra_settings or {})
        clash = _MANAGED_SETTINGS & self.extra_settings.keys()
        if clash:
            raise ValueError(f"{sorted(clash)} are managed by BrokerProcess (port/data_dir)")
        if "node.id" in self.extra_settings:
            self.node_id = int(self.extra_settings.pop("node.id"))
        self.start_timeout_s = start_timeout_s
        self.python = python
        self.env = env
        self._popen: subprocess.Popen | None = None
        self._finalizer: weakref.finalize | None = None
        self._log_file = None
        self._paused = False
        self.log_marker = log_marker

    # -- what clients need -------------------------------------------------------------
    @property
    def host(self) -> str:
        return self._host

    @property
    def bootstrap(self) -> str:
        return f"{self._host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen else None

    @property
    def returncode(self) -> int | None:
        return self._popen.poll() if self._popen else None

    def is_running(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def command(self) -> list[str]:
        settings = {"node.id": str(self.node_id),
                    "listeners": f"PLAINTEXT://{self.bootstrap}",
                    "log.dirs": str(self.data_dir), **self.extra_settings}
        return broker_command(settings, self.python)

    def __repr__(self) -> str:
        state = "running" if self.is_running() else f"exited {self.returncode}"
        return f"<BrokerProcess node={self.node_id} {self.bootstrap} {state} data={self.data_dir}>"

    # -- lifecycle -------------------------------------------------------------------------
    def start(self, timeout_s: float | None = None) -> BrokerProcess:
        """Start the process and wait until it answers ApiVersions; BrokerError otherwise."""
        self.launch()
        try:
            self.wait_ready(self.start_timeout_s if timeout_s is None else timeout_s)
        except BaseException:
            self._terminate(signal.SIGKILL, 5.0)
            raise
        return self

    def launch(self) -> BrokerProcess:
        """Start the process without waiting for it (then ``wait_ready``): a cluster helper
        launches every broker first, so their interpreters start side by side."""
        if self.is_running():
            raise BrokerError(f"{self!r} is already running")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_file = open(self.log_path, "ab")
        self._log_file.write(f"### {self.log_marker}: "
                             f"{' '.join(self.command_prefix + self.command())}\n".encode())
        self._log_file.flush()
        # The prefix must exec, not fork (ip netns exec does), for the pid to be the broker's.
        argv = self.command_prefix + with_parent_death_signal(self.command())
        self._popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self._log_file,
                                       stderr=subprocess.STDOUT,
                                       env=broker_environment(self.env),
                                       start_new_session=True)
        self._paused = False
        self._finalizer = weakref.finalize(self, _kill_quietly, self._popen)
        return self

    def wait_ready(self, timeout_s: float | None = None) -> None:
        """Wait until the running process answers ApiVersions v0 (BrokerError if it exits
        or stays silent for ``timeout_s``)."""
        if timeout_s is None:
            timeout_s = self.start_timeout_s
        deadline = time.monotonic() + timeout_s
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            code = self._popen.poll()
            if code is not None:
                raise BrokerError(f"broker node {self.node_id} exited with {code} during start\n"
                                  f"{self.log_tail()}")
            try:
                with BlockingConnection(self.bootstrap, client_id="raftwood-harness",
                                        timeout_s=2.0) as conn:
                    conn.request(ApiVersionsRequest[0]())
                return
            except ConnectionFailed as exc:
                last_error = exc
                time.sleep(0.05)
        raise BrokerError(f"broker node {self.node_id} did not answer ApiVersions on "
                          f"{self.bootstrap} within {timeout_s:.0f} s (last: {last_error!r})\n"
                          f"{self.log_tail()}")

    def stop(self, timeout_s: float = DEFAULT_STOP_TIMEOUT_S, *, check: bool = False) -> int | None:
        """SIGTERM and wait; returns the exit code (None when it never ran).

        A process still alive after ``timeout_s`` is SIGKILLed and BrokerError raised.
        With ``check``, an exit code other than 0 also raises BrokerError.
        """
        if self._popen is None:
            return None
        if self._popen.poll() is not None:
            return self._finish()
        if self._paused:
            self.resume()
        code = self._terminate(signal.SIGTERM, timeout_s)
        if code is None:
            self._terminate(signal.SIGKILL, 5.0)
            raise BrokerError(f"broker node {self.node_id} ignored SIGTERM for {timeout_s:.0f} s; "
                              f"killed\n{self.log_tail()}")
        if check and code != 0:
            raise BrokerError(f"broker node {self.node_id} exited with {code} after SIGTERM "
                              f"(expected 0)\n{self.log_tail()}")
        return code

    def terminate(self) -> None:
        """Send SIGTERM (resuming a paused process first) without waiting; see ``wait``."""
        if self.is_running():
            if self._paused:
                self.resume()
            self._popen.send_signal(signal.SIGTERM)

    def wait(self, timeout_s: float) -> int | None:
        """Wait up to ``timeout_s`` for the process to exit; its exit code, or None if it
        is still running (None too when it never ran)."""
        if self._popen is None:
            return None
        try:
            self._popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None
        return self._finish()

    @property
    def paused(self) -> bool:
        return self._paused and self.is_running()

    def kill(self) -> int | None:
        """SIGKILL (a crash: nothing is flushed) and reap; returns the exit code."""
        if self._popen is None:
            return None
        return self._terminate(signal.SIGKILL, 10.0)

    def restart(self, timeout_s: float | None = None) -> BrokerProcess:
        """Stop (SIGTERM) if running, then start again on the same port and data directory."""
        if self.is_running():
            self.stop()
        return self.start(timeout_s)

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets but answers nothing until ``resume()``."""
        self._require_running().send_signal(signal.SIGSTOP)
        self._paused = True

    def resume(self) -> None:
        """SIGCONT after ``pause()``."""
        self._require_running().send_signal(signal.SIGCONT)
        self._paused = False

    def _require_running(self) -> subprocess.Popen:
        if not self.is_running():
            raise BrokerError(f"{self!r} is not running")
        return self._popen

    def _terminate(self, sig: int, timeout_s: float) -> int | None:
        """Send ``sig`` and wait up to ``timeout_s``; the exit code, or None if still alive."""
        if self._popen.poll() is None:
            try:
                self._popen.send_signal(sig)
                if sig == signal.SIGKILL or self._paused:
                    self._popen.send_signal(signal.SIGCONT)
            except ProcessLookupError:
                pass
            try:
                self._popen.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                return None
        return self._finish()

    def _finish(self) -> int:
        code = self._popen.returncode
        self._paused = False
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        return code

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the broker's output, for error messages."""
        return log_tail(self.log_path, lines)

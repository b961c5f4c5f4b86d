"""Brokers the benchmarks measure, each run as a subprocess on 127.0.0.1.

A target knows how to prepare itself (noida-db: install into its own venv) and which
command starts it on a given port and data directory. `BrokerProcess` runs that command
in a session of its own and is the only thing that starts or stops broker processes here.

Pure helpers plus subprocess management; no Kafka client code except the readiness probe.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path

HOST = "127.0.0.1"
REPO_ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = Path(__file__).resolve().parent
NOIDA_VERSION = "0.2.3"
NOIDA_VENV = BENCH_DIR / ".noida-venv"
PIP_INSTALL_TIMEOUT_S = 600
# SIGTERM to SIGKILL. A Raftwood broker closing 1,000 partition logs takes about 10 s
# (about 8 ms a log on this machine); noida saving ~2M records about 9 s.
STOP_GRACE_S = 30.0

Say = Callable[[str], None]

# Run as `python -c PDEATHSIG_LAUNCHER <runner pid> program args...`: asks the kernel to
# SIGKILL this process when the runner dies (PR_SET_PDEATHSIG survives exec), then execs
# the program. Used instead of preexec_fn, which is unsafe once librdkafka threads exist.
PDEATHSIG_LAUNCHER = (
    "import ctypes, os, signal, sys\n"
    "try:\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))\n"
    "    if os.getppid() != int(sys.argv[1]): os._exit(1)\n"
    "except (OSError, AttributeError): pass\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


def quorum_secret(directory: Path) -> Path:
    """``directory/quorum.secret`` (mode 0600), made once: the Raft secret every broker
    of a benchmark cluster shares (a quorum does not start without one)."""
    path = directory / "quorum.secret"
    if not path.exists():
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(24) + "\n")
    return path


class TargetError(Exception):
    """A target could not be installed, started, reached or stopped."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (bind to 0, read, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


class RaftwoodTarget:
    """This repository's broker, `python -m broker.cli start`, run with `src_dir` (default:
    the work tree) as its working directory, so `python -m` imports the broker from there:
    point it at an unpacked commit (`git archive`) to measure that commit.  `settings`
    ({name: value}, from `--raftwood-set`) go to every broker as more `--set`s, after
    the ones below, so they win (e.g. `socket.sendfile.enable=false`)."""

    name = "raftwood"
    label = "Raftwood"

    def __init__(self, src_dir: Path | None = None,
                 settings: dict[str, str] | None = None) -> None:
        self.cwd = Path(src_dir) if src_dir is not None else REPO_ROOT
        self.extra = [arg for name, value in (settings or {}).items()
                      for arg in ("--set", f"{name}={value}")]

    def prepare(self, say: Say) -> None:
        if not (self.cwd / "broker" / "cli" / "__main__.py").exists():
            raise TargetError(f"{self.cwd / 'broker' / 'cli' / '__main__.py'} does not exist: "
                              "the broker cannot be started")

    def command(self, port: int, data_dir: Path) -> list[str]:
        return [sys.executable, "-m", "broker.cli", "start",
                "--set", "node.id=1",
                "--set", f"listeners=PLAINTEXT://{HOST}:{port}",
                "--set", f"log.dirs={data_dir}",
                "--set", "num.partitions=3", *self.extra]

    def cluster_commands(self, ports: list[int], raft_ports: list[int],
                         data_dirs: list[Path]) -> list[list[str]]:
        """One `broker.cli start` per broker, with the settings `raftwood dev` gives broker i
        (node.id, listeners, log.dirs, controller.quorum.voters and a quorum secret in
        ``quorum.secret`` beside the data directories), but on any free ports.

        We do not run `raftwood dev` itself: it asks every broker for its status every 2 s,
        which would add load to the figures (idle CPU above all)."""
        voters = ",".join(f"{i}@{HOST}:{port}" for i, port in enumerate(raft_ports, 1))
        secret = quorum_secret(data_dirs[0].parent)
        return [[sys.executable, "-m", "broker.cli", "start",
                 "--set", f"node.id={i}",
                 "--set", f"listeners=PLAINTEXT://{HOST}:{port}",
                 "--set", f"log.dirs={data_dir}",
                 "--set", f"controller.quorum.voters={voters}",
                 "--set", f"controller.quorum.password.file={secret}",
                 "--set", "num.partitions=3", *self.extra]
                for i, (port, data_dir) in enumerate(zip(ports, data_dirs), 1)]

    def version(self) -> str:
        return "work tree" if self.cwd == REPO_ROOT else str(self.cwd)


class NoidaTarget:
    """noida-db from PyPI, Kafka service only, in a venv of its own (benchmarks/.noida-venv).

    The `noida-db` console script is a Python wrapper that `subprocess.call`s a bundled
    native binary and does not forward signals: terminating the wrapper leaves the server
    running as an orphan. So we start the bundled binary itself (same arguments), which
    makes it our direct child; the process-group kill in `BrokerProcess` is the fallback.
    """

    name = "noida"
    label = "noida"

    def __init__(self, venv_dir: Path = NOIDA_VENV) -> None:
        self.venv_dir = venv_dir
        self.binary: Path | None = None
        self.cwd = REPO_ROOT

    def prepare(self, say: Say) -> None:
        marker = self.venv_dir / f".installed-noida-db-{NOIDA_VERSION}"
        if not marker.exists():
            say(f"installing noida-db=={NOIDA_VERSION} into {self.venv_dir} (first use only)")
            shutil.rmtree(self.venv_dir, ignore_errors=True)
            _run_checked([sys.executable, "-m", "venv", str(self.venv_dir)],
                         "create the noida venv")
            _run_checked([str(self._python()), "-m", "pip", "install", "-q",
                          "--disable-pip-version-check", f"noida-db=={NOIDA_VERSION}"],
                         f"pip install noida-db=={NOIDA_VERSION}")
            marker.write_text(NOIDA_VERSION + "\n")
        self.binary = self._find_binary()

    def command(self, port: int, data_dir: Path) -> list[str]:
        program = str(self.binary) if self.binary else str(self.venv_dir / "bin" / "noida-db")
        return [program, "start", "--data-dir", str(data_dir), "--host", HOST,
                "--only", "kafka", "--kafka-port", str(port)]

    def version(self) -> str:
        return NOIDA_VERSION

    def _python(self) -> Path:
        return self.venv_dir / "bin" / "python"

    def _find_binary(self) -> Path | None:
        """The native binary inside the noida_db package, or None to use the wrapper."""
        probe = ("from importlib.resources import files; "
                 "print(files('noida_db').joinpath('noida-db'))")
        out = _run_checked([str(self._python()), "-c", probe], "locate the noida-db binary")
        path = Path(out.strip().splitlines()[-1])
        if not path.is_file():
            return None
        path.chmod(0o755)
        return path


TARGETS = {"raftwood": RaftwoodTarget, "noida": NoidaTarget}


def make_target(name: str, raftwood_src: Path | None = None,
                raftwood_settings: dict[str, str] | None = None):
    return RaftwoodTarget(raftwood_src, raftwood_settings) if name == "raftwood" \
        else TARGETS[name]()


def _run_checked(argv: list[str], what: str) -> str:
    """Run a setup command; its stdout, or TargetError with the tail of its output."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=PIP_INSTALL_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TargetError(f"could not {what}: {exc}") from exc
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise TargetError(f"could not {what} (exit {done.returncode}):\n{tail}")
    return done.stdout


class BrokerProcess:
    """One broker subprocess in a new session, so its process group holds it and its children.

    Invariant: once `stop()` has returned, no live (non-zombie) process of that group
    remains — SIGTERM to the group, wait up to `grace_s`, then SIGKILL. `stop()` is
    idempotent and runs with SIGINT/SIGTERM blocked so a second Ctrl-C cannot cut it short.
    Instances still running at interpreter exit are stopped by an atexit hook.
    Called from the main thread only.
    """

    _running: set[BrokerProcess] = set()

    def __init__(self, name: str, argv: list[str], port: int, log_path: Path, cwd: Path) -> None:
        self.name = name
        self.argv = argv
        self.port = port
        self.log_path = log_path
        self.cwd = cwd
        self._proc: subprocess.Popen | None = None
        self._terminated = False

    @property
    def bootstrap_servers(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def pgid(self) -> int | None:
        """The broker's process group (= its pid: it leads a session of its own)."""
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        argv = self.argv
        if sys.platform.startswith("linux"):  # the broker dies with this runner, even on SIGKILL
            argv = [sys.executable, "-c", PDEATHSIG_LAUNCHER, str(os.getpid())] + argv
        with open(self.log_path, "ab") as log:
            try:
                self._proc = subprocess.Popen(argv, cwd=self.cwd, stdin=subprocess.DEVNULL,
                                              stdout=log, stderr=subprocess.STDOUT,
                                              start_new_session=True)
            except OSError as exc:
                raise TargetError(f"{self.name}: cannot run {self.argv[0]}: {exc}") from exc
        BrokerProcess._running.add(self)

    def wait_ready(self, timeout_s: float, expect_brokers: int = 1) -> float:
        """Seconds until the port accepts TCP and Metadata lists `expect_brokers` brokers
        and a controller; TargetError if not."""
        started = time.monotonic()
        deadline = started + timeout_s
        self._wait_tcp(deadline)
        self._wait_metadata(deadline, expect_brokers)
        return time.monotonic() - started

    def _wait_tcp(self, deadline: float) -> None:
        while True:
            self._raise_if_exited("before listening")
            try:
                socket.create_connection((HOST, self.port), timeout=1.0).close()
                return
            except OSError:
                if time.monotonic() >= deadline:
                    raise TargetError(f"{self.name}: port {self.port} not accepting connections "
                                      f"in time\n{self.log_tail()}") from None
                time.sleep(0.1)

    def _wait_metadata(self, deadline: float, expect_brokers: int) -> None:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        last_error: object = "no answer"
        while True:
            self._raise_if_exited("while answering Metadata")
            remaining_s = deadline - time.monotonic()
            if remaining_s <= 0:
                raise TargetError(f"{self.name}: listens but Metadata did not list a broker "
                                  f"in time (last: {last_error})\n{self.log_tail()}")
            try:
                metadata = admin.list_topics(timeout=max(0.5, min(5.0, remaining_s)))
                if len(metadata.brokers) >= expect_brokers and (
                        expect_brokers == 1 or metadata.controller_id >= 0):
                    return
                last_error = (f"Metadata with {len(metadata.brokers)} of {expect_brokers} "
                              f"brokers, controller {metadata.controller_id}")
            except KafkaException as exc:
                last_error = exc.args[0] if exc.args else exc
            time.sleep(0.2)

    def _raise_if_exited(self, when: str) -> None:
        code = self._proc.poll() if self._proc else None
        if code is not None:
            raise TargetError(f"{self.name}: exited with code {code} {when}\n{self.log_tail()}")

    def terminate(self) -> None:
        """SIGTERM to the group without waiting; `stop()` must still follow (and sends no
        second SIGTERM: a broker may take that as "stop now")."""
        if self._proc is not None and self._proc.poll() is None and not self._terminated:
            _signal_group(self._proc.pid, signal.SIGTERM)
            self._terminated = True

    def stop(self, grace_s: float = STOP_GRACE_S) -> int | None:
        """Terminate, wait, kill. Returns the leader's exit code (None if it never started)."""
        if self._proc is None:
            return None
        with _signals_blocked():
            pgid = self._proc.pid
            self.terminate()
            if not _wait_group_gone(self._proc, pgid, grace_s):
                _signal_group(pgid, signal.SIGKILL)
                _wait_group_gone(self._proc, pgid, 5.0)
            BrokerProcess._running.discard(self)
            return self._proc.poll()

    def log_tail(self, lines: int = 25) -> str:
        try:
            with open(self.log_path, errors="replace") as log:
                tail = deque(log, maxlen=lines)
        except OSError:
            return f"  (no log at {self.log_path})"
        body = "".join("  | " + line for line in tail).rstrip()
        return f"  last lines of {self.log_path}:\n{body}" if body else "  (log is empty)"

    @classmethod
    def stop_all(cls) -> None:
        for broker in list(cls._running):
            broker.stop()


atexit.register(BrokerProcess.stop_all)


class Deployment:
    """The broker processes of one benchmark session: one broker of a target, or N Raftwood
    brokers forming a cluster. Brokers are started together and stopped together.
    Main thread only; `stop()` is idempotent and leaves no live process behind."""

    def __init__(self, target, brokers: int, data_root: Path) -> None:
        if brokers > 1 and not hasattr(target, "cluster_commands"):
            raise TargetError(f"{target.label} runs as a single broker only")
        self.target = target
        self.label = target.label if brokers == 1 else f"{target.label} x{brokers}"
        ports = [free_port() for _ in range(brokers)]
        data_dirs = [data_root / f"broker-{i}" for i in range(1, brokers + 1)]
        for data_dir in data_dirs:
            data_dir.mkdir(parents=True)
        if brokers == 1:
            commands = [target.command(ports[0], data_dirs[0])]
        else:
            raft_ports = [free_port() for _ in range(brokers)]
            commands = target.cluster_commands(ports, raft_ports, data_dirs)
        self.brokers = [BrokerProcess(f"{target.name}-{i}", argv, port,
                                      data_dir.parent / f"broker-{i}.log", target.cwd)
                        for i, (argv, port, data_dir)
                        in enumerate(zip(commands, ports, data_dirs), 1)]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.bootstrap_servers for b in self.brokers)

    @property
    def pgids(self) -> list[int]:
        return [b.pgid for b in self.brokers if b.pgid is not None]

    def start(self, timeout_s: float, say: Say) -> float:
        """Start every broker at once (a Raft quorum needs a majority up); seconds until
        each answers and Metadata shows all of them."""
        say(f"starting {len(self.brokers)} broker(s): {' '.join(self.brokers[0].argv)}")
        started = time.monotonic()
        for broker in self.brokers:
            broker.start()
        for broker in self.brokers:
            remaining_s = max(1.0, timeout_s - (time.monotonic() - started))
            broker.wait_ready(remaining_s, expect_brokers=len(self.brokers))
        return time.monotonic() - started

    def stop(self, say: Say) -> None:
        say(f"stopping {len(self.brokers)} broker(s): SIGTERM, up to {STOP_GRACE_S:g} s, "
            "then SIGKILL")
        for broker in self.brokers:  # all at once: a cluster need not fail over one by one
            broker.terminate()
        for broker in self.brokers:
            code = broker.stop()
            how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit {code}"
            say(f"{broker.name} stopped ({how})")

    def log_tail(self, lines: int = 15) -> str:
        return "\n".join(b.log_tail(lines) for b in self.brokers)


@contextlib.contextmanager
def _signals_blocked() -> Iterator[None]:
    """Defer SIGINT/SIGTERM until the block ends (they are delivered then)."""
    blocked = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def stop_group(proc: subprocess.Popen, grace_s: float) -> None:
    """Stop a process started in its own session (``start_new_session=True``) with every
    child in its group: SIGTERM, then SIGKILL if the group is not gone after
    ``grace_s``.  For the one-off benchmark scripts; ``BrokerProcess.stop`` does the
    same with its own bookkeeping."""
    with _signals_blocked():
        pgid = proc.pid
        if proc.poll() is None:
            _signal_group(pgid, signal.SIGTERM)
        if not _wait_group_gone(proc, pgid, grace_s):
            _signal_group(pgid, signal.SIGKILL)
            _wait_group_gone(proc, pgid, 5.0)


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _wait_group_gone(proc: subprocess.Popen, pgid: int, timeout_s: float) -> bool:
    """True once the leader is reaped and no live member of the group is left."""
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0.05)
        if proc.poll() is not None and not _group_has_live_member(pgid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _group_has_live_member(pgid: int) -> bool:
    """Whether any non-zombie process is in group `pgid` (reads /proc; Linux)."""
    proc_root = Path("/proc")
    if not proc_root.is_dir():
        try:
            os.killpg(pgid, 0)
            return True
        except (ProcessLookupError, PermissionError):
            return False
    for stat_path in proc_root.glob("[0-9]*/stat"):
        try:
            stat = stat_path.read_text()
        except OSError:
            continue
        # Fields after the ")" that closes the command name: state ppid pgrp ...
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) >= 3 and int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False

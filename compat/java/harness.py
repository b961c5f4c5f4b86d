"""Compile and run the Java harness (``src/RaftwoodHarness.java``) against a Raftwood broker.

The harness is compiled at use time with ``javac`` into a build directory (never
committed) against the jars ``fetch_jars.ensure_jars()`` takes from PyPI.  Its modes and
its output (``PASS``/``FAIL`` per step, a final ``RESULT`` line) are described at the top
of the Java file.  From a shell::

    python -m compat.java.harness suite --bootstrap 127.0.0.1:9092 --prefix demo

compiles (if needed) and runs one mode, passing the options through; ``--client 4.3.0``
first runs it on the newest kafka-clients instead of 3.9.0.  Java's logging
(log4j 2 behind slf4j) goes to stderr at WARN, or at ``RAFTWOOD_JAVA_LOG_LEVEL``.
"""
from __future__ import annotations

import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from compat.java.fetch_jars import DEFAULT_CLIENT, JarsUnavailable, ensure_jars

SOURCE = Path(__file__).resolve().parent / "src" / "RaftwoodHarness.java"
DEFAULT_BUILD = Path(__file__).resolve().parent / "build"
MAIN_CLASS = "RaftwoodHarness"
COMPILE_TIMEOUT_S = 120.0
LOG4J2_PROPERTIES = """\
status = error
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss.SSS} %-5p [%c{1}] %m%n
rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = stderr
"""

__all__ = ["HarnessUnavailable", "Harness", "HarnessRun", "prepare"]


class HarnessUnavailable(RuntimeError):
    """No JDK, or the jars could not be fetched: the harness cannot run here."""


@dataclass
class HarnessRun:
    """A finished harness run: exit code, output lines, wall time."""

    returncode: int
    stdout: str
    stderr: str
    elapsed_s: float

    @property
    def passed(self) -> bool:
        return self.returncode == 0

    def steps(self) -> dict[str, str]:
        """step name -> "PASS" or "FAIL"."""
        result = {}
        for line in self.stdout.splitlines():
            verdict, _, rest = line.partition(" ")
            if verdict in ("PASS", "FAIL"):
                result[rest.split(" ", 1)[0]] = verdict
        return result

    def report(self) -> str:
        return (f"harness exited {self.returncode} after {self.elapsed_s:.1f} s\n"
                f"--- stdout ---\n{self.stdout}\n--- stderr (last 60 lines) ---\n"
                + "\n".join(self.stderr.splitlines()[-60:]))


class Harness:
    """The compiled harness: ``run(mode, **options)`` or ``start(...)`` for a live process."""

    def __init__(self, classes_dir: Path, jars: list[Path], java: str):
        self.classes_dir = classes_dir
        self.jars = jars
        self.java = java

    def command(self, mode: str, options: dict) -> list[str]:
        classpath = os.pathsep.join([str(self.classes_dir)] + [str(j) for j in self.jars])
        argv = [self.java, "-Xss1m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-cp", classpath, MAIN_CLASS, mode]
        for name, value in options.items():
            argv += [f"--{name.replace('_', '-')}", str(value)]
        return argv

    def run(self, mode: str, *, timeout_s: float = 120.0, **options) -> HarnessRun:
        """Run one mode to its end; a run over ``timeout_s`` is killed and reported as -9."""
        start = time.monotonic()
        try:
            done = subprocess.run(self.command(mode, options), capture_output=True, text=True,
                                  timeout=timeout_s, stdin=subprocess.DEVNULL)
            return HarnessRun(done.returncode, done.stdout, done.stderr, time.monotonic() - start)
        except subprocess.TimeoutExpired as exc:
            return HarnessRun(-9, _text(exc.stdout) + f"\nTIMEOUT after {timeout_s} s",
                              _text(exc.stderr), time.monotonic() - start)

    def start(self, mode: str, **options) -> LiveHarness:
        """Start one mode; its stdout lines arrive on ``LiveHarness.lines`` as printed."""
        return LiveHarness(self.command(mode, options))


class LiveHarness:
    """A running harness whose stdout is read line by line by a thread (bounded waits)."""

    def __init__(self, argv: list[str]):
        self.start_time = time.monotonic()
        self.stderr_file = tempfile.TemporaryFile()
        self.popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=self.stderr_file, text=True)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.popen.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for_line(self, predicate, timeout_s: float) -> str | None:
        """The first new stdout line satisfying ``predicate`` within ``timeout_s``, else None."""
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                return None
            if line is None:
                return None
            self.seen.append(line)
            if predicate(line):
                return line
        return None

    def finish(self, timeout_s: float) -> HarnessRun:
        """Wait for the end (SIGKILL past ``timeout_s``); the whole run."""
        try:
            self.popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(timeout=10)
        self._reader.join(timeout=10)
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                break
            if line is not None:
                self.seen.append(line)
        self.stderr_file.seek(0)
        stderr = self.stderr_file.read().decode(errors="replace")
        self.stderr_file.close()
        return HarnessRun(self.popen.returncode, "\n".join(self.seen), stderr,
                          time.monotonic() - self.start_time)

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(timeout=10)


def _text(data) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def prepare(build_dir: Path | str | None = None, cache_dir: Path | str | None = None,
            client_version: str = DEFAULT_CLIENT) -> Harness:
    """Fetch the jars, compile the harness into ``build_dir`` (skipped when up to date).

    ``client_version`` picks the kafka-clients set (``fetch_jars.CLIENTS``: 3.9.0, Spark's,
    by default; 4.3.0, the newest); each version compiles into a classes folder of its own.
    HarnessUnavailable when there is no ``javac``/``java`` or the jars cannot be had;
    RuntimeError (with javac's output) when the source does not compile.
    """
    javac, java = shutil.which("javac"), shutil.which("java")
    if not javac or not java:
        raise HarnessUnavailable("no JDK: `javac` and `java` must be on PATH (e.g. Debian's "
                                 "openjdk-17-jdk-headless)")
    try:
        jars = ensure_jars(cache_dir, client_version)
    except JarsUnavailable as exc:
        raise HarnessUnavailable(f"kafka-clients jars unavailable: {exc}") from exc
    build = Path(build_dir) if build_dir else DEFAULT_BUILD
    classes = build / ("classes" if client_version == DEFAULT_CLIENT
                       else f"classes-{client_version}")
    marker = classes / f"{MAIN_CLASS}.class"
    if not marker.is_file() or marker.stat().st_mtime < SOURCE.stat().st_mtime:
        classes.mkdir(parents=True, exist_ok=True)
        classpath = os.pathsep.join(str(j) for j in jars)
        done = subprocess.run([javac, "-nowarn", "-d", str(classes), "-cp", classpath,
                               str(SOURCE)], capture_output=True, text=True,
                              timeout=COMPILE_TIMEOUT_S)
        if done.returncode != 0:
            raise RuntimeError(f"javac failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    level = os.environ.get("RAFTWOOD_JAVA_LOG_LEVEL", "warn")
    (classes / "log4j2.properties").write_text(LOG4J2_PROPERTIES.replace("{level}", level))
    return Harness(classes, jars, java)


def main(argv: list[str]) -> int:
    version = DEFAULT_CLIENT
    if argv[:1] == ["--client"] and len(argv) >= 2:
        version, argv = argv[1], argv[2:]
    if not argv:
        print(__doc__)
        return 2
    try:
        harness = prepare(client_version=version)
    except HarnessUnavailable as exc:
        print(f"harness: {exc}", file=sys.stderr)
        return 2
    command = harness.command(argv[0], {})[:-1] + argv
    return subprocess.call(command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

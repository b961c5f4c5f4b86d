"""Compile and run a one-file Java probe against the newest kafka-clients (4.3.0 by default).

A probe is a single ``.java`` source with one public class and a ``main``; it talks to a
broker with the real Java client and prints what it saw (by convention one ``key=value``
or ``PASS``/``FAIL`` line per fact, and exits non-zero when something failed).  Tests use
it to check an Admin call of the newest protocol versions without growing the harness::

    from compat.java.probe import Probe, ProbeUnavailable

    probe = Probe.prepare()                       # ProbeUnavailable: no JDK or no jars
    run = probe.run(JAVA_SOURCE, "127.0.0.1:9092", timeout_s=120)
    assert run.passed, run.report()
    facts = run.facts()                           # {"key": "value"} from key=value lines

The source is compiled once per distinct text (its SHA-256 names the class folder under
the build directory); compiling takes a few seconds, running a JVM about one more.  From
a shell: ``python -m compat.java.probe Probe.java 127.0.0.1:9092``.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from compat.java.fetch_jars import JarsUnavailable, ensure_jars
from compat.java.harness import LOG4J2_PROPERTIES, HarnessRun, HarnessUnavailable

DEFAULT_BUILD = Path(__file__).resolve().parent / "build" / "probes"
COMPILE_TIMEOUT_S = 180.0
_PUBLIC_CLASS = re.compile(r"^\s*public\s+(?:final\s+)?class\s+(\w+)", re.MULTILINE)

__all__ = ["Probe", "ProbeRun", "ProbeUnavailable"]


class ProbeUnavailable(HarnessUnavailable):
    """No JDK, or the jars could not be fetched: a probe cannot run here."""


class ProbeRun(HarnessRun):
    """A finished probe run (exit code, output, wall time) and its ``key=value`` facts."""

    def facts(self) -> dict[str, str]:
        """``key=value`` lines of stdout as a dict (the last value of a key wins)."""
        result = {}
        for line in self.stdout.splitlines():
            key, sep, value = line.partition("=")
            if sep and key and " " not in key:
                result[key] = value
        return result


class Probe:
    """A JDK and a kafka-clients classpath; ``run(source, *args)`` compiles and runs a probe.

    Invariant: a source text is compiled at most once per build directory (the class files
    live under a folder named by the text's hash, written only after javac succeeded).
    """

    def __init__(self, javac: str, java: str, jars: list[Path], build_dir: Path, client: str):
        self.javac = javac
        self.java = java
        self.jars = jars
        self.build_dir = build_dir
        self.client = client

    @classmethod
    def prepare(cls, client: str = "4.3.0", build_dir: Path | str | None = None,
                cache_dir: Path | str | None = None) -> Probe:
        """Find the JDK and fetch the jars of kafka-clients ``client`` (once, cached)."""
        javac, java = shutil.which("javac"), shutil.which("java")
        if not javac or not java:
            raise ProbeUnavailable("no JDK: `javac` and `java` must be on PATH (e.g. Debian's "
                                   "openjdk-17-jdk-headless)")
        try:
            jars = ensure_jars(cache_dir, client)
        except JarsUnavailable as exc:
            raise ProbeUnavailable(f"kafka-clients {client} jars unavailable: {exc}") from exc
        build = Path(build_dir) if build_dir else DEFAULT_BUILD
        return cls(javac, java, jars, build / client, client)

    def compile(self, source: str) -> tuple[Path, str]:
        """The class folder and main class of ``source``, compiling it if not done yet."""
        match = _PUBLIC_CLASS.search(source)
        if match is None:
            raise ValueError("a probe needs one `public class Name` with a main method")
        name = match.group(1)
        digest = hashlib.sha256(source.encode()).hexdigest()[:20]
        classes = self.build_dir / f"{name}-{digest}"
        if (classes / f"{name}.class").is_file():
            return classes, name
        staging = self.build_dir / f".{name}-{digest}.{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        (staging / f"{name}.java").write_text(source)
        classpath = os.pathsep.join(str(j) for j in self.jars)
        done = subprocess.run([self.javac, "-nowarn", "-d", str(staging), "-cp", classpath,
                               str(staging / f"{name}.java")], capture_output=True, text=True,
                              timeout=COMPILE_TIMEOUT_S)
        if done.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise RuntimeError(f"javac failed ({done.returncode}):\n{done.stdout}{done.stderr}")
        level = os.environ.get("RAFTWOOD_JAVA_LOG_LEVEL", "warn")
        (staging / "log4j2.properties").write_text(LOG4J2_PROPERTIES.replace("{level}", level))
        try:
            os.rename(staging, classes)
        except OSError:  # another process compiled the same text first
            shutil.rmtree(staging, ignore_errors=True)
        return classes, name

    def command(self, source: str, args: tuple[str, ...]) -> list[str]:
        classes, name = self.compile(source)
        classpath = os.pathsep.join([str(classes)] + [str(j) for j in self.jars])
        return [self.java, "-Xss1m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-cp", classpath, name, *args]

    def run(self, source: str, *args: str, timeout_s: float = 120.0) -> ProbeRun:
        """Compile (if needed) and run ``source`` with ``args``; past ``timeout_s`` the JVM
        is killed and the run reported with returncode -9."""
        argv = self.command(source, tuple(str(a) for a in args))
        start = time.monotonic()
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s,
                                  stdin=subprocess.DEVNULL)
            return ProbeRun(done.returncode, done.stdout, done.stderr, time.monotonic() - start)
        except subprocess.TimeoutExpired as exc:
            return ProbeRun(-9, _text(exc.stdout) + f"\nTIMEOUT after {timeout_s} s",
                            _text(exc.stderr), time.monotonic() - start)


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    try:
        probe = Probe.prepare()
    except ProbeUnavailable as exc:
        print(f"probe: {exc}", file=sys.stderr)
        return 2
    return subprocess.call(probe.command(Path(argv[0]).read_text(), tuple(argv[1:])))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

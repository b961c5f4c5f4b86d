"""Virtualenvs of their own for the frameworks that cannot share the project's venv.

Quix Streams pins confluent-kafka below 2.13 (the project's tests use 2.16) and PyFlink
brings Apache Beam, pandas and a 300 MB jar bundle: each gets a venv made once with
``python -m venv`` and pip from the package index, and reused while its requirements are
unchanged (a ``.requirements`` file in the venv records what was installed; a change
rebuilds it).  A file lock keeps two test processes from building the same venv at once.

The venvs live outside the checkout, in ``$RAFTWOOD_COMPAT_CACHE`` or else
``$XDG_CACHE_HOME/raftwood`` (``~/.cache/raftwood``): a fresh clone (CI's) finds the ones
an earlier run on the machine built instead of paying for them again (Quix's takes
30-40 s of CPU with pip's cache warm, PyFlink's minutes).
"""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

CACHE = Path(os.environ.get("RAFTWOOD_COMPAT_CACHE") or Path(
    os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "raftwood")
INSTALL_TIMEOUT_S = 900.0


class VenvUnavailable(RuntimeError):
    """The venv could not be built (no network to the index, pip failed, timed out)."""


def ensure_venv(name: str, requirements: list[str], *,
                timeout_s: float = INSTALL_TIMEOUT_S) -> Path:
    """The python of ``<CACHE>/<name>-venv`` with ``requirements`` installed.

    Built on first use (seconds to minutes: see compat/README.md), then reused as long as
    its recorded requirements equal ``requirements``.  VenvUnavailable otherwise.
    """
    home = CACHE / f"{name}-venv"
    python = home / "bin" / "python"
    record = home / ".requirements"
    wanted = "\n".join(requirements) + "\n"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{name}-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if python.is_file() and record.is_file() and record.read_text() == wanted:
            return python
        shutil.rmtree(home, ignore_errors=True)
        started = time.monotonic()
        _run([sys.executable, "-m", "venv", str(home)], timeout_s)
        _run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
              *requirements], timeout_s - (time.monotonic() - started))
        record.write_text(wanted)
        return python


def _run(argv: list[str], timeout_s: float) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=max(timeout_s, 1.0),
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise VenvUnavailable(f"{' '.join(argv[:4])}…: {exc}") from exc
    if done.returncode != 0:
        raise VenvUnavailable(f"{' '.join(argv[:4])}… exited {done.returncode}: "
                              f"{(done.stderr or done.stdout).strip()[-800:]}")

"""The Java harness's command line without a JDK: one line saying what to install, exit 2
(not a traceback), as every error a user can cause."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_no_javac_on_the_path_is_one_line(tmp_path):
    env = dict(os.environ, PATH=str(tmp_path), PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "compat.java.harness", "suite",
                           "--bootstrap", "127.0.0.1:9092"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "harness: no JDK: `javac` and `java` must be on PATH (e.g. Debian's "
        "openjdk-17-jdk-headless)"]

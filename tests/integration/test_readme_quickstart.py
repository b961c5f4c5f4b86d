"""The README's quickstart, word for word, in this checkout.

The quickstart's blocks are found by the marker comment before each fenced block
(``<!-- quickstart:run -->``, ``cli``, ``kcat``, ``python``).  ``run`` (``make run``) is
started with bash in its own process group and stopped with SIGINT to that group (the
user's Ctrl-C) at teardown, then SIGKILL if it outlives the bound; ``dev`` stops its
brokers on SIGINT and the kernel kills them if ``dev`` dies (PR_SET_PDEATHSIG).  The
second terminal is one bash script: ``cli`` (the ``raftwood`` commands, produce and
consume included), ``kcat`` (only when kcat is installed) and the Python block given to
``python`` (as ``python quickstart.py`` runs it, without leaving a file in the checkout).

``make run`` serves fixed ports (9092-9094 and the ports beside them) and keeps its data
in ``./data``: the test skips when a port is busy or ``./data`` exists (the quickstart is
for a fresh clone, and someone else's cluster data is not ours to write to), and removes
``./data`` afterwards when it made it.  Every wait is bounded.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DATA = ROOT / "data"
PORTS = [base + offset + i for base in (9092,) for offset in (0, 100, 200, 300)
         for i in range(3)]      # Kafka, Raft, dev --secure, metrics/view for 3 brokers
READY_TIMEOUT_S = 600.0          # the first `make run` creates .venv and installs
CLIENT_TIMEOUT_S = 240.0
STOP_TIMEOUT_S = 60.0
MARKER = re.compile(r"<!-- quickstart:(\w+) -->\s*\n```(\w*)\n(.*?)\n```", re.S)


def quickstart_blocks() -> dict[str, tuple[str, str]]:
    """Marker name → (fence language, code) for every marked block of the README."""
    return {m.group(1): (m.group(2), m.group(3)) for m in MARKER.finditer(README.read_text())}


def busy_ports(ports) -> list[int]:
    busy = []
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            # As the brokers bind: a port held only by closed connections (TIME-WAIT) is free.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                busy.append(port)
    return busy


def wait_for_line(log: Path, proc: subprocess.Popen, needle: str, timeout_s: float) -> str:
    """The log's text once ``needle`` is in it; fails when the process exits first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if needle in text:
            return text
        if proc.poll() is not None:
            pytest.fail(f"`make run` exited with {proc.returncode} before {needle!r}:\n{text}")
        time.sleep(0.5)
    pytest.fail(f"no {needle!r} from `make run` within {timeout_s:g} s:\n"
                f"{log.read_text(errors='replace')}")


def stop_group(proc: subprocess.Popen) -> None:
    """Ctrl-C for the whole `make run` group, then SIGKILL once the bound has passed."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=STOP_TIMEOUT_S)
        except ProcessLookupError:
            pass


def user_env() -> dict:
    """The environment of a user's fresh terminal: no virtualenv of the test run."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    venv_bin = str(ROOT / ".venv" / "bin")
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and p != venv_bin)
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture
def running_quickstart_cluster(tmp_path):
    blocks = quickstart_blocks()
    assert "run" in blocks, "README.md has no <!-- quickstart:run --> block"
    busy = busy_ports(PORTS)
    if busy:
        pytest.skip(f"ports {busy} are busy: `make run` needs 9092-9094 and the ports beside them")
    if DATA.exists():
        pytest.skip(f"{DATA} exists (an earlier `make run`): the quickstart is for a fresh clone")
    log = tmp_path / "make-run.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(["bash", "-c", blocks["run"][1]], cwd=ROOT, env=user_env(),
                                stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield proc, log
    finally:
        stop_group(proc)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while busy_ports(PORTS[:6]) and time.monotonic() < deadline:
            time.sleep(0.5)
        shutil.rmtree(DATA, ignore_errors=True)


@pytest.mark.slow
def test_readme_quickstart_produces_and_consumes_as_written(running_quickstart_cluster,
                                                            tmp_path):
    proc, log = running_quickstart_cluster
    started = wait_for_line(log, proc, "bootstrap servers: ", READY_TIMEOUT_S)
    assert "127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094" in started

    blocks = quickstart_blocks()
    assert blocks["cli"][0] == "sh" and blocks["python"][0] == "python"
    with_kcat = shutil.which("kcat") is not None and "kcat" in blocks
    steps = [("cli", blocks["cli"][1])]
    if with_kcat:
        steps.append(("kcat", blocks["kcat"][1]))
    steps.append(("python", f"python - <<'QUICKSTART_PY'\n{blocks['python'][1]}\nQUICKSTART_PY"))
    script = "set -e\n" + "\n".join(f"echo '@@ {name}'\n{code}" for name, code in steps)
    (tmp_path / "terminal-2.sh").write_text(script)
    done = subprocess.run(["bash", str(tmp_path / "terminal-2.sh")], cwd=ROOT, env=user_env(),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=CLIENT_TIMEOUT_S)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"

    outputs = dict(re.findall(r"^@@ (\w+)\n(.*?)(?=^@@ |\Z)", done.stdout, re.S | re.M))
    # `raftwood produce` wrote three lines on partition 0 of a fresh topic; `raftwood
    # consume` read them back from the beginning, after the topic's description.
    assert "quickstart" in outputs["cli"], outputs["cli"]
    assert outputs["cli"].split()[-3:] == ["one", "two", "three"], done.stdout + done.stderr
    if with_kcat:   # the same on partition 2
        assert outputs["kcat"].split() == ["four", "five", "six"], done.stdout + done.stderr
    # Three records on partition 1 of a fresh topic: offsets 0..2, each with its value.
    lines = outputs["python"].strip().splitlines()
    assert lines == [f"{i} record {i}" for i in range(3)], done.stdout + done.stderr

"""Asking a running ``raftwood dev`` to restart, kill, pause, resume or isolate one of
its brokers (or heal them all): files under ``<data-dir>/dev-control/``.

    supervisor.pid                  the pid of the ``dev`` supervising this data dir
                                    (written when it starts supervising, removed at exit)
    <action>-<id>.<token>.request   ``raftwood dev <action> <id>`` asks (written
                                    atomically); action: restart, kill, pause, resume,
                                    isolate, heal (id 0: every broker)
    <action>-<id>.<token>.result    the supervisor answers: ``ok <value>`` (the pid; the
                                    exit code for kill) or ``error <why>`` (one line),
                                    then deletes the request

The supervisor polls the directory every tick (``take_requests``), so an answer comes
within about a tick plus the broker's start.  Files, not a socket: nothing listens, and
who may ask is who may write the data dir.  The client (``request``) waits for its own
token's answer within a deadline and removes it.
"""
from __future__ import annotations

import os
import secrets
import sys
import time
from pathlib import Path

CONTROL_DIR = "dev-control"
PID_FILE = "supervisor.pid"
POLL_S = 0.1
ACTIONS = ("restart", "kill", "pause", "resume", "isolate", "heal")


class ControlError(Exception):
    """No supervisor to ask, or it answered with an error (the message says which)."""


def control_dir(data_dir) -> Path:
    return Path(data_dir) / CONTROL_DIR


def _write_atomically(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


# -- the supervisor's side ----------------------------------------------------------------

def claim(data_dir) -> None:
    """Record this process as the supervisor of ``data_dir``; stale requests are dropped."""
    directory = control_dir(data_dir)
    directory.mkdir(parents=True, exist_ok=True)
    for action in ACTIONS:
        for leftover in directory.glob(f"{action}-*"):
            leftover.unlink(missing_ok=True)
    _write_atomically(directory / PID_FILE, f"{os.getpid()}\n")


def release(data_dir) -> None:
    """Remove the pid file if it is still ours."""
    path = control_dir(data_dir) / PID_FILE
    try:
        if path.read_text().strip() == str(os.getpid()):
            path.unlink()
    except OSError:
        pass


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def take_action_requests(data_dir) -> list[tuple[str, int, str]]:
    """``(action, broker id, token)`` of every request waiting, oldest first; each
    request file is removed (answer it with ``answer``)."""
    requests = []
    paths = sorted(control_dir(data_dir).glob("*-*.*.request"), key=_mtime)
    for path in paths:
        parts = path.name.split(".")
        path.unlink(missing_ok=True)
        action, _, node = parts[0].partition("-")
        if action not in ACTIONS or len(parts) != 3:
            continue
        try:
            requests.append((action, int(node), parts[1]))
        except ValueError:
            continue
    return requests


def take_requests(data_dir) -> list[tuple[int, str]]:
    """``(broker id, token)`` of the restart requests waiting (others are dropped)."""
    return [(node_id, token) for action, node_id, token in take_action_requests(data_dir)
            if action == "restart"]


def answer(data_dir, node_id: int, token: str, text: str, action: str = "restart") -> None:
    """Write the one-line answer to a request (``ok <value>`` or ``error <why>``)."""
    _write_atomically(control_dir(data_dir) / f"{action}-{node_id}.{token}.result",
                      text.replace("\n", " ") + "\n")


# -- the client's side --------------------------------------------------------------------

def supervisor_pid(data_dir) -> int | None:
    """The pid of the live ``dev`` supervising ``data_dir``, else None (no pid file, or
    its process is gone or, the pid reused, is no ``dev``)."""
    try:
        pid = int((control_dir(data_dir) / PID_FILE).read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return pid   # no /proc to ask: trust the live pid
    return pid if b"dev" in argv else None


def request_restart(data_dir, node_id: int, timeout_s: float) -> int:
    """Ask the supervisor of ``data_dir`` to restart broker ``node_id``; the new pid."""
    return request(data_dir, "restart", node_id, timeout_s)


def request(data_dir, action: str, node_id: int, timeout_s: float) -> int:
    """Ask the supervisor of ``data_dir`` to do ``action`` to broker ``node_id``; the
    value of its ``ok`` answer.  ControlError when no supervisor runs, it refuses, or no
    answer comes in time."""
    if action not in ACTIONS:
        raise ControlError(f"unknown action {action!r}")
    pid = supervisor_pid(data_dir)
    if pid is None:
        raise ControlError(f"no raftwood dev is running on {data_dir} (start one with "
                           f"raftwood dev --data-dir {data_dir})")
    token = secrets.token_hex(8)
    directory = control_dir(data_dir)
    result = directory / f"{action}-{node_id}.{token}.result"
    _write_atomically(directory / f"{action}-{node_id}.{token}.request", action + "\n")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            text = result.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            if supervisor_pid(data_dir) is None:
                raise ControlError(
                    f"raftwood dev (pid {pid}) exited before answering") from None
            time.sleep(POLL_S)
            continue
        result.unlink(missing_ok=True)
        status, _, detail = text.partition(" ")
        if status == "ok":
            return int(detail)
        raise ControlError(detail or text)
    what = f"{action} broker {node_id}" if node_id else action
    raise ControlError(f"raftwood dev (pid {pid}) did not {what} within {timeout_s:g} s; "
                       f"see its terminal")


# -- raftwood dev <action> N ----------------------------------------------------------------

# action -> (what it does, the rest of its --help)
ACTION_HELP = {
    "restart": ("start broker N again", "stopped first if it runs, on the same ports and "
                "data; prints its new pid once it answers.  In dev's terminal: the key N."),
    "kill": ("kill -9 broker N", "a crash, nothing flushed; it stays down until restarted.  "
             "In dev's terminal: k then N."),
    "pause": ("pause broker N (SIGSTOP)", "it keeps its sockets but answers nothing; the "
              "table shows it paused.  In dev's terminal: p then N."),
    "resume": ("resume paused broker N (SIGCONT)", "In dev's terminal: c then N."),
    "isolate": ("isolate broker N", "its proxy stalls every link to the other brokers and "
                "to clients (Raft too) until heal; needs dev --faults-network.  In dev's "
                "terminal: i then N."),
    "heal": ("heal every isolated broker", "the proxy lifts every cut and closes the "
             "stalled links, so both sides reconnect.  In dev's terminal: h."),
}


def run_action(args) -> int:
    """``raftwood dev restart|kill|pause|resume|isolate N`` or ``heal``: through
    ``request``; 0 once the supervisor did it (a restarted broker answers)."""
    action = args.dev_action
    try:
        value = request(args.data_dir, action, args.broker, args.timeout)
    except ControlError as exc:
        print(f"raftwood dev {action}: {exc}", file=sys.stderr)
        return 1
    done = {"restart": f"restarted (pid {value})", "kill": f"killed (exit code {value})",
            "pause": f"paused (pid {value})", "resume": f"resumed (pid {value})",
            "isolate": f"isolated (pid {value})", "heal": f"{value} broker(s) healed"}[action]
    print(done if action == "heal" else f"broker {args.broker} {done}")
    return 0


"""Faults ``raftwood dev`` injects into its own brokers, and their record.

Actions on broker N (from the keys in ``dev``'s terminal or ``raftwood dev <action> N``
through ``dev_control``):

    kill      SIGKILL (a crash: nothing flushed); shown down until restarted
    pause     SIGSTOP: the process keeps its sockets but answers nothing
    resume    SIGCONT after a pause
    restart   start it again on the same ports and data (SIGTERM first if it runs)
    isolate   its proxy stalls every link to the other brokers and to clients
              (``dev --faults-network`` only, ``dev_network.py``)
    heal      (no broker: ``heal`` asks with broker 0) lift every cut; recorded once
              per broker that was isolated, nothing when none was

Each action that was carried out is appended, one JSON object a line, to
``<data-dir>/faults.jsonl`` (``{"ts", "action", "broker", "pid", "by"}``; the file is
started empty at each ``dev`` run), and every dev broker is told that path in
``FAULTS_FILE_ENV``, so its replication view marks the faults (``broker/ui/faults.py``).
A broker is shown ``paused`` while its process is stopped, whoever stopped it.
"""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from ..ui.faults import FAULTS_FILE_ENV  # noqa: F401  (the variable dev sets, re-exported)

log = logging.getLogger(__name__)

FAULTS_FILE = "faults.jsonl"
ACTIONS = ("kill", "pause", "resume", "restart", "isolate", "heal")


def faults_file(data_dir) -> Path:
    return Path(data_dir) / FAULTS_FILE


def start_record(data_dir) -> Path:
    """An empty fault file for this run (the last run's faults are not this cluster's)."""
    path = faults_file(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("", encoding="utf-8")
    return path


def record(data_dir, action: str, node_id: int, pid: int | None, by: str) -> None:
    """Append one fault line (a failure to write is logged, not raised: the fault
    happened either way)."""
    line = json.dumps({"ts": int(time.time() * 1000), "action": action, "broker": node_id,
                       "pid": pid, "by": by})
    try:
        with open(faults_file(data_dir), "a", encoding="utf-8") as file:
            file.write(line + "\n")
    except OSError as exc:
        log.warning("cannot record fault %s of broker %d: %s", action, node_id, exc)


def is_stopped(pid: int | None) -> bool:
    """True when process ``pid`` is stopped (SIGSTOP; state T in /proc)."""
    if pid is None:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    fields = stat.rsplit(")", 1)[-1].split()
    return bool(fields) and fields[0] in ("T", "t")


def is_paused(broker) -> bool:
    """A running broker process that is stopped (by ``dev`` or anyone else)."""
    return broker.is_running() and (broker.paused or is_stopped(broker.pid))


def act(cluster, action: str, node_id: int, by: str) -> str:
    """Carry out ``action`` on broker ``node_id`` of ``cluster`` (a DevCluster) and
    record it; the one-line answer of the control protocol, ``ok <pid>`` (the exit code
    for kill) or ``error <why>``, also said in ``dev``'s output on error."""
    from .dev_layout import DevError

    try:
        if action not in ACTIONS:
            raise DevError(f"unknown action {action!r} (one of {', '.join(ACTIONS)})")
        if action == "heal":
            return _heal(cluster, by)
        if action == "restart":
            pid = cluster.restart(node_id)
            answer = f"ok {pid}"
        elif action == "isolate":
            pid, answer = _isolate(cluster, node_id)
        else:
            pid, answer = _signal(cluster, action, node_id)
    except (DevError, OSError) as exc:
        cluster.say(f"cannot {action} broker {node_id}: {exc}")
        return f"error {exc}"
    record(cluster.data_dir, action, node_id, pid, by)
    return answer


def _signal(cluster, action: str, node_id: int) -> tuple[int, str]:
    """kill, pause or resume: (the broker's pid, the answer); DevError when it cannot."""
    from .dev_layout import DevError

    broker = cluster.broker(node_id)
    if not broker.is_running():
        raise DevError(f"broker {node_id} is not running (restart it first)")
    pid = broker.pid
    if action == "kill":
        code = broker.kill()
        cluster.say(f"killed broker {node_id} (kill -9, pid {pid})")
        return pid, f"ok {code}"
    if action == "pause":
        if is_paused(broker):
            raise DevError(f"broker {node_id} is paused already")
        broker.pause()
        cluster.say(f"paused broker {node_id} (SIGSTOP, pid {pid}); resume it with "
                    f"raftwood dev resume {node_id}")
        return pid, f"ok {pid}"
    if not is_paused(broker):
        raise DevError(f"broker {node_id} is not paused")
    broker.resume()
    cluster.say(f"resumed broker {node_id} (SIGCONT, pid {pid})")
    return pid, f"ok {pid}"


def _isolate(cluster, node_id: int) -> tuple[int | None, str]:
    """Cut broker ``node_id`` off through the proxy: (its pid, the answer)."""
    from .dev_layout import DevError
    from .dev_network import ENABLE_HINT

    if cluster.network is None:
        raise DevError(ENABLE_HINT)
    pid = cluster.broker(node_id).pid or 0
    cluster.network.isolate(node_id)
    cluster.say(f"isolated broker {node_id} from the other brokers and clients (its proxy "
                f"stalls every link); heal with h or raftwood dev heal")
    return pid, f"ok {pid}"


def _heal(cluster, by: str) -> str:
    """Lift every cut; one record per broker that was isolated; ``ok <how many>``."""
    from .dev_layout import DevError
    from .dev_network import ENABLE_HINT

    try:
        if cluster.network is None:
            raise DevError(ENABLE_HINT.replace("isolate", "heal", 1))
        healed = cluster.network.heal()
    except (DevError, OSError) as exc:
        cluster.say(f"cannot heal: {exc}")
        return f"error {exc}"
    for node_id in healed:
        record(cluster.data_dir, "heal", node_id, cluster.broker(node_id).pid, by)
    cluster.say(f"healed broker(s) {', '.join(map(str, healed))}: every link open again"
                if healed else "nothing to heal: no broker is isolated")
    return f"ok {len(healed)}"

"""``raftwood dev``: a local cluster of N broker processes with a live status table.

Port layout (``--port P``, ``--raft-port-base R``, default R = P + 100), for broker i
counted from 1:

    node.id                  i
    listeners                PLAINTEXT://127.0.0.1:<P + i - 1>
    controller.quorum.voters 1@127.0.0.1:<R>,2@127.0.0.1:<R + 1>,...   (only when N > 1;
                             the first ``--voters`` brokers, default all: the others
                             are observers of the metadata quorum)
    log.dirs                 <data-dir>/broker-<i>
    stdout + stderr          <data-dir>/broker-<i>/broker.log

so ``--brokers 3 --port 9092`` serves Kafka on 9092-9094 and Raft on 9192-9194.  A lone
broker (N = 1) gets no voters setting: it is its own quorum.  Extra ``--set key=value``
settings go to every broker; the four above are managed here and refused in ``--set``.

Start-up: first every port ``dev`` will bind (Kafka, Raft, SASL_SSL, metrics) is tried
on 127.0.0.1; a taken one stops ``dev`` at once (exit 1) with one line naming the port,
its use and its owner (pid and command, when /proc tells).  Then all brokers are
launched at once (a Raft quorum needs a majority up); each is ready when its own process
answers ApiVersions on its port (a broker that exits is never ready: ``dev`` prints the
end of its log and exits 1); then ``dev`` waits (within ``--start-timeout``) until
broker 1's status shows a controller and every broker registered and unfenced, and only
then prints ``bootstrap servers: ...``, so the cluster is usable from that line on.

New topics (auto-created, or created without a replication factor) get
``default.replication.factor`` min(N, 3) and ``min.insync.replicas`` 2 when N >= 3, else
1, unless ``--set`` names them; ``dev`` says which at start.

The metadata quorum (N > 1) is always secret: at its first start ``dev`` writes a
random cluster secret to ``<data-dir>/quorum.secret`` (mode 0600) and reuses it at every
later start on the same data dir; every broker gets it as
``controller.quorum.password.file`` (never on a command line), so Raft traffic is
encrypted and only holders of the secret are heard on the Raft ports.  A ``--set`` of
``controller.quorum.password`` or ``.password.file`` replaces it.

``--secure``: the same cluster, plus on broker i a SASL_SSL listener at
``<S + i - 1>`` (S = P + 200) with SCRAM-SHA-512, on certificates made once in
``<data-dir>/tls/`` (``dev_tls.py``).  Once the cluster is up, ``dev`` adds the SCRAM user
``dev`` with a fresh password (over the PLAINTEXT listener, which stays on loopback
for ``dev``'s own status table and the ``raftwood`` commands), writes the Kafka client
properties to ``<data-dir>/client.properties`` and prints the settings for Kafka clients
and for librdkafka.

Metrics and the replication view (unless ``--no-ui``; ``--ui`` is the default, kept as
a no-op): each broker serves its metrics HTTP endpoint on ``<U + i - 1>`` (U = P + 300;
``metrics.port``, on loopback): ``/metrics`` for Prometheus, ``/replication`` the live
replication view (``broker/ui``); ``dev`` prints broker 1's URLs after the bootstrap
line.  Any broker's page shows the whole cluster, so the page of a broker that is killed
can be swapped for another's.

Each broker runs as ``<python> -m broker.cli start --set ...`` in its own session, so a
Ctrl-C in the terminal reaches ``dev`` only; ``dev`` then sends SIGTERM to every broker,
waits up to ``STOP_TIMEOUT_S`` in all, SIGKILLs what is left and exits 0.  On Linux a
broker also gets SIGKILL from the kernel if ``dev`` itself dies (PR_SET_PDEATHSIG), so
no broker outlives its supervisor.  A broker that dies is shown as down (with its exit
code) and is not restarted by itself: ``raftwood dev restart N --data-dir D`` (from any
terminal; ``dev_control.py``) or, when ``dev`` runs in a terminal, the key ``N`` starts
broker N again on the same ports and data (a running one is stopped first); the table's
RESTARTS column counts it, and Ctrl-C stops restarted brokers too.

Faults on purpose (``dev_faults.py``): ``raftwood dev kill N`` (kill -9), ``pause N``
(SIGSTOP: the table shows it ``paused``) and ``resume N`` (SIGCONT), or in the terminal
``k``, ``p`` or ``c`` then N.  Every action, restarts too, is appended to
``<data-dir>/faults.jsonl`` (started empty by each run), which the replication view
marks on its charts and lists in its event log.

``--faults-network`` (``dev_network.py``) puts every broker behind a loopback proxy on
the ports above (the brokers themselves on Kafka P + 400 + i - 1 and Raft
P + 500 + i - 1), so ``raftwood dev isolate N`` (key ``i`` then N) can cut broker N from
the other brokers and from clients, and ``raftwood dev heal`` (key ``h``) heal it.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from .. import config as config_module
from ..harness import (
    BrokerPlan,
    broker_command,  # noqa: F401  (part of this command's layout API)
    broker_process,
    log_tail,
)
from . import dev_control, dev_faults
from .client import answers_api_versions, fetch_statuses
from .dev_console import KeyReader, StatusPrinter, footer, supervise
from .dev_control import ACTION_HELP, run_action
from .dev_layout import (  # noqa: F401  (the plan's names, as ``raftwood dev``'s API)
    ADD_USER_TIMEOUT_S,
    DEV_MECHANISM,
    DEV_USER,
    HOST,
    MANAGED_SETTINGS,
    METRICS_PATH,
    QUORUM_SECRET_FILE,
    QUORUM_SECRET_SETTINGS,
    RAFT_PORT_OFFSET,
    SECURE_PORT_OFFSET,
    UI_PATH,
    UI_PORT_OFFSET,
    DevError,
    SecureDev,
    add_dev_user,
    bootstrap_line,
    broker_settings,
    check_ports_free,
    client_properties,
    librdkafka_settings,
    plan_cluster,
    plan_secure,
    plan_ui,
    port_uses,
    print_secure_settings,
    quorum_secret,
    replication_defaults,
    replication_line,
    ui_url,
    voters,
)
from .dev_network import REAL_KAFKA_OFFSET, REAL_RAFT_OFFSET, DevNetwork, plan_layouts
from .dev_tls import make_dev_pki  # noqa: F401  (used through this module by tests)
from .ports import busy_message, busy_ports, port_owner
from .status import UNKNOWN, broker_summary
from .tables import format_table

__all__ = ["StatusPrinter"]  # the live table's printer lives in dev_console

STOP_TIMEOUT_S = 15.0
DEFAULT_START_TIMEOUT_S = 60.0
STATUS_TIMEOUT_S = 1.0
TICK_S = 0.1
LOG_TAIL_LINES = 12
RESTART_ANSWER_TIMEOUT_S = 120.0
# BrokerProcess writes these from the plan (same values, same order as broker_settings).
_SET_BY_BROKER_PROCESS = ("node.id", "listeners", "log.dirs")


# -- processes --------------------------------------------------------------------------------

class DevCluster:
    """The broker processes of one ``raftwood dev`` run.  Main thread only.

    Invariant: ``brokers[i]`` is the BrokerProcess of ``layout[i]``, the only process
    ``dev`` ever runs for that broker (``restart`` starts it again, same ports and data,
    after the previous run ended) and ``restarts[i]`` counts those restarts.  A broker is
    shown up only while its own process runs.  ``stop_requests`` counts SIGINT/SIGTERM
    received; loops poll it every ``TICK_S``.
    """

    def __init__(self, layout: list[BrokerPlan], extra: dict[str, str], out=sys.stdout,
                 secure: SecureDev | None = None, ui_port_base: int | None = None,
                 voter_count: int | None = None, secret_file: Path | None = None,
                 data_dir: Path | None = None, network: DevNetwork | None = None):
        self.layout = layout
        self.network = network
        self.data_dir = Path(data_dir) if data_dir is not None else layout[0].data_dir.parent
        environment = dict(os.environ, **{
            dev_faults.FAULTS_FILE_ENV: str(dev_faults.faults_file(self.data_dir).resolve())})
        self.secure = secure
        self.ui_port_base = ui_port_base
        self.settings = [broker_settings(layout, b, extra, secure, ui_port_base, voter_count,
                                         secret_file) for b in layout]
        if network is not None:
            for member, settings in zip(layout, self.settings):
                network.adjust(settings, member, voter_count, extra)
            network.owners = self.broker_pids
        self.brokers = [broker_process(member, {k: v for k, v in settings.items()
                                                if k not in _SET_BY_BROKER_PROCESS},
                                       log_marker="raftwood dev", env=environment)
                        for member, settings in zip(layout, self.settings)]
        if secure is not None:
            for broker, settings in zip(self.brokers, self.settings):
                _use_listeners(broker, settings["listeners"])
        self.commands = [broker.command() for broker in self.brokers]
        self.restarts = [0] * len(layout)
        self.start_timeout_s = DEFAULT_START_TIMEOUT_S
        self.stop_requests = 0
        self.out = out
        self._reported_exits: dict[int, int | None] = {}   # node id -> pid reported dead

    def broker_pids(self) -> dict[int, int]:
        """{pid: node id} of the broker processes launched (the proxy's owners)."""
        return {b.pid: m.node_id for m, b in zip(self.layout, self.brokers)
                if b.pid is not None}

    @property
    def public(self) -> list[BrokerPlan]:
        """Where clients reach the brokers: the proxy's ports, else their own."""
        return self.network.public if self.network is not None else self.layout

    def on_signal(self, _signum, _frame) -> None:
        self.stop_requests += 1

    def launch(self) -> None:
        """Start every broker at once (a Raft quorum needs a majority up)."""
        for broker in self.brokers:
            broker.launch()

    def wait_ready(self, timeout_s: float) -> bool:
        """Wait for each broker's own process to answer ApiVersions, printing progress;
        False when stopped by a signal; DevError when a broker exits or misses the
        deadline."""
        deadline = time.monotonic() + timeout_s
        for index, (member, broker) in enumerate(zip(self.layout, self.brokers), 1):
            self.say(f"starting broker {index}/{len(self.layout)} "
                     f"({member.address}, pid {broker.pid}) ...", end="")
            if not self._wait_answering(member, broker, deadline, timeout_s):
                return False
        return True

    def _wait_answering(self, member: BrokerPlan, broker, deadline: float,
                        timeout_s: float) -> bool:
        """Until ``broker``'s process answers on its port (finishing the progress line);
        False when stopped by a signal; DevError when it exits, another process holds
        its port, or ``deadline`` passes."""
        started = time.monotonic()
        while not (broker.is_running() and
                   answers_api_versions((member.host, member.port), timeout_s=1.0)):
            if self.stop_requests:
                self.say(" interrupted")
                return False
            if not broker.is_running():
                self.say(" failed")
                raise DevError(self.exit_explained(member, broker, "while starting"))
            if time.monotonic() > deadline:
                self.say(" failed")
                raise DevError(f"broker {member.node_id} did not answer on {member.address} "
                               f"within {timeout_s:g} s\n"
                               f"{log_tail(member.log_path, LOG_TAIL_LINES)}")
            time.sleep(TICK_S)
        owner = port_owner(member.port)
        if owner is not None and owner[0] != broker.pid:
            self.say(" failed")
            raise DevError(f"port {member.port} answers, but from pid {owner[0]} "
                           f"({owner[1]}), not broker {member.node_id} (pid {broker.pid})")
        self.say(f" ready ({time.monotonic() - started:.1f} s)")
        return True

    def exit_explained(self, member: BrokerPlan, broker, when: str) -> str:
        """``broker N exited with C <when>`` and the end of its log (the reason)."""
        self._reported_exits[member.node_id] = broker.pid
        return (f"broker {member.node_id} exited with {broker.returncode} {when}\n"
                f"{log_tail(member.log_path, LOG_TAIL_LINES)}")

    def wait_registered(self, timeout_s: float) -> bool:
        """Wait until broker 1's cluster image shows a controller and every broker alive
        (unfenced), so clients can use the cluster once the bootstrap line is out.

        A status request that fails is asked again (a broker that dies while starting
        fails it first, then exits).  False when stopped by a signal; DevError when a
        broker exits; a warning, not an error, when the deadline passes (the table then
        shows what is missing).
        """
        started = time.monotonic()
        deadline = started + timeout_s
        wanted = {b.node_id for b in self.layout}
        self.say(f"waiting for {len(wanted)} broker(s) to register ...", end="")
        alive: set = set()
        while True:
            self._raise_if_one_exited()
            status = fetch_statuses([(HOST, self.layout[0].port)], STATUS_TIMEOUT_S)[0]
            if isinstance(status, dict):
                alive = {b.get("id") for b in status.get("brokers") or []
                         if not b.get("fenced")}
            if isinstance(status, dict) and wanted <= alive and \
                    _int_or(status.get("controller_id"), -1) >= 0:
                self._raise_if_one_exited()
                self.say(f" ready in {time.monotonic() - started:.1f} s "
                         f"(controller: broker {status['controller_id']})")
                return True
            if self.stop_requests:
                self.say(" interrupted")
                return False
            if time.monotonic() > deadline:
                self.say(f" not yet after {timeout_s:g} s (registered: {sorted(alive)})")
                return True
            time.sleep(0.2)

    def _raise_if_one_exited(self) -> None:
        for member, broker in zip(self.layout, self.brokers):
            if not broker.is_running():
                self.say(" failed")
                raise DevError(self.exit_explained(member, broker, "while starting"))

    def broker(self, node_id: int):
        """The BrokerProcess of broker ``node_id``; DevError when there is none."""
        if not 1 <= node_id <= len(self.layout):
            raise DevError(f"no broker {node_id}: this cluster has brokers 1-{len(self.layout)}")
        return self.brokers[node_id - 1]

    def restart(self, node_id: int) -> int:
        """Start broker ``node_id`` again (SIGTERM first if it runs) on the same ports and
        data, and wait until it answers; its new pid.  DevError when there is no such
        broker, a port of it is taken, or it exits or stays silent."""
        member, broker = self.layout[node_id - 1], self.broker(node_id)
        if broker.is_running():
            self.say(f"stopping broker {node_id} (pid {broker.pid}) ...")
            if dev_faults.is_paused(broker):   # stopped by anyone: SIGTERM needs it going
                broker.resume()
            broker.terminate()
            if broker.wait(STOP_TIMEOUT_S) is None:
                broker.kill()
        else:
            broker.wait(0)   # reaps it and closes the log of its last run
        check_ports_free(self.layout, [member], self.secure, self.ui_port_base)
        broker.launch()
        self.restarts[node_id - 1] += 1
        self.say(f"restarting broker {node_id} ({member.address}, pid {broker.pid}) ...",
                 end="")
        timeout_s = self.start_timeout_s
        if not self._wait_answering(member, broker, time.monotonic() + timeout_s, timeout_s):
            raise DevError("interrupted")
        return broker.pid

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM every running broker, wait up to ``timeout_s`` in all, then SIGKILL the
        rest (at once if another stop signal arrives meanwhile); reaps every process."""
        running = [b for b in self.brokers if b.is_running()]
        if running:
            self.say(f"stopping {len(running)} broker(s) ...")
        for broker in running:
            broker.terminate()
        requests_before = self.stop_requests
        deadline = time.monotonic() + timeout_s
        while any(b.is_running() for b in running):
            if time.monotonic() > deadline or self.stop_requests > requests_before:
                break
            time.sleep(TICK_S)
        for member, broker in zip(self.layout, self.brokers):
            if broker.is_running():
                broker.kill()
                self.say(f"broker {member.node_id} did not stop in time: killed")
            elif broker in running:
                self.say(f"broker {member.node_id} exited with {broker.wait(0)}")

    def report_exits(self) -> bool:
        """Print one line per broker process that died since the last call (shown as
        down after); True when it printed anything."""
        printed = False
        for member, broker in zip(self.layout, self.brokers):
            if broker.returncode is not None and \
                    self._reported_exits.get(member.node_id) != broker.pid:
                self._reported_exits[member.node_id] = broker.pid
                self.say(f"broker {member.node_id} exited with {broker.returncode}; "
                         f"see {member.log_path}; start it again with raftwood dev restart "
                         f"{member.node_id} --data-dir {member.data_dir.parent}")
                printed = True
        return printed

    def status_rows(self) -> list[list]:
        """One row per broker for the live table (status asked of running brokers only;
        a paused one would not answer)."""
        paused = {i for i, b in enumerate(self.brokers) if dev_faults.is_paused(b)}
        alive = [i for i, b in enumerate(self.brokers) if b.is_running() and i not in paused]
        answers = fetch_statuses([(HOST, self.layout[i].port) for i in alive], STATUS_TIMEOUT_S)
        by_index = dict(zip(alive, answers))
        cut = self.network.isolated if self.network is not None else set()
        rows = []
        for index, (member, broker) in enumerate(zip(self.public, self.brokers)):
            answer = by_index.get(index)
            running = index in by_index and broker.is_running()
            state = ("paused" if index in paused else
                     ("isolated" if member.node_id in cut else "up") if running
                     else f"down ({broker.returncode})")
            if isinstance(answer, dict) and running:
                summary = broker_summary(answer)
                details = [summary.is_controller, summary.quorum_role, summary.hosted,
                           summary.leaders, summary.under_replicated]
            else:
                details = [UNKNOWN if running else None] * 5
            rows.append([member.node_id, member.address, broker.pid, state] + details
                        + [self.restarts[index]])
        return rows

    def render(self) -> str:
        return render_status(self.status_rows())

    def say(self, text: str, end: str = "\n") -> None:
        print(text, end=end, file=self.out, flush=True)


STATUS_HEADERS = ["ID", "ADDRESS", "PID", "STATE", "CONTROLLER", "QUORUM", "HOSTED",
                  "LEADERS", "UNDER_REPLICATED", "RESTARTS"]


def _use_listeners(broker, listeners: str) -> None:
    """BrokerProcess owns ``listeners`` (its PLAINTEXT one, which its readiness check and
    the status table use); ``--secure`` lists the SASL_SSL one after it."""
    command = broker.command
    own = f"listeners=PLAINTEXT://{broker.bootstrap}"

    def command_with_listeners() -> list[str]:
        args = command()
        args[args.index(own)] = f"listeners={listeners}"
        return args

    broker.command = command_with_listeners


def render_status(rows: list[list]) -> str:
    return format_table(STATUS_HEADERS, rows, right=(0, 2, 6, 7, 8, 9))


def _int_or(value, default: int) -> int:
    return value if isinstance(value, int) else default


def plan_run(args) -> tuple[DevCluster, dict]:
    """The cluster of ``args`` (not launched) and what ``run`` prints about it; DevError
    or ConfigError for bad options."""
    network = None
    if getattr(args, "faults_network", False):
        if args.secure:
            raise DevError("--faults-network proxies the PLAINTEXT listener only; drop "
                           "--secure")
        layout, public = plan_layouts(args.brokers, args.port, args.data_dir,
                                      args.raft_port_base)
        network = DevNetwork(layout, public)
    else:
        layout = plan_cluster(args.brokers, args.port, args.data_dir, args.raft_port_base)
    voter_count = getattr(args, "voters", None)
    if voter_count is not None and not 1 <= voter_count <= args.brokers:
        raise DevError(f"--voters {voter_count}: between 1 and --brokers ({args.brokers})")
    extra = config_module.parse_overrides(args.set)
    extra = {**replication_defaults(args.brokers, extra), **extra}
    secure = plan_secure(layout, args.port, args.data_dir) if args.secure else None
    ui_base = plan_ui(layout, args.port, secure) if getattr(args, "ui", True) else None
    secret_file = quorum_secret(args.data_dir) if voters(layout) else None
    cluster = DevCluster(layout, extra, secure=secure, ui_port_base=ui_base,
                         voter_count=voter_count, secret_file=secret_file,
                         data_dir=Path(args.data_dir), network=network)
    cluster.start_timeout_s = args.start_timeout
    for settings in cluster.settings:  # the brokers' own parser refuses bad settings now
        config_module.build(settings)
    return cluster, {"secret_file": secret_file, "extra": extra}


def check_can_start(cluster: DevCluster, data_dir) -> None:
    """DevError when another ``dev`` supervises ``data_dir`` or a port is taken."""
    other = dev_control.supervisor_pid(data_dir)
    if other is not None and other != os.getpid():
        raise DevError(f"another raftwood dev (pid {other}) runs on {data_dir}; stop it, or "
                       f"use another --data-dir (and --port)")
    check_ports_free(cluster.layout, cluster.layout, cluster.secure, cluster.ui_port_base)
    busy = busy_ports(HOST, cluster.network.port_uses()) if cluster.network else []
    if busy:
        raise DevError(busy_message(HOST, busy, "stop it, or give raftwood dev other ports"))


def run(args) -> int:
    """The ``dev`` command: plan, check ports, launch, wait ready, print bootstrap,
    supervise, stop."""
    try:
        cluster, facts = plan_run(args)
    except (DevError, config_module.ConfigError) as exc:
        print(f"raftwood dev: {exc}", file=sys.stderr)
        return 2
    try:
        check_can_start(cluster, args.data_dir)
    except DevError as exc:
        print(f"raftwood dev: {exc}", file=sys.stderr)
        return 1
    print(replication_line(facts["extra"]), flush=True)
    previous = {s: signal.signal(s, cluster.on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    keys = None
    try:
        dev_control.claim(args.data_dir)
        dev_faults.start_record(args.data_dir)
        if cluster.network is not None:
            cluster.network.start()
        cluster.launch()
        started = time.monotonic()
        if (cluster.wait_ready(args.start_timeout) and cluster.wait_registered(
                max(1.0, args.start_timeout - (time.monotonic() - started)))):
            print_ready(cluster, Path(args.data_dir), facts["secret_file"])
            keys = KeyReader()
            printer = StatusPrinter(sys.stdout, sys.stdout.isatty(), footer(
                len(cluster.layout), args.data_dir, keys.active, cluster.network is not None))
            supervise(cluster, printer, keys, args.data_dir)
        code = 0
    except (DevError, OSError) as exc:
        print(f"raftwood dev: {exc}", file=sys.stderr)
        code = 1
    finally:
        if keys is not None:
            keys.close()
        cluster.stop()
        if cluster.network is not None:
            cluster.network.close()
        dev_control.release(args.data_dir)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return code


def print_ready(cluster: DevCluster, data_dir: Path, secret_file: Path | None) -> None:
    """What a user needs once the cluster is up: security, bootstrap, URLs, logs."""
    layout, secure, ui_base = cluster.layout, cluster.secure, cluster.ui_port_base
    if secure is not None:
        add_dev_user(layout[0], secure)
        print_secure_settings(layout, secure, data_dir)
    else:
        print("PLAINTEXT on loopback only (raftwood dev --secure adds SASL_SSL + SCRAM)",
              flush=True)
    if secret_file is not None:
        print(f"metadata quorum: Raft traffic encrypted with the secret in {secret_file}",
              flush=True)
    print(bootstrap_line(cluster.public), flush=True)
    if cluster.network is not None:
        print("every broker behind a loopback proxy: isolate one with raftwood dev isolate N "
              "(key i), heal with raftwood dev heal (key h)", flush=True)
    if ui_base is not None:
        print(f"metrics: {ui_url(layout[0], ui_base, METRICS_PATH)} (broker i: port "
              f"{ui_base}+i-1)", flush=True)
        print(f"replication view: {ui_url(layout[0], ui_base)}", flush=True)
    print(f"logs: {data_dir / 'broker-<id>' / 'broker.log'}", flush=True)


def add_command(commands) -> None:
    dev = commands.add_parser("dev", help="run a local cluster of N broker processes",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    dev.add_argument("--brokers", type=int, default=3, help="how many brokers (default 3)")
    dev.add_argument("--voters", type=int, default=None, metavar="N",
                     help="only brokers 1..N vote in the metadata quorum; the others join "
                          "as observers (default: all vote)")
    dev.add_argument("--data-dir", default="./data", help="parent of broker-<i>/ (default ./data)")
    dev.add_argument("--port", type=int, default=9092,
                     help="Kafka port of broker 1; broker i gets port+i-1 (default 9092)")
    dev.add_argument("--raft-port-base", type=int, default=None,
                     help=f"Raft port of broker 1 (default port+{RAFT_PORT_OFFSET})")
    dev.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     help="a broker setting for every broker (repeatable)")
    dev.add_argument("--secure", action="store_true",
                     help="add SASL_SSL + SCRAM-SHA-512 listeners on self-made certificates "
                          "and encrypt Raft; prints the client settings")
    dev.add_argument("--ui", action="store_true", default=True,
                     help="(the default) serve metrics and the live replication view: "
                          f"metrics.port port+{UI_PORT_OFFSET}+i-1 on broker i, loopback "
                          "only; prints the URLs")
    dev.add_argument("--no-ui", dest="ui", action="store_false",
                     help="serve no metrics port")
    dev.add_argument("--start-timeout", type=float, default=DEFAULT_START_TIMEOUT_S,
                     metavar="SECONDS", help="for all brokers to answer (default %(default)g)")
    dev.add_argument("--faults-network", action="store_true",
                     help="put every broker behind a loopback proxy on the usual ports "
                          f"(brokers on port+{REAL_KAFKA_OFFSET}+i-1, Raft port+"
                          f"{REAL_RAFT_OFFSET}+i-1), so isolate N / heal can cut a broker "
                          "from the others and from clients")
    dev.set_defaults(func=run)
    actions = dev.add_subparsers(dest="dev_action",
                                 metavar="{restart,kill,pause,resume,isolate,heal}")
    _errors_in_one_line(dev, "raftwood dev")
    for action, (summary, details) in ACTION_HELP.items():
        parser = actions.add_parser(
            action, help=f"ask the raftwood dev running on --data-dir to {summary}",
            description=f"Ask the raftwood dev supervising --data-dir to {summary}: "
                        f"{details}  Recorded in <data-dir>/{dev_faults.FAULTS_FILE}, "
                        "which the replication view marks on its timeline.")
        if action == "heal":
            parser.set_defaults(broker=0)
        else:
            parser.add_argument("broker", type=int, metavar="N",
                                help="the broker's id (1..--brokers)")
        parser.add_argument("--data-dir", default=argparse.SUPPRESS,
                            help="the data dir of that raftwood dev (default ./data)")
        parser.add_argument("--timeout", type=float, default=RESTART_ANSWER_TIMEOUT_S,
                            metavar="SECONDS", help="for dev to answer (default %(default)g)")
        parser.set_defaults(func=run_action, dev_action=action)
        _errors_in_one_line(parser, f"raftwood dev {action}")


def _errors_in_one_line(parser: argparse.ArgumentParser, prog: str) -> None:
    """A bad option of ``prog`` is one line saying what to do, not a usage block."""
    def error(message: str):
        parser.exit(2, f"{prog}: {message} (see {prog} --help)\n")

    parser.error = error

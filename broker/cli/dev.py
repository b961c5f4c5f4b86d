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

Start-up: all brokers are launched at once (a Raft quorum needs a majority up); each is
ready when its port answers ApiVersions; then ``dev`` waits (within ``--start-timeout``)
until broker 1's status shows a controller and every broker registered and unfenced, and
only then prints ``bootstrap servers: ...``, so the cluster is usable from that line on.

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

``--ui``: each broker also serves its metrics HTTP endpoint on ``<U + i - 1>`` (U = P +
300; ``metrics.port``, on loopback), whose ``/replication`` page is the live replication
view (``broker/ui``); ``dev`` prints broker 1's URL with the bootstrap line.  Any broker's
page shows the whole cluster, so the page of a broker that is killed can be swapped for
another's.

Each broker runs as ``<python> -m broker.cli start --set ...`` in its own session, so a
Ctrl-C in the terminal reaches ``dev`` only; ``dev`` then sends SIGTERM to every broker,
waits up to ``STOP_TIMEOUT_S`` in all, SIGKILLs what is left and exits 0.  On Linux a
broker also gets SIGKILL from the kernel if ``dev`` itself dies (PR_SET_PDEATHSIG), so
no broker outlives its supervisor.  A broker that dies is shown as down and is not
restarted.
"""
from __future__ import annotations

import argparse
import os
import secrets
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from kafka.protocol.admin import AlterUserScramCredentialsRequest

from protocol.errors import ErrorCode

from .. import config as config_module
from ..harness import LOCALHOST, BrokerPlan, broker_process, log_tail, plan_brokers
from ..harness import broker_command  # noqa: F401  (part of this command's layout API)
from .client import ClientError, Connection, answers_api_versions, error_name, fetch_statuses
from .dev_tls import DevPki, make_dev_pki, write_private
from .status import UNKNOWN, broker_summary
from .tables import format_table

HOST = LOCALHOST
RAFT_PORT_OFFSET = 100
SECURE_PORT_OFFSET = 200
UI_PORT_OFFSET = 300
UI_PATH = "/replication"
DEV_USER = "dev"
DEV_MECHANISM = "SCRAM-SHA-512"
ADD_USER_TIMEOUT_S = 20.0
MANAGED_SETTINGS = ("node.id", "listeners", "log.dirs", "controller.quorum.voters")
QUORUM_SECRET_SETTINGS = frozenset({"controller.quorum.password",
                                    "controller.quorum.password.file"})
QUORUM_SECRET_FILE = "quorum.secret"
STOP_TIMEOUT_S = 15.0
DEFAULT_START_TIMEOUT_S = 60.0
REFRESH_S = 2.0
QUIET_REPRINT_S = 10.0     # without a TTY: print an unchanged table this often
STATUS_TIMEOUT_S = 1.0
TICK_S = 0.1
LOG_TAIL_LINES = 30
# BrokerProcess writes these from the plan (same values, same order as broker_settings).
_SET_BY_BROKER_PROCESS = ("node.id", "listeners", "log.dirs")


class DevError(Exception):
    """``raftwood dev`` cannot go on (bad layout, a broker that did not start)."""


# -- layout (pure) ----------------------------------------------------------------------------

def plan_cluster(brokers: int, port: int, data_dir, raft_port_base: int | None = None
                 ) -> list[BrokerPlan]:
    """The layout of the module docstring; DevError when ports clash or leave 1..65535."""
    if brokers < 1:
        raise DevError("--brokers must be at least 1")
    raft_base = port + RAFT_PORT_OFFSET if raft_port_base is None else raft_port_base
    layout = plan_brokers(data_dir, [port + i for i in range(brokers)],
                          [raft_base + i for i in range(brokers)], log_in_data_dir=True)
    kafka_ports = {b.port for b in layout}
    raft_ports = {b.raft_port for b in layout} if brokers > 1 else set()
    if kafka_ports & raft_ports:
        raise DevError(f"Kafka ports {port}-{port + brokers - 1} overlap Raft ports "
                       f"{raft_base}-{raft_base + brokers - 1}; pick another --raft-port-base")
    if min(kafka_ports | raft_ports) < 1 or max(kafka_ports | raft_ports) > 65535:
        raise DevError("ports must lie in 1..65535")
    return layout


@dataclass(frozen=True)
class SecureDev:
    """What ``--secure`` adds: the SASL_SSL ports (broker i: ``port_base + i - 1``), the
    certificates, the SCRAM user and (the same as without ``--secure``) the Raft
    secret's file."""

    port_base: int
    pki: DevPki
    quorum_password_file: Path
    password: str = field(default_factory=lambda: secrets.token_urlsafe(18), repr=False)

    def address(self, member: BrokerPlan) -> str:
        return f"{member.host}:{self.port_base + member.node_id - 1}"


def plan_secure(layout: list[BrokerPlan], port: int, data_dir) -> SecureDev:
    """SASL_SSL ports after the Kafka and Raft ones; DevError when they clash."""
    base = port + SECURE_PORT_OFFSET
    secure_ports = {base + i for i in range(len(layout))}
    taken = {b.port for b in layout} | ({b.raft_port for b in layout} if len(layout) > 1
                                        else set())
    if secure_ports & taken or max(secure_ports) > 65535:
        raise DevError(f"SASL_SSL ports {base}-{max(secure_ports)} clash with the Kafka or "
                       f"Raft ports or leave 1..65535; pick another --port")
    pki = make_dev_pki(Path(data_dir) / "tls")
    return SecureDev(base, pki, quorum_secret(data_dir))


def quorum_secret(data_dir) -> Path:
    """``<data-dir>/quorum.secret``: made (random, mode 0600) at the first start, then
    reused, so brokers restarted on the same data dir still hear each other.  A file
    others could read is made private again."""
    path = Path(data_dir) / QUORUM_SECRET_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if path.read_text(encoding="utf-8").splitlines()[0].strip():
            if path.stat().st_mode & 0o077:
                os.chmod(path, 0o600)
            return path
    except (FileNotFoundError, IndexError):
        pass
    write_private(path, (secrets.token_urlsafe(24) + "\n").encode())
    return path


def plan_ui(layout: list[BrokerPlan], port: int, secure: SecureDev | None = None) -> int:
    """The first metrics port of ``--ui`` (broker i: ``base + i - 1``); DevError when
    those ports clash with the Kafka, Raft or SASL_SSL ones or leave 1..65535."""
    base = port + UI_PORT_OFFSET
    ui_ports = {base + i for i in range(len(layout))}
    taken = {b.port for b in layout} | ({b.raft_port for b in layout} if len(layout) > 1
                                        else set())
    if secure is not None:
        taken |= {secure.port_base + i for i in range(len(layout))}
    if ui_ports & taken or max(ui_ports) > 65535:
        raise DevError(f"--ui ports {base}-{max(ui_ports)} clash with the Kafka, Raft or "
                       f"SASL_SSL ports or leave 1..65535; pick another --port")
    return base


def ui_url(member: BrokerPlan, ui_port_base: int) -> str:
    return f"http://{member.host}:{ui_port_base + member.node_id - 1}{UI_PATH}"


def voters(layout: list[BrokerPlan], count: int | None = None) -> str:
    """``1@127.0.0.1:9192,2@127.0.0.1:9193,...`` of the first ``count`` brokers (default
    all); empty for a lone broker."""
    if len(layout) < 2:
        return ""
    return ",".join(f"{p.node_id}@{p.host}:{p.raft_port}" for p in layout[:count or None])


def broker_settings(layout: list[BrokerPlan], member: BrokerPlan,
                    extra: dict[str, str], secure: SecureDev | None = None,
                    ui_port_base: int | None = None,
                    voter_count: int | None = None,
                    secret_file: Path | None = None) -> dict[str, str]:
    """Every ``--set`` of one broker, managed ones first; DevError if ``extra`` names one
    (``metrics.port`` too with ``--ui``, which sets it per broker).  A quorum gets the
    secret's file (``secret_file``, else ``--secure``'s) unless ``extra`` names one."""
    managed = set(MANAGED_SETTINGS) | ({"metrics.port"} if ui_port_base is not None else set())
    clash = sorted(managed & extra.keys())
    if clash:
        raise DevError(f"{', '.join(clash)} are set by raftwood dev for each broker; "
                       f"use --port/--raft-port-base/--data-dir instead")
    settings = {"node.id": str(member.node_id), "listeners": f"PLAINTEXT://{member.address}",
                "log.dirs": str(member.data_dir)}
    if voters(layout):
        settings["controller.quorum.voters"] = voters(layout, voter_count)
    secret_file = secret_file or (secure.quorum_password_file if secure else None)
    if voters(layout) and secret_file is not None and not QUORUM_SECRET_SETTINGS & extra.keys():
        settings["controller.quorum.password.file"] = str(secret_file)
    if secure is not None:
        settings["listeners"] += f",SASL_SSL://{secure.address(member)}"
        settings.update({
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": DEV_MECHANISM,
            "listener.name.sasl_ssl.ssl.keystore.location": str(secure.pki.broker_keystore)})
    if ui_port_base is not None:
        settings["metrics.port"] = str(ui_port_base + member.node_id - 1)
    settings.update(extra)
    return settings


def bootstrap_line(layout: list[BrokerPlan]) -> str:
    return "bootstrap servers: " + ",".join(b.address for b in layout)


def client_properties(layout: list[BrokerPlan], secure: SecureDev) -> str:
    """Kafka's client properties for the SASL_SSL listeners (Java clients, Spark with the
    ``kafka.`` prefix, ``raftwood --command-config``)."""
    return "\n".join([
        "bootstrap.servers=" + ",".join(secure.address(b) for b in layout),
        "security.protocol=SASL_SSL",
        f"sasl.mechanism={DEV_MECHANISM}",
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{DEV_USER}" password="{secure.password}";',
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={secure.pki.ca.resolve()}"]) + "\n"


def librdkafka_settings(layout: list[BrokerPlan], secure: SecureDev) -> dict[str, str]:
    """The same for confluent-kafka and kcat (``-X key=value``)."""
    return {"bootstrap.servers": ",".join(secure.address(b) for b in layout),
            "security.protocol": "SASL_SSL", "sasl.mechanisms": DEV_MECHANISM,
            "sasl.username": DEV_USER, "sasl.password": secure.password,
            "ssl.ca.location": str(secure.pki.ca.resolve())}


def add_dev_user(member: BrokerPlan, secure: SecureDev,
                 timeout_s: float = ADD_USER_TIMEOUT_S) -> None:
    """The SCRAM user ``dev`` through the PLAINTEXT listener; retried while the cluster
    settles (no controller yet), DevError at the deadline."""
    from .users import scram_upsertion

    request = AlterUserScramCredentialsRequest[0](upsertions=[scram_upsertion(
        DEV_USER, DEV_MECHANISM, secure.password)], deletions=[])
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with Connection((member.host, member.port), timeout_s) as conn:
                result = conn.request(request).results[0]
            if result.error_code == ErrorCode.NONE:
                return
            problem = f"{error_name(result.error_code)}: {result.error_message}"
        except ClientError as exc:
            problem = str(exc)
        if time.monotonic() > deadline:
            raise DevError(f"cannot add the SCRAM user {DEV_USER}: {problem}")
        time.sleep(0.5)


# -- processes --------------------------------------------------------------------------------

class DevCluster:
    """The broker processes of one ``raftwood dev`` run.  Main thread only.

    Invariant: ``brokers[i]`` is the BrokerProcess of ``layout[i]``; each is launched
    once by ``launch()`` and never restarted.  ``stop_requests`` counts SIGINT/SIGTERM
    received; loops poll it every ``TICK_S``.
    """

    def __init__(self, layout: list[BrokerPlan], extra: dict[str, str], out=sys.stdout,
                 secure: SecureDev | None = None, ui_port_base: int | None = None,
                 voter_count: int | None = None, secret_file: Path | None = None):
        self.layout = layout
        self.settings = [broker_settings(layout, b, extra, secure, ui_port_base, voter_count,
                                         secret_file) for b in layout]
        self.brokers = [broker_process(member, {k: v for k, v in settings.items()
                                                if k not in _SET_BY_BROKER_PROCESS},
                                       log_marker="raftwood dev")
                        for member, settings in zip(layout, self.settings)]
        if secure is not None:
            for broker, settings in zip(self.brokers, self.settings):
                _use_listeners(broker, settings["listeners"])
        self.commands = [broker.command() for broker in self.brokers]
        self.stop_requests = 0
        self.out = out
        self._reported_exits: set[int] = set()

    def on_signal(self, _signum, _frame) -> None:
        self.stop_requests += 1

    def launch(self) -> None:
        """Start every broker at once (a Raft quorum needs a majority up)."""
        for broker in self.brokers:
            broker.launch()

    def wait_ready(self, timeout_s: float) -> bool:
        """Wait for each broker to answer ApiVersions, printing progress; False when
        stopped by a signal; DevError when a broker exits or misses the deadline."""
        deadline = time.monotonic() + timeout_s
        for index, (member, broker) in enumerate(zip(self.layout, self.brokers), 1):
            self._print(f"starting broker {index}/{len(self.layout)} "
                        f"({member.address}, pid {broker.pid}) ...", end="")
            started = time.monotonic()
            while not answers_api_versions((member.host, member.port), timeout_s=1.0):
                if self.stop_requests:
                    self._print(" interrupted")
                    return False
                if not broker.is_running():
                    self._print(" failed")
                    raise DevError(f"broker {member.node_id} exited with {broker.returncode} "
                                   f"while starting\n{log_tail(member.log_path, LOG_TAIL_LINES)}")
                if time.monotonic() > deadline:
                    self._print(" failed")
                    raise DevError(f"broker {member.node_id} did not answer on {member.address} "
                                   f"within {timeout_s:g} s\n"
                                   f"{log_tail(member.log_path, LOG_TAIL_LINES)}")
                time.sleep(TICK_S)
            self._print(f" ready ({time.monotonic() - started:.1f} s)")
        return True

    def wait_registered(self, timeout_s: float) -> bool:
        """Wait until broker 1's cluster image shows a controller and every broker alive
        (unfenced), so clients can use the cluster once the bootstrap line is out.

        Skipped (True) when the broker does not answer the status request.  False when
        stopped by a signal; DevError when a broker exits; a warning, not an error, when
        the deadline passes (the table then shows what is missing).
        """
        started = time.monotonic()
        deadline = started + timeout_s
        wanted = {b.node_id for b in self.layout}
        self._print(f"waiting for {len(wanted)} broker(s) to register ...", end="")
        while True:
            status = fetch_statuses([(HOST, self.layout[0].port)], STATUS_TIMEOUT_S)[0]
            if not isinstance(status, dict):
                self._print(" skipped (no status answer)")
                return True
            alive = {b.get("id") for b in status.get("brokers") or [] if not b.get("fenced")}
            if wanted <= alive and _int_or(status.get("controller_id"), -1) >= 0:
                self._print(f" ready in {time.monotonic() - started:.1f} s "
                            f"(controller: broker {status['controller_id']})")
                return True
            if self.stop_requests:
                self._print(" interrupted")
                return False
            for member, broker in zip(self.layout, self.brokers):
                if not broker.is_running():
                    self._print(" failed")
                    raise DevError(f"broker {member.node_id} exited with {broker.returncode} "
                                   f"while starting\n{log_tail(member.log_path, LOG_TAIL_LINES)}")
            if time.monotonic() > deadline:
                self._print(f" not yet after {timeout_s:g} s (registered: {sorted(alive)})")
                return True
            time.sleep(0.2)

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM every running broker, wait up to ``timeout_s`` in all, then SIGKILL the
        rest (at once if another stop signal arrives meanwhile); reaps every process."""
        running = [b for b in self.brokers if b.is_running()]
        if running:
            self._print(f"stopping {len(running)} broker(s) ...")
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
                self._print(f"broker {member.node_id} did not stop in time: killed")
            elif broker in running:
                self._print(f"broker {member.node_id} exited with {broker.wait(0)}")

    def report_exits(self) -> bool:
        """Print one line per broker that died since the last call (shown as down after);
        True when it printed anything."""
        printed = False
        for member, broker in zip(self.layout, self.brokers):
            if broker.returncode is not None and member.node_id not in self._reported_exits:
                self._reported_exits.add(member.node_id)
                self._print(f"broker {member.node_id} exited with {broker.returncode}; "
                            f"see {member.log_path}")
                printed = True
        return printed

    def status_rows(self) -> list[list]:
        """One row per broker for the live table (status asked of running brokers only)."""
        alive = [i for i, b in enumerate(self.brokers) if b.is_running()]
        answers = fetch_statuses([(HOST, self.layout[i].port) for i in alive], STATUS_TIMEOUT_S)
        by_index = dict(zip(alive, answers))
        rows = []
        for index, (member, broker) in enumerate(zip(self.layout, self.brokers)):
            answer = by_index.get(index)
            state = "up" if index in by_index else f"down ({broker.returncode})"
            if isinstance(answer, dict):
                summary = broker_summary(answer)
                details = [summary.is_controller, summary.quorum_role, summary.hosted,
                           summary.leaders, summary.under_replicated]
            else:
                details = [UNKNOWN if index in by_index else None] * 5
            rows.append([member.node_id, member.address, broker.pid, state] + details)
        return rows

    def _print(self, text: str, end: str = "\n") -> None:
        print(text, end=end, file=self.out, flush=True)


STATUS_HEADERS = ["ID", "ADDRESS", "PID", "STATE", "CONTROLLER", "QUORUM", "HOSTED",
                  "LEADERS", "UNDER_REPLICATED"]


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
    return format_table(STATUS_HEADERS, rows, right=(0, 2, 6, 7, 8))


def _int_or(value, default: int) -> int:
    return value if isinstance(value, int) else default


# -- the live table ---------------------------------------------------------------------------

class StatusPrinter:
    """Prints the table: redrawn in place on a TTY every ``REFRESH_S``; otherwise only when
    it changed or ``QUIET_REPRINT_S`` passed, so a captured log stays readable."""

    def __init__(self, out, is_tty: bool):
        self.out = out
        self.is_tty = is_tty
        self._last_table: str | None = None
        self._last_print = 0.0
        self._drawn_lines = 0

    def forget_drawing(self) -> None:
        """Something else was printed: the next table is drawn below it, not over it."""
        self._drawn_lines = 0

    def show(self, table: str, now: float) -> bool:
        """Print ``table`` if due; True when it did."""
        changed = table != self._last_table
        if not self.is_tty and not changed and now - self._last_print < QUIET_REPRINT_S:
            return False
        stamp = time.strftime("%H:%M:%S")
        block = f"status at {stamp} (Ctrl-C stops every broker)\n{table}"
        if self.is_tty and self._drawn_lines:
            self.out.write(f"\x1b[{self._drawn_lines}F\x1b[J")
        self.out.write(block + "\n")
        self.out.flush()
        self._drawn_lines = block.count("\n") + 1
        self._last_table, self._last_print = table, now
        return True


def supervise(cluster: DevCluster, printer: StatusPrinter) -> None:
    """Refresh the table every ``REFRESH_S`` until a stop signal (the loop of ``dev``).

    Reacts to: SIGINT/SIGTERM (``cluster.stop_requests``), brokers exiting (reported once).
    """
    next_refresh = 0.0
    while not cluster.stop_requests:
        now = time.monotonic()
        if now >= next_refresh:
            if cluster.report_exits():
                printer.forget_drawing()
            printer.show(render_status(cluster.status_rows()), now)
            next_refresh = time.monotonic() + REFRESH_S
        time.sleep(TICK_S)


def run(args) -> int:
    """The ``dev`` command: plan, launch, wait ready, print bootstrap, supervise, stop."""
    try:
        layout = plan_cluster(args.brokers, args.port, args.data_dir, args.raft_port_base)
        voter_count = getattr(args, "voters", None)
        if voter_count is not None and not 1 <= voter_count <= args.brokers:
            raise DevError(f"--voters {voter_count}: between 1 and --brokers ({args.brokers})")
        extra = config_module.parse_overrides(args.set)
        secure = plan_secure(layout, args.port, args.data_dir) if args.secure else None
        ui_base = plan_ui(layout, args.port, secure) if getattr(args, "ui", False) else None
        secret_file = quorum_secret(args.data_dir) if voters(layout) else None
        cluster = DevCluster(layout, extra, secure=secure, ui_port_base=ui_base,
                             voter_count=voter_count, secret_file=secret_file)
        for settings in cluster.settings:  # the brokers' own parser refuses bad settings now
            config_module.build(settings)
    except (DevError, config_module.ConfigError) as exc:
        print(f"raftwood dev: {exc}", file=sys.stderr)
        return 2
    previous = {s: signal.signal(s, cluster.on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        cluster.launch()
        started = time.monotonic()
        if (cluster.wait_ready(args.start_timeout) and cluster.wait_registered(
                max(1.0, args.start_timeout - (time.monotonic() - started)))):
            if secure is not None:
                add_dev_user(layout[0], secure)
                print_secure_settings(layout, secure, Path(args.data_dir))
            else:
                print("PLAINTEXT on loopback only (raftwood dev --secure adds SASL_SSL + "
                      "SCRAM)", flush=True)
            if secret_file is not None:
                print(f"metadata quorum: Raft traffic encrypted with the secret in "
                      f"{secret_file}", flush=True)
            print(bootstrap_line(layout), flush=True)
            if ui_base is not None:
                print(f"replication view: {ui_url(layout[0], ui_base)} (broker i: port "
                      f"{ui_base}+i-1)", flush=True)
            print(f"logs: {Path(args.data_dir) / 'broker-<id>' / 'broker.log'}", flush=True)
            supervise(cluster, StatusPrinter(sys.stdout, sys.stdout.isatty()))
        code = 0
    except (DevError, OSError) as exc:
        print(f"raftwood dev: {exc}", file=sys.stderr)
        code = 1
    finally:
        cluster.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return code


def print_secure_settings(layout: list[BrokerPlan], secure: SecureDev, data_dir: Path) -> None:
    path = data_dir / "client.properties"
    path.write_text(client_properties(layout, secure))
    path.chmod(0o600)
    lines = ["SASL_SSL (SCRAM-SHA-512, user dev) on "
             + ",".join(secure.address(b) for b in layout) + "; Raft traffic encrypted",
             f"Kafka clients (Java, Spark with kafka., raftwood --command-config): {path}",
             "librdkafka (confluent-kafka; kcat -X each):"]
    lines += [f"  {k}={v}" for k, v in librdkafka_settings(layout, secure).items()]
    print("\n".join(lines), flush=True)


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
    dev.add_argument("--ui", action="store_true",
                     help=f"serve the live replication view: metrics.port port+"
                          f"{UI_PORT_OFFSET}+i-1 on broker i; prints the page's URL")
    dev.add_argument("--start-timeout", type=float, default=DEFAULT_START_TIMEOUT_S,
                     metavar="SECONDS", help="for all brokers to answer (default %(default)g)")
    dev.set_defaults(func=run)


"""``raftwood dev``'s plan, before any process runs (pure, but for the secret and the
certificates it makes once in the data dir): the port layout, each broker's settings,
the ``--secure`` additions, the ports to check, the replication defaults.  The layout
itself is described in ``dev.py``'s docstring (``raftwood dev --help``).
"""
from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

from kafka.protocol.admin import AlterUserScramCredentialsRequest

from protocol.errors import ErrorCode

from ..harness import LOCALHOST, BrokerPlan, plan_brokers
from .client import ClientError, Connection, error_name
from .dev_tls import DevPki, make_dev_pki, write_private
from .ports import PortUse, busy_message, busy_ports

HOST = LOCALHOST
RAFT_PORT_OFFSET = 100
SECURE_PORT_OFFSET = 200
UI_PORT_OFFSET = 300
UI_PATH = "/replication"
METRICS_PATH = "/metrics"
DEV_USER = "dev"
DEV_MECHANISM = "SCRAM-SHA-512"
ADD_USER_TIMEOUT_S = 20.0
MANAGED_SETTINGS = ("node.id", "listeners", "log.dirs", "controller.quorum.voters")
QUORUM_SECRET_SETTINGS = frozenset({"controller.quorum.password",
                                    "controller.quorum.password.file"})
QUORUM_SECRET_FILE = "quorum.secret"
PORT_HINT = "stop it, or give raftwood dev other ports with --port N (and --raft-port-base N)"


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


def ui_url(member: BrokerPlan, ui_port_base: int, path: str = UI_PATH) -> str:
    return f"http://{member.host}:{ui_port_base + member.node_id - 1}{path}"


def port_uses(layout: list[BrokerPlan], member: BrokerPlan, secure: SecureDev | None = None,
              ui_port_base: int | None = None) -> list[PortUse]:
    """Every port broker ``member`` binds, with what it is for."""
    name = f"broker {member.node_id}"
    uses = [PortUse(member.port, f"Kafka listener of {name}")]
    if len(layout) > 1:
        uses.append(PortUse(member.raft_port, f"Raft port of {name}"))
    if secure is not None:
        uses.append(PortUse(secure.port_base + member.node_id - 1, f"SASL_SSL listener of {name}"))
    if ui_port_base is not None:
        uses.append(PortUse(ui_port_base + member.node_id - 1, f"metrics port of {name}"))
    return uses


def check_ports_free(layout: list[BrokerPlan], members: list[BrokerPlan],
                     secure: SecureDev | None = None, ui_port_base: int | None = None) -> None:
    """DevError (one line: port, use, owner, what to do) when a port of ``members`` is taken."""
    uses = [use for m in members for use in port_uses(layout, m, secure, ui_port_base)]
    busy = busy_ports(HOST, uses)
    if busy:
        raise DevError(busy_message(HOST, busy, PORT_HINT))


def replication_defaults(brokers: int, extra: dict[str, str]) -> dict[str, str]:
    """``default.replication.factor`` min(N, 3) and ``min.insync.replicas`` 2 for N >= 3
    (else 1): what ``extra`` does not set itself."""
    defaults = {"default.replication.factor": str(min(brokers, 3)),
                "min.insync.replicas": "2" if brokers >= 3 else "1"}
    return {k: v for k, v in defaults.items() if k not in extra}


def replication_line(settings: dict[str, str]) -> str:
    return (f"new topics: replication factor {settings.get('default.replication.factor', '1')}"
            f", min.insync.replicas {settings.get('min.insync.replicas', '1')} (change with "
            f"--set default.replication.factor=N --set min.insync.replicas=N)")


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

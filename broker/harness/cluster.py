"""N brokers forming one Raft quorum: where each lives (``plan_brokers``), and
``ClusterProcess``, which starts them, waits until they are registered, kills, stops and
restarts them, and observes them through the private status request.

``raftwood dev`` plans its fixed consecutive ports with ``plan_brokers`` and
``quorum_voters``; ``raftwood verify`` and the pytest plugin run a ``ClusterProcess``.
"""
from __future__ import annotations

import os
import secrets
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from kafka.protocol.admin import CreateTopicsRequest

from broker.client.kafka_client import ConnectionFailed

from .process import (
    _MANAGED_SETTINGS,
    DEFAULT_STOP_TIMEOUT_S,
    LOCALHOST,
    BrokerProcess,
    settings_from_kwargs,
)
from .wire import KafkaConnection

# Failure detection in seconds rather than Kafka's production defaults, so a test that kills
# a broker waits ~3 s for the fencing instead of 9 s.  ClusterProcess applies these unless
# ``fast=False``; explicit settings override them.
FAST_CLUSTER_SETTINGS = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "3000",
    "leader.imbalance.check.interval.seconds": "3",
    "replica.fetch.backoff.ms": "200",
}
DEFAULT_CLUSTER_START_TIMEOUT_S = 60.0
DEFAULT_CLUSTER_STOP_TIMEOUT_S = 30.0
STATUS_TIMEOUT_S = 3.0
_CLUSTER_MANAGED_SETTINGS = frozenset({"node.id", "controller.quorum.voters"})


def free_ports(count: int, host: str = LOCALHOST) -> list[int]:
    """``count`` distinct TCP ports that were free a moment ago (all held while picking)."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(sock)
            sock.bind((host, 0))
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


@dataclass(frozen=True)
class BrokerPlan:
    """Where one broker of a cluster lives.  Fixed for the cluster's life, so a broker
    started again is the same broker with the same data."""

    node_id: int
    port: int          # Kafka listener
    raft_port: int     # its controller.quorum.voters entry (unused by a lone broker)
    data_dir: Path
    log_path: Path     # stdout and stderr of every run, appended
    host: str = LOCALHOST

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def plan_brokers(home, kafka_ports: list[int], raft_ports: list[int], *,
                 hosts: dict[int, str] | None = None,
                 log_in_data_dir: bool = False) -> list[BrokerPlan]:
    """Brokers 1..N (N = ``len(kafka_ports)``): broker i on ``kafka_ports[i - 1]`` and
    ``raft_ports[i - 1]``, at ``hosts[i]`` (default 127.0.0.1), data in
    ``home/broker-<i>``, output in ``home/broker-<i>.log`` or, with
    ``log_in_data_dir``, ``home/broker-<i>/broker.log``."""
    home = Path(home)
    plans = []
    for node_id, (port, raft_port) in enumerate(zip(kafka_ports, raft_ports, strict=True), 1):
        data_dir = home / f"broker-{node_id}"
        log_path = data_dir / "broker.log" if log_in_data_dir else home / f"broker-{node_id}.log"
        plans.append(BrokerPlan(node_id, port, raft_port, data_dir, log_path,
                                (hosts or {}).get(node_id, LOCALHOST)))
    return plans


def _has_own_quorum_policy(settings: dict) -> bool:
    """The settings give a quorum secret of their own, or opt out of one
    (``controller.quorum.allow.unauthenticated`` true)."""
    if settings.get("controller.quorum.password") or \
            settings.get("controller.quorum.password.file"):
        return True
    return str(settings.get("controller.quorum.allow.unauthenticated", "")).lower() == "true"


def quorum_voters(plans: list[BrokerPlan]) -> str:
    """``controller.quorum.voters`` of these brokers (``1@host:raft_port,...``); empty
    for a lone broker, which is its own quorum (the local metadata store)."""
    if len(plans) < 2:
        return ""
    return ",".join(f"{p.node_id}@{p.host}:{p.raft_port}" for p in plans)


def broker_process(plan: BrokerPlan, settings: dict, **options) -> BrokerProcess:
    """The BrokerProcess of ``plan`` with ``settings`` (not yet started); ``options``
    go to BrokerProcess (start_timeout_s, python, env, command_prefix, log_marker)."""
    return BrokerProcess(plan.data_dir, node_id=plan.node_id, port=plan.port,
                         log_path=plan.log_path, extra_settings=settings, host=plan.host,
                         **options)


class ClusterProcess:
    """``size`` brokers (node ids 1..size) on 127.0.0.1 (by default) forming one Raft
    metadata quorum.

    Every broker has its own Kafka port and Raft port (``controller.quorum.voters`` lists
    the Raft ones), its data in ``home/broker-<id>`` and its output in
    ``home/broker-<id>.log``.  Ports and directories never change, so a broker stopped or
    killed and started again is the same broker with the same data.  Settings, later
    winning: ``FAST_CLUSTER_SETTINGS`` (unless ``fast=False``), ``settings`` (every
    broker), ``broker_settings[node_id]`` (one broker).  A cluster of one runs without
    voters (the broker's local metadata store).  A quorum is authenticated: every broker
    gets ``home/quorum.secret`` (0600) as ``controller.quorum.password.file`` unless its
    settings give a secret of their own or ``controller.quorum.allow.unauthenticated``.

    A broker counts as started when it answers ApiVersions *and* every running broker's
    status shows it registered in this run (a broker epoch newer than any seen before),
    unfenced, with a controller elected among the running brokers.

    Elsewhere than 127.0.0.1: ``hosts`` maps a node id to its address (listener,
    advertised listener, Raft voter), ``ports`` gives every broker the same (Kafka
    port, Raft port) — each needs its own address then — and ``command_prefixes`` maps a
    node id to what goes in front of its launch command (``ip netns exec NAME``).

    Threads: lifecycle methods (start, stop, kill, pause ...) from one thread; ``status``,
    ``statuses``, ``wait_for`` and the other read-only helpers open their own
    connections and may also be called from background threads.
    """

    def __init__(self, home, size: int = 3, *, settings: dict | None = None,
                 broker_settings: dict[int, dict] | None = None, fast: bool = True,
                 start_timeout_s: float = DEFAULT_CLUSTER_START_TIMEOUT_S,
                 python: str = sys.executable, env: dict | None = None,
                 hosts: dict[int, str] | None = None, ports: tuple[int, int] | None = None,
                 command_prefixes: dict[int, list[str]] | None = None,
                 voters: int | None = None):
        if size < 1:
            raise ValueError("a cluster needs at least one broker")
        self.home = Path(home)
        self.size = size
        self.start_timeout_s = start_timeout_s
        hosts = {i: (hosts or {}).get(i, LOCALHOST) for i in range(1, size + 1)}
        if ports is not None and len(set(hosts.values())) < size:
            raise ValueError("fixed ports need a host of its own for every broker")
        ports = [ports[0]] * size + [ports[1]] * size if ports else free_ports(2 * size)
        self.plans = plan_brokers(self.home, ports[:size], ports[size:], hosts=hosts)
        self.raft_ports = ports[size:]
        self.voters = quorum_voters(self.plans[:voters or size])
        common = {**(FAST_CLUSTER_SETTINGS if fast else {}), **settings_from_kwargs(settings or {})}
        per_broker = {int(k): settings_from_kwargs(v) for k, v in (broker_settings or {}).items()}
        for own in [common, *per_broker.values()]:
            clash = (_CLUSTER_MANAGED_SETTINGS | _MANAGED_SETTINGS) & own.keys()
            if clash:
                raise ValueError(f"{sorted(clash)} are managed by ClusterProcess")
        secret_file = self._quorum_secret() if self.voters else None
        self.brokers: list[BrokerProcess] = []
        for plan in self.plans:
            own = {**common, **per_broker.get(plan.node_id, {})}
            if self.voters:
                own["controller.quorum.voters"] = self.voters
            if secret_file is not None and not _has_own_quorum_policy(own):
                own["controller.quorum.password.file"] = str(secret_file)
            self.brokers.append(broker_process(
                plan, own, start_timeout_s=start_timeout_s, python=python, env=env,
                command_prefix=(command_prefixes or {}).get(plan.node_id)))
        self._epochs: dict[int, int] = {}  # highest broker epoch seen per node

    def _quorum_secret(self) -> Path:
        """A quorum needs a secret (``raftwood start`` refuses to run one without):
        ``home/quorum.secret``, made once (mode 0600) and reused by later clusters on
        the same home, for every broker whose settings name none.  A broker given
        ``controller.quorum.allow.unauthenticated`` (or its own password) gets none."""
        path = self.home / "quorum.secret"
        if not path.exists():
            self.home.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_urlsafe(24) + "\n")
        return path

    # -- addresses and processes -----------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        """Every broker's ``host:port``, comma-separated (clients need only one alive)."""
        return ",".join(b.bootstrap for b in self.brokers)

    @property
    def node_ids(self) -> list[int]:
        return [b.node_id for b in self.brokers]

    def broker(self, node_id: int) -> BrokerProcess:
        for broker in self.brokers:
            if broker.node_id == node_id:
                return broker
        raise KeyError(f"no broker with node id {node_id} (have {self.node_ids})")

    def running(self) -> list[int]:
        """Node ids of running processes that are not paused."""
        return [b.node_id for b in self.brokers if b.is_running() and not b.paused]

    def connect(self, node_id: int, timeout_s: float = 10.0) -> KafkaConnection:
        """A raw KafkaConnection to one broker (close it, or use ``with``)."""
        return KafkaConnection(self.broker(node_id).bootstrap, timeout_s=timeout_s)

    def partition_dir(self, node_id: int, topic: str, partition: int) -> Path:
        """Where ``node_id`` keeps the log of ``topic``-``partition``."""
        return self.broker(node_id).data_dir / f"{topic}-{partition}"

    def __repr__(self) -> str:
        return f"<ClusterProcess {self.brokers!r}>"

    def __enter__(self) -> ClusterProcess:
        try:
            return self.start_all()
        except BaseException:
            self.stop_all()
            raise

    def __exit__(self, *exc) -> None:
        self.stop_all()

    # -- lifecycle -------------------------------------------------------------------------
    def start_all(self, timeout_s: float | None = None,
                  nodes: list[int] | None = None) -> ClusterProcess:
        """Start every broker (of ``nodes``, default all) that is not running, side by
        side, and wait until all are registered with a controller elected;
        BrokerError / AssertionError otherwise."""
        timeout_s = self.start_timeout_s if timeout_s is None else timeout_s
        return self._start([b.node_id for b in self.brokers if not b.is_running()
                            and (nodes is None or b.node_id in nodes)], timeout_s)

    def start(self, node_id: int, timeout_s: float | None = None) -> ClusterProcess:
        """Start one broker and wait until the running brokers see it registered."""
        timeout_s = self.start_timeout_s if timeout_s is None else timeout_s
        return self._start([node_id], timeout_s)

    def _start(self, nodes: list[int], timeout_s: float) -> ClusterProcess:
        deadline = time.monotonic() + timeout_s
        self.statuses()  # remember the broker epochs the running brokers know
        for node_id in nodes:
            self.broker(node_id).launch()
        for node_id in nodes:
            self.broker(node_id).wait_ready(max(1.0, deadline - time.monotonic()))
        self._wait_registered(nodes, max(1.0, deadline - time.monotonic()))
        return self

    def _wait_registered(self, nodes: list[int], timeout_s: float) -> None:
        previous = {n: self._epochs.get(n, -1) for n in nodes}

        def registered(statuses):
            running = self.running()
            if sorted(statuses) != sorted(running):
                return False  # every running broker must answer and agree
            for status in statuses.values():
                known = {b["id"]: b for b in status["brokers"]}
                for node_id in nodes:
                    info = known.get(node_id)
                    if info is None or info["fenced"] or info["epoch"] <= previous[node_id]:
                        return False
                if status["controller_id"] not in running:
                    return False
            return True

        self.wait_for(registered, timeout_s, f"brokers {nodes} registered (newer than broker "
                      f"epochs {previous}), unfenced, with a controller elected")

    def stop(self, node_id: int, timeout_s: float = DEFAULT_STOP_TIMEOUT_S, *,
             check: bool = False) -> int | None:
        """SIGTERM one broker (controlled shutdown) and wait; its exit code."""
        self.statuses()
        return self.broker(node_id).stop(timeout_s, check=check)

    def kill(self, node_id: int) -> int | None:
        """SIGKILL one broker (a crash) and reap it; its exit code."""
        self.statuses()
        return self.broker(node_id).kill()

    def restart(self, node_id: int, timeout_s: float | None = None) -> ClusterProcess:
        """Stop (SIGTERM) if running, then start again with the same port and data."""
        if self.broker(node_id).is_running():
            self.stop(node_id)
        return self.start(node_id, timeout_s)

    def pause(self, node_id: int) -> None:
        """SIGSTOP one broker: it keeps its sockets and answers nothing until ``resume``."""
        self.broker(node_id).pause()

    def resume(self, node_id: int) -> None:
        self.broker(node_id).resume()

    def stop_all(self, timeout_s: float = DEFAULT_CLUSTER_STOP_TIMEOUT_S) -> dict[int, int | None]:
        """SIGTERM every running broker, one after the other, each waited up to
        ``timeout_s`` and SIGKILLed if still running; paused brokers are resumed first.
        Returns {node id: exit code} for the brokers that were running; None for one that
        had to be killed.

        The order keeps every controlled shutdown quick: the controller (the Raft
        leader) goes last, so each broker before it fences itself through a quorum that
        is still there and every survivor learns of it; the last broker then sees no live
        peer to hand leadership to and exits at once instead of waiting out its bound.
        Among the others, brokers leading more partitions go first.
        """
        try:
            self._wait_dead_brokers_fenced()
        except Exception:  # an optimisation; stopping must go on
            pass
        codes: dict[int, int | None] = {}
        while running := [b for b in self.brokers if b.is_running()]:
            broker = min(running, key=self._stop_order_key())
            broker.terminate()
            codes[broker.node_id] = broker.wait(timeout_s)
            if codes[broker.node_id] is None:
                broker.kill()
        return codes

    def _stop_order_key(self):
        """Sort key for the next broker to stop: the controller last, most partitions
        led first, then node id."""
        try:
            statuses = self.statuses(timeout_s=1.0)
        except Exception:
            statuses = {}
        status = self.freshest(statuses)
        led: dict[int, int] = {}
        controller = -1
        if status is not None:
            controller = status["controller_id"]
            for topic in status["topics"]:
                for p in topic["partitions"]:
                    led[p["leader"]] = led.get(p["leader"], 0) + 1
        return lambda b: (b.node_id == controller, -led.get(b.node_id, 0), b.node_id)

    def _wait_dead_brokers_fenced(self) -> None:
        """Before a full stop: if a broker died recently and the rest still form a quorum,
        give the controller its session timeout to fence it.  Otherwise the last broker's
        controlled shutdown would see a live peer, try to move leadership without a
        quorum, and spend its whole bound (10 s) waiting."""
        running = self.running()
        if not running or len(running) * 2 <= self.size or len(running) == self.size:
            return
        dead = [n for n in self.node_ids if not self.broker(n).is_running()]
        session_ms = max(int(b.extra_settings.get("broker.session.timeout.ms", 9000))
                         for b in self.brokers)

        def fenced(statuses):
            status = self.freshest(statuses)
            return all(b["fenced"] for b in status["brokers"] if b["id"] in dead)

        try:
            self.wait_for(fenced, session_ms / 1000.0 + 2.0, f"brokers {dead} fenced")
        except AssertionError:
            pass

    # -- observing -------------------------------------------------------------------------
    def status(self, node_id: int, timeout_s: float = STATUS_TIMEOUT_S) -> dict:
        """One broker's status object (``protocol/status.py``); ConnectionFailed when it
        does not answer within ``timeout_s``."""
        with self.connect(node_id, timeout_s) as conn:
            status = conn.status()
        self._remember(status)
        return status

    def statuses(self, nodes=None, timeout_s: float = STATUS_TIMEOUT_S) -> dict[int, dict]:
        """{node id: status} of the running, unpaused brokers among ``nodes`` (default
        all) that answered; a broker that does not answer is left out."""
        result = {}
        for node_id in self.running() if nodes is None else nodes:
            if node_id not in self.running():
                continue
            try:
                result[node_id] = self.status(node_id, timeout_s)
            except ConnectionFailed:
                continue
        return result

    def _remember(self, status: dict) -> None:
        for info in status.get("brokers", []):
            if info["epoch"] > self._epochs.get(info["id"], -1):
                self._epochs[info["id"]] = info["epoch"]

    def controller_id(self) -> int:
        """The controller as the running brokers see it: the broker that reports itself
        as controller (the one most others agree with when several do); -1 if none."""
        statuses = self.statuses()
        claims = [n for n, s in statuses.items() if s["controller_id"] == n]
        if not claims:
            return -1
        votes = [s["controller_id"] for s in statuses.values()]
        return max(claims, key=votes.count)

    @staticmethod
    def freshest(statuses: dict[int, dict]) -> dict | None:
        """The status whose metadata image is the newest (highest metadata version)."""
        if not statuses:
            return None
        return max(statuses.values(), key=lambda s: s["metadata_version"])

    @staticmethod
    def find_partition(status: dict, topic: str, partition: int) -> dict | None:
        """A partition of a status' image: replicas, leader, leader_epoch,
        partition_epoch, isr, replica_states; None when the image lacks it."""
        for entry in status.get("topics", []):
            if entry["name"] == topic:
                for p in entry["partitions"]:
                    if p["partition"] == partition:
                        return p
        return None

    @staticmethod
    def find_hosted(status: dict, topic: str, partition: int) -> dict | None:
        """A broker's own replica of a partition from its status: role, leader_epoch,
        log_end_offset, high_watermark, followers ...; None when it does not host it."""
        for entry in status.get("hosted", []):
            if entry["topic"] == topic and entry["partition"] == partition:
                return entry
        return None

    def partition_state(self, topic: str, partition: int) -> dict | None:
        """The partition in the newest metadata image among the running brokers."""
        status = self.freshest(self.statuses())
        return self.find_partition(status, topic, partition) if status else None

    def leader_of(self, topic: str, partition: int) -> int:
        """The partition's leader in the newest image; -1 when offline or unknown."""
        state = self.partition_state(topic, partition)
        return state["leader"] if state else -1

    def hosted(self, node_id: int, topic: str, partition: int) -> dict | None:
        """``node_id``'s own replica of the partition (see ``find_hosted``)."""
        return self.find_hosted(self.status(node_id), topic, partition)

    def wait_for(self, predicate, timeout_s: float = 30.0, what: str = "the condition", *,
                 interval_s: float = 0.1, nodes=None):
        """Poll ``predicate(statuses)`` (``statuses()`` of ``nodes``) until it returns
        something truthy, and return that.  A KeyError, IndexError, TypeError,
        AttributeError or StopIteration from the predicate (a topic not in the image
        yet, no broker answering) counts as False.
        After ``timeout_s`` (inclusive bound, at least one poll): AssertionError naming
        ``what``, the last result and every broker's view."""
        deadline = time.monotonic() + timeout_s
        last, last_error = None, None
        while True:
            statuses = self.statuses(nodes)
            try:
                last = predicate(statuses)
                if last:
                    return last
            except (KeyError, IndexError, TypeError, AttributeError, StopIteration) as exc:
                last_error = exc
            if time.monotonic() >= deadline:
                break
            time.sleep(interval_s)
        error = f" (last error {last_error!r})" if last_error is not None else ""
        raise AssertionError(f"timed out after {timeout_s:.1f} s waiting for {what}; last "
                             f"result {last!r}{error}\n{self.describe(statuses)}")

    def describe(self, statuses: dict[int, dict] | None = None, log_lines: int = 12) -> str:
        """Every broker's process state, view of the cluster and hosted replicas, and the
        tail of its log: the text a failing wait prints."""
        if statuses is None:
            statuses = self.statuses(timeout_s=1.0)
        lines = []
        for broker in self.brokers:
            state = ("paused" if broker.paused else "running") if broker.is_running() \
                else f"not running (exit {broker.returncode})"
            lines.append(f"== broker {broker.node_id} {broker.bootstrap} {state}")
            status = statuses.get(broker.node_id)
            if status is None:
                lines.append("   (no status)")
            else:
                brokers = " ".join(f"{b['id']}:{'F' if b['fenced'] else 'up'}@{b['epoch']}"
                                   for b in status["brokers"])
                lines.append(f"   controller={status['controller_id']} "
                             f"version={status['metadata_version']} brokers={brokers}")
                for topic in status["topics"]:
                    for p in topic["partitions"]:
                        lines.append(
                            f"   {topic['name']}-{p['partition']}: leader={p['leader']} "
                            f"le={p['leader_epoch']} pe={p['partition_epoch']} isr={p['isr']} "
                            f"replicas={p['replicas']} states={p['replica_states']}")
                for h in status["hosted"]:
                    followers = ", ".join(f"{f['replica_id']}:leo={f['log_end_offset']}"
                                          f"{'' if f['in_sync'] else '(out)'}"
                                          for f in h["followers"])
                    lines.append(f"   hosts {h['topic']}-{h['partition']} {h['role']} "
                                 f"le={h['leader_epoch']} leo={h['log_end_offset']} "
                                 f"hw={h['high_watermark']} {followers}")
            lines.append(broker.log_tail(log_lines))
        return "\n".join(lines)

    # -- conveniences for tests ------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 1, replication_factor: int | None = None,
                     configs: dict | None = None, *, assignments: list[list[int]] | None = None,
                     timeout_s: float = 30.0, via: int | None = None) -> str:
        """Create a topic with raw CreateTopics and wait until every running broker's image
        has it, each partition's leader hosts it as leader in its epoch and every live
        replica hosts it; returns ``name``.  Replication factor default: the cluster size;
        ``assignments`` (replica lists, first = preferred leader) replace partitions and
        replication factor.  ``via``: the broker that gets the request."""
        replication_factor = self.size if replication_factor is None else replication_factor
        topic_class = CreateTopicsRequest.CreatableTopic
        config_class = topic_class.CreatableTopicConfig
        assignment_class = topic_class.CreatableReplicaAssignment
        if assignments:
            partitions, replication_factor = len(assignments), -1
        topic = topic_class(name=name, num_partitions=-1 if assignments else partitions,
                            replication_factor=replication_factor,
                            assignments=[assignment_class(partition_index=i, broker_ids=list(r))
                                         for i, r in enumerate(assignments or [])],
                            configs=[config_class(name=k, value=str(v))
                                     for k, v in (configs or {}).items()])
        node_id = via if via is not None else self.running()[0]
        with self.connect(node_id, timeout_s) as conn:
            response = conn.request(CreateTopicsRequest[4](
                topics=[topic], timeout_ms=int(timeout_s * 1000), validate_only=False))
        result = response.topics[0]
        if result.error_code != 0:
            raise AssertionError(f"CreateTopics {name} via broker {node_id}: error "
                                 f"{result.error_code} {result.error_message}")
        self.wait_for(lambda s: self._topic_ready(s, name, partitions), timeout_s,
                      f"topic {name} with {partitions} partition(s) led and hosted")
        return name

    def _topic_ready(self, statuses: dict[int, dict], name: str, partitions: int) -> bool:
        if not statuses:
            return False
        for index in range(partitions):
            views = [self.find_partition(s, name, index) for s in statuses.values()]
            if any(v is None or v["leader"] < 0 for v in views):
                return False
            state = self.find_partition(self.freshest(statuses), name, index)
            leader = statuses.get(state["leader"])
            hosted = leader and self.find_hosted(leader, name, index)
            if not hosted or hosted["role"] != "leader" \
                    or hosted["leader_epoch"] != state["leader_epoch"]:
                return False
            for replica in state["replicas"]:
                if replica in statuses and self.find_hosted(statuses[replica], name, index) is None:
                    return False
        return True

    def wait_for_leader(self, topic: str, partition: int, *, not_in=(), timeout_s: float = 30.0,
                        what: str | None = None) -> int:
        """Wait until the newest image names a leader for the partition that is not in
        ``not_in`` and that broker hosts it as leader in that epoch; returns its id."""
        def leader(statuses):
            state = self.find_partition(self.freshest(statuses), topic, partition)
            if state["leader"] < 0 or state["leader"] in not_in:
                return None
            hosted = self.find_hosted(statuses[state["leader"]], topic, partition)
            if hosted["role"] == "leader" and hosted["leader_epoch"] == state["leader_epoch"]:
                return state["leader"]
            return None

        return self.wait_for(leader, timeout_s, what or
                             f"a leader of {topic}-{partition} outside {list(not_in)}")

    def wait_for_isr(self, topic: str, partition: int, isr, *, timeout_s: float = 30.0) -> dict:
        """Wait until the newest image shows exactly ``isr`` (any order) as the ISR and the
        leader has taken it; returns the partition state."""
        wanted = sorted(isr)

        def matches(statuses):
            state = self.find_partition(self.freshest(statuses), topic, partition)
            if sorted(state["isr"]) != wanted or state["leader"] not in statuses:
                return None
            hosted = self.find_hosted(statuses[state["leader"]], topic, partition)
            in_sync = sorted([f["replica_id"] for f in hosted["followers"] if f["in_sync"]]
                             + [state["leader"]])
            return state if hosted["role"] == "leader" and in_sync == wanted else None

        return self.wait_for(matches, timeout_s, f"ISR of {topic}-{partition} == {wanted}")

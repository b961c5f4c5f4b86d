"""A cluster whose network can be cut: :class:`ChaosCluster`, a ClusterProcess with
``isolate``, ``partition``, ``degrade`` (delay, loss), ``heal`` and ``wait_healthy``;
and ``health_problem``, the health check it shares with ``raftwood verify``.

Two modes make the cuts (``chaos_mode``), with the same API and the same meaning:

* ``netns``: every broker runs in a network namespace of its own on a private bridge
  (``netns.NamespaceNetwork``), listening on its bridge address; clients in this
  process reach the brokers over the bridge (``bootstrap`` names those addresses).  A
  cut is an nftables drop rule on both ends, all ports.  Packets are dropped, not
  refused: a client connecting to a cut broker waits for its own timeout.  It needs
  root (CAP_NET_ADMIN) and ``ip``/``nft``.
* ``proxy``: every broker listens on 127.0.0.1 and advertises a loopback proxy in front
  of its Kafka port and its Raft port (``proxy.LoopbackProxy``; ``bootstrap`` names the
  proxies).  A cut stalls the proxied connections between the two sides (nothing is
  forwarded, nothing refused); ``heal`` closes the stalled ones, so both sides
  reconnect.  No root needed (Linux: the proxy reads /proc to tell brokers from
  clients).  The harness's own status requests (``status``, ``wait_for``) and
  ``connect(id)`` go to the real ports, past the proxy.

Either way a cut covers Kafka and Raft alike, so an isolated broker loses its metadata
quorum too and is fenced, its partitions led elsewhere, exactly as across a real
network.  The mode is ``mode`` when given, else the environment's
``RAFTWOOD_CHAOS_MODE``, else ``netns`` where namespaces can be built and ``proxy``
otherwise; ``chaos_unavailable(mode)`` says why a mode cannot run here.

Invariants: a cut, delay or loss lasts until ``heal()``; ``stop_all()`` heals, stops
every broker and then removes the network (namespaces, or the proxy's listeners), also
when a stop fails, after which the cluster cannot start again; the network is also
removed when the interpreter exits.
Lifecycle and cuts from one thread; ``wait_healthy`` and the read-only helpers may run
in others.
"""
from __future__ import annotations

import logging
import os

from .cluster import (
    DEFAULT_CLUSTER_STOP_TIMEOUT_S,
    STATUS_TIMEOUT_S,
    ClusterProcess,
    free_ports,
)
from .netns import CLIENTS, NamespaceNetwork, netem_supported, netns_available
from .process import LOCALHOST, BrokerError
from .proxy import LoopbackProxy, proxy_unavailable

log = logging.getLogger(__name__)

CHAOS_PORTS = (9192, 9193)   # (Kafka, Raft) of every broker, each in its own namespace
DEFAULT_HEALTHY_TIMEOUT_S = 60.0
CHAOS_MODES = ("netns", "proxy")
MODE_ENVIRONMENT = "RAFTWOOD_CHAOS_MODE"   # netns, proxy or auto (the default)


class ChaosUnavailable(BrokerError):
    """This process cannot build a chaos cluster (the message says why)."""


def pick_chaos_mode(mode: str | None = None) -> str:
    """``mode``, else ``$RAFTWOOD_CHAOS_MODE``, else (also for ``auto``) ``netns`` where
    namespaces can be built and ``proxy`` otherwise.  ValueError for another name."""
    mode = (mode or os.environ.get(MODE_ENVIRONMENT) or "auto").strip().lower()
    if mode == "auto":
        return "netns" if netns_available()[0] else "proxy"
    if mode not in CHAOS_MODES:
        raise ValueError(f"chaos mode {mode!r}: one of {', '.join(CHAOS_MODES)} or auto "
                         f"(${MODE_ENVIRONMENT})")
    return mode


def chaos_unavailable(mode: str | None = None) -> str | None:
    """None when a ChaosCluster of ``mode`` (``pick_chaos_mode``) can run here, else
    why not."""
    mode = pick_chaos_mode(mode)
    if mode == "proxy":
        return proxy_unavailable()
    usable, why = netns_available()
    return None if usable else why


def health_problem(cluster: ClusterProcess, statuses: dict[int, dict],
                   partitions=None) -> str | None:
    """None when every broker runs unpaused, answers, is registered and unfenced in the
    newest image, one controller is elected among them, every broker sees all of them
    as the quorum's voters, and every partition (``partitions``: (topic, partition)
    pairs; default every partition of the image) has a leader hosting it in its epoch
    and a full ISR that the leader also counts in sync.  Otherwise what is missing."""
    node_ids = cluster.node_ids
    running = cluster.running()
    if sorted(running) != node_ids:
        return f"brokers running: {running}"
    if sorted(statuses) != node_ids:
        return f"brokers answering status: {sorted(statuses)}"
    image = cluster.freshest(statuses)
    fenced = [b["id"] for b in image["brokers"] if b["fenced"]]
    if fenced or len(image["brokers"]) < cluster.size:
        return f"fenced brokers: {fenced}"
    controllers = {s["controller_id"] for s in statuses.values()}
    if len(controllers) != 1 or image["controller_id"] not in running:
        return f"controllers seen: {sorted(controllers)}"
    expected = sorted(int(v.split("@")[0]) for v in cluster.voters.split(",")) \
        if cluster.voters else None
    for node_id, status in sorted(statuses.items()):
        quorum = status.get("quorum")
        voters = sorted(v["id"] for v in quorum["voters"]) if quorum else expected
        if voters != expected:
            return f"broker {node_id} sees the metadata quorum's voters as {voters}"
    if partitions is None:
        partitions = [(t["name"], p["partition"]) for t in image["topics"]
                      for p in t["partitions"]]
    for topic, index in partitions:
        problem = _partition_problem(cluster, statuses, image, topic, index)
        if problem:
            return problem
    return None


def _partition_problem(cluster, statuses, image, topic: str, index: int) -> str | None:
    state = cluster.find_partition(image, topic, index)
    if state is None or state["leader"] < 0:
        return f"{topic}-{index} has no leader"
    if sorted(state["isr"]) != sorted(state["replicas"]):
        return f"{topic}-{index} ISR {state['isr']} of {state['replicas']}"
    hosted = cluster.find_hosted(statuses[state["leader"]], topic, index)
    if not hosted or hosted["role"] != "leader" \
            or hosted["leader_epoch"] != state["leader_epoch"]:
        return f"{topic}-{index}: leader {state['leader']} has not taken over"
    if not all(f["in_sync"] for f in hosted["followers"]):
        return f"{topic}-{index}: leader counts a follower out of sync"
    return None


class ChaosCluster(ClusterProcess):
    """A ClusterProcess (same arguments, but not ``hosts``, ``ports`` or
    ``command_prefixes``, which it sets) whose network can be cut (see the module
    docstring); ``mode`` is ``netns``, ``proxy`` or ``auto`` (``pick_chaos_mode``), and
    ``chaos_mode`` (also ``mode``) the one in use.  ``CLIENTS`` stands for this process
    (every client) in ``partition``.  Raises ChaosUnavailable when the mode cannot run
    here."""

    CLIENTS = CLIENTS

    def __init__(self, home, size: int = 3, *, mode: str | None = None, **options):
        for managed in ("hosts", "ports", "command_prefixes"):
            if managed in options:
                raise ValueError(f"{managed} is managed by ChaosCluster")
        self.chaos_mode = pick_chaos_mode(mode)
        why = chaos_unavailable(self.chaos_mode)
        if why is not None:
            raise ChaosUnavailable(f"a chaos cluster in mode {self.chaos_mode} cannot run "
                                   f"here: {why}")
        self._net_state = "planned"   # planned -> up -> closed
        self._proxy_ports: dict[int, int] = {}
        if self.chaos_mode == "proxy":
            super().__init__(home, size, **options)
            self.net = self._plan_proxy()
            return
        nodes = range(1, size + 1)
        self.net = NamespaceNetwork(nodes)
        super().__init__(home, size, hosts={n: self.net.address(n) for n in nodes},
                         ports=CHAOS_PORTS,
                         command_prefixes={n: self.net.exec_prefix(n) for n in nodes},
                         **options)

    @property
    def mode(self) -> str:
        """How cuts are made: ``netns`` or ``proxy``."""
        return self.chaos_mode

    def _plan_proxy(self) -> LoopbackProxy:
        """Every broker advertises its proxy's Kafka port and, as its voter entry, its
        proxy's Raft port, binding its real Raft port (``controller.quorum.bind.address``)."""
        for broker in self.brokers:
            if "advertised.listeners" in broker.extra_settings:
                raise ValueError("advertised.listeners is managed by a proxy ChaosCluster")
        taken = {p.port for p in self.plans} | {p.raft_port for p in self.plans}
        for _ in range(20):   # ports free now, none a broker's own
            ports = free_ports(2 * self.size)
            if not taken & set(ports):
                break
        else:
            raise BrokerError("no free ports for the chaos proxies apart from the brokers'")
        kafka = dict(zip(self.node_ids, ports[:self.size], strict=True))
        raft = dict(zip(self.node_ids, ports[self.size:], strict=True))
        self._proxy_ports = kafka
        voter_ids = [int(v.split("@")[0]) for v in self.voters.split(",")] if self.voters else []
        self.voters = ",".join(f"{n}@{LOCALHOST}:{raft[n]}" for n in voter_ids)
        for broker, plan in zip(self.brokers, self.plans, strict=True):
            own = broker.extra_settings
            own["advertised.listeners"] = f"PLAINTEXT://{LOCALHOST}:{kafka[plan.node_id]}"
            if self.voters:
                own["controller.quorum.voters"] = self.voters
            if plan.node_id in voter_ids:
                own["controller.quorum.bind.address"] = f"{LOCALHOST}:{plan.raft_port}"
        routes = {p.node_id: [(kafka[p.node_id], p.port), (raft[p.node_id], p.raft_port)]
                  for p in self.plans}
        return LoopbackProxy(routes, self._broker_pids)

    def _broker_pids(self) -> dict[int, int]:
        """{pid: node id} of the brokers launched (the proxy's owner lookup)."""
        return {b.pid: b.node_id for b in self.brokers if b.pid is not None}

    @property
    def bootstrap(self) -> str:
        """Where clients go: the bridge addresses (netns) or the proxies (proxy)."""
        if self._proxy_ports:
            return ",".join(f"{LOCALHOST}:{port}" for port in self._proxy_ports.values())
        return super().bootstrap

    # -- lifecycle -------------------------------------------------------------------------
    def _start(self, nodes: list[int], timeout_s: float) -> ChaosCluster:
        if self._net_state == "closed":
            raise BrokerError("this chaos cluster was stopped (its network is removed)")
        if self._net_state == "planned":
            self.net.start()
            self._net_state = "up"
        super()._start(nodes, timeout_s)
        return self

    def stop_all(self, timeout_s: float = DEFAULT_CLUSTER_STOP_TIMEOUT_S) -> dict[int, int | None]:
        """Heal, stop every broker as ClusterProcess does, then remove the network."""
        try:
            if self._net_state == "up":
                self.heal()
            return super().stop_all(timeout_s)
        finally:
            if self._net_state != "closed":
                self._net_state = "closed"
                self.net.close()

    # -- cuts ------------------------------------------------------------------------------
    def isolate(self, node_id: int) -> None:
        """Cut ``node_id`` from every other broker and from every client, all ports
        (Raft included), both ways, until ``heal``."""
        self._need_network([node_id])
        log.info("chaos: isolating broker %d", node_id)
        self.net.isolate(node_id, clients=True)

    def partition(self, side_a, side_b) -> None:
        """Cut every member of ``side_a`` from every member of ``side_b``, both ways, all
        ports, until ``heal``.  Members are node ids or ``CLIENTS`` (this process's
        clients); a node in neither side still reaches both.  Adds to earlier cuts."""
        side_a, side_b = set(side_a), set(side_b)
        if not side_a or not side_b or side_a & side_b:
            raise ValueError(f"a partition needs two disjoint non-empty sides: "
                             f"{sorted(side_a)} | {sorted(side_b)}")
        self._need_network(side_a | side_b)
        log.info("chaos: partition %s | %s", sorted(side_a), sorted(side_b))
        for a in sorted(side_a):
            for b in sorted(side_b):
                self.net.cut(a, b)

    def degrade(self, node_id: int, *, delay_ms: int = 0, jitter_ms: int = 0,
                loss_pct: float = 0.0) -> str:
        """Delay (with jitter) and drop at random ``loss_pct`` % of everything
        ``node_id`` sends (to brokers and clients alike) until ``heal``; returns what was
        applied.  netns: ChaosUnavailable asking for delay on a kernel without the netem
        qdisc (loss alone is then made with an nftables rule).  proxy: a lost chunk
        arrives a retransmission timeout late, 100 % loss forwards nothing."""
        self._need_network([node_id])
        if not 0 <= loss_pct <= 100 or delay_ms < 0 or jitter_ms < 0:
            raise ValueError("delay and jitter >= 0 ms, loss in 0..100 %")
        if (delay_ms or jitter_ms) and self.chaos_mode == "netns" and not netem_supported():
            raise ChaosUnavailable("no netem qdisc in this kernel: delay cannot be added "
                                   "(loss alone can)")
        applied = self.net.netem(node_id, delay_ms, jitter_ms, loss_pct)
        log.info("chaos: broker %d: %s", node_id, applied)
        return applied

    def heal(self) -> None:
        """Remove every cut, delay and loss."""
        self._need_network([])
        log.info("chaos: healing every cut")
        self.net.heal()

    def cuts(self) -> list[tuple[int, int]]:
        """The pairs cut now (``CLIENTS`` is 0), sorted."""
        return sorted(tuple(sorted(pair)) for pair in self.net.cut_pairs)

    def degraded(self) -> list[int]:
        """The brokers given delay or loss now."""
        return sorted(self.net.netem_nodes | self.net.lossy_nodes)

    def _need_network(self, members) -> None:
        if self._net_state != "up":
            raise BrokerError(f"the chaos cluster's network is {self._net_state}, not up")
        unknown = [m for m in members if m != CLIENTS and m not in self.node_ids]
        if unknown:
            raise ValueError(f"no brokers {unknown} (have {self.node_ids}; CLIENTS is "
                             f"{CLIENTS})")

    def unreachable(self) -> list[int]:
        """Brokers cut from this process's clients now."""
        return sorted(n for pair in self.net.cut_pairs if CLIENTS in pair
                      for n in pair if n != CLIENTS)

    # -- observing -------------------------------------------------------------------------
    def statuses(self, nodes=None, timeout_s: float = STATUS_TIMEOUT_S) -> dict[int, dict]:
        """As ClusterProcess's, without asking the brokers cut from clients (they cannot
        answer; asking would cost ``timeout_s`` each)."""
        cut = self.unreachable()
        nodes = self.running() if nodes is None else nodes
        return super().statuses([n for n in nodes if n not in cut], timeout_s)

    def describe(self, statuses: dict[int, dict] | None = None, log_lines: int = 12) -> str:
        """ClusterProcess's description, after the cuts in place."""
        return (f"== chaos ({self.chaos_mode}, network {self._net_state}): cuts "
                f"{self.cuts() or 'none'} (0 = clients), degraded {self.degraded() or 'none'}\n"
                + super().describe(statuses, log_lines))

    # -- health ----------------------------------------------------------------------------
    def wait_healthy(self, timeout_s: float = DEFAULT_HEALTHY_TIMEOUT_S) -> None:
        """Wait until ``health_problem`` finds nothing: every broker registered and
        unfenced, one controller, a full ISR on every partition (internal topics
        included).  AssertionError naming the last problem and every broker's view
        after ``timeout_s``."""
        last: list[str | None] = [None]

        def healthy(statuses):
            last[0] = health_problem(self, statuses)
            return last[0] is None

        try:
            self.wait_for(healthy, timeout_s, "a healthy cluster", interval_s=0.2)
        except AssertionError as exc:
            raise AssertionError(f"last problem: {last[0]}; {exc}") from None

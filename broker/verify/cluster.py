"""The cluster under test: a ClusterProcess, optionally behind the network-cut proxy or
with every broker in a network namespace of its own, with what the runner asks of it —
roles, health, the stored logs after healing.

A thin layer over ``broker.harness.ClusterProcess`` (which starts, stops, kills,
pauses brokers and reads their private status); nothing here changes a broker.
With ``netns`` broker N listens on ``10.213.R.N:9092`` (Raft on 9093) inside its
namespace and clients reach it from the root namespace (see ``netns``).
Lifecycle calls come from the runner's thread only.
"""
from __future__ import annotations

from pathlib import Path

from broker.harness import ClusterProcess, free_ports
from broker.harness.chaos import health_problem
from broker.harness.netns import NamespaceNetwork

from .netproxy import NetworkProxy

TopicPartition = tuple[str, int]

# Fast failure detection (seconds, not Kafka's production defaults; broker.harness's fast set plus a
# slower preferred-leader check, so leadership is not moved back in the middle of a fault).
CLUSTER_SETTINGS = {
    "broker.session.timeout.ms": 3000,
    "broker.heartbeat.interval.ms": 500,
    "replica.lag.time.max.ms": 3000,
    "leader.imbalance.check.interval.seconds": 5,
    "replica.fetch.backoff.ms": 200,
    "unclean.leader.election.enable": "false",
    "auto.create.topics.enable": "false",
    # the transactional workload: a transaction its producer leaves open is aborted soon
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000,
}
TOPIC_CONFIGS = {"min.insync.replicas": "2", "segment.bytes": str(256 * 1024)}
NETNS_PORTS = (9092, 9093)   # (Kafka, Raft) of every broker, each on its own address


class VerifyCluster:
    """``brokers`` brokers in ``home``; with ``proxy`` every broker advertises a proxy
    port (see netproxy) so inter-broker links can be cut; with ``netns`` (instead) every
    broker runs in its own network namespace (see netns) and cuts are nftables rules."""

    def __init__(self, home, brokers: int = 3, *, proxy: bool = True, netns: bool = False,
                 settings: dict | None = None):
        self.home = Path(home)
        self.size = brokers
        self.proxy: NetworkProxy | None = None
        self.net: NamespaceNetwork | None = None
        nodes = range(1, brokers + 1)
        placement: dict = {}
        broker_settings = None
        if netns:
            self.net = NamespaceNetwork(nodes)
            placement = {"hosts": {n: self.net.address(n) for n in nodes},
                         "ports": NETNS_PORTS,
                         "command_prefixes": {n: self.net.exec_prefix(n) for n in nodes}}
        elif proxy:
            ports = free_ports(brokers)
            self.proxy = NetworkProxy({n: ports[n - 1] for n in nodes},
                                      log_path=self.home / "proxy.log")
            broker_settings = {n: {"advertised.listeners": self.proxy.advertised_listener(n)}
                               for n in nodes}
        self.cluster = ClusterProcess(self.home, brokers,
                                      settings={**CLUSTER_SETTINGS, **(settings or {})},
                                      broker_settings=broker_settings, **placement)
        self.partitions: list[TopicPartition] = []

    @property
    def network(self) -> str:
        """``netns``, ``proxy`` or ``none`` (loopback, nothing can be cut)."""
        return "netns" if self.net else "proxy" if self.proxy else "none"

    @property
    def kafka_ports(self) -> list[int]:
        return sorted({b.port for b in self.cluster.brokers})

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> VerifyCluster:
        self.home.mkdir(parents=True, exist_ok=True)
        if self.net is not None:
            self.net.start()
        if self.proxy is not None:
            self.proxy.start({b.node_id: b.port for b in self.cluster.brokers})
        self.cluster.start_all()
        return self

    def create_topics(self, names: list[str], partitions: int,
                      replication_factor: int) -> list[TopicPartition]:
        for name in names:
            self.cluster.create_topic(name, partitions=partitions,
                                      replication_factor=replication_factor,
                                      configs=TOPIC_CONFIGS)
            self.partitions += [(name, p) for p in range(partitions)]
        return self.partitions

    def heal_everything(self) -> list[str]:
        """Undo whatever a fault left behind: heal cuts, resume paused brokers, start
        stopped ones.  Returns what it had to do."""
        done = []
        if self.net is not None:
            if self.net.is_cut():
                done.append("healed network cuts")
            self.net.heal()
        if self.proxy is not None and self.proxy.is_running():
            if self.proxy.stats().get("cuts"):
                done.append("healed network cuts")
            self.proxy.heal()
        for broker in self.cluster.brokers:
            if broker.is_running() and broker.paused:
                broker.resume()
                done.append(f"resumed broker {broker.node_id}")
        for broker in self.cluster.brokers:
            if not broker.is_running():
                self.cluster.start(broker.node_id)
                done.append(f"started broker {broker.node_id}")
        return done

    def close(self) -> dict:
        """Stop everything (heal first so controlled shutdowns can proceed); idempotent
        and safe after errors.  Returns the brokers' exit codes."""
        codes: dict = {}
        try:
            if self.net is not None:
                self.net.heal()
            if self.proxy is not None and self.proxy.is_running():
                self.proxy.heal()
        except Exception:  # stopping must go on
            pass
        try:
            codes = self.cluster.stop_all()
        finally:
            try:
                if self.proxy is not None:
                    self.proxy.close()
            finally:
                if self.net is not None:
                    self.net.close()
        return codes

    # -- what clients need -------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    @property
    def node_ids(self) -> list[int]:
        return self.cluster.node_ids

    # -- roles -------------------------------------------------------------------------
    def resolve(self, role: str, tp: TopicPartition, pick: int) -> int:
        """The broker holding ``role`` for ``tp`` now (``leader``, ``follower``,
        ``controller``); a running broker chosen by ``pick`` when nobody does."""
        running = self.cluster.running()
        statuses = self.cluster.statuses()
        image = self.cluster.freshest(statuses)
        state = image and self.cluster.find_partition(image, *tp)
        if role == "controller":
            controller = self.cluster.controller_id()
            if controller in running:
                return controller
        elif role == "leader" and state and state["leader"] in running:
            return state["leader"]
        elif role == "follower" and state:
            followers = [r for r in state["replicas"] if r != state["leader"] and r in running]
            if followers:
                return followers[pick % len(followers)]
        return running[pick % len(running)]

    def other_broker(self, node: int, pick: int) -> int:
        others = [n for n in self.node_ids if n != node]
        return others[pick % len(others)]

    # -- health --------------------------------------------------------------------------
    def health_problem(self, statuses: dict[int, dict]) -> str | None:
        """None when every broker runs unpaused and unfenced, a controller is elected,
        and every workload partition has a leader hosting it and a full ISR that the
        leader also counts in sync; otherwise what is missing (``harness.chaos``)."""
        return health_problem(self.cluster, statuses, self.partitions)

    def wait_healthy(self, timeout_s: float) -> str | None:
        """Wait up to ``timeout_s`` for ``health_problem`` to clear; None when healthy,
        else the last problem."""
        last: list[str | None] = [None]

        def healthy(statuses):
            last[0] = self.health_problem(statuses)
            return last[0] is None

        try:
            self.cluster.wait_for(healthy, timeout_s, "a healthy cluster", interval_s=0.2)
            return None
        except AssertionError:
            return last[0] or "unknown"

    def fully_replicated(self, statuses: dict[int, dict]) -> dict[TopicPartition, dict] | None:
        """When healthy and every replica's LEO and HW equal the leader's LEO (nothing in
        flight): {tp: {"high_watermark", "log_start_offset", "leader"}}; else None."""
        if self.health_problem(statuses) is not None:
            return None
        cluster = self.cluster
        image = cluster.freshest(statuses)
        result = {}
        for tp in self.partitions:
            state = cluster.find_partition(image, *tp)
            leader = cluster.find_hosted(statuses[state["leader"]], *tp)
            leo = leader["log_end_offset"]
            for replica in state["replicas"]:
                own = cluster.find_hosted(statuses[replica], *tp)
                if not own or (own["log_end_offset"], own["high_watermark"]) != (leo, leo):
                    return None
            result[tp] = {"high_watermark": leo, "leader": state["leader"],
                          "log_start_offset": leader["log_start_offset"],
                          "replicas": list(state["replicas"])}
        return result

    def wait_fully_replicated(self, timeout_s: float) -> dict[TopicPartition, dict]:
        """``fully_replicated`` within ``timeout_s``; AssertionError (with every
        broker's view) otherwise."""
        return self.cluster.wait_for(self.fully_replicated, timeout_s,
                                     "every replica identical in LEO and HW", interval_s=0.2)

    # -- stored logs -------------------------------------------------------------------
    def partition_dir(self, node: int, tp: TopicPartition) -> Path:
        return self.cluster.partition_dir(node, *tp)

    def stored_log(self, node: int, tp: TopicPartition) -> bytes:
        """Every segment of ``node``'s replica, concatenated in base-offset order."""
        return b"".join(p.read_bytes() for p in sorted(self.partition_dir(node, tp).glob("*.log")))

    def describe(self) -> str:
        return self.cluster.describe()

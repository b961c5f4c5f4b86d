"""The network faults of ``--network netns``: cuts made with nftables inside the brokers'
namespaces (``netns.NamespaceNetwork``), held, then healed.

``NetworkFaults.apply(step, node, tp, role)`` runs one step of a kind in
``schedule.NETNS_FAULT_KINDS`` against the broker ``node`` that holds the step's role
and returns what it did.  Every method heals in ``finally``, so a step never leaves a
rule behind even when it fails half-way; the flap loop is bounded by its cycle count.
Only the runner's thread calls it (through ``faults.FaultInjector``).
"""
from __future__ import annotations

import logging
import time

from .cluster import VerifyCluster
from .schedule import FaultStep, flap_cycles, netem_params

log = logging.getLogger(__name__)


class NetworkFaults:
    """Applies netns steps to a VerifyCluster started with ``netns=True``."""

    def __init__(self, vc: VerifyCluster, progress=None):
        if vc.net is None:
            raise ValueError("network faults need the brokers in network namespaces")
        self.vc = vc
        self.net = vc.net
        self.cluster = vc.cluster
        self.progress = progress or (lambda text: None)

    def apply(self, step: FaultStep, node: int, tp, role: str) -> str:
        try:
            return getattr(self, "_" + step.kind.replace("-", "_"))(step, node, tp, role)
        finally:
            self.net.heal()

    def _hold(self, step: FaultStep, what: str) -> str:
        """Keep what was just cut for the step's hold time, then heal."""
        log.debug("fault #%d %s: %s for %.1fs", step.index, step.kind, what, step.hold_s)
        self.progress(f"  #{step.index} {what} for {step.hold_s:.1f}s")
        try:
            time.sleep(step.hold_s)
        finally:
            self.net.heal()
        return f"{what} for {step.hold_s:.1f}s, healed"

    # -- one method per kind; each returns the action's description ---------------------
    def _isolate_controller(self, step, node, tp, role) -> str:
        blind = step.variant == "blind"
        self.net.isolate(node, clients=blind)
        what = (f"broker {node} ({role}) cut off from every other broker"
                + (" and from clients" if blind else " (clients still reach it)")
                + (", longer than the Raft journal compaction interval"
                   if step.variant == "long" else ""))
        return self._hold(step, what)

    def _zombie_leader(self, step, node, tp, role) -> str:
        self.net.isolate(node)
        return self._hold(step, f"broker {node} ({role}) cut off from every broker, "
                                f"clients still reach it")

    def _leader_from_followers(self, step, node, tp, role) -> str:
        followers = self._followers(node, tp)
        controller = self.cluster.controller_id()
        kafka = self.vc.kafka_ports
        if node == controller:
            self.net.cut_ports(node, kafka, peers=followers)
            what = (f"broker {node} ({role}) is the controller: its Kafka ports cut from "
                    f"its followers {followers} (Raft up, so it stays reachable as "
                    f"controller)")
        else:
            cut = [f for f in followers if f != controller]
            for follower in cut:
                self.net.cut(node, follower)
            if controller in followers:
                self.net.cut_ports(node, kafka, peers=[controller])
            what = (f"broker {node} ({role}) cut off from followers {cut} (all ports)"
                    + (f" and from follower {controller}, the controller, on the Kafka "
                       f"ports only (Raft up)" if controller in followers else "")
                    + f"; it still reaches controller {controller}")
        return self._hold(step, what)

    def _kafka_ports(self, step, node, tp, role) -> str:
        self.net.cut_ports(node, self.vc.kafka_ports)
        return self._hold(step, f"broker {node} ({role}): Kafka port cut from every other "
                                f"broker (Raft up)")

    def _split_minority(self, step, node, tp, role) -> str:
        size = self._minority_size()
        others = self._rotated([n for n in self.vc.node_ids if n != node], step.pick)
        minority = sorted([node] + others[:size - 1])
        self.net.split(minority)
        return self._hold(step, f"split {minority} | {self._rest(minority)}: broker {node} "
                                f"({role}) on the minority side")

    def _split_majority(self, step, node, tp, role) -> str:
        size = self._minority_size()
        minority = sorted(self._rotated([n for n in self.vc.node_ids if n != node],
                                        step.pick)[:size])
        self.net.split(minority)
        return self._hold(step, f"split {minority} | {self._rest(minority)}: broker {node} "
                                f"({role}) on the majority side")

    def _flap(self, step, node, tp, role) -> str:
        other = self.vc.other_broker(node, step.pick)
        cycles = flap_cycles(step)
        self.progress(f"  #{step.index} flapping the link between broker {node} ({role}) "
                      f"and broker {other}: {len(cycles)} cuts in {step.hold_s:.1f}s")
        for cut_s, up_s in cycles:  # bounded: the schedule's cycle count
            self.net.cut(node, other)
            try:
                time.sleep(cut_s)
            finally:
                self.net.heal()
            time.sleep(up_s)
        return (f"link between broker {node} ({role}) and broker {other} cut "
                f"{len(cycles)} times ({', '.join(f'{c:.2f}s' for c, _ in cycles)}) in "
                f"{step.hold_s:.1f}s, healed")

    def _netem(self, step, node, tp, role) -> str:
        delay, jitter, loss = netem_params(step)
        applied = self.net.netem(node, delay, jitter, loss)
        return self._hold(step, f"broker {node} ({role}): {applied}")

    # -- helpers -------------------------------------------------------------------------
    def _followers(self, leader: int, tp) -> list[int]:
        state = self.cluster.partition_state(*tp)
        replicas = state["replicas"] if state else self.vc.node_ids
        return sorted(r for r in replicas if r != leader)

    def _minority_size(self) -> int:
        return max(1, (len(self.vc.node_ids) - 1) // 2)

    def _rest(self, minority) -> list[int]:
        return [n for n in self.vc.node_ids if n not in minority]

    @staticmethod
    def _rotated(nodes: list[int], pick: int) -> list[int]:
        shift = pick % len(nodes)
        return nodes[shift:] + nodes[:shift]

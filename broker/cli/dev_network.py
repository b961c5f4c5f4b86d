"""``raftwood dev --faults-network``: every dev broker behind a loopback proxy
(``broker/harness/proxy.py``, no root needed), so ``dev`` can cut one broker from the
other brokers and from every client (isolate) and heal it again.

Ports (``--port P``, Raft base R): the proxy takes the ports a plain ``dev`` gives its
brokers, Kafka ``P + i - 1`` and Raft ``R + i - 1``, and broker i listens behind it on
Kafka ``P + 400 + i - 1`` and Raft ``P + 500 + i - 1``.  Each broker advertises its
proxy's Kafka port (``advertised.listeners``); the quorum's voter entries are the
proxies' Raft ports and each voter binds its own (``controller.quorum.bind.address``).
So the bootstrap servers are those of a plain ``dev``, and every byte between brokers
and every client byte passes the proxy.  ``dev``'s own status table asks each broker on
its own port, so an isolated broker is still shown, with what it believes.

Invariants: the proxy's listeners are bound before the first broker starts and kept
until ``dev`` exits (a restarted broker keeps its addresses); a cut is by broker id, so
a broker restarted while isolated stays isolated; ``isolated`` is what is cut now.
Only the PLAINTEXT listener is proxied (``--secure`` is refused with this option).
"""
from __future__ import annotations

import logging

from ..harness import BrokerPlan
from ..harness.proxy import LoopbackProxy, ProxyError, proxy_unavailable
from .dev_layout import HOST, DevError, plan_cluster, voters
from .ports import PortUse

log = logging.getLogger(__name__)

REAL_KAFKA_OFFSET = 400
REAL_RAFT_OFFSET = 500
NETWORK_SETTINGS = ("advertised.listeners", "controller.quorum.bind.address")
ENABLE_HINT = ("isolate needs the loopback proxy: start raftwood dev with "
               "--faults-network (same bootstrap servers)")


def plan_layouts(brokers: int, port: int, data_dir, raft_port_base: int | None
                 ) -> tuple[list[BrokerPlan], list[BrokerPlan]]:
    """(the brokers' own layout, the proxy's public one); DevError when ports clash."""
    public = plan_cluster(brokers, port, data_dir, raft_port_base)
    real = plan_cluster(brokers, port + REAL_KAFKA_OFFSET, data_dir, port + REAL_RAFT_OFFSET)
    public_ports = {p.port for p in public} | {p.raft_port for p in public}
    real_ports = {p.port for p in real} | {p.raft_port for p in real}
    if public_ports & real_ports:
        raise DevError(f"--faults-network puts the brokers on ports {port + REAL_KAFKA_OFFSET}"
                       f"-{port + REAL_RAFT_OFFSET + brokers - 1}, which clash with the "
                       f"proxy's; pick another --raft-port-base")
    return real, public


class DevNetwork:
    """The proxy in front of ``real`` (the brokers' own ports) at ``public`` (what they
    advertise).  ``owners`` ({pid: node id} of the running brokers) is set by the
    cluster before ``start``."""

    def __init__(self, real: list[BrokerPlan], public: list[BrokerPlan]):
        self.real, self.public = real, public
        self.owners = dict
        self.isolated: set[int] = set()
        self._proxy: LoopbackProxy | None = None

    def adjust(self, settings: dict[str, str], member: BrokerPlan,
               voter_count: int | None, extra: dict[str, str]) -> None:
        """Point broker ``member``'s advertised listener and voter entries at the proxy."""
        clash = sorted(set(NETWORK_SETTINGS) & extra.keys())
        if clash:
            raise DevError(f"{', '.join(clash)} are set by raftwood dev --faults-network")
        public = self.public[member.node_id - 1]
        settings["advertised.listeners"] = f"PLAINTEXT://{public.address}"
        if len(self.public) > 1:
            settings["controller.quorum.voters"] = voters(self.public, voter_count)
            if member.node_id <= (voter_count or len(self.public)):
                settings["controller.quorum.bind.address"] = f"{HOST}:{member.raft_port}"

    def port_uses(self) -> list[PortUse]:
        uses = [PortUse(p.port, f"proxy of broker {p.node_id}'s Kafka listener")
                for p in self.public]
        if len(self.public) > 1:
            uses += [PortUse(p.raft_port, f"proxy of broker {p.node_id}'s Raft port")
                     for p in self.public]
        return uses

    def start(self) -> None:
        """Bind every proxy listener; DevError when the proxy cannot run or bind."""
        why = proxy_unavailable()
        if why is not None:
            raise DevError(f"--faults-network: {why}")
        routes = {}
        for real, public in zip(self.real, self.public, strict=True):
            routes[real.node_id] = [(public.port, real.port)]
            if len(self.public) > 1:
                routes[real.node_id].append((public.raft_port, real.raft_port))
        proxy = LoopbackProxy(routes, lambda: self.owners())
        try:
            self._proxy = proxy.start()
        except ProxyError as exc:
            raise DevError(str(exc)) from exc

    def isolate(self, node_id: int) -> None:
        """Stall every link between broker ``node_id`` and the other brokers and clients."""
        if node_id in self.isolated:
            raise DevError(f"broker {node_id} is isolated already (heal with h or "
                           f"raftwood dev heal)")
        try:
            self._need_proxy().isolate(node_id, clients=True)
        except ProxyError as exc:
            raise DevError(str(exc)) from exc
        self.isolated.add(node_id)
        log.debug("isolated broker %d", node_id)

    def heal(self) -> list[int]:
        """Lift every cut; the brokers that were isolated."""
        try:
            self._need_proxy().heal()
        except ProxyError as exc:
            raise DevError(str(exc)) from exc
        healed, self.isolated = sorted(self.isolated), set()
        return healed

    def _need_proxy(self) -> LoopbackProxy:
        if self._proxy is None:
            raise DevError("the loopback proxy is not running")
        return self._proxy

    def close(self) -> None:
        if self._proxy is not None:
            self._proxy.close()

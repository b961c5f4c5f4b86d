"""The test network of ``raftwood verify --network netns`` and of the chaos clusters
(``chaos.ChaosCluster``): one network namespace per broker on a private bridge, and the
cuts made inside those namespaces.

Layout (every name carries a per-run random prefix ``rw<6 hex>``, so runs never
collide and cleanup removes only its own)::

    root namespace: clients, the runner     bridge rwXXXXXX-br   10.213.R.254/24
      veth rwXXXXXX-v1 (on the bridge) ── rwXXXXXX-p1 in namespace rwXXXXXX-b1   10.213.R.1
      veth rwXXXXXX-v2 (on the bridge) ── rwXXXXXX-p2 in namespace rwXXXXXX-b2   10.213.R.2
      ...

The /24 is used only on these links: R is drawn at random among the third octets that
no route or address of the root namespace overlaps (a host that routes 10.213.0.0/16
elsewhere gets an error, never a shadowed route).  Broker N binds 10.213.R.N; clients
in the root namespace reach it over the bridge.

Cuts are nftables drop rules inside the broker namespaces.  Each namespace has one
table ``inet raftwood``: set ``peers`` (every packet to or from these addresses is
dropped, all ports: Kafka and Raft alike), sets ``local_ports`` / ``remote_ports``
(``address . port`` pairs: TCP to or from a peer where our / its end is that port,
for cuts of the Kafka ports only) and chain ``loss`` (random drops, the stand-in for
netem on kernels without it).  A cut is always made on both ends, so both
directions drop.  Delay and loss use ``tc qdisc ... netem`` on the namespace's veth.
``heal()`` empties every set and chain and removes every qdisc.

``close()`` deletes every veth, the bridge and every namespace (the rules go with
their namespace).  It is idempotent, registered with ``atexit`` by ``start()``, and
checks that none of the run's names is left.  Every command runs through
``subprocess`` with a bound and its exit code checked; a failure raises
``NetnsError`` naming the command and its stderr.  Calls come from one thread (the
runner's); nothing here loops except bounded retries.
"""
from __future__ import annotations

import atexit
import functools
import ipaddress
import json
import logging
import os
import secrets
import shutil
import socket
import subprocess
import sys
import threading

log = logging.getLogger(__name__)

COMMAND_TIMEOUT_S = 15.0
SUBNET_PARENT = "10.213"
CLIENTS = 0                  # the root namespace (the bridge's address) as a cut's end
BRIDGE_HOST = 254
TABLE = "raftwood"
_TABLE_SCRIPT = f"""
table inet {TABLE} {{
  set peers {{ type ipv4_addr; }}
  set local_ports {{ type ipv4_addr . inet_service; }}
  set remote_ports {{ type ipv4_addr . inet_service; }}
  chain input {{
    type filter hook input priority 0; policy accept;
    ip saddr @peers drop
    ip saddr . tcp dport @local_ports drop
    ip saddr . tcp sport @remote_ports drop
  }}
  chain output {{
    type filter hook output priority 0; policy accept;
    ip daddr @peers drop
    ip daddr . tcp sport @local_ports drop
    ip daddr . tcp dport @remote_ports drop
  }}
  chain loss {{
    type filter hook output priority 1; policy accept;
  }}
}}
"""
_HEAL_SCRIPT = (f"flush set inet {TABLE} peers\nflush set inet {TABLE} local_ports\n"
                f"flush set inet {TABLE} remote_ports\nflush chain inet {TABLE} loss\n")
# A listener in one namespace, for start()'s link check: accepts two connections.
_LISTENER = ("import socket, sys\n"
             "s = socket.socket(); s.settimeout(10); s.bind((sys.argv[1], 0)); s.listen(4)\n"
             "print(s.getsockname()[1], flush=True)\n"
             "for _ in range(2): s.accept()[0].close()\n")
_CONNECTOR = ("import socket, sys\n"
              "socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).close()\n")


class NetnsError(RuntimeError):
    """A namespace, link or rule could not be made or removed (the message names the
    command and what it printed)."""


def run(argv: list[str], *, input: str | None = None,
        timeout_s: float = COMMAND_TIMEOUT_S) -> str:
    """Run one command, bounded; its stdout, or NetnsError with its stderr."""
    log.debug("netns: %s", " ".join(argv))
    try:
        done = subprocess.run(argv, input=input, capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NetnsError(f"`{' '.join(argv)}` did not run: {exc}") from exc
    if done.returncode != 0:
        raise NetnsError(f"`{' '.join(argv)}` failed with exit code {done.returncode}: "
                         f"{(done.stderr or done.stdout).strip()[:500]}")
    return done.stdout


def _new_prefix() -> str:
    return "rw" + secrets.token_hex(3)


@functools.lru_cache(maxsize=1)
def _probe() -> tuple[bool, str, bool]:
    """(usable, why, netem qdisc available): checked once per process."""
    if os.geteuid() != 0:
        return False, "not root (network namespaces need CAP_NET_ADMIN)", False
    missing = [tool for tool in ("ip", "nft", "tc") if shutil.which(tool) is None]
    if missing:
        return False, (f"{', '.join(missing)} not found (install iproute2 and nftables)"), False
    name = f"{_new_prefix()}-probe"
    try:
        run(["ip", "netns", "add", name])
        try:
            run(["ip", "-n", name, "link", "add", "probe0", "type", "veth",
                 "peer", "name", "probe1"])
            run(["ip", "-n", name, "link", "add", "probebr", "type", "bridge"])
            run(["ip", "netns", "exec", name, "nft", "-f", "-"], input=_TABLE_SCRIPT)
            try:
                run(["ip", "netns", "exec", name, "tc", "qdisc", "add", "dev", "probe0",
                     "root", "netem", "delay", "1ms"])
                netem = True
            except NetnsError:
                netem = False
        finally:
            run(["ip", "netns", "del", name])
    except NetnsError as exc:
        return False, f"a trial namespace failed: {exc}", False
    why = "root; ip, nft and tc present; a trial namespace worked"
    if not netem:
        why += "; no netem qdisc in this kernel (netem faults drop packets with nftables, " \
               "without delay)"
    return True, why, netem


def netns_available() -> tuple[bool, str]:
    """Whether this process can build the test network, and why (or why not): root,
    ``ip``/``nft``/``tc`` on PATH, and a trial namespace with a veth, a bridge and the
    nftables table could be created and deleted."""
    usable, why, _netem = _probe()
    return usable, why


def netem_supported() -> bool:
    """Whether the kernel has the netem qdisc (checked by ``netns_available``)."""
    return _probe()[2]


def _used_networks() -> list[ipaddress.IPv4Network]:
    """Every IPv4 route destination and address of the root namespace."""
    used = []
    for entry in json.loads(run(["ip", "-j", "-4", "route", "show", "table", "all"]) or "[]"):
        dst = entry.get("dst", "default")
        if dst != "default":
            used.append(ipaddress.ip_network(dst, strict=False))
    for link in json.loads(run(["ip", "-j", "-4", "addr", "show"]) or "[]"):
        for info in link.get("addr_info", []):
            used.append(ipaddress.ip_network(f"{info['local']}/{info['prefixlen']}",
                                             strict=False))
    return used


def pick_subnet(used: list[ipaddress.IPv4Network], draw) -> ipaddress.IPv4Network:
    """A 10.213.R.0/24 overlapping nothing in ``used``; ``draw()`` gives candidate R."""
    for _ in range(64):
        subnet = ipaddress.ip_network(f"{SUBNET_PARENT}.{draw()}.0/24")
        if not any(subnet.overlaps(net) for net in used):
            return subnet
    raise NetnsError(f"no free /24 in {SUBNET_PARENT}.0.0/16: the root namespace routes "
                     f"or uses it ({[str(n) for n in used if n.overlaps(subnet)][:3]})")


class NamespaceNetwork:
    """The namespaces, bridge, veths and rules of one run (see the module docstring).

    ``nodes`` are broker ids (1..253).  The subnet is picked when constructed (so the
    addresses are known before anything is built); ``start()`` builds everything; the
    fault methods (``isolate``, ``cut``, ``split``, ``cut_ports``, ``netem``) add to
    what is cut until ``heal()``; ``close()`` removes it all.  One thread at a time."""

    def __init__(self, nodes, *, python: str = sys.executable):
        self.nodes = sorted(nodes)
        if not self.nodes or self.nodes[0] < 1 or self.nodes[-1] >= BRIDGE_HOST:
            raise ValueError(f"node ids must lie in 1..{BRIDGE_HOST - 1}: {self.nodes}")
        self.python = python
        self.prefix = _new_prefix()
        self.bridge = f"{self.prefix}-br"
        self.subnet = pick_subnet(_used_networks(), lambda: secrets.randbelow(254) + 1)
        self.netem_nodes: set[int] = set()    # a netem qdisc on their veth
        self.lossy_nodes: set[int] = set()    # an nftables loss rule instead
        self.cut_pairs: set[frozenset] = set()
        self.port_cuts: set[tuple[frozenset, int]] = set()
        self._made: list[tuple[str, str]] = []   # ("link"|"netns", name), creation order
        self._lock = threading.Lock()
        self._closed = False

    # -- names and addresses -----------------------------------------------------------
    def namespace(self, node: int) -> str:
        return f"{self.prefix}-b{node}"

    def host_veth(self, node: int) -> str:
        return f"{self.prefix}-v{node}"

    def inner_veth(self, node: int) -> str:
        return f"{self.prefix}-p{node}"

    def address(self, node: int) -> str:
        """Broker ``node``'s address; ``CLIENTS`` (0) gives the bridge's (root side)."""
        return str(self.subnet.network_address + (BRIDGE_HOST if node == CLIENTS else node))

    @property
    def client_address(self) -> str:
        return self.address(CLIENTS)

    def exec_prefix(self, node: int) -> list[str]:
        """What runs a command inside ``node``'s namespace (``ip netns exec`` execs it,
        so the pid stays the command's own)."""
        return ["ip", "netns", "exec", self.namespace(node)]

    def names(self) -> list[str]:
        """Every namespace and link name this run uses."""
        return ([self.bridge] + [self.namespace(n) for n in self.nodes]
                + [self.host_veth(n) for n in self.nodes]
                + [self.inner_veth(n) for n in self.nodes])

    # -- building and removing ---------------------------------------------------------
    def start(self) -> NamespaceNetwork:
        """Build the bridge, namespaces, veths and tables, then check that a namespace
        reaches another and the root namespace reaches it.  On failure everything made
        so far is removed and NetnsError raised."""
        atexit.register(self.close)
        try:
            prefix = f"/{self.subnet.prefixlen}"
            self._make("link", self.bridge, ["ip", "link", "add", self.bridge, "type", "bridge"])
            run(["ip", "addr", "add", self.client_address + prefix, "dev", self.bridge])
            run(["ip", "link", "set", self.bridge, "up"])
            for node in self.nodes:
                self._build_node(node, prefix)
            self._check_links()
        except BaseException:
            try:
                self.close()
            except NetnsError as exc:
                log.error("cleaning up after a failed start: %s", exc)
            raise
        log.debug("netns: %d namespaces %s-b* on %s (bridge %s)", len(self.nodes),
                  self.prefix, self.subnet, self.bridge)
        return self

    def _build_node(self, node: int, prefix: str) -> None:
        ns, outer, inner = self.namespace(node), self.host_veth(node), self.inner_veth(node)
        self._make("netns", ns, ["ip", "netns", "add", ns])
        self._make("link", outer, ["ip", "link", "add", outer, "type", "veth",
                                   "peer", "name", inner, "netns", ns])
        run(["ip", "link", "set", outer, "master", self.bridge, "up"])
        run(["ip", "-n", ns, "addr", "add", self.address(node) + prefix, "dev", inner])
        run(["ip", "-n", ns, "link", "set", inner, "up"])
        run(["ip", "-n", ns, "link", "set", "lo", "up"])
        run(self.exec_prefix(node) + ["nft", "-f", "-"], input=_TABLE_SCRIPT)

    def _make(self, kind: str, name: str, argv: list[str]) -> None:
        run(argv)
        self._made.append((kind, name))

    def _check_links(self) -> None:
        """A TCP connect from the root namespace and from a second namespace to a
        listener in the first (bridged traffic may meet a host firewall)."""
        first, other = self.nodes[0], self.nodes[-1]
        listener = subprocess.Popen(self.exec_prefix(first) + [
            self.python, "-c", _LISTENER, self.address(first)], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        try:
            port = listener.stdout.readline().strip()
            if not port:
                raise NetnsError(f"no listener in {self.namespace(first)}: "
                                 f"{listener.stderr.read()[:300]}")
            try:
                socket.create_connection((self.address(first), int(port)), timeout=5).close()
            except OSError as exc:
                raise NetnsError(f"the root namespace cannot reach {self.address(first)} "
                                 f"over {self.bridge}: {exc}") from exc
            if other != first:
                try:
                    run(self.exec_prefix(other) + [self.python, "-c", _CONNECTOR,
                                                   self.address(first), port])
                except NetnsError as exc:
                    raise NetnsError(f"namespace {self.namespace(other)} cannot reach "
                                     f"{self.address(first)} across the bridge (a host "
                                     f"firewall filtering bridged traffic?): {exc}") from exc
        finally:
            if listener.poll() is None:
                listener.kill()
            listener.wait(5)
            listener.stdout.close()
            listener.stderr.close()

    def close(self) -> None:
        """Delete every veth, the bridge and every namespace of this run (idempotent);
        NetnsError when one of the run's names is still there afterwards."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        atexit.unregister(self.close)
        errors = []
        for kind, name in reversed(self._made):
            argv = ["ip", "netns", "del", name] if kind == "netns" else ["ip", "link", "del", name]
            try:
                run(argv)
            except NetnsError as exc:
                errors.append(str(exc))
        left = self.leftovers()
        if left:
            raise NetnsError(f"left after cleanup: {left}; errors: {errors}")

    def leftovers(self) -> list[str]:
        """The run's names that ``ip netns list`` / ``ip link show`` still show."""
        mine = f"{self.prefix}-"
        present = run(["ip", "netns", "list"]).split() + run(["ip", "-o", "link", "show"]).split()
        return sorted({word.split("@")[0].rstrip(":") for word in present
                       if word.startswith(mine)})

    # -- cuts ----------------------------------------------------------------------------
    def isolate(self, node: int, *, clients: bool = False) -> None:
        """Cut ``node`` from every other broker (all ports, both ways); with
        ``clients`` from the root namespace too.  Without, clients still reach it
        (a zombie: it answers them while the cluster cannot hear it)."""
        for other in self.nodes:
            if other != node:
                self.cut(node, other)
        if clients:
            self.cut(node, CLIENTS)

    def split(self, minority) -> None:
        """Partition the brokers into ``minority`` and the rest, both ways, all ports;
        clients reach both sides."""
        minority = set(minority)
        if not minority or not minority < set(self.nodes):
            raise ValueError(f"a split needs a proper non-empty subset of {self.nodes}")
        for a in sorted(minority):
            for b in self.nodes:
                if b not in minority:
                    self.cut(a, b)

    def cut(self, a: int, b: int) -> None:
        """Drop everything between ``a`` and ``b`` (brokers, or CLIENTS), both ways."""
        if a == b:
            raise ValueError("a cut needs two different ends")
        script = {}
        for here, there in ((a, b), (b, a)):
            if here != CLIENTS:  # the root namespace's own rules are never touched
                script[here] = f"add element inet {TABLE} peers {{ {self.address(there)} }}\n"
        self._nft(script)
        self.cut_pairs.add(frozenset((a, b)))

    def cut_ports(self, node: int, ports, peers=None) -> None:
        """Drop TCP between ``node`` and each of ``peers`` (default: every other
        broker) where either end uses one of ``ports`` (listening ports: the Kafka
        ports leave Raft up).  Clients are not cut."""
        peers = [p for p in (self.nodes if peers is None else peers) if p != node]
        script: dict[int, str] = {}
        for peer in peers:
            for here, there in ((node, peer), (peer, node)):
                for port in ports:
                    element = f"{{ {self.address(there)} . {int(port)} }}"
                    script[here] = script.get(here, "") + (
                        f"add element inet {TABLE} local_ports {element}\n"
                        f"add element inet {TABLE} remote_ports {element}\n")
            self.port_cuts.update((frozenset((node, peer)), int(p)) for p in ports)
        self._nft(script)

    def netem(self, node: int, delay_ms: int, jitter_ms: int, loss_pct: float) -> str:
        """Delay (with jitter) and random loss on everything ``node`` sends; returns
        what was applied.  Without the netem qdisc: loss only, by an nftables rule."""
        dev = self.inner_veth(node)
        if netem_supported():
            run(self.exec_prefix(node) + [
                "tc", "qdisc", "replace", "dev", dev, "root", "netem", "delay",
                f"{int(delay_ms)}ms", f"{int(jitter_ms)}ms", "loss", f"{loss_pct:g}%"])
            self.netem_nodes.add(node)
            return f"netem delay {delay_ms}±{jitter_ms} ms, loss {loss_pct:g}% on {dev}"
        # nft's ``numgen random mod 100`` compares against 0..99 only: 100 % is a plain drop
        chance = "" if round(loss_pct) >= 100 else f"numgen random mod 100 < {round(loss_pct)} "
        self._nft({node: f'add rule inet {TABLE} loss oifname "{dev}" {chance}drop\n'})
        self.lossy_nodes.add(node)
        return (f"loss {round(loss_pct)}% by nftables on {dev} (no netem qdisc in this "
                f"kernel: no delay)")

    def heal(self) -> None:
        """Remove every rule and qdisc a fault added."""
        for node in self.nodes:
            run(self.exec_prefix(node) + ["nft", "-f", "-"], input=_HEAL_SCRIPT)
        for node in sorted(self.netem_nodes):
            run(self.exec_prefix(node) + ["tc", "qdisc", "del", "dev", self.inner_veth(node),
                                          "root"])
        self.netem_nodes.clear()
        self.lossy_nodes.clear()
        self.cut_pairs.clear()
        self.port_cuts.clear()

    def is_cut(self) -> bool:
        return bool(self.cut_pairs or self.port_cuts or self.netem_nodes or self.lossy_nodes)

    def _nft(self, scripts: dict[int, str]) -> None:
        for node, script in sorted(scripts.items()):
            run(self.exec_prefix(node) + ["nft", "-f", "-"], input=script)

    def __repr__(self) -> str:
        return f"<NamespaceNetwork {self.prefix} {self.subnet} nodes={self.nodes}>"

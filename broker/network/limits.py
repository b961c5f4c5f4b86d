"""The Kafka listeners' connection limits, with Kafka's names and defaults.

* ``max.connections``: open connections on the broker's Kafka listeners, the
  inter-broker listener excepted (Kafka's protected listener: replication must not be
  locked out by clients).  Kafka stops accepting until a slot frees; Raftwood accepts
  and closes the new connection at once, so a full broker answers quickly instead of
  leaving connections in the kernel's backlog.
* ``max.connections.per.ip``, with ``max.connections.per.ip.overrides``
  (``host:count,host:count``, by address): open connections from one client address,
  on every listener; over it the new connection is closed, as Kafka does.
* ``connections.max.idle.ms``: a connection that neither sent a byte nor was written to
  for this long, and owes no answer, is closed (see ``Connection``).
* ``sasl.server.max.receive.size``: the largest frame a SASL listener reads before
  the connection has authenticated (see ``Connection``).

The count is the broker's: ``broker/node.py`` makes one ConnectionLimits, which every
connection counts in (through its ConnectionContext) and dynamic configs change.
"""
from __future__ import annotations

from collections import Counter

UNLIMITED = 2 ** 31 - 1  # Kafka's Int.MaxValue defaults
DEFAULTS = {
    "max.connections": UNLIMITED,
    "max.connections.per.ip": UNLIMITED,
    "max.connections.per.ip.overrides": "",
    "connections.max.idle.ms": 600_000,
    "sasl.server.max.receive.size": 524_288,
}


def setting(config, name: str):
    """``config[name]``, or Kafka's default for a broker stand-in without the key."""
    try:
        return config[name]
    except KeyError:
        return DEFAULTS[name]


def parse_overrides(text: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count`` pairs separated by commas
    (an IPv6 address keeps its colons: the count follows the last one)."""
    overrides: dict[str, int] = {}
    for item in str(text).split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        if not sep or not host.strip():
            raise ValueError(f"{item!r}: expected host:count")
        value = int(count)
        if value < 0:
            raise ValueError(f"{item!r}: the count must be at least 0")
        overrides[host.strip().strip("[]")] = value
    return overrides


class ConnectionLimits:
    """Open connections in total and per client address, against the caps. Event-loop only.

    Invariant: ``total`` and ``per_host`` count exactly the connections ``admit`` accepted
    and ``release`` has not yet been called for (each at most once, by the connection);
    ``total`` excludes connections on the protected (inter-broker) listener.
    """

    def __init__(self, config, protected_listener: str = ""):
        self.max_connections = setting(config, "max.connections")
        self.max_per_host = setting(config, "max.connections.per.ip")
        self.overrides = parse_overrides(setting(config, "max.connections.per.ip.overrides"))
        self.protected_listener = protected_listener
        self.total = 0
        self.per_host: Counter[str] = Counter()

    def cap_of(self, host: str) -> int:
        return self.overrides.get(host, self.max_per_host)

    def admit(self, host: str, listener_name: str) -> str | None:
        """Count a new connection from ``host`` on ``listener_name``; or, when a cap is
        reached, count nothing and return why it must be closed."""
        if self.per_host[host] >= self.cap_of(host):
            return f"max.connections.per.ip ({self.cap_of(host)}) reached for {host}"
        protected = listener_name == self.protected_listener
        if not protected and self.total >= self.max_connections:
            return f"max.connections ({self.max_connections}) reached"
        self.per_host[host] += 1
        if not protected:
            self.total += 1
        return None

    def release(self, host: str, listener_name: str) -> None:
        self.per_host[host] -= 1
        if self.per_host[host] <= 0:
            del self.per_host[host]
        if listener_name != self.protected_listener:
            self.total -= 1


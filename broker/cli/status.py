"""Merge brokers' status answers into what ``raftwood topics describe``, ``raftwood cluster``
and ``raftwood dev`` print (pure functions: no sockets, no printing).

The inputs are the JSON objects of ``protocol/status.py``:
* one broker's *image* (``brokers``, ``controller_id``, ``topics`` with their partitions:
  replicas, leader, leader_epoch, partition_epoch, isr, replica_states), taken from the
  bootstrap broker;
* every reachable broker's *hosted* list (its own view of the partitions it holds:
  role, log_end_offset, high_watermark and, on a leader, each follower's
  log_end_offset / lag / in_sync).

Unknown values print as ``?``: a broker that did not answer, a field a broker does not
send yet.  Nothing here trusts the JSON to be complete; a missing key is never an error.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .tables import format_table

UNKNOWN = "?"
DEFAULT_MIN_ISR = 1
PROBLEM_OFFLINE = "offline"
PROBLEM_UNDER_REPLICATED = "under-replicated"
PROBLEM_UNDER_MIN_ISR = "under-min-isr"


@dataclass
class ClusterView:
    """The bootstrap broker's image plus the hosted lists of the brokers that answered.

    ``hosted`` maps broker id → that broker's ``hosted`` list; ``unreachable`` maps broker
    id → why its status is missing.  Invariant: no id is in both.
    """

    image: dict
    hosted: dict[int, list[dict]] = field(default_factory=dict)
    unreachable: dict[int, str] = field(default_factory=dict)

    @property
    def controller_id(self) -> int:
        return _int(self.image.get("controller_id"), -1)

    @property
    def brokers(self) -> list[dict]:
        return sorted(self.image.get("brokers") or [], key=lambda b: _int(b.get("id"), 0))

    def topics(self, names: list[str] | None = None) -> list[dict]:
        """Topics of the image sorted by name; only ``names`` when given (unknown ones skipped)."""
        topics = [t for t in self.image.get("topics") or [] if "name" in t]
        if names:
            wanted = set(names)
            topics = [t for t in topics if t["name"] in wanted]
        return sorted(topics, key=lambda t: t["name"])

    def is_fenced(self, broker_id: int) -> bool:
        """The image has the broker fenced (its session expired: down, or cut off)."""
        return any(b.get("id") == broker_id and b.get("fenced") for b in self.brokers)

    def hosted_entry(self, broker_id: int, topic: str, partition: int) -> dict | None:
        for entry in self.hosted.get(broker_id, ()):
            if entry.get("topic") == topic and entry.get("partition") == partition:
                return entry
        return None


def _int(value, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _or_unknown(value):
    return UNKNOWN if value is None else value


def partitions_of(topic: dict) -> list[dict]:
    return sorted(topic.get("partitions") or [], key=lambda p: _int(p.get("partition"), 0))


def min_isr(topic: dict) -> int:
    """The topic's ``min.insync.replicas`` from its configs, else 1 (Kafka's default)."""
    try:
        return int((topic.get("configs") or {}).get("min.insync.replicas", DEFAULT_MIN_ISR))
    except (TypeError, ValueError):
        return DEFAULT_MIN_ISR


def partition_problems(partition: dict, min_insync: int) -> list[str]:
    """``offline`` when leader is -1; ``under-replicated`` when |isr| < |replicas|;
    ``under-min-isr`` when |isr| < min.insync.replicas."""
    isr = partition.get("isr") or []
    replicas = partition.get("replicas") or []
    problems = []
    if _int(partition.get("leader"), -1) < 0:
        problems.append(PROBLEM_OFFLINE)
    if len(isr) < len(replicas):
        problems.append(PROBLEM_UNDER_REPLICATED)
    if len(isr) < min_insync:
        problems.append(PROBLEM_UNDER_MIN_ISR)
    return problems


def short_state(state: str | None) -> str:
    """``OnlineReplica`` → ``Online`` (the replica state machine's names, shortened)."""
    if not state:
        return UNKNOWN
    return state[:-len("Replica")] if state.endswith("Replica") and state != "Replica" else state


def replica_state(partition: dict, replica_id: int) -> str | None:
    states = partition.get("replica_states") or {}
    return states.get(str(replica_id), states.get(replica_id))


def replica_cells(view: ClusterView, topic: str, partition: dict) -> list[str]:
    """``id:state:LEO:lag`` for every replica, in assignment order.

    LEO: the replica's own hosted view, else what its leader knows of it.  Lag: 0 for the
    leader; a follower's lag as its leader reports it, else leader LEO − replica LEO;
    unknown (``?``) for a replica whose broker is fenced (down): what its leader last
    saw of it says nothing of now.  A broker that only misses its status answer (not
    fenced) still fetches, so its leader's figures stand.
    """
    index = _int(partition.get("partition"), -1)
    leader = _int(partition.get("leader"), -1)
    leader_entry = view.hosted_entry(leader, topic, index) if leader >= 0 else None
    followers = {f.get("replica_id"): f for f in (leader_entry or {}).get("followers") or []}
    leader_leo = (leader_entry or {}).get("log_end_offset")
    cells = []
    for replica in partition.get("replicas") or []:
        own = view.hosted_entry(replica, topic, index) or {}
        seen_by_leader = followers.get(replica, {})
        leo = own.get("log_end_offset", seen_by_leader.get("log_end_offset"))
        if view.is_fenced(replica) and replica != leader:
            lag = None
        elif replica == leader and leader_entry is not None:
            lag = 0
        elif "lag" in seen_by_leader:
            lag = seen_by_leader["lag"]
        elif isinstance(leader_leo, int) and isinstance(leo, int):
            lag = max(0, leader_leo - leo)
        else:
            lag = None
        state = short_state(replica_state(partition, replica))
        cells.append(f"{replica}:{state}:{_or_unknown(leo)}:{_or_unknown(lag)}")
    return cells


DESCRIBE_HEADERS = ["TOPIC", "PARTITION", "LEADER", "LEADER_EPOCH", "PARTITION_EPOCH",
                    "REPLICAS", "ISR", "HW", "REPLICA:STATE:LEO:LAG"]
TOPIC_HEADERS = ["TOPIC", "TOPIC_ID", "PARTITIONS", "REPLICATION_FACTOR", "CONFIGS"]


def describe_rows(view: ClusterView, topics: list[dict]) -> list[list]:
    rows = []
    for topic in topics:
        for partition in partitions_of(topic):
            leader = _int(partition.get("leader"), -1)
            leader_entry = view.hosted_entry(leader, topic["name"],
                                             _int(partition.get("partition"), -1))
            high_watermark = (leader_entry or {}).get("high_watermark")
            rows.append([topic["name"], partition.get("partition"), leader,
                         partition.get("leader_epoch"), partition.get("partition_epoch"),
                         partition.get("replicas"), partition.get("isr"),
                         _or_unknown(high_watermark),
                         " ".join(replica_cells(view, topic["name"], partition))])
    return rows


def topic_rows(topics: list[dict]) -> list[list]:
    rows = []
    for topic in topics:
        partitions = partitions_of(topic)
        factor = len(partitions[0].get("replicas") or []) if partitions else None
        configs = ",".join(f"{k}={v}" for k, v in sorted((topic.get("configs") or {}).items()))
        rows.append([topic["name"], topic.get("topic_id"), len(partitions), factor,
                     configs or None])
    return rows


def render_describe(view: ClusterView, topics: list[dict]) -> str:
    numbers = (1, 2, 3, 4, 7)
    return (format_table(TOPIC_HEADERS, topic_rows(topics), right=(2, 3)) + "\n\n"
            + format_table(DESCRIBE_HEADERS, describe_rows(view, topics), right=numbers))


def problem_rows(view: ClusterView) -> list[list]:
    """One row per partition with at least one problem (see ``partition_problems``)."""
    rows = []
    for topic in view.topics():
        minimum = min_isr(topic)
        for partition in partitions_of(topic):
            problems = partition_problems(partition, minimum)
            if problems:
                rows.append([topic["name"], partition.get("partition"), partition.get("leader"),
                             partition.get("replicas"), partition.get("isr"), minimum,
                             ",".join(problems)])
    return rows


def render_cluster(view: ClusterView) -> str:
    controller = view.controller_id
    broker_rows = [[b.get("id"), f"{b.get('host')}:{b.get('port')}", b.get("epoch"),
                    "fenced" if b.get("fenced") else "alive", b.get("id") == controller]
                   for b in view.brokers]
    problems = problem_rows(view)
    counts = {name: sum(1 for row in problems if name in row[-1].split(","))
              for name in (PROBLEM_OFFLINE, PROBLEM_UNDER_REPLICATED, PROBLEM_UNDER_MIN_ISR)}
    lines = [f"cluster id: {view.image.get('cluster_id') or UNKNOWN}",
             f"controller: {controller if controller >= 0 else 'none'}",
             f"metadata version: {_or_unknown(view.image.get('metadata_version'))}", "",
             format_table(["ID", "ADDRESS", "EPOCH", "STATE", "CONTROLLER"], broker_rows,
                          right=(0, 2)), "",
             f"offline partitions: {counts[PROBLEM_OFFLINE]}",
             f"under-replicated partitions: {counts[PROBLEM_UNDER_REPLICATED]}",
             f"under-min-isr partitions: {counts[PROBLEM_UNDER_MIN_ISR]}"]
    if problems:
        lines += ["", format_table(["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR",
                                    "MIN_ISR", "PROBLEMS"], problems, right=(1, 2, 5))]
    return "\n".join(lines)


@dataclass(frozen=True)
class BrokerSummary:
    """What ``raftwood dev`` shows of one broker, from that broker's own status."""

    is_controller: bool
    hosted: int
    leaders: int
    under_replicated: int
    quorum_role: str | None = None  # voter / observer; None for a lone broker


def broker_summary(status: dict) -> BrokerSummary:
    """Controller flag, hosted and led partition counts, and the under-replicated
    partitions this broker leads (per its own image)."""
    me = status.get("broker_id")
    hosted = status.get("hosted") or []
    under = sum(1 for topic in status.get("topics") or [] for p in topic.get("partitions") or []
                if p.get("leader") == me
                and len(p.get("isr") or []) < len(p.get("replicas") or []))
    return BrokerSummary(is_controller=me is not None and status.get("controller_id") == me,
                         hosted=len(hosted),
                         leaders=sum(1 for e in hosted if e.get("role") == "leader"),
                         under_replicated=under,
                         quorum_role=(status.get("quorum") or {}).get("role"))

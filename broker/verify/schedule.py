"""The fault schedule: which faults, against which role, when and for how long.

``generate_schedule(seed, duration_s, kinds, partitions)`` is a pure function: the same
arguments give the same list of ``FaultStep`` (that is what makes a failing run
replayable with ``--seed``).  A step names a *role* (the leader or a follower of one
partition, the controller), not a broker id: which broker holds the role is only known
when the step runs, and the runner prints the broker it resolved.  A replay repeats
the kinds, roles, partitions, variants, hold times and planned start times; the
brokers and timings of the cluster itself are not deterministic.

Faults never overlap: each is applied, held, healed, and the cluster is given time to
recover before the next.  Planned start times (``at_s``, seconds after the fault phase
began) leave room for a broker restart after each fault, so a schedule of
``duration_s`` takes about that long on a quiet machine; the runner starts a step at its
planned time or when the previous one has recovered, whichever is later.

The kinds (``FAULT_KINDS``):

``kill-leader``, ``kill-follower``, ``kill-controller``
    SIGKILL the broker holding the role, keep it down ``hold_s``, start it again.
``pause``
    SIGSTOP for ``hold_s`` (sometimes past the session timeout, so it gets fenced
    and comes back as a zombie that must notice), then SIGCONT.
``restart-clean`` / ``restart-hard``
    SIGTERM (controlled shutdown) / SIGKILL, then start again at once.
``cut``
    Cut the inter-broker data path (replica fetching) for ``hold_s``: variant
    ``isolate`` (the broker from every other broker) or ``pair`` (from one other).
``corrupt-tail``
    SIGKILL, then damage the tail of the active segment of one partition the broker
    hosts (variant ``truncate``: cut inside the last batch, a torn write; ``corrupt``:
    flip bytes inside the last batch, a CRC failure), then start it: recovery must cut
    the damage and the replica must refetch what it lost.

With ``--network netns`` (brokers in network namespaces, see ``netns``) ``cut`` drops
every packet, Raft included, and these kinds come on top (``NETNS_FAULT_KINDS``):

``isolate-controller``
    The controller cut off from every other broker: variant ``short`` (clients still
    reach it), ``blind`` (clients cut too) or, rarely, ``long`` (held longer than the
    Raft journal compaction interval, so it must catch up from a snapshot).
``zombie-leader``
    A partition's leader cut off from every broker while clients still reach it.
``leader-from-followers``
    A partition's leader cut off from its followers but not from the controller.
``kafka-ports``
    A broker's Kafka ports cut from every other broker; Raft stays up.
``split-minority`` / ``split-majority``
    The brokers split in two, both ways; the role (leader or controller) on the
    minority side / on the majority side.
``flap``
    The link between the role's broker and another cut and healed several times.
``netem``
    Delay with jitter and random loss on everything one broker sends.

Opt-in (``OPT_IN_FAULT_KINDS``: never in a mode's default set nor in the ``all`` alias,
so a default run and every recorded seed keep their schedule; named in ``--faults``,
in either network mode):

``reassign``
    Move a partition's replicas while writing (AlterPartitionReassignments): the role's
    broker (the leader or a follower) is replaced by a broker that does not hold the
    partition, the fault waits (bounded) for the move to complete; variant ``cancel``
    cancels it shortly after the start instead.  See ``reassign`` for the plan and why
    such runs have 4 brokers.
``voter``
    Take the role's broker (the controller, that is the metadata quorum's leader, or a
    partition's follower) out of the quorum's voters (RemoveRaftVoter: it carries on as
    an observer, the leader handing leadership over first), hold, then add it back
    (AddRaftVoter at its own Raft address).  Convergence includes every broker seeing
    the whole voter set again.
``pause-coordinator-follower``
    SIGSTOP a follower of the coordinator's partition of the progress probe's
    transactional id (variant ``txn``: its ``__transaction_state`` partition) or group
    (``group``: its ``__consumer_offsets`` partition) for ``hold_s``, longer than the
    probe's 2.5 s client timeout: the coordinator's write waits for the follower until
    the ISR shrinks while its client gives up and closes the connection (see ``stuck``).
    Added to the default kinds when the transactional workload runs (``TXN_FAULT_KINDS``).
"""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass

FAULT_KINDS = ("kill-leader", "kill-follower", "kill-controller", "pause",
               "restart-clean", "restart-hard", "cut", "corrupt-tail")
NETNS_FAULT_KINDS = ("isolate-controller", "zombie-leader", "leader-from-followers",
                     "kafka-ports", "split-majority", "split-minority", "flap", "netem")
ALL_FAULT_KINDS = FAULT_KINDS + NETNS_FAULT_KINDS
OPT_IN_FAULT_KINDS = ("reassign", "voter", "pause-coordinator-follower")
# Part of the default kinds of a run with the transactional workload.
TXN_FAULT_KINDS = ("pause-coordinator-follower",)
KNOWN_FAULT_KINDS = ALL_FAULT_KINDS + OPT_IN_FAULT_KINDS
NETWORKS = ("proxy", "netns")
ALIASES = {
    "all": FAULT_KINDS,
    "kill": ("kill-leader", "kill-follower", "kill-controller"),
    "restart": ("restart-clean", "restart-hard"),
    "network": ("cut",),
    "storage": ("corrupt-tail",),
}
NETNS_ALIASES = {**ALIASES, "all": ALL_FAULT_KINDS, "network": ("cut",) + NETNS_FAULT_KINDS}
ROLES = ("leader", "follower", "controller")
FIXED_ROLE = {"kill-leader": "leader", "kill-follower": "follower",
              "kill-controller": "controller", "isolate-controller": "controller",
              "zombie-leader": "leader", "leader-from-followers": "leader",
              "pause-coordinator-follower": "follower"}
ROLE_CHOICES = {"split-majority": ("leader", "controller"),
                "split-minority": ("leader", "controller"),
                "reassign": ("leader", "follower"),
                "voter": ("controller", "follower")}
VARIANTS = {"cut": ("isolate", "pair"), "corrupt-tail": ("truncate", "corrupt"),
            "reassign": ("move", "move", "cancel"),   # about one move in three cancelled
            "pause-coordinator-follower": ("txn", "group")}
# isolate-controller: (variant, weight); a long one at most once per LONG_EVERY_S.
ISOLATE_VARIANTS = (("short", 6), ("blind", 3), ("long", 1))
LONG_HOLD_RANGE_S = (65.0, 75.0)   # past the Raft journal compaction interval (60 s)
LONG_RECOVERY_ESTIMATE_S = 8.0
LONG_EVERY_S = 300.0
# Seconds each kind holds its fault (uniform in the range).
HOLD_RANGES_S = {"kill-leader": (0.5, 3.0), "kill-follower": (0.5, 3.0),
                 "kill-controller": (0.5, 3.0), "pause": (1.0, 4.5),
                 "restart-clean": (0.0, 0.0), "restart-hard": (0.0, 0.0),
                 "cut": (2.0, 5.0), "corrupt-tail": (0.0, 0.0),
                 "isolate-controller": (1.5, 4.0), "zombie-leader": (3.5, 5.0),
                 "leader-from-followers": (3.5, 5.0), "kafka-ports": (1.5, 3.5),
                 "split-majority": (1.5, 3.5), "split-minority": (1.5, 3.5),
                 "flap": (1.5, 3.0), "netem": (2.0, 4.0), "reassign": (0.0, 0.0),
                 "voter": (1.0, 3.0), "pause-coordinator-follower": (6.0, 10.0)}
# What a step costs beyond its hold time, for planning: a broker restart (process start,
# registration) where there is one, plus recovery of the ISR.
RECOVERY_ESTIMATE_S = {"kill-leader": 2.5, "kill-follower": 2.5, "kill-controller": 2.5,
                       "pause": 1.0, "restart-clean": 2.5, "restart-hard": 2.5,
                       "cut": 1.5, "corrupt-tail": 2.5,
                       "isolate-controller": 2.0, "zombie-leader": 2.0,
                       "leader-from-followers": 1.5, "kafka-ports": 1.5,
                       "split-majority": 1.5, "split-minority": 2.0, "flap": 1.0,
                       "netem": 1.0, "reassign": 4.0,  # reassign: copy, join, complete
                       "voter": 3.0,  # voter: hand-over, two committed changes
                       "pause-coordinator-follower": 2.0}
GAP_RANGE_S = (0.5, 1.5)
WARMUP_S = 2.0


@dataclass(frozen=True)
class FaultStep:
    """One planned fault.  ``partition`` indexes the workload's partition list (the
    partition whose leader/follower is meant, or whose log is damaged); ``pick``
    chooses among several candidates (followers, the other broker of a pair) by
    ``pick % len(candidates)``."""

    index: int
    at_s: float
    kind: str
    role: str
    partition: int
    pick: int
    hold_s: float
    variant: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def describe(self, partition_names: list[str] | None = None) -> str:
        name = (partition_names[self.partition % len(partition_names)] if partition_names
                else f"partition #{self.partition}")
        target = ("the controller" if self.role == "controller"
                  else f"the {self.role} of {name}")
        what = {
            "pause": f"pause {target} for {self.hold_s:.1f}s",
            "restart-clean": f"clean restart (SIGTERM) of {target}",
            "restart-hard": f"hard restart (SIGKILL) of {target}",
            "cut": (f"cut {target} off from every other broker for {self.hold_s:.1f}s"
                    if self.variant == "isolate"
                    else f"cut {target} off from one other broker for {self.hold_s:.1f}s"),
            "corrupt-tail": f"kill -9 {target}, {self.variant} the tail of its {name} "
                            f"log, start it",
            "pause-coordinator-follower": f"pause a follower of the probe's {self.variant} "
                                          f"coordinator partition for {self.hold_s:.1f}s "
                                          f"while its client times out",
            "voter": f"take {target} out of the metadata quorum's voters for "
                     f"{self.hold_s:.1f}s (an observer), then add it back",
            "reassign": f"move the replica of {target} to a broker without one "
                        f"(AlterPartitionReassignments; a reorder if none), "
                        + ("cancel it halfway" if self.variant == "cancel"
                           else "wait for it to complete"),
        }.get(self.kind) or self._describe_network(target) or \
            f"kill -9 {target}, down {self.hold_s:.1f}s"
        return f"#{self.index:<3} at {self.at_s:6.1f}s  {self.kind:<15} {what}"

    def _describe_network(self, target: str) -> str | None:
        hold = f"{self.hold_s:.1f}s"
        if self.kind == "isolate-controller":
            return {"short": f"cut {target} off from every other broker for {hold} "
                             f"(clients still reach it)",
                    "blind": f"cut {target} off from every broker and client for {hold}",
                    "long": f"cut {target} off from every other broker for {hold}, past "
                            f"the Raft journal compaction interval"}[self.variant]
        if self.kind == "flap":
            cycles = flap_cycles(self)
            return (f"flap the link between {target} and one other broker: {len(cycles)} "
                    f"cuts in {hold}")
        if self.kind == "netem":
            delay, jitter, loss = netem_params(self)
            return f"delay {delay}±{jitter} ms and {loss}% loss on {target} for {hold}"
        return {
            "zombie-leader": f"cut {target} off from every broker for {hold}; clients "
                             f"still reach it (a zombie)",
            "leader-from-followers": f"cut {target} off from its followers, not from the "
                                     f"controller, for {hold}",
            "kafka-ports": f"cut the Kafka ports of {target} from every other broker for "
                           f"{hold} (Raft up)",
            "split-minority": f"split the brokers in two, {target} on the minority side, "
                              f"for {hold}",
            "split-majority": f"split off a minority of brokers without {target} for {hold}",
        }.get(self.kind)


def flap_cycles(step: FaultStep) -> list[tuple[float, float]]:
    """(cut seconds, up seconds) per cycle of a ``flap`` step: 3-6 cycles filling its
    hold time; derived from ``pick`` (pure)."""
    rng = random.Random(step.pick)
    count = rng.randint(3, 6)
    period = step.hold_s / count
    cycles = []
    for _ in range(count):
        cut = round(period * rng.uniform(0.4, 0.7), 2)
        cycles.append((cut, round(period - cut, 2)))
    return cycles


def netem_params(step: FaultStep) -> tuple[int, int, int]:
    """(delay ms, jitter ms, loss %) of a ``netem`` step: delay 50-200 ms, jitter up to
    a quarter of it, loss 5-20 %; derived from ``pick`` (pure)."""
    rng = random.Random(step.pick)
    delay = rng.randint(50, 200)
    return delay, rng.randint(5, delay // 4), rng.randint(5, 20)


def kinds_for(network: str) -> tuple[str, ...]:
    """Every kind a network mode can run: ``proxy`` FAULT_KINDS, ``netns`` all."""
    return ALL_FAULT_KINDS if network == "netns" else FAULT_KINDS


def default_kinds(network: str, workloads=()) -> tuple[str, ...]:
    """The kinds of a run without ``--faults``: the network mode's, and
    TXN_FAULT_KINDS when the transactional workload runs."""
    return kinds_for(network) + (TXN_FAULT_KINDS if "txn" in workloads else ())


def parse_fault_kinds(text: str | None, network: str = "proxy") -> tuple[str, ...]:
    """``--faults`` (comma-separated kinds or aliases: all, kill, restart, network,
    storage) to a tuple of kinds in KNOWN_FAULT_KINDS order; ValueError on an unknown
    name or on a kind the ``network`` mode cannot run (the netns kinds need netns).
    The opt-in kinds run in both modes and only when named."""
    kinds, aliases = kinds_for(network), NETNS_ALIASES if network == "netns" else ALIASES
    if text is None or not text.strip():
        return kinds
    chosen: set[str] = set()
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        if item in aliases:
            chosen.update(aliases[item])
        elif item in kinds or item in OPT_IN_FAULT_KINDS:
            chosen.add(item)
        elif item in ALL_FAULT_KINDS:
            raise ValueError(f"fault {item!r} needs --network netns (brokers in network "
                             f"namespaces); this run uses --network {network}")
        else:
            raise ValueError(f"unknown fault {item!r}; choose from "
                             f"{', '.join(kinds + OPT_IN_FAULT_KINDS + tuple(aliases))}")
    if not chosen:
        raise ValueError("--faults names no fault")
    return tuple(k for k in KNOWN_FAULT_KINDS if k in chosen)


def generate_schedule(seed: int, duration_s: float, kinds=FAULT_KINDS, partitions: int = 6,
                      *, max_faults: int | None = None) -> list[FaultStep]:
    """The steps for ``seed``: kinds in a shuffled round first (every chosen kind once,
    as far as the duration allows), then drawn at random; planned so that the last
    step, with its hold and recovery estimate, ends within ``duration_s``.  Pure."""
    if partitions < 1:
        raise ValueError("a schedule needs at least one partition")
    kinds = tuple(kinds)
    unknown = set(kinds) - set(KNOWN_FAULT_KINDS)
    if unknown:
        raise ValueError(f"unknown fault kinds {sorted(unknown)}")
    rng = random.Random(seed)
    first_round = list(kinds)
    rng.shuffle(first_round)
    steps: list[FaultStep] = []
    at_s = WARMUP_S
    longs_left = int(duration_s // LONG_EVERY_S)
    while kinds and (max_faults is None or len(steps) < max_faults):
        kind = first_round[len(steps)] if len(steps) < len(first_round) else rng.choice(kinds)
        low, high = HOLD_RANGES_S[kind]
        hold_s = round(rng.uniform(low, high), 1)
        role = FIXED_ROLE.get(kind) or rng.choice(ROLE_CHOICES.get(kind, ROLES))
        variant = rng.choice(VARIANTS[kind]) if kind in VARIANTS else None
        recovery_s = RECOVERY_ESTIMATE_S[kind]
        if kind == "isolate-controller":
            names, weights = zip(*ISOLATE_VARIANTS)
            variant = rng.choices(names, weights)[0]
            if variant == "long" and longs_left > 0:
                longs_left -= 1
                hold_s = round(rng.uniform(*LONG_HOLD_RANGE_S), 1)
                recovery_s = LONG_RECOVERY_ESTIMATE_S
            elif variant == "long":
                variant = "short"
        step = FaultStep(index=len(steps) + 1, at_s=round(at_s, 1), kind=kind, role=role,
                         partition=rng.randrange(partitions), pick=rng.randrange(1 << 16),
                         hold_s=hold_s, variant=variant)
        end_s = at_s + hold_s + recovery_s
        if end_s > duration_s:
            break
        steps.append(step)
        at_s = end_s + rng.uniform(*GAP_RANGE_S)
    return steps


def format_schedule(steps: list[FaultStep], partition_names: list[str] | None = None) -> str:
    """The schedule as printed at the start of a run, one line per step."""
    if not steps:
        return "  (no faults: the duration is too short for any)"
    return "\n".join("  " + step.describe(partition_names) for step in steps)

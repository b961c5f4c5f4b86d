"""Recovery after each fault: how long from heal to a converged cluster, and the longest
window without an acks=all success.

*Converged* means: the cluster is healthy (``VerifyCluster.health_problem``: every
broker up and unfenced, a controller, every partition led with its full replica set in
the ISR and counted in sync by its leader) and every replica's stored batches below the
leader's high watermark are identical (same base offset, last offset, leader epoch and
CRC — the CRC covers the records — compared over the offsets present in the last
segments of every replica, read from the data directories).  ``wait_converged``
polls that every ``POLL_S`` and exits when it holds or after its bound.

The stall of a fault is the longest stretch of its window (from the moment the fault
began to convergence, or heal + the bound) in which no acks=all produce succeeded:
across the whole cluster, and for the worst single partition.  ``longest_gap`` and
``stalls`` are pure; ``RecoveryStats`` aggregates per fault kind for the report.
"""
from __future__ import annotations

import bisect
import time
from collections import defaultdict
from dataclasses import dataclass, field

from protocol.records import valid_prefix

from .cluster import TopicPartition, VerifyCluster

CONVERGENCE_BOUND_S = 60.0
POLL_S = 0.2
TAIL_SEGMENTS = 2


def tail_batches(vc: VerifyCluster, node: int, tp: TopicPartition) -> dict[int, tuple]:
    """{base offset: (last offset, leader epoch, crc)} of the batches in the last
    ``TAIL_SEGMENTS`` segments of ``node``'s replica (a torn end is left out)."""
    segments = sorted(vc.partition_dir(node, tp).glob("*.log"))[-TAIL_SEGMENTS:]
    batches = {}
    for segment in segments:
        try:
            data = segment.read_bytes()
        except OSError:  # deleted by retention or a truncation meanwhile
            continue
        for h in valid_prefix(data, check_crc=False)[0]:
            batches[h.base_offset] = (h.last_offset, h.partition_leader_epoch, h.crc)
    return batches


def replica_mismatch(vc: VerifyCluster, tp: TopicPartition, replicas: list[int],
                     high_watermark: int) -> str | None:
    """Where the replicas' stored tails below ``high_watermark`` differ; None if not."""
    tails = {n: tail_batches(vc, n, tp) for n in replicas}
    common = set.intersection(*(set(b) for b in tails.values())) if tails else set()
    for base in sorted(common):
        seen = {n: tails[n][base] for n in replicas}
        if next(iter(seen.values()))[0] >= high_watermark:
            continue
        if len(set(seen.values())) > 1:
            return (f"{tp[0]}-{tp[1]}: replicas differ at batch {base} below HW "
                    f"{high_watermark}: " + ", ".join(f"{n}={v}" for n, v in seen.items()))
    return None


def converged_problem(vc: VerifyCluster, statuses: dict[int, dict]) -> str | None:
    """None when converged (see the module docstring), else what is missing."""
    problem = vc.health_problem(statuses)
    if problem is not None:
        return problem
    cluster = vc.cluster
    image = cluster.freshest(statuses)
    for tp in vc.partitions:
        state = cluster.find_partition(image, *tp)
        hosted = cluster.find_hosted(statuses[state["leader"]], *tp)
        mismatch = replica_mismatch(vc, tp, list(state["replicas"]),
                                    hosted["high_watermark"])
        if mismatch:
            return mismatch
    return None


def wait_converged(vc: VerifyCluster, bound_s: float = CONVERGENCE_BOUND_S
                   ) -> tuple[float | None, str | None]:
    """(seconds until converged, None) — or (None, the last problem) after ``bound_s``.
    Loop: reacts to its poll timer; exits on convergence or at the bound."""
    started = time.monotonic()
    problem = "not polled"
    while True:
        try:
            problem = converged_problem(vc, vc.cluster.statuses())
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            problem = f"status incomplete ({exc!r})"
        elapsed = time.monotonic() - started
        if problem is None:
            return elapsed, None
        if elapsed >= bound_s:
            return None, problem
        time.sleep(POLL_S)


def longest_gap(times: list[float], start: float, end: float) -> float:
    """The longest stretch of [start, end] holding none of ``times`` (sorted)."""
    if end <= start:
        return 0.0
    inside = times[bisect.bisect_right(times, start):bisect.bisect_left(times, end)]
    points = [start, *inside, end]
    return max(b - a for a, b in zip(points, points[1:]))


def stalls(ack_times: dict[TopicPartition, list[float]], start: float, end: float
           ) -> tuple[float, float, TopicPartition | None]:
    """(longest gap across the cluster, longest gap of one partition, that partition)
    within [start, end]; ``ack_times`` per partition, each sorted."""
    merged = sorted(t for times in ack_times.values()
                    for t in times[bisect.bisect_right(times, start):
                                   bisect.bisect_left(times, end)])
    overall = longest_gap(merged, start, end)
    worst, worst_tp = 0.0, None
    for tp, times in sorted(ack_times.items()):
        gap = longest_gap(times, start, end)
        if gap > worst:
            worst, worst_tp = gap, tp
    return overall, worst, worst_tp


@dataclass
class KindRecovery:
    faults: int = 0
    converged_max_s: float = 0.0
    unconverged: int = 0
    stall_max_s: float = 0.0
    partition_stall_max_s: float = 0.0
    stalls_s: list[float] = field(default_factory=list)

    def to_dict(self) -> dict:
        ordered = sorted(self.stalls_s)
        median = ordered[len(ordered) // 2] if ordered else 0.0
        return {"faults": self.faults, "converged_max_s": round(self.converged_max_s, 1),
                "unconverged": self.unconverged, "stall_max_s": round(self.stall_max_s, 1),
                "stall_median_s": round(median, 1),
                "partition_stall_max_s": round(self.partition_stall_max_s, 1)}


class RecoveryStats:
    """Per fault kind: the slowest convergence and the longest stalls.  Pure."""

    def __init__(self, bound_s: float = CONVERGENCE_BOUND_S):
        self.bound_s = bound_s
        self.kinds: dict[str, KindRecovery] = defaultdict(KindRecovery)

    def add(self, kind: str, converged_s: float | None, stall_s: float,
            partition_stall_s: float) -> None:
        entry = self.kinds[kind]
        entry.faults += 1
        if converged_s is None:
            entry.unconverged += 1
        else:
            entry.converged_max_s = max(entry.converged_max_s, converged_s)
        entry.stall_max_s = max(entry.stall_max_s, stall_s)
        entry.partition_stall_max_s = max(entry.partition_stall_max_s, partition_stall_s)
        entry.stalls_s.append(stall_s)

    def converged_max_s(self) -> float:
        return max((k.converged_max_s for k in self.kinds.values()), default=0.0)

    def to_dict(self) -> dict:
        return {"bound_s": self.bound_s, "converged_max_s": round(self.converged_max_s(), 1),
                "kinds": {kind: entry.to_dict() for kind, entry in sorted(self.kinds.items())}}

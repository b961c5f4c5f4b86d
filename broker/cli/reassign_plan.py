"""A balanced reassignment plan: which brokers each partition should live on (pure).

``plan(current, brokers, racks)`` gives every partition the same replica count on the
``brokers`` allowed, moving as few replicas as it can while evening out the load:

1. every allowed broker gets a share of the replicas: ``total // brokers``, plus one for
   the ``total % brokers`` brokers holding the most now (so the fewest must move);
2. each partition keeps its current replicas that are allowed; a broker above its share
   gives up replicas, first where a partition already lost one (spreading the holes, so
   a newcomer can fill each), never its partitions' first replica (the preferred leader)
   while it has others;
3. the holes go first to a rack the partition does not use yet (rack-aware when racks
   are known), then to a broker below its share, then to the least loaded, ties by
   broker id.

Partitions are planned in (topic, partition) order, so the plan is deterministic.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

Key = tuple[str, int]


class PlanError(ValueError):
    """The plan cannot be made (fewer allowed brokers than a partition's replicas)."""


def plan(current: Mapping[Key, list[int]], brokers: list[int],
         racks: Mapping[int, str | None] | None = None) -> dict[Key, list[int]]:
    allowed = sorted(set(brokers))
    racks = racks or {}
    if not allowed:
        raise PlanError("no broker to place replicas on")
    widest = max((len(r) for r in current.values()), default=0)
    if widest > len(allowed):
        raise PlanError(f"a partition has {widest} replicas but only {len(allowed)} brokers "
                        f"are allowed")
    kept = {key: [b for b in current[key] if b in allowed] for key in sorted(current)}
    load = Counter(dict.fromkeys(allowed, 0))
    load.update(b for replicas in kept.values() for b in replicas)
    share = _shares(sum(len(r) for r in current.values()), allowed, load)
    for broker in allowed:
        while load[broker] > share[broker]:
            key = min((k for k, replicas in kept.items() if broker in replicas),
                      key=lambda k: (kept[k][0] == broker and len(kept[k]) > 1,
                                     len(current[k]) - len(kept[k]), k))
            kept[key].remove(broker)
            load[broker] -= 1
    for key, replicas in kept.items():
        while len(replicas) < len(current[key]):
            used = {racks.get(b) for b in replicas if racks.get(b)}
            choice = min((b for b in allowed if b not in replicas),
                         key=lambda b: (bool(racks.get(b)) and racks.get(b) in used,
                                        load[b] >= share[b], load[b], b))
            replicas.append(choice)
            load[choice] += 1
    return kept


def _shares(total: int, allowed: list[int], load: Counter) -> dict[int, int]:
    base, extra = divmod(total, len(allowed))
    fullest = sorted(allowed, key=lambda b: (-load[b], b))[:extra]
    return {b: base + (b in fullest) for b in allowed}


def replace_broker(current: Mapping[Key, list[int]], broker: int, remaining: list[int],
                   racks: Mapping[int, str | None] | None = None) -> dict[Key, list[int]]:
    """Decommissioning: each partition on ``broker`` gets, in its place (same position, so
    a preferred leader's successor leads), the remaining broker holding the fewest
    replicas of the whole cluster that the partition does not use, preferring an unused
    rack.  Only those partitions change."""
    racks = racks or {}
    allowed = sorted(set(remaining) - {broker})
    load = Counter(dict.fromkeys(allowed, 0))
    load.update(b for replicas in current.values() for b in replicas if b in load)
    targets = {}
    for key in sorted(k for k, replicas in current.items() if broker in replicas):
        replicas = list(current[key])
        others = [b for b in replicas if b != broker]
        used = {racks.get(b) for b in others if racks.get(b)}
        candidates = [b for b in allowed if b not in replicas]
        if not candidates:
            raise PlanError(f"{key[0]}-{key[1]} has {len(replicas)} replicas: no broker "
                            f"left to take broker {broker}'s")
        choice = min(candidates, key=lambda b: (bool(racks.get(b)) and racks.get(b) in used,
                                                load[b], b))
        replicas[replicas.index(broker)] = choice
        load[choice] += 1
        targets[key] = replicas
    return targets


def moves(current: Mapping[Key, list[int]],
          proposed: Mapping[Key, list[int]]) -> dict[Key, list[int]]:
    """The partitions whose replica set or order changes."""
    return {key: replicas for key, replicas in proposed.items() if replicas != current[key]}

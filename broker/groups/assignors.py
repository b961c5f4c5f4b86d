"""Server-side assignors of KIP-848 consumer groups: ``uniform`` and ``range`` (pure).

The coordinator computes a group's target assignment with one of these whenever the
group epoch moves (members, subscriptions or the subscribed topics' partition counts
changed).  Input: each member's subscribed topic names, the subscribed topics that
exist (name → (topic id, partition count)) and the previous target assignment; output:
member id → topic id → partitions.  Every partition of a subscribed topic goes to
exactly one member subscribed to that topic, or to nobody when none is; members with
nothing get an empty assignment.  Deterministic: the same input gives the same output
on every coordinator, so a reload after a failover computes what the old one would.

``uniform`` (Kafka's default) is sticky and balanced: a partition stays with its
previous owner while that owner is still subscribed to the topic, then partitions go
to the least loaded eligible member, and finally partitions move from the most to the
least loaded eligible member until no move can narrow the difference below two — with
identical subscriptions every member ends with ⌊P/N⌋ or ⌈P/N⌉ partitions, and only
the partitions that must move do.  ``range`` splits each topic into contiguous ranges
over its subscribers in member id order (the first P mod N get one more); it does not
look at the previous assignment.
"""
from __future__ import annotations

Assignment = dict[str, dict[str, set[int]]]  # member id -> topic id -> partitions
Topics = dict[str, tuple[str, int]]          # topic name -> (topic id, partitions)


class UnknownAssignor(ValueError):
    """An assignor name that is not served."""


def _partitions(subscriptions: dict[str, set[str]], topics: Topics):
    """((topic id, partition), members subscribed to its topic) in topic-name order."""
    for name in sorted(topics):
        topic_id, count = topics[name]
        eligible = sorted(m for m, subscribed in subscriptions.items() if name in subscribed)
        for partition in range(count):
            yield (topic_id, partition), eligible


def uniform(subscriptions: dict[str, set[str]], topics: Topics,
            previous: Assignment) -> Assignment:
    owner_before = {(topic_id, p): member for member, assigned in previous.items()
                    for topic_id, parts in assigned.items() for p in parts}
    owned: dict[str, list[tuple[str, int]]] = {m: [] for m in subscriptions}
    eligible_of: dict[tuple[str, int], list[str]] = {}
    unassigned = []
    for tp, eligible in _partitions(subscriptions, topics):
        if not eligible:
            continue
        eligible_of[tp] = eligible
        owner = owner_before.get(tp)
        if owner in eligible:
            owned[owner].append(tp)
        else:
            unassigned.append(tp)
    for tp in unassigned:
        least = min(eligible_of[tp], key=lambda m: (len(owned[m]), m))
        owned[least].append(tp)
    moved = True
    while moved:  # each move narrows a gap of two or more: this ends
        moved = False
        for donor in sorted(owned, key=lambda m: (-len(owned[m]), m)):
            for tp in sorted(owned[donor], reverse=True):
                target = min(eligible_of[tp], key=lambda m: (len(owned[m]), m))
                if len(owned[donor]) - len(owned[target]) > 1:
                    owned[donor].remove(tp)
                    owned[target].append(tp)
                    moved = True
                    break
            if moved:
                break
    return {m: _by_topic(tps) for m, tps in owned.items()}


def range_(subscriptions: dict[str, set[str]], topics: Topics,
           previous: Assignment) -> Assignment:
    result: Assignment = {m: {} for m in subscriptions}
    for name in sorted(topics):
        topic_id, count = topics[name]
        members = sorted(m for m, subscribed in subscriptions.items() if name in subscribed)
        if not members:
            continue
        share, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            size = share + (1 if i < extra else 0)
            if size:
                result[member][topic_id] = set(range(start, start + size))
            start += size
    return result


def _by_topic(tps: list[tuple[str, int]]) -> dict[str, set[int]]:
    result: dict[str, set[int]] = {}
    for topic_id, partition in tps:
        result.setdefault(topic_id, set()).add(partition)
    return result


ASSIGNORS = {"uniform": uniform, "range": range_}


def assign(name: str, subscriptions: dict[str, set[str]], topics: Topics,
           previous: Assignment) -> Assignment:
    try:
        assignor = ASSIGNORS[name]
    except KeyError:
        raise UnknownAssignor(name) from None
    return assignor(subscriptions, topics, previous)

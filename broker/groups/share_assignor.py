"""Kafka's *simple* share-group assignor (KIP-932), on the principles of Kafka 4.2's
``SimpleAssignor`` (pure).

Share groups may give one partition to several members; the simple assignor decides how
many and whom, putting balance before stickiness:

* *sharing*: with M members subscribed to a topic of P partitions, every partition goes
  to ``ceil(M / P)`` members (one each while M <= P, more once members outnumber
  partitions), so no partition is left unassigned while a member subscribes to it;
* *balance*: members' partition counts differ by at most one (each member of a
  homogeneous group gets ``floor`` or ``ceil`` of the slots over the members);
* *stickiness*: a member keeps the partitions it had, as far as the two rules above allow;
  the rest go, partition by partition, to the subscribed member with fewest partitions
  that does not hold that partition yet (ties: the member id's order).

Raftwood applies these rules per topic to the topic's subscribers, so a group whose
members subscribe to different topics (Kafka's heterogeneous case) is balanced per topic
rather than across topics.  Topic ids are the metadata image's strings; an assignment is
``member id -> topic id -> partitions``.
"""
from __future__ import annotations

ShareAssignment = dict[str, dict[str, set[int]]]  # member id -> topic id -> partitions

SIMPLE = "simple"


def assign_simple(subscriptions: dict[str, set[str]], topics: dict[str, tuple[str, int]],
                  current: ShareAssignment) -> ShareAssignment:
    """The target assignment: ``subscriptions`` member id -> topic names, ``topics`` topic
    name -> (topic id, partition count) for the subscribed topics that exist,
    ``current`` the previous target.  Every member gets an entry, maybe empty."""
    target: ShareAssignment = {member_id: {} for member_id in subscriptions}
    for name, (topic_id, count) in sorted(topics.items()):
        members = sorted(m for m, names in subscriptions.items() if name in names)
        if not members or count <= 0:
            continue
        held = {m: {p for p in current.get(m, {}).get(topic_id, set()) if p < count}
                for m in members}
        for member_id, partitions in _assign_topic(members, count, held).items():
            if partitions:
                target[member_id][topic_id] = partitions
    return target


def _assign_topic(members: list[str], count: int,
                  held: dict[str, set[int]]) -> dict[str, set[int]]:
    """One topic's partitions ``0 .. count - 1`` over ``members`` (sorted), keeping what
    ``held`` allows."""
    sharing = -(-len(members) // count)                      # ceil(M / P)
    slots = sharing * count
    base, extra = divmod(slots, len(members))
    # Members holding most get the extra slot, so that keeping their partitions fits.
    by_holding = sorted(members, key=lambda m: (-len(held[m]), m))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_holding)}
    result: dict[str, set[int]] = {m: set() for m in members}
    owners: dict[int, int] = dict.fromkeys(range(count), 0)
    for member_id in by_holding:                              # stickiness, within the rules
        for partition in sorted(held[member_id]):
            if len(result[member_id]) < quota[member_id] and owners[partition] < sharing:
                result[member_id].add(partition)
                owners[partition] += 1
    for partition in range(count):                            # the rest, least-loaded first
        while owners[partition] < sharing:
            candidates = [m for m in members
                          if partition not in result[m] and len(result[m]) < quota[m]]
            if not candidates:
                break
            chosen = min(candidates, key=lambda m: (len(result[m]), m))
            result[chosen].add(partition)
            owners[partition] += 1
    return result

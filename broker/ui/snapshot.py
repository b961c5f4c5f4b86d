"""The replication view's data: statuses → snapshot, two snapshots → events (pure).

Inputs are the JSON objects of the private status request (``protocol/status.py``): the
serving broker's own status (its metadata image: brokers, controller, every partition's
leader, epochs, replicas, ISR, adding/removing replicas) and the ``hosted`` lists of the
brokers that answered (each replica's own log end offset and high watermark and, on a
leader, what it knows of each follower's LEO).

A snapshot (what ``/replication/events`` sends, JSON)::

    {"ts": ms, "source": broker id, "cluster_id", "metadata_version", "controller": id,
     "brokers": [{"id", "host", "port", "epoch", "fenced", "controller", "reachable",
                  "error"}],
     "partitions": [{"topic", "partition", "internal", "leader", "leader_epoch",
                     "partition_epoch", "replicas", "isr", "adding", "removing",
                     "hw", "leader_leo",
                     "replica_view": [{"id", "leo", "leo_from", "hw", "role", "state",
                                       "in_isr", "lag"}]}]}

A replica's ``leo`` is its own (``leo_from`` "self") when its broker answered, else what
the leader last saw of it in the follower's fetches (``"leader"``), else None; ``hw`` is
known only from the replica's own broker.  The partition's ``hw`` is the leader's.

Events are derived by diffing consecutive snapshots, so they are what a watcher at
``INTERVAL_S`` granularity can see: a shrink and re-expansion between two polls shows as
nothing.  Each event: ``{"ts", "kind", "topic", "partition", "text"}`` (``topic`` and
``partition`` None for broker events).  Nothing here trusts the JSON to be complete: a
missing key is an unknown value, never an error.
"""
from __future__ import annotations

# Event kinds (the page colours them; tests match on them).
BROKER_REGISTERED = "broker_registered"
BROKER_REMOVED = "broker_removed"
BROKER_FENCED = "broker_fenced"
BROKER_UNFENCED = "broker_unfenced"
BROKER_UNREACHABLE = "broker_unreachable"
BROKER_REACHABLE = "broker_reachable"
CONTROLLER_CHANGE = "controller_change"
PARTITION_CREATED = "partition_created"
PARTITION_DELETED = "partition_deleted"
LEADER_CHANGE = "leader_change"
ISR_SHRINK = "isr_shrink"
ISR_EXPAND = "isr_expand"
ISR_CHANGE = "isr_change"
REASSIGNMENT = "reassignment"
TRUNCATION = "truncation"


def short_state(state) -> str | None:
    """``OnlineReplica`` → ``Online``: the replica state machine's names as ``raftwood
    topics describe`` shortens them (not imported from ``broker.cli``, whose package
    pulls in the whole command line)."""
    if not isinstance(state, str) or not state:
        return None
    return state[:-len("Replica")] if state.endswith("Replica") and state != "Replica" else state


def _int(value, default=None):
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _ints(values) -> list[int]:
    return [v for v in values or [] if _int(v) is not None]


def _hosted_index(hosted: dict[int, list[dict]]) -> dict[tuple[int, str, int], dict]:
    return {(broker, entry.get("topic"), entry.get("partition")): entry
            for broker, entries in hosted.items() for entry in entries or []}


def build_snapshot(source: dict, hosted: dict[int, list[dict]],
                   unreachable: dict[int, str], now_ms: int) -> dict:
    """One snapshot from the serving broker's status (``source``), the hosted lists of
    the brokers that answered (``hosted``: broker id → list; the source's own included)
    and why the others did not (``unreachable``: broker id → reason)."""
    controller = _int(source.get("controller_id"), -1)
    index = _hosted_index(hosted)
    brokers = [{
        "id": b.get("id"), "host": b.get("host"), "port": b.get("port"),
        "epoch": b.get("epoch"), "fenced": bool(b.get("fenced")),
        "controller": b.get("id") == controller,
        "reachable": b.get("id") in hosted, "error": unreachable.get(b.get("id")),
    } for b in sorted(source.get("brokers") or [], key=lambda b: _int(b.get("id"), 0))]
    partitions = []
    for topic in sorted(source.get("topics") or [], key=lambda t: str(t.get("name"))):
        name = topic.get("name")
        for p in sorted(topic.get("partitions") or [],
                        key=lambda p: _int(p.get("partition"), 0)):
            number = _int(p.get("partition"), -1)
            leader = _int(p.get("leader"), -1)
            isr = _ints(p.get("isr"))
            leader_entry = index.get((leader, name, number)) if leader >= 0 else None
            seen_by_leader = {f.get("replica_id"): f
                              for f in (leader_entry or {}).get("followers") or []}
            leader_leo = _int((leader_entry or {}).get("log_end_offset"))
            states = p.get("replica_states") or {}
            view = []
            for replica in _ints(p.get("replicas")):
                own = index.get((replica, name, number))
                seen = seen_by_leader.get(replica) or {}
                if own is not None and _int(own.get("log_end_offset")) is not None:
                    leo, leo_from = own["log_end_offset"], "self"
                elif _int(seen.get("log_end_offset"), -1) >= 0:
                    leo, leo_from = seen["log_end_offset"], "leader"
                else:
                    leo, leo_from = None, None
                lag = (max(0, leader_leo - leo)
                       if leader_leo is not None and leo is not None else None)
                view.append({
                    "id": replica, "leo": leo, "leo_from": leo_from,
                    "hw": _int((own or {}).get("high_watermark")),
                    "role": (own or {}).get("role"),
                    "state": short_state(states.get(str(replica))),
                    "in_isr": replica in isr, "lag": lag})
            partitions.append({
                "topic": name, "partition": number, "internal": str(name).startswith("__"),
                "leader": leader, "leader_epoch": _int(p.get("leader_epoch")),
                "partition_epoch": _int(p.get("partition_epoch")),
                "replicas": _ints(p.get("replicas")), "isr": isr,
                "adding": _ints(p.get("adding_replicas")),
                "removing": _ints(p.get("removing_replicas")),
                "hw": _int((leader_entry or {}).get("high_watermark")),
                "leader_leo": leader_leo, "replica_view": view})
    return {"ts": now_ms, "source": source.get("broker_id"),
            "cluster_id": source.get("cluster_id"),
            "metadata_version": source.get("metadata_version"), "controller": controller,
            "brokers": brokers, "partitions": partitions}


def _fmt(values: list[int]) -> str:
    return "[" + ",".join(str(v) for v in values) + "]"


def _leader(value) -> str:
    return str(value) if _int(value, -1) >= 0 else "none"


def diff(previous: dict | None, current: dict) -> list[dict]:
    """The events between two snapshots, broker events first, then partitions in
    (topic, partition) order.  No previous snapshot: no events (the first picture is
    the starting point, not news)."""
    if previous is None:
        return []
    now = current.get("ts")
    events: list[dict] = []

    def add(kind: str, text: str, topic=None, partition=None) -> None:
        events.append({"ts": now, "kind": kind, "topic": topic, "partition": partition,
                       "text": text})

    before = {b.get("id"): b for b in previous.get("brokers") or []}
    after = {b.get("id"): b for b in current.get("brokers") or []}
    old_controller = _int(previous.get("controller"), -1)
    new_controller = _int(current.get("controller"), -1)
    if old_controller != new_controller:
        add(CONTROLLER_CHANGE, f"controller {_leader(old_controller)} → {_leader(new_controller)}")
    for broker_id in sorted(set(before) | set(after), key=lambda i: _int(i, 0)):
        old, new = before.get(broker_id), after.get(broker_id)
        if old is None:
            add(BROKER_REGISTERED, f"broker {broker_id} registered")
            continue
        if new is None:
            add(BROKER_REMOVED, f"broker {broker_id} left the cluster metadata")
            continue
        if not old.get("fenced") and new.get("fenced"):
            add(BROKER_FENCED, f"broker {broker_id} fenced")
        elif old.get("fenced") and not new.get("fenced"):
            add(BROKER_UNFENCED, f"broker {broker_id} unfenced")
        if old.get("reachable") and not new.get("reachable"):
            reason = f": {new['error']}" if new.get("error") else ""
            add(BROKER_UNREACHABLE, f"broker {broker_id} not answering{reason}")
        elif not old.get("reachable") and new.get("reachable"):
            add(BROKER_REACHABLE, f"broker {broker_id} answering again")

    def key(p):
        return (p.get("topic"), p.get("partition"))

    old_parts = {key(p): p for p in previous.get("partitions") or []}
    new_parts = {key(p): p for p in current.get("partitions") or []}
    for topic, number in sorted(set(old_parts) | set(new_parts),
                                key=lambda k: (str(k[0]), _int(k[1], 0))):
        old, new = old_parts.get((topic, number)), new_parts.get((topic, number))
        if old is None:
            add(PARTITION_CREATED, f"created: replicas {_fmt(new.get('replicas'))}, "
                                   f"leader {_leader(new.get('leader'))}", topic, number)
            continue
        if new is None:
            add(PARTITION_DELETED, "deleted", topic, number)
            continue
        events.extend(dict(e, ts=now, topic=topic, partition=number)
                      for e in partition_events(old, new))
    return events


def partition_events(old: dict, new: dict) -> list[dict]:
    """``{"kind", "text"}`` for what changed in one partition between two snapshots."""
    events = []
    old_epoch, new_epoch = old.get("leader_epoch"), new.get("leader_epoch")
    if old_epoch != new_epoch or old.get("leader") != new.get("leader"):
        events.append({"kind": LEADER_CHANGE,
                       "text": f"leader epoch {old_epoch} → {new_epoch}: leader "
                               f"{_leader(old.get('leader'))} → {_leader(new.get('leader'))}"})
    old_isr, new_isr = _ints(old.get("isr")), _ints(new.get("isr"))
    if set(old_isr) != set(new_isr):
        gone, came = set(old_isr) - set(new_isr), set(new_isr) - set(old_isr)
        kind, word = ((ISR_SHRINK, "shrink") if gone and not came else
                      (ISR_EXPAND, "expand") if came and not gone else (ISR_CHANGE, "change"))
        events.append({"kind": kind, "text": f"ISR {word} {_fmt(old_isr)} → {_fmt(new_isr)}"})
    moving_before = (old.get("adding") or [], old.get("removing") or [])
    moving_after = (new.get("adding") or [], new.get("removing") or [])
    if moving_before != moving_after or old.get("replicas") != new.get("replicas"):
        if moving_after[0] or moving_after[1]:
            text = (f"reassigning: replicas {_fmt(new.get('replicas'))}, adding "
                    f"{_fmt(moving_after[0])}, removing {_fmt(moving_after[1])}")
        else:
            text = f"replicas {_fmt(old.get('replicas'))} → {_fmt(new.get('replicas'))}"
        events.append({"kind": REASSIGNMENT, "text": text})
    # A LEO that goes back is a truncation (a follower cutting its log to the new leader's
    # at a divergence point, KIP-101/279), but only when both values are the replica's own:
    # the leader's view of a follower trails the follower's own LEO, so switching between
    # the two sources would look like a truncation that never happened.
    old_view = {r.get("id"): r for r in old.get("replica_view") or []}
    for replica in new.get("replica_view") or []:
        was = old_view.get(replica.get("id"))
        if (was is not None and was.get("leo_from") == "self" == replica.get("leo_from")
                and _int(replica.get("leo")) is not None and _int(was.get("leo")) is not None
                and replica["leo"] < was["leo"]):
            events.append({"kind": TRUNCATION,
                           "text": f"replica {replica['id']} truncated its log "
                                   f"{was['leo']} → {replica['leo']}"})
    return events

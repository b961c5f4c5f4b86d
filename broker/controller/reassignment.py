"""Partition reassignment (KIP-455), the controller's rules, as Kafka's KRaft controller
applies them (ReplicationControlManager with PartitionReassignmentReplicas).

A reassignment moves a partition from its replicas R to a target T in three steps, each
a change of the partition's record (epochs bumped, so every broker sees it):

1. **Start** (``alter_reassignments``): replicas := T + (R - T), ``adding`` := T - R,
   ``removing`` := R - T.  Each adding replica goes NewReplica → OnlineReplica; its broker
   opens the log and follows the leader like any follower (throttled by
   ``leader.replication.throttled.rate`` while it is adding).
2. **Catch up**: the leader adds a follower to the ISR when it has caught up (the usual
   AlterPartition).  The leader stays where it is.
3. **Complete** (``maybe_complete``, run on every ISR change and at the start): once
   every replica of T is in the ISR — the adding ones and the kept ones alike, as
   Kafka's ``PartitionReassignmentReplicas.maybeCompleteReassignment`` asks; a kept
   replica whose broker is down holds the move until it is back in sync —
   replicas := T, ISR := ISR ∩ T, and the removed replicas go OfflineReplica →
   ReplicaDeletionStarted → ReplicaDeletionSuccessful → NonExistentReplica (their
   brokers drop the logs when they leave the replica list).  When the leader itself was
   removed, the first in-sync replica of T leads in a new epoch.  No committed record can be lost:
   every replica of T is in the ISR then.

**Cancel** (target None): back to R (replicas := R, ISR := ISR ∩ R); the adding replicas are
removed the same way.  Refused with INVALID_REPLICA_ASSIGNMENT when no replica of R is in
sync (the adding ones hold the only current copies); NO_REASSIGNMENT_IN_PROGRESS when
there is nothing to cancel.  A new target for a partition already moving starts from R.

Pure and replay-safe like every apply: it reads only the state and its arguments.
Results are plain values: ``[topic, partition, error code name, message or None]``.
"""
from __future__ import annotations

import logging

from .replica_state import ReplicaState

NO_LEADER = -1

log = logging.getLogger(__name__)

REMOVAL = (ReplicaState.OFFLINE, ReplicaState.DELETION_STARTED,
           ReplicaState.DELETION_SUCCESSFUL, ReplicaState.NON_EXISTENT)


def original_replicas(partition) -> list[int]:
    """R: the replicas before the reassignment in progress (all of them when none is)."""
    return [r for r in partition.replicas if r not in partition.adding_replicas]


def is_reassigning(partition) -> bool:
    return bool(partition.adding_replicas or partition.removing_replicas)


def alter_reassignments(state, requests: list) -> list:
    """``requests``: [topic, partition, target replica list or None (cancel)]; see the
    module doc.  Returns one result per request, in order."""
    results = []
    for name, index, target in requests:
        topic = state.topics.get(name)
        partition = topic.partitions.get(index) if topic is not None else None
        if partition is None:
            results.append([name, index, "UNKNOWN_TOPIC_OR_PARTITION",
                            f"no partition {name}-{index}"])
            continue
        if target is None:
            results.append([name, index, *_cancel(state, name, index, partition)])
            continue
        problem = _invalid_target(state, target)
        if problem is not None:
            results.append([name, index, "INVALID_REPLICA_ASSIGNMENT", problem])
            continue
        results.append([name, index, *_start(state, name, index, partition,
                                                  [int(r) for r in target])])
    return results


def _invalid_target(state, target) -> str | None:
    if not target:
        return "the target replica list is empty"
    if len(set(target)) != len(target):
        return f"the target {list(target)} repeats a broker"
    unknown = [r for r in target if r not in state.brokers]
    if unknown:
        return f"brokers {unknown} are not registered"
    return None


def _start(state, name: str, index: int, partition, target: list[int]) -> list:
    original = original_replicas(partition)
    # A new target replaces one in progress: the adding replicas it no longer names go.
    dropped = [r for r in partition.adding_replicas if r not in target]
    isr = [r for r in partition.isr if r not in dropped]
    if not isr:
        return ["INVALID_REPLICA_ASSIGNMENT",
                f"{name}-{index}: only {dropped}, which the new target drops, are in sync"]
    before = set(partition.replicas)
    partition.replicas = target + [r for r in original if r not in target]
    partition.isr = isr
    partition.adding_replicas = tuple(r for r in target if r not in original)
    partition.removing_replicas = tuple(r for r in original if r not in target)
    _remove_replicas(state, partition, dropped)
    for replica in partition.adding_replicas:
        if replica not in before:
            state._move_replica(partition, replica, ReplicaState.NEW)
            state._move_replica(partition, replica, ReplicaState.ONLINE
                                if state.is_live(replica) else ReplicaState.OFFLINE)
    _lead_from(state, partition, partition.replicas)
    partition.partition_epoch += 1
    log.info("reassigning %s-%d: %s -> %s (adding %s, removing %s)", name, index, original,
             target, list(partition.adding_replicas), list(partition.removing_replicas))
    maybe_complete(state, name, index, partition)
    return ["NONE", None]


def _cancel(state, name: str, index: int, partition) -> list:
    if not is_reassigning(partition):
        return ["NO_REASSIGNMENT_IN_PROGRESS", f"{name}-{index} is not being reassigned"]
    original = original_replicas(partition)
    isr = [r for r in partition.isr if r in original]
    if not isr:
        return ["INVALID_REPLICA_ASSIGNMENT",
                f"{name}-{index}: none of {original} is in sync; cancelling would lose the "
                f"only current copies"]
    adding = list(partition.adding_replicas)
    partition.replicas, partition.isr = original, isr
    partition.adding_replicas = partition.removing_replicas = ()
    _remove_replicas(state, partition, adding)
    _lead_from(state, partition, original)
    partition.partition_epoch += 1
    log.info("reassignment of %s-%d cancelled: back to %s", name, index, original)
    return ["NONE", None]


def maybe_complete(state, name: str, index: int, partition) -> bool:
    """Finish the reassignment of this partition if every replica of the target is in
    sync (not only the adding ones: completing while a kept replica is out of the ISR
    would drop the removed replicas, perhaps in-sync copies, and leave fewer in-sync
    copies than the target names); True when it did (the caller's change already
    counts as a new partition epoch)."""
    removed = list(partition.removing_replicas)
    target = [r for r in partition.replicas if r not in removed]
    if not is_reassigning(partition) or not target \
            or any(r not in partition.isr for r in target):
        return False
    partition.replicas = target
    partition.isr = [r for r in target if r in partition.isr]
    partition.adding_replicas = partition.removing_replicas = ()
    _remove_replicas(state, partition, removed)
    _lead_from(state, partition, target)
    partition.partition_epoch += 1
    log.info("reassignment of %s-%d complete: replicas %s, isr %s, leader %d", name, index,
             target, partition.isr, partition.leader)
    return True


def _lead_from(state, partition, replicas: list[int]) -> None:
    """Keep the leader if it is still a replica (or there is none: the usual elections
    handle that); else the first live in-sync one of ``replicas`` leads in a new epoch."""
    if partition.leader in replicas or partition.leader == NO_LEADER:
        return
    partition.leader = next((r for r in replicas if r in partition.isr and state.is_live(r)),
                            NO_LEADER)
    partition.leader_epoch += 1


def _remove_replicas(state, partition, replicas: list[int]) -> None:
    for replica in replicas:
        for target in REMOVAL:
            state._move_replica(partition, replica, target)
        partition.replica_states.pop(replica, None)  # NonExistent: no longer listed


def ongoing(state, wanted: list | None) -> list:
    """ListPartitionReassignments: [topic, partition, replicas, adding, removing] of the
    partitions being reassigned, among ``wanted`` ([topic, [partitions]]; None: all)."""
    found = []
    names = sorted(state.topics) if wanted is None else [t for t, _ in wanted]
    chosen = None if wanted is None else {t: set(ps) for t, ps in wanted}
    for name in names:
        topic = state.topics.get(name)
        if topic is None:
            continue
        for index, partition in sorted(topic.partitions.items()):
            if (chosen is None or index in chosen[name]) and is_reassigning(partition):
                found.append([name, index, list(partition.replicas),
                              list(partition.adding_replicas),
                              list(partition.removing_replicas)])
    return found

"""Leader elections asked for by a client: ElectLeaders (KIP-460), PREFERRED or UNCLEAN.

``elect_leaders(state, election_type, targets)`` is the body of
``ClusterState.apply_elect_leaders``: pure and replay-safe like every apply (it reads
only the state and its arguments; "alive" is the state's fencing), so every node
decides each partition the same way.  Per partition, Kafka's outcome
(ReplicationControlManager.electLeader), first match wins:

* the topic or partition does not exist: UNKNOWN_TOPIC_OR_PARTITION;
* PREFERRED and the first assigned replica already leads, or UNCLEAN and the
  partition has a leader: ELECTION_NOT_NEEDED;
* PREFERRED: the first assigned replica leads when it is alive and in the ISR,
  else PREFERRED_LEADER_NOT_AVAILABLE;
* UNCLEAN (the partition has no leader): the first alive ISR member in assignment
  order leads (a clean election: the request never makes an unclean election when a
  clean one is possible), else the first alive replica, whose log becomes the ISR
  (records committed before may be lost), whatever ``unclean.leader.election.enable``
  says: the request is the operator's explicit consent.  No alive replica at all:
  ELIGIBLE_LEADERS_NOT_AVAILABLE.

An election bumps the leader epoch and the partition epoch, as every election does.
``targets`` None means every partition of every topic.  Results are plain values
(journal-safe): ``[topic, partition, error code name, message or None]``, in the
order of ``targets``.
"""
from __future__ import annotations

import logging

from .leaders import NO_LEADER, Election

log = logging.getLogger(__name__)

PREFERRED = 0
UNCLEAN = 1
ELECTION_TYPES = (PREFERRED, UNCLEAN)


def elect_leaders(state, election_type: int, targets: list | None) -> tuple[list, list]:
    """(results, elections) of one ElectLeaders request; see the module doc.  Changes
    ``state`` (but not its version: the caller bumps it once if anything changed)."""
    if targets is None:
        targets = [[topic.name, index] for topic, index, _ in state.partitions()]
    results, elections = [], []
    for name, index in targets:
        code, message, election = _elect_one(state, election_type, name, index)
        results.append([name, index, code, message])
        if election is not None:
            elections.append(election)
    return results, elections


def _elect_one(state, election_type: int, name: str, index: int):
    topic = state.topics.get(name)
    partition = topic.partitions.get(index) if topic is not None else None
    if partition is None:
        return "UNKNOWN_TOPIC_OR_PARTITION", f"no partition {name}-{index}", None
    preferred = partition.replicas[0]
    if election_type == PREFERRED:
        if partition.leader == preferred:
            return "ELECTION_NOT_NEEDED", None, None
        if preferred not in partition.isr or not state.is_live(preferred):
            return ("PREFERRED_LEADER_NOT_AVAILABLE",
                    f"preferred replica {preferred} of {name}-{index} is not alive and in "
                    f"the ISR {partition.isr}", None)
        leader, unclean = preferred, False
    else:
        if partition.leader != NO_LEADER:
            return "ELECTION_NOT_NEEDED", None, None
        in_sync = [r for r in partition.replicas if r in partition.isr and state.is_live(r)]
        alive = [r for r in partition.replicas if state.is_live(r)]
        if not alive:
            return ("ELIGIBLE_LEADERS_NOT_AVAILABLE",
                    f"no replica of {name}-{index} is alive", None)
        leader, unclean = (in_sync[0], False) if in_sync else (alive[0], True)
    partition.leader = leader
    partition.leader_epoch += 1
    partition.partition_epoch += 1
    if unclean:
        partition.isr = [leader]
        log.warning("UNCLEAN leader election for %s-%d asked by a client: broker %d was "
                    "not in sync; records committed before may be lost", name, index, leader)
    else:
        log.info("%s election for %s-%d asked by a client: broker %d leads in epoch %d",
                 "preferred" if election_type == PREFERRED else "clean", name, index, leader,
                 partition.leader_epoch)
    return "NONE", None, Election(name, index, leader, partition.leader_epoch, unclean)

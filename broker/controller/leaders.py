"""Partition leadership words shared by the state machine and the election rules.

``NO_LEADER`` (Kafka's LeaderConstants.NO_LEADER) is the leader of a partition none of
whose replicas may lead.  ``Election`` records what one apply did to one partition's
leadership.  A leaf: it imports nothing of the controller, so ``state.py`` and
``elections.py`` (which decides elections on a state) both build on it.
"""
from __future__ import annotations

from dataclasses import dataclass

NO_LEADER = -1


@dataclass
class Election:
    """What one apply did to one partition (for logs and tests)."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    unclean: bool = False

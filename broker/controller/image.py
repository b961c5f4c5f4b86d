"""Publishing the metadata state: an image plus a delta (Kafka's MetadataImage and
MetadataDelta).

The Raft consumer applies commands to one live ``ClusterState`` on its thread and
hands the event loop a copy after each change.  ``publish`` makes that copy cheap and
says what changed: every topic and partition equal to the previous image's *is* the
previous image's object, only the changed ones are copied, and the image's ``delta``
names them.  A broker that acted on the previous image acts on the delta alone
(``replication/image_applier.py``).

Invariant: a published image is never mutated (by anyone: the loop reads it, the next
``publish`` shares parts of it), and never shares an object with the live state.
Pure: runs on the Raft thread, reads only its arguments.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

from .state import ClusterState, TopicInfo


@dataclass(frozen=True)
class MetadataDelta:
    """What an image changed since the image at position ``base``.

    ``partitions``: (topic, index) of every partition added or changed in any field
    (assignment, leader, epochs, ISR, replica states), including every partition of a
    topic created or re-created (a new topic id).  ``topics``: every topic added,
    removed, re-created or whose configs changed.  A partition of a removed topic is
    named by ``topics`` only.  Brokers are not covered (readers look them up)."""

    base: tuple
    partitions: frozenset = frozenset()
    topics: frozenset = frozenset()


def publish(state: ClusterState, previous: ClusterState | None) -> ClusterState:
    """The image of ``state`` to hand the loop after ``previous`` (the image published
    before, never the live state; None: a whole new image, without a delta).  Costs a
    comparison per partition and a copy per changed one."""
    if previous is None:
        return state.snapshot()
    shell = copy.copy(state)
    shell.topics = {}  # built below, sharing what did not change
    image = copy.deepcopy(shell)
    changed_partitions: set = set()
    changed_topics = set(previous.topics) - set(state.topics)
    for name, topic in state.topics.items():
        before = previous.topics.get(name)
        image.topics[name] = _share_topic(topic, before, changed_partitions)
        if before is None or before.topic_id != topic.topic_id \
                or before.configs != topic.configs:
            changed_topics.add(name)
    image.delta = MetadataDelta(previous.position(), frozenset(changed_partitions),
                                frozenset(changed_topics))
    return image


def _share_topic(topic: TopicInfo, before: TopicInfo | None, changed: set) -> TopicInfo:
    """``topic`` as the next image holds it: ``before`` itself when nothing in it
    changed, else a new TopicInfo sharing ``before``'s unchanged partitions.  Adds the
    keys of the partitions copied to ``changed``."""
    same_topic = before is not None and before.topic_id == topic.topic_id
    partitions = {}
    for index, partition in topic.partitions.items():
        old = before.partitions.get(index) if same_topic else None
        if old is not None and old == partition:
            partitions[index] = old
        else:
            partitions[index] = copy.deepcopy(partition)
            changed.add((topic.name, index))
    if same_topic and before.configs == topic.configs \
            and len(before.partitions) == len(partitions) \
            and all(before.partitions.get(i) is p for i, p in partitions.items()):
        return before
    return TopicInfo(topic.name, topic.topic_id, dict(topic.configs), partitions)

"""Publishing the metadata state: an image plus a delta (Kafka's MetadataImage and
MetadataDelta).

The Raft consumer applies commands to one live ``ClusterState`` on its thread and
hands the event loop a copy after each change.  ``publish`` makes that copy cheap and
says what changed: every topic and partition equal to the previous image's *is* the
previous image's object, only the changed ones are copied, and the image's ``delta``
names them.  A broker that acted on the previous image acts on the delta alone
(``replication/image_applier.py``).

What a command can have changed is known for the commands that name one topic (or one
partition: AlterPartition, the ISR changes that come by the thousand): ``touched``
says so, and only those parts are compared; any other command compares everything.

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


# method -> the field naming the one topic its command may change (commands.py)
ONE_TOPIC_COMMANDS = {"create_topic": "name", "create_partitions": "name",
                      "delete_topic": "name", "alter_topic_configs": "name",
                      "alter_partition": "topic"}

Touched = dict  # topic name -> the partition indexes changed, or None: any of them


def touched(command) -> Touched | None:
    """What an applied ``command`` (commands.py) may have changed: {topic: {index}}
    for AlterPartition, {topic: None} for the other one-topic commands, None (all of
    the state) for any other."""
    field = ONE_TOPIC_COMMANDS.get(getattr(command, "method", None))
    if field is None:
        return None
    name = getattr(command, field)
    if command.method == "alter_partition":
        return {name: {command.partition}}
    return {name: None}


def publish(state: ClusterState, previous: ClusterState | None,
            changed: Touched | None = None) -> ClusterState:
    """The image of ``state`` to hand the loop after ``previous`` (the image published
    before, never the live state; None: a whole new image, without a delta).
    ``changed`` (``touched`` of the command applied since ``previous``; None: unknown)
    limits what is compared.  Costs a comparison per partition compared and a copy per
    changed one."""
    if previous is None:
        return state.snapshot()
    shell = copy.copy(state)
    shell.topics = {}  # built below, sharing what did not change
    image = copy.deepcopy(shell)
    changed_partitions: set = set()
    changed_topics = set(previous.topics) - set(state.topics)
    for name, topic in state.topics.items():
        before = previous.topics.get(name)
        if changed is not None and name not in changed and before is not None:
            image.topics[name] = before  # the command named another topic
            continue
        indexes = changed.get(name) if changed is not None else None
        image.topics[name] = _share_topic(topic, before, changed_partitions, indexes)
        if before is None or before.topic_id != topic.topic_id \
                or before.configs != topic.configs:
            changed_topics.add(name)
    image.delta = MetadataDelta(previous.position(), frozenset(changed_partitions),
                                frozenset(changed_topics))
    return image


def _share_topic(topic: TopicInfo, before: TopicInfo | None, changed: set,
                 indexes: set | None = None) -> TopicInfo:
    """``topic`` as the next image holds it: ``before`` itself when nothing in it
    changed, else a new TopicInfo sharing ``before``'s unchanged partitions (only
    ``indexes`` may have changed, when given).  Adds the keys of the partitions copied
    to ``changed``."""
    same_topic = before is not None and before.topic_id == topic.topic_id
    partitions = {}
    for index, partition in topic.partitions.items():
        old = before.partitions.get(index) if same_topic else None
        if old is not None and indexes is not None and index not in indexes:
            partitions[index] = old
        elif old is not None and old == partition:
            partitions[index] = old
        else:
            partitions[index] = copy.deepcopy(partition)
            changed.add((topic.name, index))
    if same_topic and before.configs == topic.configs \
            and len(before.partitions) == len(partitions) \
            and all(before.partitions.get(i) is p for i, p in partitions.items()):
        return before
    return TopicInfo(topic.name, topic.topic_id, dict(topic.configs), partitions)

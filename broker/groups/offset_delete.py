"""OffsetDelete on the group coordinator (Kafka's deleteOffsets, KIP-496).

An admin removes a group's committed offsets of some partitions, e.g. of a topic the
group stopped reading, so the offsets do not wait for ``offsets.retention.minutes``.
Kafka's rules, in its order:

* the group must be coordinated here (the coordinator errors of any group API) and
  exist: an unknown or Dead group is GROUP_ID_NOT_FOUND;
* a classic group with members whose protocol type is not ``consumer`` is
  NON_EMPTY_GROUP (its subscriptions cannot be read);
* a partition of a topic the group is subscribed to (a classic consumer group's
  members' subscriptions, a KIP-848 group's subscribed topic names) answers
  GROUP_SUBSCRIBED_TO_TOPIC and keeps its offset; every other partition answers NONE,
  and the ones with an offset (committed, or pending in a transaction) get a tombstone
  on ``__consumer_offsets``, so the deletion survives a coordinator failover.

The offsets leave memory and their tombstones are appended in one step without an
``await`` between them (a commit arriving later is appended after the tombstone);
the answer waits for the acks (acks=all), and a failed write answers its error for
the partitions it should have deleted.  Event-loop only.
"""
from __future__ import annotations

import logging

from protocol.errors import ErrorCode

from . import records
from .manager import GroupMetadataManager
from .state import GroupState

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


async def delete_offsets(manager: GroupMetadataManager, group_id: str,
                         partitions: list[TopicPartition]
                         ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
    """(group error, partition → error).  A group error leaves the partitions empty."""
    error = manager.validate_group(group_id)
    if error != ErrorCode.NONE:
        return error, {}
    group = manager.get_group(group_id)
    if group is None or group.is_state(GroupState.DEAD):
        return ErrorCode.GROUP_ID_NOT_FOUND, {}
    if group.consumer is not None:
        subscribed = group.consumer.subscribed_topics()
    elif group.share is not None:
        subscribed = group.share.subscribed_topics()
    elif group.is_empty():
        subscribed = set()
    elif group.protocol_type != "consumer":
        return ErrorCode.NON_EMPTY_GROUP, {}
    else:
        subscribed = group.subscribed_topics or set()
    results = {tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC if tp[0] in subscribed
               else ErrorCode.NONE for tp in partitions}
    pending = {tp for by_producer in group.pending_txn_offsets.values() for tp in by_producer}
    deleted = [tp for tp, code in results.items()
               if code == ErrorCode.NONE and (tp in group.offsets or tp in pending)]
    if not deleted:
        return ErrorCode.NONE, results
    group.remove_offsets(deleted)
    written = manager.write_now(group, [(records.offset_key(group_id, topic, partition), None)
                                        for topic, partition in deleted])
    error = await written
    log.info("[GroupCoordinator] deleted the offsets of %d partitions of group %s: %s",
             len(deleted), group_id, error.name)
    if error != ErrorCode.NONE:
        results.update(dict.fromkeys(deleted, error))
    return ErrorCode.NONE, results

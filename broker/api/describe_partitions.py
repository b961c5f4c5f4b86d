"""DescribeTopicPartitions (KIP-966, v0): topics' partitions, a page at a time.

Newer clients (the Java Admin's describeTopics) use it instead of Metadata: one
answer carries at most ``response_partition_limit`` partitions (bounded to 1 ..
``max.request.partition.size.limit``, Kafka's default 2000), and a ``next_cursor``
(topic name, partition index) says where the next page starts; null when the page
reached the end.  Kafka's rules, in its order:

* topics: the named ones, or every topic when none is named; either way only names
  ``>=`` the cursor's topic, in name order (the cursor's order);
* a cursor whose topic is not among the named topics, or with a negative partition
  index: INVALID_REQUEST for every named topic (Kafka's error response);
* Describe on each topic: refused topics are answered TOPIC_AUTHORIZATION_FAILED
  without partitions or id, after the others (when every topic was asked for, they
  are left out instead, so their existence is not disclosed);
* the cursor topic starts at the cursor's partition, the others at 0; a topic is cut
  where the page is full, and the cursor then points at its first partition left
  out; a page that fills exactly at a topic's end points at the next topic's
  partition 0 (Kafka's DescribeTopicPartitions response, KRaftMetadataCache);
* a named topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION
  for an illegal name); when all topics were asked for, one deleted meanwhile is
  skipped.
Per partition: leader (-1 and LEADER_NOT_AVAILABLE when it has none), leader epoch,
replicas, ISR, offline replicas (fenced brokers), and empty eligible leader replicas
and last known ELR (no KIP-966 ELR here).  Each described topic carries the
operations the principal may do on it (Kafka's bitfield).  Reads the image only.
"""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin import DescribeTopicPartitionsResponse

from protocol.errors import ErrorCode

from ..controller.metadata_client import NO_LEADER
from ..security.acls import AclOperation, ResourceType
from ..topics import is_internal, topic_name_problem

if TYPE_CHECKING:
    from protocol.messages import Request

    from ..controller.metadata_client import ClusterState
    from .context import ApiContext

Topic = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
Partition = Topic.DescribeTopicPartitionsResponsePartition
Cursor = DescribeTopicPartitionsResponse.Cursor

# The schema's default for "not computed" (refused and unknown topics).
OPERATIONS_OMITTED = -(1 << 31)
# Kafka's max.request.partition.size.limit default: the most partitions in one answer.
MAX_PARTITIONS_PER_RESPONSE = 2000
TOPIC_OPERATIONS = (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                    AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE,
                    AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS)


async def handle_describe_topic_partitions(ctx: ApiContext,
                                           request: Request) -> DescribeTopicPartitionsResponse:
    body = request.body
    image = ctx.image
    cursor = body.cursor
    named = [t.name for t in body.topics]
    all_topics = not named
    after = cursor.topic_name if cursor is not None else ""
    if all_topics:
        candidates = {name for name in image.topics if name >= after}
        if cursor is not None:
            candidates.add(cursor.topic_name)   # deleted since: skipped below
    else:
        candidates = {name for name in named if name >= after}
    if cursor is not None and (cursor.topic_name not in candidates or cursor.partition_index < 0):
        return _response([_topic_error(name, ErrorCode.INVALID_REQUEST) for name in named], None)
    authorized, refused = [], []
    for name in sorted(candidates):
        if ctx.authorizer.allows(request, AclOperation.DESCRIBE, ResourceType.TOPIC, name,
                                 log_denial=not all_topics):
            authorized.append(name)
        elif not all_topics:
            refused.append(_topic_error(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    limit = max(1, min(MAX_PARTITIONS_PER_RESPONSE, body.response_partition_limit))
    topics, next_cursor = _page(image, authorized, cursor, limit, all_topics)
    for topic in topics:
        topic.topic_authorized_operations = _operations(ctx, request, topic.name)
    return _response(topics + refused, next_cursor)


def _page(image: ClusterState, names: list[str], cursor: Any, limit: int,
          all_topics: bool) -> tuple[list[Topic], Cursor | None]:
    """(described topics, next cursor or None): ``names`` in order, at most ``limit``
    partitions in all (see the module doc for where the cursor points)."""
    topics, remaining = [], limit
    for name in names:
        if remaining == 0:
            return topics, Cursor(topic_name=name, partition_index=0)
        info = image.topics.get(name)
        if info is None:
            if not all_topics:
                code = (ErrorCode.INVALID_TOPIC_EXCEPTION if topic_name_problem(name)
                        else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                topics.append(_topic_error(name, code, internal=is_internal(name)))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        count = len(info.partitions)
        end = min(count, start + remaining)
        topics.append(Topic(error_code=ErrorCode.NONE, name=name,
                            topic_id=uuid.UUID(info.topic_id), is_internal=is_internal(name),
                            partitions=[_partition(image, index, info.partitions[index])
                                        for index in range(start, end)],
                            topic_authorized_operations=OPERATIONS_OMITTED))
        if end < count:
            return topics, Cursor(topic_name=name, partition_index=end)
        remaining -= max(0, end - start)
    return topics, None


def _partition(image: ClusterState, index: int, p: Any) -> Partition:
    leaderless = p.leader == NO_LEADER
    return Partition(
        error_code=ErrorCode.LEADER_NOT_AVAILABLE if leaderless else ErrorCode.NONE,
        partition_index=index, leader_id=p.leader, leader_epoch=p.leader_epoch,
        replica_nodes=list(p.replicas), isr_nodes=list(p.isr),
        eligible_leader_replicas=[], last_known_elr=[],
        offline_replicas=[r for r in p.replicas if not image.is_live(r)])


def _operations(ctx: ApiContext, request: Request, name: str) -> int:
    """Kafka's authorized-operations bitfield: bit ``op`` set when ``op`` is allowed."""
    return sum(1 << int(op) for op in TOPIC_OPERATIONS
               if ctx.authorizer.allows(request, op, ResourceType.TOPIC, name, log_denial=False))


def _topic_error(name: str, code: ErrorCode, internal: bool = False) -> Topic:
    return Topic(error_code=code, name=name, topic_id=None, is_internal=internal,
                 partitions=[], topic_authorized_operations=OPERATIONS_OMITTED)


def _response(topics: list, next_cursor: Cursor | None) -> DescribeTopicPartitionsResponse:
    return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=topics,
                                           next_cursor=next_cursor)

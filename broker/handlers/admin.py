"""CreateTopics and DeleteTopics on a single broker.

Replication factor: a lone broker can hold one replica, so a factor above 1 answers
INVALID_REPLICATION_FACTOR, as Kafka does when it exceeds the live brokers.
"""
from __future__ import annotations

import logging

from kafka.protocol.admin import CreateTopicsResponse, DeleteTopicsResponse

from protocol.errors import ErrorCode

from ..local_metadata import topic_name_problem

log = logging.getLogger(__name__)

Created = CreateTopicsResponse.CreatableTopicResult
CreatedConfig = Created.CreatableTopicConfigs
Deleted = DeleteTopicsResponse.DeletableTopicResult
CONFIG_SOURCE_TOPIC = 1
CONFIG_SOURCE_DEFAULT = 5


class TopicRefused(Exception):
    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code = code


async def handle_create_topics(broker, request):
    body = request.body
    results = []
    seen: set[str] = set()
    for topic in body.topics:
        try:
            if topic.name in seen:
                raise TopicRefused(ErrorCode.INVALID_REQUEST, "topic named twice in one request")
            seen.add(topic.name)
            partitions, replication, configs = _validate(broker, topic)
            record = None
            if not body.validate_only:
                record = broker.replica_manager.create_topic(topic.name, partitions, configs)
            results.append(_created(broker, topic.name, record, partitions, replication, configs))
        except TopicRefused as exc:
            results.append(Created(name=topic.name, topic_id=None, error_code=exc.code,
                                   error_message=str(exc), num_partitions=-1,
                                   replication_factor=-1, configs=None))
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


def _validate(broker, topic) -> tuple[int, int, dict[str, str]]:
    problem = topic_name_problem(topic.name)
    if problem:
        raise TopicRefused(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
    if topic.name in broker.metadata.topics:
        raise TopicRefused(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {topic.name!r} already exists")
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            raise TopicRefused(ErrorCode.INVALID_REQUEST,
                               "give either assignments or partitions and replication factor")
        indexes = sorted(a.partition_index for a in topic.assignments)
        if indexes != list(range(len(indexes))):
            raise TopicRefused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                               "assignments must cover partitions 0..n-1")
        for assignment in topic.assignments:
            if list(assignment.broker_ids) != [broker.node_id]:
                raise TopicRefused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                   f"unknown brokers in {list(assignment.broker_ids)}")
        partitions, replication = len(indexes), 1
    else:
        partitions = topic.num_partitions
        if partitions == -1:
            partitions = broker.config["num.partitions"]
        replication = topic.replication_factor
        if replication == -1:
            replication = broker.config["default.replication.factor"]
    if partitions < 1:
        raise TopicRefused(ErrorCode.INVALID_PARTITIONS, "number of partitions must be at least 1")
    if replication < 1:
        raise TopicRefused(ErrorCode.INVALID_REPLICATION_FACTOR,
                           "replication factor must be at least 1")
    live_brokers = 1
    if replication > live_brokers:
        raise TopicRefused(ErrorCode.INVALID_REPLICATION_FACTOR,
                           f"replication factor {replication} exceeds the {live_brokers} "
                           f"live broker(s)")
    configs = {c.name: c.value for c in topic.configs if c.value is not None}
    try:
        broker.replica_manager.validate_topic_configs(configs)
    except (ValueError, KeyError) as exc:
        raise TopicRefused(ErrorCode.INVALID_CONFIG, str(exc)) from exc
    return partitions, replication, configs


def _created(broker, name, record, partitions, replication, configs):
    effective = broker.config.topic_defaults()
    effective.update(configs)
    return Created(
        name=name, topic_id=record.uuid if record else None, error_code=ErrorCode.NONE,
        error_message=None, num_partitions=partitions, replication_factor=replication,
        configs=[CreatedConfig(name=k, value=v, read_only=False,
                               config_source=CONFIG_SOURCE_TOPIC if k in configs
                               else CONFIG_SOURCE_DEFAULT, is_sensitive=False)
                 for k, v in sorted(effective.items())])


async def handle_delete_topics(broker, request):
    body = request.body
    if request.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in body.topics]
    else:
        wanted = [(name, None) for name in body.topic_names]
    results = []
    for name, topic_id in wanted:
        record = broker.metadata.topics.get(name) if name else None
        if record is None and topic_id is not None:
            record = broker.metadata.topic_by_id(topic_id)
        if record is None:
            code = ErrorCode.UNKNOWN_TOPIC_ID if name is None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            results.append(Deleted(name=name, topic_id=topic_id, error_code=code,
                                   error_message=code.name))
            continue
        broker.replica_manager.delete_topic(record.name)
        results.append(Deleted(name=record.name, topic_id=record.uuid,
                               error_code=ErrorCode.NONE, error_message=None))
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)

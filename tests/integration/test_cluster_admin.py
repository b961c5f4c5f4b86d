"""Admin APIs that change partitions, on three real broker processes (issue #16).

CreateTopics answers once every live broker's metadata knows the new partitions, so a
client asking any broker right after the answer finds them; the wait is bounded by the
request's timeout (REQUEST_TIMED_OUT then, the topic created all the same).
"""
from __future__ import annotations

import time

from kafka.protocol.admin import CreateTopicsRequest

from broker.testing import build_batch

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
REQUEST_TIMED_OUT = 7


def _create_topics(conn, names: list[str], partitions: int, replication_factor: int,
                   timeout_ms: int = 15_000):
    topic_class = CreateTopicsRequest.CreatableTopic
    topics = [topic_class(name=name, num_partitions=partitions,
                          replication_factor=replication_factor, assignments=[], configs=[])
              for name in names]
    return conn.request(CreateTopicsRequest[5](topics=topics, timeout_ms=timeout_ms,
                                               validate_only=False))


def test_every_broker_knows_a_topic_created_through_the_controller_when_it_answers(
        cluster, topic_name):
    """The controller applies a command first, the others a moment later: that moment is
    the race of the issue (without the wait, about half of these Metadata requests to the
    other brokers answered UNKNOWN_TOPIC_OR_PARTITION).  20 topics, each created by its
    own request and looked up on the other brokers on connections opened beforehand;
    then every partition's leader takes a produce."""
    names = [topic_name(f"t{i:02d}") for i in range(20)]
    via = cluster.controller_id()
    connections = {node: cluster.connect(node) for node in cluster.node_ids}
    try:
        leaders = {}
        for name in names:
            response = _create_topics(connections[via], [name], partitions=2,
                                      replication_factor=3)
            assert response.topics[0].error_code == NONE, response.topics[0]
            for node in [n for n in connections if n != via] + [via]:
                topic = connections[node].metadata([name]).topics[0]
                assert topic.error_code == NONE, f"broker {node}: {name} error {topic.error_code}"
                assert sorted(p.partition_index for p in topic.partitions) == [0, 1]
                for p in topic.partitions:
                    assert p.leader_id >= 0, f"broker {node}: {name}-{p.partition_index}"
                    leaders[(name, p.partition_index)] = p.leader_id
        batch = build_batch([(None, b"v", int(time.time() * 1000), [])])
        for (name, index), leader in leaders.items():
            answer = connections[leader].produce(name, index, batch, acks=1)
            assert answer.error_code == NONE, (name, index, leader, answer.error_code)
    finally:
        for conn in connections.values():
            conn.close()


def test_twenty_topics_created_in_one_request_are_known_everywhere_when_it_answers(
        cluster, topic_name):
    names = [topic_name(f"b{i:02d}") for i in range(20)]
    connections = {node: cluster.connect(node) for node in cluster.node_ids}
    try:
        response = _create_topics(connections[1], names, partitions=1, replication_factor=3)
        assert [(t.name, t.error_code) for t in response.topics] == [(n, NONE) for n in names]
        for node in (2, 3, 1):
            topics = connections[node].metadata(names).topics
            assert {t.name: t.error_code for t in topics} == dict.fromkeys(names, NONE), node
    finally:
        for conn in connections.values():
            conn.close()


def test_a_broker_that_cannot_learn_the_topic_in_time_makes_create_topics_time_out(
        cluster, topic_name):
    name = topic_name()
    via = cluster.controller_id()         # Raft keeps its quorum: the pause is not its leader
    paused = next(n for n in cluster.node_ids if n != via)
    cluster.pause(paused)                 # live (its session lasts 3 s) but applying nothing
    try:
        started = time.monotonic()
        with cluster.connect(via) as conn:
            response = _create_topics(conn, [name], partitions=1, replication_factor=1,
                                      timeout_ms=1000)
        elapsed = time.monotonic() - started
    finally:
        cluster.resume(paused)
    assert response.topics[0].error_code == REQUEST_TIMED_OUT, response.topics[0]
    # It waited for timeout_ms; that it answered at all (not the connection's own timeout)
    # shows the wait is bounded.  No upper figure: timings belong in benchmarks/.
    assert elapsed >= 0.9, (elapsed, response.topics[0])
    with cluster.connect(via) as conn:    # created all the same, as Kafka does
        assert conn.metadata([name]).topics[0].error_code == NONE


def test_create_partitions_from_confluent_kafka_grows_a_topic_a_producer_then_writes_to(
        cluster, topic_name):
    """AdminClient.create_partitions (librdkafka) with a computed and a given assignment,
    then a confluent-kafka producer writes to every partition, old and new; a count not
    above the current one is INVALID_PARTITIONS, an internal topic refused."""
    from confluent_kafka import KafkaError, KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewPartitions
    name = topic_name()
    cluster.create_topic(name, partitions=2, replication_factor=2)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_partitions([NewPartitions(name, 4)], operation_timeout=15)[name].result(20)
    admin.create_partitions([NewPartitions(name, 5, replica_assignment=[[3, 1]])],
                            operation_timeout=15)[name].result(20)
    with cluster.connect(1) as conn:      # every broker knew them when the answers came
        for node in cluster.node_ids:
            with cluster.connect(node) as other:
                topic = other.metadata([name]).topics[0]
                assert sorted(p.partition_index for p in topic.partitions) == list(range(5))
        topic = conn.metadata([name]).topics[0]
        by_index = {p.partition_index: p for p in topic.partitions}
        assert by_index[4].replica_nodes == [3, 1]
        assert all(len(p.replica_nodes) == 2 for p in topic.partitions)

    delivered = {}
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for index in range(5):
        producer.produce(name, value=f"v{index}".encode(), partition=index,
                         on_delivery=lambda err, msg: delivered.__setitem__(
                             msg.partition(), (err, msg.offset())))
    assert producer.flush(30) == 0
    assert delivered == dict.fromkeys(range(5), (None, 0))

    from kafka import KafkaAdminClient
    from kafka.admin import NewPartitions as KafkaPythonNewPartitions
    python_admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:                                  # kafka-python's admin too: 5 -> 6
        python_admin.create_partitions({name: KafkaPythonNewPartitions(total_count=6)})
    finally:
        python_admin.close()
    for node in cluster.node_ids:
        with cluster.connect(node) as conn:
            assert len(conn.metadata([name]).topics[0].partitions) == 6

    for new_parts, code in (([NewPartitions(name, 6)], KafkaError.INVALID_PARTITIONS),
                            ([NewPartitions(name, 3)], KafkaError.INVALID_PARTITIONS),
                            ([NewPartitions(name, 7, replica_assignment=[[1, 9]])],
                             KafkaError.INVALID_REPLICA_ASSIGNMENT),
                            ([NewPartitions(topic_name("missing"), 2)],
                             KafkaError.UNKNOWN_TOPIC_OR_PART)):
        future = admin.create_partitions(new_parts, operation_timeout=15)[new_parts[0].topic]
        try:
            future.result(20)
        except KafkaException as exc:
            assert exc.args[0].code() == code, exc
        else:
            raise AssertionError(f"{new_parts} was accepted")


OFFSET_OUT_OF_RANGE = 1
EARLIEST = -2


def _log_starts(cluster, topic: str) -> dict[int, int]:
    return {node: cluster.hosted(node, topic, 0)["log_start_offset"]
            for node in cluster.running()}


def test_delete_records_moves_every_replicas_log_start_and_survives_leader_changes(
        cluster, topic_name):
    """AdminClient.delete_records (librdkafka): the answer's low watermark is the new
    start, every replica already has it when the answer comes (small segments, so whole
    segments go); a consumer at 0 gets OFFSET_OUT_OF_RANGE and resets to the new start;
    an offset above the HW is OFFSET_OUT_OF_RANGE; after two leader changes ListOffsets
    earliest still answers the new start; OFFSET_END (-1) deletes up to the HW."""
    from confluent_kafka import (
        OFFSET_END,
        Consumer,
        KafkaError,
        KafkaException,
        Producer,
        TopicPartition,
    )
    from confluent_kafka.admin import AdminClient
    name = topic_name()
    cluster.create_topic(name, partitions=1, replication_factor=3,
                         configs={"segment.bytes": "1024", "min.insync.replicas": "2"})
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "linger.ms": 0, "batch.num.messages": 5})
    for i in range(100):
        producer.produce(name, value=f"value-{i:04d}".encode() * 4, partition=0)
    assert producer.flush(30) == 0
    leader = cluster.leader_of(name, 0)
    segments_before = len(list(cluster.partition_dir(leader, name, 0).glob("*.log")))

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    deleted = admin.delete_records([TopicPartition(name, 0, 40)], operation_timeout=15)
    result = list(deleted.values())[0].result(20)
    assert result.low_watermark == 40
    assert _log_starts(cluster, name) == {1: 40, 2: 40, 3: 40}
    assert len(list(cluster.partition_dir(leader, name, 0).glob("*.log"))) < segments_before

    with cluster.connect(leader) as conn:
        assert conn.fetch(name, 0, 0).error_code == OFFSET_OUT_OF_RANGE
        assert conn.list_offsets(name, 0, EARLIEST).offset == 40
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": name,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(name, 0, 0)])
        message = None
        deadline = time.monotonic() + 20
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error():
                message = None
        assert message is not None and message.offset() == 40
    finally:
        consumer.close()

    beyond = admin.delete_records([TopicPartition(name, 0, 1000)], operation_timeout=15)
    try:
        list(beyond.values())[0].result(20)
    except KafkaException as exc:
        assert exc.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE, exc
    else:
        raise AssertionError("deleting beyond the high watermark was accepted")

    for _ in range(2):                     # two leader changes: the start stays
        old = cluster.leader_of(name, 0)
        cluster.stop(old)
        new = cluster.wait_for_leader(name, 0, not_in=(old,))
        with cluster.connect(new) as conn:
            assert conn.list_offsets(name, 0, EARLIEST).offset == 40
        cluster.start(old)
    cluster.wait_for(lambda s: set(_log_starts(cluster, name).values()) == {40}, 30,
                     "every replica, restarted ones included, starting at 40")

    cluster.wait_for_isr(name, 0, [1, 2, 3])
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})   # fresh leader lookups
    everything = admin.delete_records([TopicPartition(name, 0, OFFSET_END)],
                                      operation_timeout=15)
    assert list(everything.values())[0].result(20).low_watermark == 100
    with cluster.connect(cluster.leader_of(name, 0)) as conn:
        assert conn.list_offsets(name, 0, EARLIEST).offset == 100


def test_describe_cluster_and_describe_log_dirs_from_kafka_pythons_admin(cluster,
                                                                         topic_name):
    """kafka-python's describe_cluster sends DescribeCluster (KIP-700; librdkafka's uses
    Metadata): every broker at its advertised address, unfenced, the Raft leader as
    controller, every cluster operation authorized without an authorizer.  Its
    describe_log_dirs asks every broker: one directory each, with the size of every
    replica it hosts."""
    from kafka import KafkaAdminClient
    name = topic_name()
    cluster.create_topic(name, partitions=2, replication_factor=2)
    batch = build_batch([(None, b"x" * 100, int(time.time() * 1000), [])])
    for index in (0, 1):
        with cluster.connect(cluster.leader_of(name, index)) as leader:
            assert leader.produce(name, index, batch).error_code == NONE
    with cluster.connect(1) as conn:
        cluster_id = conn.metadata([]).cluster_id
    replicas = {index: cluster.partition_state(name, index)["replicas"] for index in (0, 1)}

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        described = admin.describe_cluster()
        log_dirs = admin.describe_log_dirs()
    finally:
        admin.close()
    assert described["cluster_id"] == cluster_id
    assert described["controller_id"] == cluster.controller_id()
    assert sorted((b["broker_id"], b["host"], b["port"], b["is_fenced"])
                  for b in described["brokers"]) == sorted(
        (b.node_id, "127.0.0.1", int(b.bootstrap.rsplit(":", 1)[1]), False)
        for b in cluster.brokers)
    assert described["authorized_operations"]

    assert sorted(answer["broker"] for answer in log_dirs) == [1, 2, 3]
    for answer in log_dirs:
        [directory] = answer["log_dirs"]
        assert directory["error_code"] == NONE and directory["total_bytes"] > 0
        sizes = {(t["name"], p["partition_index"]): p["partition_size"]
                 for t in directory["topics"] for p in t["partitions"]}
        mine = {(name, index) for index, nodes in replicas.items()
                if answer["broker"] in nodes}
        assert {key for key in sizes if key[0] == name} == mine, (answer["broker"], sizes)
        assert all(sizes[key] > 100 for key in mine)

"""A client that times out never wedges the broker: its work completes, only the answer is lost.

The reproduction of the issue, on 3 broker processes: a follower of the coordinator's
``__transaction_state`` (or ``__consumer_offsets``) partition is paused (SIGSTOP), so the
coordinator's write waits for that follower until the ISR shrinks; meanwhile the client
gives up after 2.5 s and closes its connection, as a client with a short request timeout
does.  Kafka finishes the write and the state transition after it whatever happens to
the client.  After the follower is resumed and the ISR is full again:

* the transactional id makes progress: a new confluent-kafka producer initialises it,
  commits a transaction, and a read_committed consumer reads that transaction;
* an EndTxn whose client left still ends its transaction (CompleteCommit/CompleteAbort);
* an OffsetCommit whose client left is visible to OffsetFetch;
* a group whose leader left while its SyncGroup's assignment was being written is
  Stable with that assignment;
* topics a CreateTopics, and partitions a CreatePartitions, created while their client
  left exist on every broker.
"""
from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from kafka.protocol.admin import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DescribeTransactionsRequest,
)
from kafka.protocol.consumer import (
    JoinGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest

from broker.client.client_protocol import ConnectionFailed
from broker.groups.placement import partition_for
from broker.harness.cluster import ClusterProcess
from broker.testing import KafkaConnection

NONE = 0
RETRIABLE = {14, 15, 16, 51}  # LOAD_IN_PROGRESS, NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT
CLIENT_TIMEOUT_S = 2.5
PAUSE_S = 10.0
WAIT_S = 60.0
TOPIC = "ct"
# The ISR drops the paused follower after 4 s: later than the client's 2.5 s, earlier
# than the offset commit timeout (raised here so a slow machine cannot reach it).
SETTINGS = {"replica.lag.time.max.ms": 4000, "offsets.commit.timeout.ms": 20_000,
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
            "transaction.state.log.num.partitions": 3, "offsets.topic.num.partitions": 3}


@pytest.fixture(scope="module")
def shared_cluster(module_cluster_factory) -> ClusterProcess:
    """One cluster for the module's tests on SETTINGS, with TOPIC: each test uses a
    transactional id or group of its own."""
    cluster = module_cluster_factory(3, **SETTINGS)
    cluster.create_topic(TOPIC, 1, replication_factor=3)
    return cluster


def retried(send, error_of):
    """``send()`` until ``error_of(response)`` is not a retriable coordinator error."""
    deadline = time.monotonic() + WAIT_S
    while True:
        response = send()
        if error_of(response) not in RETRIABLE or time.monotonic() > deadline:
            return response
        time.sleep(0.2)


def coordinator(cluster: ClusterProcess, key: str, key_type: int) -> int:
    with cluster.connect(cluster.node_ids[0]) as conn:
        answer = retried(lambda: conn.request(FindCoordinatorRequest[3](
            key=key, key_type=key_type)), lambda a: a.error_code)
    assert answer.error_code == NONE, answer
    return answer.node_id


def paused_follower(cluster: ClusterProcess, topic: str, key: str, leader: int) -> int:
    """A follower of ``key``'s partition of ``topic`` (the internal topic), once its ISR is
    full; not the metadata quorum's leader when there is a choice."""
    with cluster.connect(leader) as conn:
        count = len(conn.metadata([topic]).topics[0].partitions)
    index = partition_for(key, count)
    state = cluster.wait_for_isr(topic, index, [1, 2, 3], timeout_s=WAIT_S)
    assert state["leader"] == leader, state
    followers = [n for n in cluster.node_ids if n != leader]
    controller = cluster.controller_id()
    return next((n for n in followers if n != controller), followers[0])


def give_up(cluster: ClusterProcess, node_id: int, request) -> None:
    """Send ``request`` to ``node_id`` as a client with a 2.5 s timeout: no answer comes
    in time (the write waits for the paused follower), so the client closes."""
    with KafkaConnection(cluster.broker(node_id).bootstrap,
                         timeout_s=CLIENT_TIMEOUT_S) as conn:
        with pytest.raises(ConnectionFailed):
            conn.request(request)


def heal(cluster: ClusterProcess, follower: int, paused_at: float, topic: str) -> None:
    time.sleep(max(0.0, paused_at + PAUSE_S - time.monotonic()))
    cluster.resume(follower)
    with cluster.connect(cluster.node_ids[0]) as conn:
        count = len(conn.metadata([topic]).topics[0].partitions)
    for index in range(count):
        cluster.wait_for_isr(topic, index, [1, 2, 3], timeout_s=WAIT_S)


# -- transactions --------------------------------------------------------------------------

def init_raw(conn, tid: str) -> tuple[int, int]:
    answer = retried(lambda: conn.request(InitProducerIdRequest[4](
        transactional_id=tid, transaction_timeout_ms=60_000, producer_id=-1,
        producer_epoch=-1)), lambda a: a.error_code)
    assert answer.error_code == NONE, answer
    return answer.producer_id, answer.producer_epoch


def add_partitions_request(tid: str, producer: tuple[int, int]):
    return AddPartitionsToTxnRequest[3](
        v3_and_below_transactional_id=tid, v3_and_below_producer_id=producer[0],
        v3_and_below_producer_epoch=producer[1],
        v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(
            name=TOPIC, partitions=[0])])


def end_txn_request(tid: str, producer: tuple[int, int], commit: bool):
    return EndTxnRequest[3](transactional_id=tid, producer_id=producer[0],
                            producer_epoch=producer[1], committed=commit)


def described_state(cluster: ClusterProcess, node_id: int, tid: str) -> str:
    with cluster.connect(node_id) as conn:
        [state] = conn.request(DescribeTransactionsRequest[0](
            transactional_ids=[tid])).transaction_states
    return state.transaction_state


def wait_for_state(cluster: ClusterProcess, node_id: int, tid: str, wanted: str) -> None:
    deadline = time.monotonic() + WAIT_S
    state = None
    while time.monotonic() < deadline:
        state = described_state(cluster, node_id, tid)
        if state == wanted:
            return
        time.sleep(0.2)
    raise AssertionError(f"{tid} is {state}, not {wanted}, after {WAIT_S} s")


def one_transaction(cluster: ClusterProcess, node_id: int, tid: str) -> tuple[int, int]:
    """A whole transaction by raw requests (no records); returns the producer."""
    with cluster.connect(node_id) as conn:
        producer = init_raw(conn, tid)
        answer = conn.request(add_partitions_request(tid, producer))
        assert answer.results_by_topic_v3_and_below[0].results_by_partition[0] \
            .partition_error_code == NONE
        assert conn.request(end_txn_request(tid, producer, True)).error_code == NONE
    wait_for_state(cluster, node_id, tid, "CompleteCommit")
    return producer


def a_new_producer_commits(cluster: ClusterProcess, tid: str) -> None:
    """A confluent-kafka producer initialises ``tid`` (retrying retriable answers, within
    WAIT_S), commits one record, and a read_committed consumer reads it."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": tid,
                         "linger.ms": 5, "transaction.timeout.ms": 30_000})
    deadline = time.monotonic() + WAIT_S
    errors = []
    while True:
        try:
            producer.init_transactions(10)
            break
        except KafkaException as exc:
            errors.append(exc.args[0].name())
            if not exc.args[0].retriable() or time.monotonic() > deadline:
                raise AssertionError(f"init_transactions({tid}) failed {len(errors)} times: "
                                     f"{errors[-6:]}") from exc
    value = f"after-{tid}".encode()
    producer.begin_transaction()
    producer.produce(TOPIC, value, partition=0)
    producer.commit_transaction(30)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"read-{tid}",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    seen = []
    deadline = time.monotonic() + WAIT_S
    try:
        while time.monotonic() < deadline and value not in seen:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.append(message.value())
    finally:
        consumer.close()
    assert seen.count(value) == 1, seen


def test_a_timed_out_add_partitions_does_not_wedge_the_transactional_id(cluster):
    tid = "timeout-add"
    leader = coordinator(cluster, tid, 1)
    producer = one_transaction(cluster, leader, tid)
    follower = paused_follower(cluster, "__transaction_state", tid, leader)
    cluster.pause(follower)
    paused_at = time.monotonic()
    give_up(cluster, leader, add_partitions_request(tid, producer))
    heal(cluster, follower, paused_at, "__transaction_state")
    a_new_producer_commits(cluster, tid)


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_a_timed_out_end_txn_still_ends_the_transaction(cluster, commit):
    """PrepareCommit/PrepareAbort, the markers and Complete* follow an EndTxn whose
    client left while the Prepare write waited."""
    tid = f"timeout-end-{'commit' if commit else 'abort'}"
    leader = coordinator(cluster, tid, 1)
    with cluster.connect(leader) as conn:
        producer = init_raw(conn, tid)
        answer = conn.request(add_partitions_request(tid, producer))
        assert answer.results_by_topic_v3_and_below[0].results_by_partition[0] \
            .partition_error_code == NONE
    follower = paused_follower(cluster, "__transaction_state", tid, leader)
    cluster.pause(follower)
    paused_at = time.monotonic()
    give_up(cluster, leader, end_txn_request(tid, producer, commit))
    heal(cluster, follower, paused_at, "__transaction_state")
    wait_for_state(cluster, leader, tid, "CompleteCommit" if commit else "CompleteAbort")
    a_new_producer_commits(cluster, tid)


# -- groups and admin ----------------------------------------------------------------------

def test_a_timed_out_offset_commit_is_applied(cluster):
    group = "timeout-group"
    leader = coordinator(cluster, group, 0)
    follower = paused_follower(cluster, "__consumer_offsets", group, leader)
    topic = OffsetCommitRequest.OffsetCommitRequestTopic
    cluster.pause(follower)
    paused_at = time.monotonic()
    give_up(cluster, leader, OffsetCommitRequest[8](
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=[topic(name=TOPIC, partitions=[topic.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=42, committed_leader_epoch=-1,
            committed_metadata="left")])]))
    heal(cluster, follower, paused_at, "__consumer_offsets")
    with cluster.connect(leader) as conn:
        answer = retried(lambda: conn.request(OffsetFetchRequest[7](
            group_id=group, require_stable=True, topics=[
                OffsetFetchRequest.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])])),
            lambda a: a.error_code)
    assert answer.error_code == NONE
    committed = answer.topics[0].partitions[0]
    assert (committed.error_code, committed.committed_offset, committed.metadata) == \
        (NONE, 42, "left")


def test_a_group_whose_leader_left_during_sync_is_stable(cluster):
    """The leader's SyncGroup writes the assignment; its client leaves while the write
    waits.  The group still becomes Stable, and the SyncGroup sent again (same
    generation) is answered with the assignment stored."""
    group = "timeout-sync"
    leader = coordinator(cluster, group, 0)
    protocol = JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"m")

    def join(conn, member_id: str):
        return conn.request(JoinGroupRequest[5](
            group_id=group, session_timeout_ms=60_000, rebalance_timeout_ms=60_000,
            member_id=member_id, group_instance_id=None, protocol_type="consumer",
            protocols=[protocol]))

    with cluster.connect(leader) as conn:
        first = join(conn, "")
        joined = join(conn, first.member_id) if first.error_code == 79 else first
    assert joined.error_code == NONE and joined.leader == joined.member_id, joined
    member, generation = joined.member_id, joined.generation_id
    assigned = SyncGroupRequest.SyncGroupRequestAssignment(member_id=member,
                                                           assignment=b"all of it")

    def sync(assignments):
        return SyncGroupRequest[3](group_id=group, generation_id=generation, member_id=member,
                                   group_instance_id=None, assignments=assignments)

    follower = paused_follower(cluster, "__consumer_offsets", group, leader)
    cluster.pause(follower)
    paused_at = time.monotonic()
    give_up(cluster, leader, sync([assigned]))
    heal(cluster, follower, paused_at, "__consumer_offsets")
    with cluster.connect(leader) as conn:
        answer = conn.request(sync([]))
    assert (answer.error_code, answer.assignment) == (NONE, b"all of it"), answer


def wait_known(cluster: ClusterProcess, names: list[str], partitions: int) -> None:
    """Every broker (the paused one catching up) knows each topic with ``partitions``."""
    wanted = dict.fromkeys(names, (NONE, partitions))
    for node_id in cluster.node_ids:
        deadline = time.monotonic() + WAIT_S
        while True:
            with cluster.connect(node_id) as conn:
                known = {t.name: (t.error_code, len(t.partitions))
                         for t in conn.metadata(names).topics}
            if known == wanted or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert known == wanted, (node_id, known)


def test_topics_and_partitions_created_while_their_client_left_exist_everywhere(
        raftwood_cluster_factory):
    """CreateTopics and CreatePartitions wait until every live broker knows what they
    created; a paused broker (live all along: a session timeout longer than the pause)
    holds that wait past the client's timeout.  Every topic and partition of the
    requests is created."""
    cluster = raftwood_cluster_factory(3, **{**SETTINGS, "broker.session.timeout.ms": 30_000})
    cluster.create_topic(TOPIC, 1, replication_factor=3)
    controller = cluster.controller_id()
    asked = next(n for n in cluster.node_ids if n != controller)
    paused = next(n for n in cluster.node_ids if n not in (controller, asked))
    Topic = CreateTopicsRequest.CreatableTopic
    names = [f"left-{i}" for i in range(3)]
    grown = CreatePartitionsRequest.CreatePartitionsTopic(name=TOPIC, count=3,
                                                          assignments=None)
    cluster.pause(paused)
    paused_at = time.monotonic()
    give_up(cluster, asked, CreatePartitionsRequest[3](topics=[grown], timeout_ms=30_000,
                                                       validate_only=False))
    give_up(cluster, asked, CreateTopicsRequest[4](topics=[Topic(
        name=name, num_partitions=1, replication_factor=2, assignments=[], configs=[])
        for name in names], timeout_ms=30_000, validate_only=False))
    time.sleep(max(0.0, paused_at + PAUSE_S - time.monotonic()))
    cluster.resume(paused)
    wait_known(cluster, names, 1)
    wait_known(cluster, [TOPIC], 3)

"""Share-partition state across brokers: a leader kill -9 loses no acknowledgement.

Three brokers.  The topic's leader and the share coordinator of its share partition (the
leader of its ``__share_group_state`` partition, one partition here) are different
brokers, so every state read and write crosses the network (ReadShareGroupState /
WriteShareGroupState).  A member acquires six records and acknowledges four of them; the
leader is killed with SIGKILL; the new leader loads the share partition from the
coordinator and hands out exactly the two records left in flight (delivery count 2) and
the two never fetched (count 1).  The new leader's high watermark starts at what it
knew as a follower (usually behind those records) and moves once the other follower
fetches from it: meanwhile a ShareFetch long-polls instead of answering nothing (Kafka's
DelayedShareFetch; before, a consumer spun through empty answers).  A follower asked for
the partition answers NOT_LEADER_OR_FOLLOWER with the current leader and its endpoint.

Under load, with confluent-kafka: two ShareConsumers of one group (the verify share
workload's ``ShareWorker``: explicit ACCEPT of every record, a commit after each poll)
read a 2-partition RF 3 topic while an idempotent acks=all producer writes it; the
share coordinator's broker (every key's: the state topic has one partition), then a
partition leader that is not the coordinator, are killed with SIGKILL and started again.
By the end every record produced was acknowledged by the group, none was delivered again
after a commit carrying its ACCEPT succeeded (0 lost acknowledgements), and the
redeliveries are at most the records in flight (delivered, not yet committed) while the
fault lasted plus the commits it refused; the figures are printed.
"""
from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Producer

from broker.testing import KafkaConnection, build_batch
from broker.verify.checker import ViolationLog
from broker.verify.shareload import ShareWorker, check_share, group_starts
from tests.integration.test_share_fetch_wire import (
    ACCEPT,
    NONE,
    REJECT,
    Member,
    acquired,
    fetch_until,
    open_member,
    partition_of,
)

STATE_TOPIC = "__share_group_state"
NOT_LEADER_OR_FOLLOWER = 6
COORDINATOR_NOT_AVAILABLE = 15
RETRIABLE = (NOT_LEADER_OR_FOLLOWER, COORDINATOR_NOT_AVAILABLE)
SETTINGS = {"share.coordinator.state.topic.num.partitions": 1,
            "offsets.topic.num.partitions": 1, "group.share.record.lock.duration.ms": 15_000}


@pytest.fixture(scope="module")
def shared_cluster(module_cluster_factory):
    """The module's cluster; conftest's ``cluster`` heals it after each test (the
    killed leader started again, the preferred leaders back)."""
    return module_cluster_factory(3, **SETTINGS)


def topic_id_of(conn: KafkaConnection, name: str):
    return conn.metadata([name], version=12).topics[0].topic_id


def produce(conn: KafkaConnection, name: str, count: int) -> None:
    records = [(None, b"r%d" % i, 1_700_000_000_000, []) for i in range(count)]
    assert conn.produce(name, 0, build_batch(records)).error_code == NONE


def redelivered(member: Member, want: int, *, seconds: float = 90.0) -> list:
    """Long polls on a new leader until ``want`` offsets are acquired: the acquired
    ranges, in order.  An answer without error and without records fails: the share
    partition holds AVAILABLE records, so the leader waits (up to max_wait_ms) until it
    may read them, its high watermark caught up, rather than answering nothing.  A
    partition still moving (NOT_LEADER_OR_FOLLOWER) or its coordinator not reachable yet
    (COORDINATOR_NOT_AVAILABLE) is asked again."""
    ranges: list = []
    deadline = time.monotonic() + seconds
    while sum(last - first + 1 for first, last, _ in ranges) < want:
        assert time.monotonic() < deadline, f"only {ranges} acquired in {seconds} s"
        answer = member.fetch(max_wait_ms=30_000)
        assert answer.error_code == NONE, answer
        partition = partition_of(answer)
        if partition is not None and partition.error_code in RETRIABLE:
            time.sleep(0.1)
            continue
        assert acquired(answer), f"an empty answer after {ranges}: {answer}"
        ranges += acquired(answer)
    return ranges


def test_a_leader_kill_9_loses_no_acknowledgement(cluster):
    # The first share fetch anywhere creates the state topic; its leader coordinates.
    cluster.create_topic("warm", 1, replication_factor=3)
    warm_leader = cluster.leader_of("warm", 0)
    with cluster.connect(warm_leader) as conn:
        open_member(conn, "g-warm", topic_id_of(conn, "warm"))
    coordinator = cluster.wait_for(lambda s: cluster.leader_of(STATE_TOPIC, 0) > 0 and
                                   cluster.leader_of(STATE_TOPIC, 0), what="a state leader")
    leader = next(n for n in cluster.node_ids if n != coordinator)
    third = next(n for n in cluster.node_ids if n not in (leader, coordinator))
    cluster.create_topic("jobs", assignments=[[leader, coordinator, third]])
    assert cluster.leader_of("jobs", 0) == leader

    with cluster.connect(leader) as conn:
        topic_id = topic_id_of(conn, "jobs")
        a = open_member(conn, "g-jobs", topic_id)  # the group starts here, at offset 0
        produce(conn, "jobs", 8)
        assert acquired(fetch_until(a, acquired, max_records=6)) == [(0, 5, 1)]
        answer = a.acknowledge([(0, 2, [ACCEPT, ACCEPT, REJECT]), (4, 4, [ACCEPT])])
        assert partition_of(answer).error_code == NONE

    cluster.kill(leader)  # the cluster fixture starts it again
    new_leader = cluster.wait_for_leader("jobs", 0, not_in=(leader,))
    with cluster.connect(new_leader) as conn:
        b = Member(conn, "g-jobs", topic_id)
        assert redelivered(b, 4) == [(3, 3, 2), (5, 5, 2), (6, 7, 1)]
        done = b.acknowledge([(3, 3, [ACCEPT]), (5, 7, [ACCEPT])])
        assert partition_of(done).error_code == NONE
        assert acquired(b.fetch()) == []


def test_a_follower_answers_not_leader_with_the_leader_and_its_endpoint(cluster):
    first, second, third = cluster.node_ids
    cluster.create_topic("elsewhere", assignments=[[first, second, third]])
    with cluster.connect(second) as conn:
        answer = Member(conn, "g-elsewhere", topic_id_of(conn, "elsewhere")).fetch()
    partition = partition_of(answer)
    assert answer.error_code == NONE and partition.error_code == NOT_LEADER_OR_FOLLOWER
    assert partition.current_leader.leader_id == first
    endpoints = {e.node_id: e.port for e in answer.node_endpoints}
    assert endpoints == {first: cluster.broker(first).port}


# -- a kill -9 under load, confluent-kafka share consumers -------------------------------------

class Load:
    """An idempotent acks=all confluent-kafka producer writing ``topic`` in a thread (at
    most about 100 records a second) until ``stop``; ``acked`` holds the (topic,
    partition, offset) of every record acknowledged to it."""

    def __init__(self, bootstrap: str, topic: str):
        self.topic = topic
        self.acked: set[tuple[str, int, int]] = set()
        self.failed = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                   "enable.idempotence": True, "linger.ms": 5,
                                   "log_level": 0})
        self._thread = threading.Thread(target=self._run, daemon=True, name="share-load")
        self._thread.start()

    def _run(self) -> None:
        sent = 0
        while not self._stop.is_set():
            self._producer.produce(self.topic, b"job-%d" % sent, on_delivery=self._delivered)
            sent += 1
            self._producer.poll(0.01)

    def _delivered(self, error, message) -> None:
        with self._lock:
            if error is None:
                self.acked.add((message.topic(), message.partition(), message.offset()))
            else:
                self.failed += 1

    def stop(self) -> set[tuple[str, int, int]]:
        self._stop.set()
        self._thread.join(30)
        assert self._producer.flush(60) == 0, "every record answered"
        with self._lock:
            return set(self.acked)


def wait_for_more(worker: ShareWorker, more: int, seconds: float, what: str) -> None:
    """Wait (bounded) until ``more`` further records are acknowledged by the group."""
    target = len(worker.accepted) + more
    deadline = time.monotonic() + seconds
    while len(worker.accepted) < target:
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
        time.sleep(0.2)


def share_coordinator(cluster, warm: str) -> int:
    """The broker leading ``__share_group_state``-0 (every key's share coordinator here);
    a first share fetch creates the state topic if no test did yet."""
    cluster.create_topic(warm, 1)
    with cluster.connect(cluster.leader_of(warm, 0)) as conn:
        open_member(conn, f"{warm}-group", topic_id_of(conn, warm))

    def led(statuses):
        state = cluster.find_partition(cluster.freshest(statuses), STATE_TOPIC, 0)
        return state["leader"] if state is not None and state["leader"] > 0 else None
    return cluster.wait_for(led, 60, "a leader of __share_group_state-0")


def preferred_and_in_sync(cluster, partitions, victim: int):
    """A wait_for predicate: ``victim`` back in the ISR of each (topic, partition) and
    each led by its preferred replica again (leader.imbalance.check.interval.seconds)."""
    def back(statuses):
        image = cluster.freshest(statuses)
        for topic, index in partitions:
            state = cluster.find_partition(image, topic, index)
            if state is None or victim not in state["isr"] \
                    or state["leader"] != state["replicas"][0]:
                return False
        return True
    return back


def kill_under_load(cluster, topic: str, faults: list[tuple[int, tuple[str, int]]]) -> dict:
    """Share consumers read ``topic`` (2 partitions) while it is written; for each
    (victim, moved) in turn, once the group acknowledges: ``victim`` is killed with
    SIGKILL, ``moved`` gets a new leader, the group goes on acknowledging, ``victim``
    starts again and is in sync and leading its partitions again.  Then the producer
    stops and the group drains.  check_share's summary, with no violation."""
    group = f"{topic}-group"
    worker = ShareWorker(cluster.bootstrap, [topic], consumers=2, group=group).start()
    load = Load(cluster.bootstrap, topic)
    in_flight_at_kills = []
    try:
        for victim, moved in faults:
            wait_for_more(worker, 100, 120, "the group acknowledging")
            worker.fault_begun()
            with worker._lock:
                in_flight_at_kills.append(len(worker.outstanding))
            cluster.kill(victim)
            cluster.wait_for_leader(*moved, not_in=(victim,), timeout_s=60)
            wait_for_more(worker, 100, 120, f"the group acknowledging without broker {victim}")
            cluster.start(victim)
            cluster.wait_for(preferred_and_in_sync(cluster, [(topic, 0), (topic, 1), moved],
                                                   victim), 120,
                             f"broker {victim} in sync and leading its partitions again")
            worker.fault_ended()
        wanted = load.stop()

        def starts():
            return group_starts(cluster.bootstrap.split(","), group, [topic], 2)
        left = worker.drain(wanted, 120, starts)
        worker.finish(15)
        worker.starts = starts()
    finally:
        load.stop()
        worker.finish(15)
    violations = ViolationLog()
    summary = check_share(worker, wanted, violations)
    summary["in_flight_at_kills"] = in_flight_at_kills
    print(f"share group under kill -9 of brokers {[v for v, _ in faults]}: {summary}")
    assert not violations.counts, f"{violations.examples} ({len(left)} left)\n{summary}"
    assert summary["missing"] == 0 and summary["lost_acknowledgements"] == 0, summary
    assert summary["acknowledged"] == len(wanted) > 400, summary
    return summary


def test_kill_9_of_the_share_coordinator_then_of_a_leader_under_load_loses_no_ack(cluster):
    """First the coordinator's broker, which leads no partition of the topic: only the
    share state moves (its partition's new leader loads every key) and the leaders keep
    their locks.  Then a leader that is not the coordinator: its share partitions are
    loaded by the new leader, which hands out again only the records left in flight."""
    coordinator = share_coordinator(cluster, "warm-load")
    a, b = (n for n in cluster.node_ids if n != coordinator)
    cluster.create_topic("load", assignments=[[a, b, coordinator], [b, a, coordinator]])
    kill_under_load(cluster, "load", [(coordinator, (STATE_TOPIC, 0)), (a, ("load", 0))])

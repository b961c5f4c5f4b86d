"""Consume-transform-produce through the crash of a broker that is BOTH the consumer group's
coordinator and the transactional id's coordinator (kill -9, 3 brokers, confluent-kafka).

A group's coordinator leads its ``__consumer_offsets`` partition and a transactional id's
leads its ``__transaction_state`` partition (abs(Java hashCode(key)) % partitions of each
topic); here the two ids are picked so that one broker leads both, and that broker is
killed right after ``send_offsets_to_transaction`` returned, before the commit.  Both
coordinators then move at once: the commit's EndTxn is retried at the new transaction
coordinator (which loaded ``__transaction_state``), whose COMMIT markers go to the new
leader of the group's ``__consumer_offsets`` partition (which loaded the group and the
transaction's pending offsets).  Checked after the fact: the output holds every input
exactly once and the group's committed offsets are the end of the input.
``test_txn_failover.py`` kills the two coordinators separately.

librdkafka 2.16 (confluent-kafka 2.16.1) has a client-side hang here, not a broker one:
once the dead broker is fenced it drops out of Metadata (as in Kafka, whose KRaft metadata
leaves fenced brokers out) and librdkafka decommissions it, but its coordinator cache may
still name it as the group's coordinator.  A ``send_offsets_to_transaction`` issued after
that gets AddOffsetsToTxn answered by the new transaction coordinator and then waits for
the dead broker's connection to come up, which never happens: no FindCoordinator, no
TxnOffsetCommit (confluentinc/librdkafka#5511, fix proposed in #5512), and its own timeout
is never checked (#5456, fix proposed in #5457), so it blocks for good while the
decommissioned broker's thread spins.  Killing both coordinators makes this likely (4 of
10 runs of the same loop with a single producer) because the commit cannot finish before
the transaction coordinator has moved, which happens together with the fencing, so the
next ``send_offsets_to_transaction`` starts right about when the broker drops out of
Metadata.  The loop below therefore goes on with a new producer (same transactional id, an
empty coordinator cache) after the crash, once every live broker names a live coordinator
for both ids; that is the workaround for applications on librdkafka 2.16 too.  The loop
runs in a thread with a bound, so a hang fails the test instead of blocking the run.
"""
from __future__ import annotations

import threading
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from kafka.protocol.metadata import FindCoordinatorRequest

from tests.integration.test_txn_failover import (
    PARTITIONS,
    WAIT_S,
    assert_exactly_once_with_offsets,
    describe_txn,
    find_group_coordinator,
    find_txn_coordinator,
    new_producer,
    txn_cluster,
)

PER_PARTITION = 40
KILL_AT_BATCH = 4
OP_TIMEOUT_S = 15.0      # each send_offsets_to_transaction / commit / abort
LOOP_BOUND_S = 120.0     # the whole loop, crash included (about 15 s when it works)


def pick_colocated_ids(cluster, group_prefix: str, tid_prefix: str) -> tuple[str, str, int]:
    """A group id and a transactional id coordinated by the same broker (FindCoordinator
    key types 0 and 1), and that broker."""
    group = f"{group_prefix}-group"
    coordinator = find_group_coordinator(cluster, group)
    for n in range(64):
        tid = f"{tid_prefix}-{n}"
        if find_txn_coordinator(cluster, tid) == coordinator:
            return group, tid, coordinator
    raise AssertionError(f"no transactional id among 64 coordinated by broker {coordinator}")


def wait_coordinators_moved(cluster, group: str, tid: str, dead: int) -> tuple[int, int]:
    """Bounded wait until every running broker answers FindCoordinator for ``group`` and
    ``tid`` with the same live broker (not ``dead``); the two coordinators."""
    deadline = time.monotonic() + WAIT_S
    answers: dict = {}
    while time.monotonic() < deadline:
        answers = {}
        for node_id in cluster.running():
            for key, key_type in ((group, 0), (tid, 1)):
                try:
                    with cluster.connect(node_id) as conn:
                        reply = conn.request(FindCoordinatorRequest[3](key=key, key_type=key_type))
                    answers[(node_id, key_type)] = (reply.error_code, reply.node_id)
                except OSError as exc:
                    answers[(node_id, key_type)] = repr(exc)
        named: dict[int, set[int]] = {0: set(), 1: set()}
        settled = True
        for (_, key_type), answer in answers.items():
            if isinstance(answer, str) or answer[0] != 0 or answer[1] == dead:
                settled = False
            else:
                named[key_type].add(answer[1])
        if settled and len(named[0]) == len(named[1]) == 1:
            return named[0].pop(), named[1].pop()
        time.sleep(0.2)
    raise AssertionError(f"coordinators of {group} / {tid} never settled off broker {dead}: "
                         f"{answers}")


class Loop:
    """The consume-transform-produce loop, run in a thread by ``run_bounded``."""

    def __init__(self, cluster, source: str, sink: str, group: str, tid: str, victim: int):
        self.cluster, self.source, self.sink = cluster, source, sink
        self.group, self.tid, self.victim = group, tid, victim
        self.errors: list[str] = []
        self.batches = 0
        self.killed = False
        self.finished = False
        self.moved: tuple[int, int] | None = None
        self.doing = "starting"
        self.failure: BaseException | None = None
        # replaced producers: destroyed after the loop, not inside its bound (librdkafka's
        # destroy joins every broker thread, the decommissioned one's included)
        self.retired: list[Producer] = []

    def note(self, what: str) -> None:
        self.errors.append(f"batch {self.batches}: {what}")

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # reported by run_bounded in the test's thread
            self.failure = exc

    def _run(self) -> None:
        bootstrap = self.cluster.bootstrap
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": self.group,
                             "isolation.level": "read_committed", "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "session.timeout.ms": 10_000,
                             "heartbeat.interval.ms": 500, "fetch.wait.max.ms": 100})
        producer = new_producer(bootstrap, self.tid)
        consumer.subscribe([self.source])
        deadline = time.monotonic() + LOOP_BOUND_S
        try:
            while not self.finished and time.monotonic() < deadline:
                self.doing = "consume"
                msgs = consumer.consume(num_messages=10, timeout=0.5)
                for msg in msgs:
                    assert msg.error() is None, msg.error()
                if not msgs:
                    continue
                self.batches += 1
                crash = self.batches == KILL_AT_BATCH
                try:
                    producer.begin_transaction()
                    for msg in msgs:
                        producer.produce(self.sink, value=b"out-" + msg.value(),
                                         partition=msg.partition())
                    positions = consumer.position(consumer.assignment())
                    self.doing = f"send_offsets_to_transaction (batch {self.batches})"
                    producer.send_offsets_to_transaction(
                        positions, consumer.consumer_group_metadata(), OP_TIMEOUT_S)
                    if crash:
                        self.cluster.kill(self.victim)
                        self.killed = True
                    self.doing = f"commit_transaction (batch {self.batches})"
                    self._commit(producer)
                    self.finished = sorted((tp.partition, tp.offset) for tp in positions) == \
                        [(p, PER_PARTITION) for p in range(PARTITIONS)]
                except KafkaException as exc:
                    error = exc.args[0]
                    self.note(str(error))
                    if error.txn_requires_abort() and not error.fatal():
                        self.doing = f"abort_transaction (batch {self.batches})"
                        producer.abort_transaction(OP_TIMEOUT_S)
                    else:
                        self.retired.append(producer)
                        producer = new_producer(bootstrap, self.tid)
                    self._rewind(consumer)
                if crash:
                    # librdkafka #5511: a new producer, whose coordinator cache cannot name
                    # the decommissioned broker (see the module docstring).
                    self.doing = "waiting for both coordinators to move"
                    self.moved = wait_coordinators_moved(self.cluster, self.group, self.tid,
                                                         self.victim)
                    self.retired.append(producer)
                    producer = new_producer(bootstrap, self.tid)
            if self.finished:
                self.doing = "the end transaction"
                producer.begin_transaction()
                for p in range(PARTITIONS):
                    producer.produce(self.sink, value=f"end-{p}".encode(), partition=p)
                producer.commit_transaction(WAIT_S)
            self.doing = "done"
        finally:
            consumer.close()

    def _commit(self, producer: Producer) -> None:
        for _ in range(3):
            try:
                producer.commit_transaction(OP_TIMEOUT_S)
                return
            except KafkaException as exc:
                if not exc.args[0].retriable() or exc.args[0].txn_requires_abort():
                    raise
                self.note(f"commit retried: {exc.args[0]}")
        raise AssertionError(f"commit never went through: {self.errors[-3:]}")

    def _rewind(self, consumer: Consumer) -> None:
        """Back to the group's committed offsets (the aborted batch is consumed again)."""
        for tp in consumer.committed(consumer.assignment(), timeout=WAIT_S):
            try:
                consumer.seek(TopicPartition(self.source, tp.partition,
                                             tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))
            except KafkaException as exc:        # no longer assigned: the rebalance resets it
                self.note(f"seek {tp}: {exc.args[0]}")

    def run_bounded(self) -> None:
        worker = threading.Thread(target=self.run, name="ctp-loop", daemon=True)
        worker.start()
        worker.join(LOOP_BOUND_S + 2 * WAIT_S)
        assert not worker.is_alive(), (
            f"the loop is stuck in {self.doing} after {self.batches} batches (broker "
            f"{self.victim} killed: {self.killed}); client errors {self.errors[-8:]}; the "
            f"coordinator says {describe_txn(self.cluster.bootstrap, self.tid)}")
        if self.failure is not None:
            raise self.failure


def test_consume_transform_produce_through_the_crash_of_both_coordinators(
        raftwood_cluster_factory):
    cluster = txn_cluster(raftwood_cluster_factory)
    settings = {"min.insync.replicas": 2}
    source = cluster.create_topic("ctp-colocated-in", PARTITIONS, 3, settings)
    sink = cluster.create_topic("ctp-colocated-out", PARTITIONS, 3, settings)
    group, tid, victim = pick_colocated_ids(cluster, "ctp-colocated", "ctp-colocated-tid")
    plain = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})
    for i in range(PER_PARTITION):
        for p in range(PARTITIONS):
            plain.produce(source, value=f"in-{p}-{i}".encode(), partition=p)
    assert plain.flush(WAIT_S) == 0

    loop = Loop(cluster, source, sink, group, tid, victim)
    loop.run_bounded()
    assert loop.killed, f"broker {victim} was never killed ({loop.batches} batches)"
    assert loop.finished, (f"inputs not all committed after {loop.batches} batches; "
                           f"errors {loop.errors[-8:]}")
    group_coordinator, txn_coordinator = loop.moved
    assert victim not in (group_coordinator, txn_coordinator)

    assert_exactly_once_with_offsets(cluster, source, sink, group, PER_PARTITION, loop.errors)
    print(f"broker {victim} coordinated {group} and {tid}, killed after send_offsets of batch "
          f"{KILL_AT_BATCH} of {loop.batches}; now group coordinator {group_coordinator}, "
          f"transaction coordinator {txn_coordinator}; client errors {loop.errors}")

"""The pytest plugin's chaos API, used only as its docstring documents it: a ChaosCluster
whose network the test cuts with ``isolate``, ``partition`` and ``heal``, waiting with
``wait_healthy``, in both modes: ``netns`` (every broker in a network namespace of its
own; root) and ``proxy`` (a loopback proxy in front of every broker; no root needed, and
run as root too).

* a consume-transform-produce pipeline (confluent-kafka: read_committed group consumer,
  transactional producer, offsets sent to the transaction) keeps running while the leader
  of its input partition is partitioned away from its followers and from every client,
  then healed: the output is exactly the input transformed, in order, none lost, none
  twice, and the group's committed offset is the input's end;
* isolating a partition leader fences it and moves the leadership to the majority;
  healing brings it back into the ISR;
* (proxy mode) a restarted broker partitioned from the other brokers alone is fenced,
  yet clients still reach it.

One cluster per mode for the module; each test heals what it cut and waits for health
before it ends.  The netns variant is skipped where network namespaces cannot be built
(not root, no ``ip``/``nft``).
"""
from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from broker.testing import (
    BrokerError,
    ChaosCluster,
    KafkaConnection,
    chaos_unavailable,
    pick_chaos_mode,
)

WAIT_S = 60.0
PIPELINE_S = 240.0        # bound of the whole pipeline run
SETTINGS = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
            "group.initial.rebalance.delay.ms": 100,
            "unclean.leader.election.enable": "false"}
TOPIC_CONFIGS = {"min.insync.replicas": 2}


@pytest.fixture(scope="module", params=["netns", "proxy"])
def chaos_cluster(request, tmp_path_factory):
    """One started ChaosCluster of three brokers in each mode; at the end every broker
    must stop with exit code 0 and the network is gone."""
    why = chaos_unavailable(request.param)
    if why is not None:
        pytest.skip(f"a chaos cluster in mode {request.param} cannot run here: {why}")
    cluster = ChaosCluster(tmp_path_factory.mktemp(f"chaos-{request.param}"), 3,
                           mode=request.param, settings=SETTINGS)
    assert cluster.mode == request.param
    try:
        cluster.start_all()
        yield cluster
    finally:
        codes = cluster.stop_all()
    bad = {n: c for n, c in codes.items() if c != 0}
    if bad:
        raise BrokerError(f"brokers exited with {bad} after SIGTERM\n{cluster.describe({})}")


@pytest.fixture
def cluster(chaos_cluster):
    """The module's cluster, healed and healthy again after the test."""
    yield chaos_cluster
    chaos_cluster.heal()
    chaos_cluster.wait_healthy(90)


def transform(value: bytes) -> bytes:
    return b"out-" + value


class Pipeline:
    """A consume-transform-produce loop in a thread, run as an exactly-once application
    should: a batch per transaction, the consumer's positions sent to the transaction;
    an abortable error aborts, any other error replaces the producer (same
    transactional.id, fencing the old one); either way the consumer rewinds to the
    group's committed offset.  ``committed`` is the input offset last committed."""

    def __init__(self, bootstrap: str, source: str, sink: str, group: str, tid: str):
        self.bootstrap, self.source, self.sink, self.tid = bootstrap, source, sink, tid
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group,
            "isolation.level": "read_committed", "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": 500, "fetch.wait.max.ms": 100,
            "socket.timeout.ms": 10_000, "reconnect.backoff.max.ms": 1000})
        self.producer: Producer | None = None
        self.committed = 0
        self.batches = 0
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="pipeline", daemon=True)

    def start(self) -> Pipeline:
        self.producer = self._new_producer()
        self.consumer.subscribe([self.source])
        self.thread.start()
        return self

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive(), "the pipeline thread did not stop"
        self.consumer.close()
        if self.failure is not None:
            raise AssertionError(f"the pipeline failed; errors {self.errors[-8:]}") \
                from self.failure

    def _new_producer(self) -> Producer:
        producer = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": self.tid,
                             "linger.ms": 5, "socket.timeout.ms": 10_000,
                             "transaction.timeout.ms": 30_000, "retry.backoff.ms": 200,
                             "reconnect.backoff.max.ms": 1000})
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                producer.init_transactions(15)
                return producer
            except KafkaException as exc:
                self.errors.append(f"init_transactions: {exc.args[0]}")
                if not exc.args[0].retriable() or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def _run(self) -> None:
        deadline = time.monotonic() + PIPELINE_S
        try:
            while not self.stop.is_set() and time.monotonic() < deadline:
                msgs = self.consumer.consume(num_messages=20, timeout=0.3)
                for msg in msgs:
                    assert msg.error() is None, msg.error()
                if msgs:
                    self._transaction(msgs)
        except BaseException as exc:  # reported by finish()
            self.failure = exc

    def _transaction(self, msgs) -> None:
        self.batches += 1
        try:
            self.producer.begin_transaction()
            for msg in msgs:
                self.producer.produce(self.sink, value=transform(msg.value()), partition=0)
            positions = self.consumer.position(self.consumer.assignment())
            self.producer.send_offsets_to_transaction(
                positions, self.consumer.consumer_group_metadata(), 15)
            self.producer.commit_transaction(15)
            self.committed = max(tp.offset for tp in positions)
        except KafkaException as exc:
            error = exc.args[0]
            self.errors.append(f"batch {self.batches}: {error}")
            self._recover(error)
            self._rewind()

    def _recover(self, error) -> None:
        if error.txn_requires_abort() and not error.fatal():
            try:
                self.producer.abort_transaction(15)
                return
            except KafkaException as exc:
                self.errors.append(f"abort: {exc.args[0]}")
        self.producer = self._new_producer()

    def _rewind(self) -> None:
        assignment = self.consumer.assignment()
        for tp in self.consumer.committed(assignment, timeout=WAIT_S):
            offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            try:
                self.consumer.seek(TopicPartition(self.source, tp.partition, offset))
            except KafkaException as exc:     # no longer assigned: the rebalance resets it
                self.errors.append(f"seek {tp}: {exc.args[0]}")


def produce_inputs(bootstrap: str, topic: str, start: int, count: int) -> list[bytes]:
    """``count`` numbered values, acks=all and idempotent, all acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 5, "message.timeout.ms": int(WAIT_S * 1000),
                         "socket.timeout.ms": 10_000, "reconnect.backoff.max.ms": 1000})
    values = [f"in-{i:05d}".encode() for i in range(start, start + count)]
    failed: list[str] = []
    for value in values:
        producer.produce(topic, value=value, partition=0,
                         on_delivery=lambda err, _msg: err and failed.append(str(err)))
    assert producer.flush(WAIT_S) == 0, "inputs still unacknowledged"
    assert not failed, f"inputs not delivered: {failed[:3]}"
    return values


def wait_until(condition, timeout_s: float, what: str):
    """Poll ``condition()`` until truthy (returned), AssertionError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.1)


def read_committed(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """The first ``count`` values of partition 0, read_committed (bounded)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-verifier",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100, "socket.timeout.ms": 10_000})
    got: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + WAIT_S
        while len(got) < count and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=0.2):
                assert msg.error() is None, msg.error()
                got.append(msg.value())
        for _ in range(5):  # anything beyond ``count`` is a duplicate: read on a little
            got += [m.value() for m in consumer.consume(num_messages=1000, timeout=0.2)
                    if m.error() is None]
    finally:
        consumer.close()
    return got


def test_pipeline_stays_exactly_once_across_a_partition_of_its_input_leader(cluster):
    """The input partition's leader is cut from its followers and every client while the
    pipeline runs (more input arrives meanwhile), then healed: the output is exactly
    the input transformed, the group's offset is the input's end, the cluster healthy."""
    source = cluster.create_topic("chaos-in", 1, 3, TOPIC_CONFIGS)
    sink = cluster.create_topic("chaos-out", 1, 3, TOPIC_CONFIGS)
    group = "chaos-pipeline"
    inputs = produce_inputs(cluster.bootstrap, source, 0, 400)
    pipeline = Pipeline(cluster.bootstrap, source, sink, group, "chaos-pipeline-tid").start()
    try:
        wait_until(lambda: pipeline.committed >= 40, WAIT_S, "the pipeline's first commits")
        leader = cluster.leader_of(source, 0)
        followers = [n for n in cluster.node_ids if n != leader]
        cluster.partition([leader], followers + [cluster.CLIENTS])
        at_cut = pipeline.committed
        new_leader = cluster.wait_for_leader(source, 0, not_in=[leader], timeout_s=WAIT_S)
        assert new_leader in followers
        inputs += produce_inputs(cluster.bootstrap, source, 400, 200)
        cluster.heal()
        cluster.wait_healthy(90)
        inputs += produce_inputs(cluster.bootstrap, source, 600, 200)
        wait_until(lambda: pipeline.committed >= len(inputs) or pipeline.failure,
                   PIPELINE_S / 2, f"the pipeline committing all {len(inputs)} inputs "
                   f"(at {pipeline.committed})")
    finally:
        pipeline.finish()
    assert at_cut < len(inputs), "the partition came after the pipeline had finished"
    output = read_committed(cluster.bootstrap, sink, len(inputs))
    want = [transform(v) for v in inputs]
    differ = next((i for i, (a, b) in enumerate(zip(output, want)) if a != b), None)
    assert output == want, (f"{len(output)} outputs for {len(want)} inputs; missing "
                            f"{sorted(set(want) - set(output))[:5]}, first difference at "
                            f"{differ}; client errors {pipeline.errors[-8:]}")
    checker = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    try:
        [committed] = checker.committed([TopicPartition(source, 0)], timeout=WAIT_S)
    finally:
        checker.close()
    assert committed.offset == len(inputs)
    cluster.wait_healthy(90)
    print(f"leader {leader} partitioned after input offset {at_cut}, {new_leader} took over; "
          f"{pipeline.batches} transactions; client errors {pipeline.errors}")


def test_isolating_a_leader_moves_leadership_and_heal_brings_it_back(cluster):
    """``isolate`` cuts the leader from brokers and clients: the majority fences it and
    elects another leader; after ``heal`` it rejoins, the ISR is full again."""
    topic = cluster.create_topic("chaos-isolate", 1, 3, TOPIC_CONFIGS)
    leader = cluster.leader_of(topic, 0)
    cluster.isolate(leader)
    assert all(leader in pair for pair in cluster.cuts()) and len(cluster.cuts()) == 3
    others = [n for n in cluster.node_ids if n != leader]
    cluster.wait_for(lambda s: next(b["fenced"] for b in cluster.freshest(s)["brokers"]
                                    if b["id"] == leader), WAIT_S,
                     f"broker {leader} fenced by the majority", nodes=others)
    new_leader = cluster.wait_for_leader(topic, 0, not_in=[leader], timeout_s=WAIT_S)
    assert new_leader in others
    cluster.heal()
    assert cluster.cuts() == []
    cluster.wait_healthy(90)
    assert sorted(cluster.partition_state(topic, 0)["isr"]) == cluster.node_ids


def test_cluster_factory_gives_a_chaos_cluster_on_request(raftwood_cluster_factory):
    """``chaos=True`` gives a ChaosCluster (netns where namespaces can be built, else
    proxy), ``chaos="proxy"`` one behind loopback proxies, both checking a partition's
    sides; without it the factory's cluster is the plain loopback one.  None is started:
    teardown removes the unbuilt network as well."""
    plain = raftwood_cluster_factory(start=False)
    assert not isinstance(plain, ChaosCluster)
    assert all(address.startswith("127.0.0.1:") for address in plain.bootstrap.split(","))
    picked = pick_chaos_mode()   # netns where it can run, else proxy; the environment's first
    chaos = raftwood_cluster_factory(chaos=True, start=False)
    assert isinstance(chaos, ChaosCluster) and chaos.mode == picked
    proxied = raftwood_cluster_factory(chaos="proxy", start=False)
    assert proxied.mode == "proxy"
    assert all(a.startswith("127.0.0.1:") for a in proxied.bootstrap.split(","))
    assert proxied.bootstrap != ",".join(b.bootstrap for b in proxied.brokers)
    if picked == "netns":
        assert not any(a.startswith("127.") for a in chaos.bootstrap.split(","))
    for each in (chaos, proxied):
        with pytest.raises(ValueError):
            each.partition([1], [1, 2])
        with pytest.raises(ValueError):
            each.partition([1], [])
        with pytest.raises(BrokerError):      # not started: there is no network to cut yet
            each.isolate(1)
    with pytest.raises(ValueError):
        raftwood_cluster_factory(chaos="firewall", start=False)


def test_a_follower_losing_every_packet_leaves_the_isr_until_healed(cluster):
    """``degrade`` with 100 % loss silences a follower (its fetches and its heartbeats):
    the ISR shrinks without it; ``heal`` brings it back in."""
    topic = cluster.create_topic("chaos-loss", 1, 3, TOPIC_CONFIGS)
    state = cluster.partition_state(topic, 0)
    controller = cluster.controller_id()
    follower = next(r for r in state["replicas"] if r not in (state["leader"], controller))
    applied = cluster.degrade(follower, loss_pct=100)
    assert "loss 100" in applied and cluster.degraded() == [follower]
    others = [n for n in cluster.node_ids if n != follower]
    cluster.wait_for_isr(topic, 0, others, timeout_s=WAIT_S)
    cluster.heal()
    assert cluster.degraded() == []
    cluster.wait_healthy(90)
    assert sorted(cluster.partition_state(topic, 0)["isr"]) == cluster.node_ids


def test_a_restarted_broker_cut_from_the_brokers_only_is_fenced_and_clients_still_reach_it(
        cluster):
    """A partition of the brokers alone cuts a restarted broker's links too (in proxy
    mode the proxy must know it by its new process): the majority fences it, while a
    client still reaches it; ``heal`` brings it back."""
    controller = cluster.controller_id()
    node = next(n for n in cluster.node_ids if n != controller)
    cluster.restart(node)
    others = [n for n in cluster.node_ids if n != node]
    cluster.partition([node], others)
    assert cluster.unreachable() == []
    cluster.wait_for(lambda s: next(b["fenced"] for b in cluster.freshest(s)["brokers"]
                                    if b["id"] == node), WAIT_S,
                     f"broker {node} fenced by the majority", nodes=others)
    with KafkaConnection(cluster.bootstrap.split(",")[node - 1], timeout_s=WAIT_S) as conn:
        assert conn.api_versions().error_code == 0
    cluster.heal()
    cluster.wait_healthy(90)

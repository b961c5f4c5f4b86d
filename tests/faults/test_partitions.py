"""Network partitions against real broker processes: the end-to-end regressions.

* An acks=all write waiting while its leader is cut from its followers (Kafka ports
  only; Raft up, so the controller commits the ISR shrink) is never acknowledged on the
  leader's copy alone: the shrink moves the HW to the leader's LEO, and the answer is
  NOT_ENOUGH_REPLICAS_AFTER_APPEND.  Runs over the loopback cut proxy: no root needed.
* With every broker in a network namespace of its own (root only; skipped elsewhere
  with the reason), a controller that also leads the partition is cut off from the
  other brokers, Raft included, while an idempotent acks=all producer writes.  The
  majority elects a new controller and leader; after the heal every broker's view
  agrees again, the replicas are identical below the HW, every acknowledged record is
  at its offset, and no broker's Raft node ever applied an entry it later had to
  truncate (pysyncobj logs that as "truncating already-applied log entries").
* A zombie leader — cut from every broker but still reachable by clients — acknowledges
  no acks=all write, and what it appended alone is gone after the heal.
"""
from __future__ import annotations

import pytest

from broker.harness.netns import netns_available
from broker.testing import build_batch
from broker.verify.cluster import VerifyCluster
from protocol.errors import ErrorCode
from tests.faults.checker import (
    OffsetWatch,
    assert_replicas_identical_below,
    wait_fully_replicated,
    wait_until,
)
from tests.faults.test_faults_replication import PacedProducer

SETTINGS = {"replica.lag.time.max.ms": 3000, "broker.session.timeout.ms": 3000}
TOPIC_CONFIGS = {"min.insync.replicas": "2"}
APPLIED_THEN_TRUNCATED = "truncating already-applied log entries"

needs_netns = pytest.mark.skipif(not netns_available()[0],
                                 reason=f"network namespaces: {netns_available()[1]}")


def one_record(value: bytes) -> bytes:
    return build_batch([(None, value, 1_000, [])])


@pytest.fixture
def proxied(tmp_path):
    vc = VerifyCluster(tmp_path, 3, proxy=True, settings=SETTINGS).start()
    try:
        yield vc
    finally:
        vc.close()


@pytest.fixture
def namespaced(tmp_path):
    vc = VerifyCluster(tmp_path, 3, proxy=False, netns=True, settings=SETTINGS)
    try:
        yield vc.start()
    finally:
        vc.close()


@pytest.mark.slow
def test_acks_all_waiting_through_an_isr_shrink_is_not_acknowledged_on_one_copy(proxied):
    cluster = proxied.cluster
    topic = cluster.create_topic("shrink", assignments=[[1, 2, 3]], configs=TOPIC_CONFIGS)
    cluster.wait_for_isr(topic, 0, [1, 2, 3])
    with cluster.connect(1) as conn:
        assert conn.produce(topic, 0, one_record(b"before"), acks=-1).error_code == 0
        proxied.proxy.isolate(1)   # followers cannot fetch; Raft still works
        answer = conn.produce(topic, 0, one_record(b"during"), acks=-1, timeout_ms=30_000)
    state = cluster.partition_state(topic, 0)
    assert state["isr"] == [1], f"the controller should have shrunk the ISR: {state}"
    assert answer.error_code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, \
        f"got {ErrorCode(answer.error_code).name}: one copy was acknowledged"


def _views(cluster, topic):
    """Each running broker's (leader, leader epoch, isr) for partition 0 of ``topic``."""
    statuses = cluster.statuses(timeout_s=2.0)
    views = {}
    for node, status in statuses.items():
        state = cluster.find_partition(status, topic, 0)
        if state:
            views[node] = (state["leader"], state["leader_epoch"], tuple(sorted(state["isr"])))
    return views


def _assert_all_acked_and_converged(vc, topic, producer, watch):
    cluster = vc.cluster
    high_watermark = wait_fully_replicated(cluster, topic, timeout_s=60)
    wait_until(lambda: len(set(_views(cluster, topic).values())) == 1
               and len(_views(cluster, topic)) == 3, 30, "every broker's view to agree")
    leader = cluster.leader_of(topic, 0)
    with cluster.connect(leader) as conn:
        stored = {r[0]: r[2] for r in conn.read_partition(topic, 0)}
    lost = [(o, v) for o, v in producer.acked.items() if stored.get(o) != v]
    assert not lost, f"{len(lost)} acknowledged records not at their offsets: {lost[:5]}"
    assert_replicas_identical_below(cluster, topic, 0, high_watermark, [1, 2, 3])
    watch.reread_all(leader)
    watch.assert_clean(min_observations=10)
    for node in (1, 2, 3):
        text = (vc.home / f"broker-{node}.log").read_text(errors="replace")
        assert APPLIED_THEN_TRUNCATED not in text, \
            f"broker {node}'s Raft node applied entries that were not committed"


@pytest.mark.slow
@needs_netns
def test_a_cut_off_controller_leaves_no_trace_after_the_heal(namespaced):
    vc, cluster = namespaced, namespaced.cluster
    controller = cluster.controller_id()
    others = [n for n in (1, 2, 3) if n != controller]
    topic = cluster.create_topic("cut-controller", assignments=[[controller] + others],
                                 configs=TOPIC_CONFIGS)
    cluster.wait_for_isr(topic, 0, [1, 2, 3])
    watch = OffsetWatch(cluster, topic).start()
    producer = PacedProducer(cluster.bootstrap, topic, 6_000).start()
    try:
        wait_until(lambda: len(producer.acked) >= 1_000, 60, "1k acknowledged records")
        vc.net.isolate(controller)              # Raft and Kafka ports, both directions
        cluster.wait_for(lambda s: all(s[n]["controller_id"] in others for n in others
                                       if n in s), 30, "a new controller on the majority side",
                         nodes=others)
        new_leader = cluster.wait_for_leader(topic, 0, not_in=[controller], timeout_s=30)
        acked_during = len(producer.acked)
        wait_until(lambda: len(producer.acked) >= acked_during + 500, 60,
                   "writes acknowledged by the new leader")
        vc.net.heal()
        producer.join(180)
        _assert_all_acked_and_converged(vc, topic, producer, watch)
    finally:
        watch.stop()
    assert new_leader in others
    assert not producer.errors, producer.errors[:5]


@pytest.mark.slow
@needs_netns
def test_a_zombie_leader_acknowledges_nothing_and_its_lone_writes_are_cut(namespaced):
    vc, cluster = namespaced, namespaced.cluster
    controller = cluster.controller_id()
    zombie = next(n for n in (1, 2, 3) if n != controller)
    others = [n for n in (1, 2, 3) if n != zombie]
    topic = cluster.create_topic("zombie", assignments=[[zombie] + others],
                                 configs=TOPIC_CONFIGS)
    cluster.wait_for_isr(topic, 0, [1, 2, 3])
    with cluster.connect(zombie) as conn:
        assert conn.produce(topic, 0, one_record(b"committed"), acks=-1).error_code == 0
        vc.net.isolate(zombie)                  # from the brokers; clients still reach it
        alone = conn.produce(topic, 0, one_record(b"alone"), acks=-1, timeout_ms=8_000)
    assert alone.error_code != 0, "a write on the zombie's copy alone was acknowledged"
    cluster.wait_for_leader(topic, 0, not_in=[zombie], timeout_s=30)
    vc.net.heal()
    wait_fully_replicated(cluster, topic, timeout_s=60)
    with cluster.connect(cluster.leader_of(topic, 0)) as conn:
        values = [r[2] for r in conn.read_partition(topic, 0)]
    assert values[0] == b"committed"
    assert b"alone" not in values, "the zombie's unacknowledged write survived the heal"

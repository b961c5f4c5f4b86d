"""Replication under faults (issue 4): kill -9 and SIGSTOP against a 3-broker cluster
while real clients write, then a checker reads everything back.

Invariants asserted here (tests/faults/checker.py does the polling and the byte
comparison):
  * every acknowledged record is read back at its acknowledged offset;
  * a leader's uncommitted tail is truncated when it returns as follower (A→B→A), and
    afterwards every replica stores the same bytes below the high watermark;
  * ListOffsets latest and each leader's high watermark never go backwards, no consumer
    fetch returns a batch at or above the high watermark of its response, and a record
    once read never reads differently.
"""
from __future__ import annotations

import threading
import time

from confluent_kafka import Producer

from broker.testing import FAST_CLUSTER_SETTINGS, build_batch
from tests.faults.checker import (
    OffsetWatch,
    assert_replicas_identical_below,
    wait_fully_replicated,
    wait_until,
)

NONE = 0
SESSION_S = int(FAST_CLUSTER_SETTINGS["broker.session.timeout.ms"]) / 1000.0
FAILOVER_BOUND_S = SESSION_S + 12.0
TOTAL_RECORDS = 20_000


class PacedProducer:
    """confluent-kafka, acks=all, idempotent, writing ``total`` records to partition 0 in
    a background thread at a bounded pace (so the run spans the faults).  ``acked`` maps
    each acknowledged offset to its value (from delivery reports); ``errors`` holds the
    failed deliveries."""

    def __init__(self, bootstrap: str, topic: str, total: int, per_tick: int = 200,
                 tick_s: float = 0.08):
        self.topic = topic
        self.total = total
        self.per_tick = per_tick
        self.tick_s = tick_s
        self.acked: dict[int, bytes] = {}
        self.errors: list = []
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 10, "message.timeout.ms": 90_000, "retry.backoff.ms": 100,
            "socket.timeout.ms": 10_000, "topic.metadata.refresh.interval.ms": 1_000})
        self.thread = threading.Thread(target=self._run, daemon=True, name="PacedProducer")

    def _on_delivery(self, err, msg) -> None:
        if err is not None:
            self.errors.append(err)
        else:
            self.acked[msg.offset()] = msg.value()

    def _run(self) -> None:
        for start in range(0, self.total, self.per_tick):
            for i in range(start, min(start + self.per_tick, self.total)):
                while True:
                    try:
                        self.producer.produce(self.topic, value=b"rec-%06d" % i, partition=0,
                                              on_delivery=self._on_delivery)
                        break
                    except BufferError:
                        self.producer.poll(0.1)
            self.producer.poll(self.tick_s)
        self.producer.flush(120)

    def start(self) -> PacedProducer:
        self.thread.start()
        return self

    def join(self, timeout_s: float) -> None:
        self.thread.join(timeout_s)
        assert not self.thread.is_alive(), "the producer did not finish in time"


def test_every_acknowledged_record_survives_leader_kill_9_and_restart(cluster):
    """RF=3, min.insync.replicas=2, acks=all: 20k records while the leader is killed -9
    (a new leader from the ISR takes over) and later restarted (it catches up, rejoins
    and becomes leader again).  Every acknowledged record is at its acknowledged offset,
    nothing else is in the log, the replicas are identical below the HW, and the watch
    saw no offset go backwards and no read above the HW."""
    topic = cluster.create_topic("acked-20k", assignments=[[1, 2, 3]],
                                 configs={"min.insync.replicas": "2"})
    cluster.wait_for_isr(topic, 0, [1, 2, 3])
    watch = OffsetWatch(cluster, topic).start()
    producer = PacedProducer(cluster.bootstrap, topic, TOTAL_RECORDS).start()
    try:
        wait_until(lambda: len(producer.acked) >= 4_000, 60, "4k acknowledged records")
        cluster.kill(1)
        new_leader = cluster.wait_for_leader(topic, 0, not_in=[1], timeout_s=FAILOVER_BOUND_S)
        wait_until(lambda: len(producer.acked) >= 10_000, 90, "10k acknowledged records")
        cluster.start(1)
        producer.join(180)
        cluster.wait_for_isr(topic, 0, [1, 2, 3], timeout_s=60)
        cluster.wait_for(lambda s: cluster.find_partition(cluster.freshest(s), topic, 0)
                         ["leader"] == 1, 30, "broker 1 leading again (preferred replica)")
        leader = cluster.wait_for_leader(topic, 0)
        high_watermark = wait_fully_replicated(cluster, topic)
    finally:
        watch.stop()

    assert new_leader in (2, 3)
    assert not producer.errors, producer.errors[:5]
    assert len(producer.acked) == TOTAL_RECORDS
    with cluster.connect(leader) as conn:
        stored = {r[0]: r[2] for r in conn.read_partition(topic, 0)}
    lost = [(o, v) for o, v in producer.acked.items() if stored.get(o) != v]
    assert not lost, f"{len(lost)} acknowledged records not at their offsets: {lost[:5]}"
    assert sorted(stored.values()) == sorted(producer.acked.values()), \
        "the log holds records nobody had acknowledged, or duplicates"
    assert high_watermark == len(stored)
    assert_replicas_identical_below(cluster, topic, 0, high_watermark, [1, 2, 3])
    watch.reread_all(leader)
    watch.assert_clean(min_observations=20)
    assert watch.fetched_batches > 0 and len(watch.values) > 1_000


def test_leader_change_a_b_a_truncates_the_uncommitted_tail_and_replicas_agree(
        cluster):
    """A (broker 1) leads; B and C are paused while A appends records with acks=1, so A
    alone holds them (uncommitted: the HW cannot pass the paused followers).  A is
    killed -9, B and C resumed: B leads (epoch+1) and takes new writes at the same
    offsets.  A restarts, truncates its tail (KIP-101/279), catches up, rejoins the ISR
    and leads again (preferred replica).  The replicas then store identical bytes below
    the HW; A's records beyond B's log are gone, every acks=all record is there."""
    topic = cluster.create_topic("a-b-a", assignments=[[1, 2, 3]])
    committed: list[bytes] = []
    with cluster.connect(1) as conn:
        for serial in range(10):
            values = [b"committed-%d-%d" % (serial, i) for i in range(10)]
            answer = conn.produce(topic, 0, _batch(values), acks=-1)
            assert (answer.error_code, answer.base_offset) == (NONE, len(committed))
            committed += values
    assert wait_fully_replicated(cluster, topic) == 100

    watch = OffsetWatch(cluster, topic).start()
    try:
        cluster.pause(2)
        cluster.pause(3)
        only_on_a: list[bytes] = []
        with cluster.connect(1) as conn:
            for serial in range(5):
                values = [b"uncommitted-%d-%d" % (serial, i) for i in range(10)]
                answer = conn.produce(topic, 0, _batch(values), acks=1)
                assert (answer.error_code, answer.base_offset) == (NONE, 100 + serial * 10)
                only_on_a += values
        hosted = cluster.hosted(1, topic, 0)
        assert (hosted["log_end_offset"], hosted["high_watermark"]) == (150, 100), hosted
        cluster.kill(1)
        cluster.resume(2)
        cluster.resume(3)

        b = cluster.wait_for_leader(topic, 0, not_in=[1], timeout_s=FAILOVER_BOUND_S)
        with cluster.connect(b) as conn:
            for serial in range(3):
                values = [b"from-b-%d-%d" % (serial, i) for i in range(10)]
                answer = conn.produce(topic, 0, _batch(values), acks=-1)
                assert answer.error_code == NONE
                if serial == 0:
                    # A follower's long-poll fetch pending at A when it was paused is
                    # answered by A's first append: that batch may sit in its socket and be
                    # appended on resume (Kafka's semantics too).  So B's log may reach past
                    # 100; whatever it holds below its first new offset is kept.
                    divergence = answer.base_offset
                    assert divergence in (100, 110, 120, 130, 140), divergence
                    committed += only_on_a[:divergence - 100]
                assert answer.base_offset == len(committed)
                committed += values

        cluster.start(1)
        cluster.wait_for(lambda s: cluster.find_partition(cluster.freshest(s), topic, 0)
                         ["leader"] == 1, 40, "broker 1 back in the ISR and leading again")
        assert cluster.wait_for_leader(topic, 0) == 1
        with cluster.connect(1) as conn:
            for serial in range(2):
                values = [b"from-a-again-%d-%d" % (serial, i) for i in range(10)]
                answer = conn.produce(topic, 0, _batch(values), acks=-1)
                assert (answer.error_code, answer.base_offset) == (NONE, len(committed))
                committed += values
        high_watermark = wait_fully_replicated(cluster, topic)
    finally:
        watch.stop()

    assert b in (2, 3)
    assert high_watermark == len(committed)
    log_text = cluster.broker(1).log_path.read_text(errors="replace")
    assert f"truncated from 150 to {divergence}" in log_text, \
        f"broker 1 did not cut its tail at {divergence}"
    assert_replicas_identical_below(cluster, topic, 0, high_watermark, [1, 2, 3])
    with cluster.connect(1) as conn:
        values = [r[2] for r in conn.read_partition(topic, 0)]
    assert values == committed, "the log is not exactly the acks=all records"
    watch.reread_all(1)
    watch.assert_clean(min_observations=10)


def _batch(values: list[bytes]) -> bytes:
    now_ms = int(time.time() * 1000)
    return build_batch([(None, v, now_ms, []) for v in values])

"""The data plane on three real broker processes (issue 4): ISR membership by lag time,
the high watermark over the ISR, min.insync.replicas, visibility below the HW, and
monotonic offsets across a leader change.

Leader and follower state comes from each broker's status request (broker/testing/);
records go in and out through raw requests where the test needs exact offsets and error
codes, and through kafka-python where a real consumer's view matters.  Bounds are
generous: they catch hangs and missing transitions, they do not measure.
"""
from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import NotEnoughReplicasError

from broker.testing import ClusterProcess, build_batch
from protocol.records import iter_headers
from tests.faults.checker import OffsetWatch, wait_fully_replicated

NONE = 0
NOT_ENOUGH_REPLICAS = 19
OFFSET_NOT_AVAILABLE = 78
SLACK_S = 10.0


def _batch(values: list[bytes]) -> bytes:
    now_ms = int(time.time() * 1000)
    return build_batch([(None, v, now_ms, []) for v in values])


def _leader_view(cluster: ClusterProcess, topic: str, follower: int) -> tuple[int, int, int]:
    """(leader HW, leader LEO, the follower's LEO as the leader knows it)."""
    hosted = cluster.hosted(1, topic, 0)
    assert hosted["role"] == "leader", hosted
    [known] = [f for f in hosted["followers"] if f["replica_id"] == follower]
    return hosted["high_watermark"], hosted["log_end_offset"], known["log_end_offset"]


def _assert_fetch_below_hw(cluster: ClusterProcess, topic: str, leader: int,
                           offset: int = 0) -> int:
    """A consumer Fetch from ``offset``: every returned batch ends below the HW of the
    same response.  Returns that HW."""
    with cluster.connect(leader) as conn:
        data = conn.fetch(topic, 0, offset, max_bytes=8 << 20)
    assert data.error_code == NONE, data
    for header in iter_headers(bytes(data.records or b"")):
        assert header.last_offset < data.high_watermark, (
            f"batch {header.base_offset}..{header.last_offset} served above "
            f"HW {data.high_watermark}")
    return data.high_watermark


def test_min_insync_replicas_3_with_a_follower_stopped_refuses_acks_all(cluster):
    """min.insync.replicas=3: with every replica in sync acks=all succeeds; once a stopped
    follower has left the ISR, acks=all is refused with NOT_ENOUGH_REPLICAS before anything
    is appended (raw request and kafka-python's error), acks=1 still succeeds; when the
    follower is back in the ISR acks=all succeeds again."""
    topic = cluster.create_topic("min-isr-3", assignments=[[1, 2, 3]],
                                 configs={"min.insync.replicas": "3"})
    cluster.wait_for_isr(topic, 0, [1, 2, 3])
    with cluster.connect(1) as conn:
        assert conn.produce(topic, 0, _batch([b"all-in-sync"]), acks=-1).error_code == NONE

    assert cluster.stop(3) == 0
    cluster.wait_for_isr(topic, 0, [1, 2], timeout_s=SLACK_S)
    with cluster.connect(1) as conn:
        leo_before = cluster.hosted(1, topic, 0)["log_end_offset"]
        refused = conn.produce(topic, 0, _batch([b"refused"]), acks=-1)
        assert refused.error_code == NOT_ENOUGH_REPLICAS, refused
        assert cluster.hosted(1, topic, 0)["log_end_offset"] == leo_before, \
            "a refused acks=all batch must not be appended"
        accepted = conn.produce(topic, 0, _batch([b"acks-1"]), acks=1)
        assert (accepted.error_code, accepted.base_offset) == (NONE, leo_before)

    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", retries=0,
                             request_timeout_ms=10_000, max_block_ms=10_000)
    try:
        with pytest.raises(NotEnoughReplicasError):
            producer.send(topic, b"client", partition=0).get(timeout=20)
    finally:
        producer.close(timeout=5)

    cluster.start(3)
    cluster.wait_for_isr(topic, 0, [1, 2, 3], timeout_s=30)
    with cluster.connect(1) as conn:
        back = conn.produce(topic, 0, _batch([b"back-in-sync"]), acks=-1)
    assert (back.error_code, back.base_offset) == (NONE, leo_before + 1), back


def test_paused_follower_leaves_and_rejoins_the_isr_and_the_hw_stalls_only_while_in_it(
        raftwood_cluster_factory):
    """A follower stopped with SIGSTOP stays in the ISR at first: the leader's HW stalls at
    the follower's LEO while its own LEO moves on, and consumers (raw Fetch and
    kafka-python) see nothing at or above that HW.  Within replica.lag.time.max.ms plus
    slack it leaves the ISR and the HW advances to the LEO; after SIGCONT it catches up
    and rejoins.  Sessions are long (20 s) so the ISR change comes from the lag rule, not
    from fencing."""
    lag_s = 3.0
    cluster = raftwood_cluster_factory(**{"replica.lag.time.max.ms": int(lag_s * 1000),
                                          "broker.session.timeout.ms": 20_000})
    topic = cluster.create_topic("paused-follower", assignments=[[1, 2, 3]])
    with cluster.connect(1) as conn:
        assert conn.produce(topic, 0, _batch([b"c-%d" % i for i in range(50)]),
                            acks=-1).error_code == NONE
    assert wait_fully_replicated(cluster, topic) == 50
    follower = 3 if cluster.controller_id() != 3 else 2
    other = 5 - follower

    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False,
                             fetch_max_wait_ms=100, request_timeout_ms=15_000)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    try:
        # Read what is committed before the pause, so the consumer already has metadata
        # and its connection to the leader: a metadata refresh sent to the paused broker
        # would hang until kafka-python's request timeout and fetch nothing meanwhile.
        seen_before: list[int] = []
        deadline = time.monotonic() + SLACK_S
        while len(seen_before) < 50 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                seen_before += [r.offset for r in records]
        assert seen_before == list(range(50))
        paused_at = time.monotonic()
        cluster.pause(follower)
        with cluster.connect(1) as conn:
            for serial in range(10):
                answer = conn.produce(topic, 0, _batch([b"lag-%d-%d" % (serial, i)
                                                        for i in range(10)]), acks=1)
                assert (answer.error_code, answer.base_offset) == (NONE, 50 + serial * 10)

        # In the ISR and behind (its last fetch came at most replica.fetch.wait.max.ms
        # before the pause, so for the first third of the lag time at least): the HW may
        # not pass the follower's LEO, and no consumer sees anything at or above it.
        seen_by_consumer: list[int] = list(seen_before)
        while time.monotonic() - paused_at < lag_s / 3:
            hw, leo, follower_leo = _leader_view(cluster, topic, follower)
            assert leo == 150 and hw <= follower_leo == 50, (hw, leo, follower_leo)
            assert _assert_fetch_below_hw(cluster, topic, 1) == hw
            for records in consumer.poll(timeout_ms=100).values():
                seen_by_consumer += [r.offset for r in records]
            assert max(seen_by_consumer, default=-1) < hw, "a consumer read above the HW"
        assert follower in cluster.partition_state(topic, 0)["isr"]

        cluster.wait_for_isr(topic, 0, [1, other], timeout_s=lag_s + SLACK_S)
        left_after_s = time.monotonic() - paused_at
        assert left_after_s <= lag_s + SLACK_S

        # Out of the ISR: the HW advances to the LEO without the paused follower.
        cluster.wait_for(lambda s: cluster.find_hosted(s[1], topic, 0)["high_watermark"] == 150,
                         SLACK_S, "the HW at the LEO without the paused follower")
        hw, leo, follower_leo = _leader_view(cluster, topic, follower)
        assert (hw, leo, follower_leo) == (150, 150, 50)
        assert _assert_fetch_below_hw(cluster, topic, 1) == 150
        deadline = time.monotonic() + SLACK_S
        while len(seen_by_consumer) < 150 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                seen_by_consumer += [r.offset for r in records]
        assert seen_by_consumer == list(range(150))
    finally:
        consumer.close()
        if cluster.broker(follower).paused:
            cluster.resume(follower)

    cluster.resume(follower)
    cluster.wait_for_isr(topic, 0, [1, 2, 3], timeout_s=lag_s + SLACK_S)
    assert wait_fully_replicated(cluster, topic) == 150


def test_list_offsets_latest_never_goes_back_when_a_lagging_follower_takes_over(
        raftwood_cluster_factory):
    """KIP-207: a follower learns the HW one fetch late, so a new leader can start with an
    HW below the old leader's.  ListOffsets latest must then answer OFFSET_NOT_AVAILABLE
    (clients retry) rather than an offset below one already given out, until the HW
    reaches the new leader epoch's start offset.

    Made certain here: a long follower fetch wait (5 s) means the followers' parked
    fetches never bring back the last HW (110).  Roles: the controller is the follower
    that takes over (it commits the change, so it sees it at once); the third broker is
    paused so it cannot fetch from the new leader (long sessions keep it in the ISR); the
    old leader leaves by SIGTERM, whose controlled shutdown elects the new leader at
    once.  The new leader then leads with HW 100 while 110 was already given out."""
    cluster = raftwood_cluster_factory(**{"replica.fetch.wait.max.ms": 5_000,
                                          "replica.lag.time.max.ms": 10_000,
                                          "broker.session.timeout.ms": 15_000})
    new = cluster.controller_id()
    old, paused = [n for n in cluster.node_ids if n != new]
    topic = cluster.create_topic("kip-207", assignments=[[old, new, paused]])
    with cluster.connect(old) as conn:
        assert conn.produce(topic, 0, _batch([b"a-%d" % i for i in range(100)]),
                            acks=-1).error_code == NONE
    assert wait_fully_replicated(cluster, topic, timeout_s=30) == 100
    with cluster.connect(old) as conn:
        answer = conn.produce(topic, 0, _batch([b"b-%d" % i for i in range(10)]), acks=-1)
        assert (answer.error_code, answer.base_offset) == (NONE, 100)
        latest = conn.list_offsets(topic, 0, -1)
        assert (latest.error_code, latest.offset) == (NONE, 110)
    cluster.pause(paused)
    try:
        assert cluster.stop(old) == 0
        hosted = cluster.wait_for(
            lambda s: (h := cluster.find_hosted(s[new], topic, 0))["role"] == "leader" and h,
            SLACK_S, f"broker {new} leading")
        assert (hosted["log_end_offset"], hosted["high_watermark"]) == (110, 100), \
            "precondition: the new leader's HW lags the old leader's"
        answers = []
        with cluster.connect(new) as conn:
            for _ in range(10):
                latest = conn.list_offsets(topic, 0, -1)
                answers.append((latest.error_code, latest.offset))
                time.sleep(0.05)
        assert all(code == OFFSET_NOT_AVAILABLE or (code == NONE and offset >= 110)
                   for code, offset in answers), answers
    finally:
        cluster.resume(paused)
    cluster.wait_for(lambda s: cluster.find_hosted(s[new], topic, 0)["high_watermark"] == 110,
                     SLACK_S + 5, "the new leader's HW caught up")
    with cluster.connect(new) as conn:
        latest = conn.list_offsets(topic, 0, -1)
    assert (latest.error_code, latest.offset) == (NONE, 110)


def test_watch_sees_monotonic_offsets_through_a_controlled_leader_move(cluster):
    """The OffsetWatch checker itself on a quiet leader move (SIGTERM of the leader while
    records flow): ListOffsets latest and each leader's HW never go backwards, and no
    consumer fetch returns data above its response's HW."""
    topic = cluster.create_topic("watched", assignments=[[1, 2, 3]])
    cluster.wait_for_isr(topic, 0, [1, 2, 3])
    with OffsetWatch(cluster, topic, interval_s=0.05) as watch:
        with cluster.connect(1) as conn:
            for serial in range(20):
                assert conn.produce(topic, 0, _batch([b"w-%d-%d" % (serial, i)
                                                      for i in range(20)]),
                                    acks=-1).error_code == NONE
        assert cluster.stop(1) == 0
        leader = cluster.wait_for_leader(topic, 0, not_in=[1])
        with cluster.connect(leader) as conn:
            for serial in range(20, 30):
                assert conn.produce(topic, 0, _batch([b"w-%d-%d" % (serial, i)
                                                      for i in range(20)]),
                                    acks=-1).error_code == NONE
        cluster.wait_for(lambda s: watch.next_offset >= 600, SLACK_S, "the watch read all")
    watch.reread_all(leader)
    watch.assert_clean(min_observations=2)
    assert len(watch.values) == 600

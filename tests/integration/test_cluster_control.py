"""The control plane on three real broker processes (issue 3).

Brokers run as subprocesses through the ``cluster`` fixture (broker/testing/,
FAST_CLUSTER_SETTINGS: 3 s sessions, 0.5 s heartbeats, 3 s lag time, preferred-leader
check every 3 s).  The cluster's own view comes from each broker's status request; what
clients see comes from kafka-python and confluent-kafka with every broker as bootstrap.
Timing bounds are generous (the machine is small and shared): they catch a hang or a
missing election, they are not measurements.
"""
from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType
from kafka.protocol.admin import DescribeConfigsRequest

from broker.testing import FAST_CLUSTER_SETTINGS, ClusterProcess, build_batch

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
LEADER_NOT_AVAILABLE = 5
INVALID_REPLICATION_FACTOR = 38
SESSION_S = int(FAST_CLUSTER_SETTINGS["broker.session.timeout.ms"]) / 1000.0
# Fencing needs the session to expire and one controller tick; an election follows in the
# same Raft command.  The slack covers a loaded 2-core machine.
FAILOVER_BOUND_S = SESSION_S + 12.0
CLIENT_TIMEOUT_S = 30.0


def _log_mark(cluster: ClusterProcess) -> dict[int, int]:
    """Where every broker's log ends now (``_log_since`` reads what comes after)."""
    return {b.node_id: b.log_path.stat().st_size if b.log_path.exists() else 0
            for b in cluster.brokers}


def _log_since(cluster: ClusterProcess, node_id: int, mark: dict[int, int]) -> str:
    """What broker ``node_id`` logged since ``mark`` (this test's part of a shared log)."""
    with open(cluster.broker(node_id).log_path, "rb") as f:
        f.seek(mark[node_id])
        return f.read().decode(errors="replace")


def _produce_kafka_python(bootstrap: str, topic: str, values: list[bytes]) -> list[int]:
    """acks=all through kafka-python (retrying through leader changes); the offsets."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=20,
                             retry_backoff_ms=200, request_timeout_ms=10_000,
                             metadata_max_age_ms=1_000, max_block_ms=20_000)
    try:
        futures = [producer.send(topic, value=v, partition=0) for v in values]
        return [f.get(timeout=CLIENT_TIMEOUT_S).offset for f in futures]
    finally:
        producer.close(timeout=5)


def _consume_kafka_python(bootstrap: str, topic: str, count: int) -> list[tuple[int, bytes]]:
    """(offset, value) of the first ``count`` records of partition 0 (bounded)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             metadata_max_age_ms=1_000, request_timeout_ms=15_000)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while len(got) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got += [(r.offset, r.value) for r in records]
        return got
    finally:
        consumer.close()


def _records(n: int, tag: str) -> list[bytes]:
    return [f"{tag}-{i:05d}".encode() for i in range(n)]


def _partition_where(cluster: ClusterProcess, topic: str, condition, partition: int = 0):
    """A ``wait_for`` predicate: the partition's state in the newest image, once
    ``condition(state)`` holds."""
    def predicate(statuses):
        state = cluster.find_partition(cluster.freshest(statuses), topic, partition)
        return state if condition(state) else None

    return predicate


def _leaders(cluster: ClusterProcess, topic: str, partitions: int) -> dict[int, int]:
    state = cluster.freshest(cluster.statuses())
    return {p: cluster.find_partition(state, topic, p)["leader"] for p in range(partitions)}


# -- elections -------------------------------------------------------------------------------

def test_leader_kill_9_elects_an_in_sync_replica_and_the_old_leader_rejoins(cluster):
    """RF=3: 3 replicas in sync (client Metadata and status); kill -9 of the leader elects
    another ISR member with both epochs bumped, fences the dead broker out of the ISR
    (OfflineReplica) while clients carry on; restarted, it returns as a follower with its
    replica online, rejoins the ISR once caught up, and the preferred leader (itself) is
    restored by auto.leader.rebalance."""
    topic = cluster.create_topic("failover", partitions=1, replication_factor=3)

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10_000)
    try:
        described = admin.describe_topics([topic])[0]
    finally:
        admin.close()
    assert described["error_code"] == NONE
    [meta] = described["partitions"]
    assert sorted(meta["replica_nodes"]) == [1, 2, 3], meta
    assert sorted(meta["isr_nodes"]) == [1, 2, 3], meta
    before = cluster.wait_for_isr(topic, 0, [1, 2, 3])
    assert set(before["replica_states"].values()) == {"OnlineReplica"}, before
    leader = before["leader"]
    assert leader == before["replicas"][0], "a new topic is led by its preferred replica"

    first = _records(100, "before")
    assert _produce_kafka_python(cluster.bootstrap, topic, first) == list(range(100))

    cluster.kill(leader)
    new_leader = cluster.wait_for_leader(topic, 0, not_in=[leader], timeout_s=FAILOVER_BOUND_S)
    after = cluster.wait_for(_partition_where(cluster, topic, lambda p: leader not in p["isr"]),
                             10, f"broker {leader} out of the ISR")
    assert new_leader in before["isr"] and new_leader != leader
    assert after["leader_epoch"] == before["leader_epoch"] + 1, (before, after)
    assert after["partition_epoch"] > before["partition_epoch"], (before, after)
    assert after["replica_states"][str(leader)] == "OfflineReplica", after
    assert {after["replica_states"][str(r)] for r in after["isr"]} == {"OnlineReplica"}

    second = _records(100, "after-kill")
    assert _produce_kafka_python(cluster.bootstrap, topic, second) == list(range(100, 200))
    consumed = _consume_kafka_python(cluster.bootstrap, topic, 200)
    assert consumed == list(enumerate(first + second))

    cluster.start(leader)
    returned = cluster.status(leader)
    hosted = cluster.find_hosted(returned, topic, 0)
    state = cluster.find_partition(cluster.freshest(cluster.statuses()), topic, 0)
    if state["leader"] != leader:  # the preferred election may already have run
        assert hosted["role"] == "follower", hosted
    cluster.wait_for(lambda s: cluster.find_partition(cluster.freshest(s), topic, 0)
                     ["replica_states"][str(leader)] == "OnlineReplica", 10,
                     f"broker {leader}'s replica back online")
    cluster.wait_for_isr(topic, 0, [1, 2, 3], timeout_s=30)
    final = cluster.wait_for(_partition_where(cluster, topic, lambda p: p["leader"] == leader),
                             30, f"preferred leader {leader} restored")
    assert final["leader_epoch"] >= after["leader_epoch"] + 1
    assert cluster.wait_for_leader(topic, 0) == leader
    assert _produce_kafka_python(cluster.bootstrap, topic, [b"back"]) == [200]


def test_controller_kill_9_moves_the_controller_and_topics_can_still_be_created(
        cluster):
    """Kill -9 the controller: the other brokers agree on a new controller among
    themselves, CreateTopics works (replication factor 2 of the 2 live brokers), a
    replication factor above the live brokers is refused with INVALID_REPLICATION_FACTOR,
    and the old controller rejoins as an ordinary member."""
    old = cluster.controller_id()
    assert old in cluster.node_ids
    cluster.kill(old)
    alive = [n for n in cluster.node_ids if n != old]

    def new_controller(statuses):
        ids = {s["controller_id"] for s in statuses.values()}
        return ids.pop() if len(ids) == 1 and len(statuses) == 2 and ids <= set(alive) else None

    controller = cluster.wait_for(new_controller, FAILOVER_BOUND_S, "a new controller")
    assert controller in alive
    # The new controller gives every broker a fresh session, then fences the dead one.
    # Every live broker's image (CreateTopics assigns from the receiving broker's view).
    cluster.wait_for(lambda s: len(s) == len(alive) and all(
        next(b for b in st["brokers"] if b["id"] == old)["fenced"] for st in s.values()),
        FAILOVER_BOUND_S, f"broker {old} fenced in every live broker's view")

    topic = cluster.create_topic("after-controller-kill", partitions=2, replication_factor=2)
    for p in range(2):
        assert sorted(cluster.partition_state(topic, p)["replicas"]) == sorted(alive)
    with cluster.connect(alive[0]) as conn:
        refused = conn.request(_create_request("rf-too-big", 1, 3))
        refused_4 = conn.request(_create_request("rf-four", 1, 4))
    assert refused.topics[0].error_code == INVALID_REPLICATION_FACTOR, refused
    assert refused_4.topics[0].error_code == INVALID_REPLICATION_FACTOR, refused_4

    cluster.start(old)
    assert cluster.controller_id() in cluster.node_ids
    cluster.create_topic("after-rejoin", partitions=3, replication_factor=3)


def _create_request(name: str, partitions: int, replication_factor: int):
    from kafka.protocol.admin import CreateTopicsRequest

    topic = CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=replication_factor,
        assignments=[], configs=[])
    return CreateTopicsRequest[4](topics=[topic], timeout_ms=10_000, validate_only=False)


# -- full restart ----------------------------------------------------------------------------

def test_stopping_and_starting_every_broker_keeps_topics_assignments_epochs_and_data(
        cluster):
    """SIGTERM every broker (all exit 0), start them again: the same topics with the same
    ids, configs and replica assignments, epochs not lower than before, every partition
    led again, and every acknowledged record back at its offset."""
    wide = cluster.create_topic("restart-wide", partitions=3, replication_factor=3)
    narrow = cluster.create_topic("restart-narrow", partitions=2, replication_factor=2,
                                  configs={"retention.ms": "86400000"})
    acked = _produce_confluent(cluster.bootstrap, {wide: 3, narrow: 2}, per_partition=40)
    for topic, partitions in ((wide, 3), (narrow, 2)):
        for p in range(partitions):
            replicas = cluster.partition_state(topic, p)["replicas"]
            cluster.wait_for_isr(topic, p, replicas)
    before = cluster.freshest(cluster.statuses())

    codes = cluster.stop_all()
    assert codes == {1: 0, 2: 0, 3: 0}, codes
    cluster.start_all()

    for topic, partitions in ((wide, 3), (narrow, 2)):
        for p in range(partitions):
            cluster.wait_for_leader(topic, p)
    after = cluster.freshest(cluster.statuses())
    topics_before = {t["name"]: t for t in before["topics"]}
    topics_after = {t["name"]: t for t in after["topics"]}
    assert sorted(topics_after) == sorted(topics_before)
    assert {wide, narrow} <= set(topics_after)
    for name, old in topics_before.items():
        new = topics_after[name]
        assert new["topic_id"] == old["topic_id"] and new["configs"] == old["configs"]
        for p_old, p_new in zip(old["partitions"], new["partitions"]):
            assert p_new["replicas"] == p_old["replicas"], (p_old, p_new)
            assert p_new["leader_epoch"] >= p_old["leader_epoch"], (p_old, p_new)
            assert p_new["partition_epoch"] >= p_old["partition_epoch"], (p_old, p_new)

    for (topic, p), records in acked.items():
        leader = cluster.wait_for_leader(topic, p)
        with cluster.connect(leader) as conn:
            got = [(r[0], r[2]) for r in conn.read_partition(topic, p)]
        assert got == records, f"{topic}-{p}: read back differs from what was acknowledged"


def _produce_confluent(bootstrap: str, partitions: dict[str, int],
                       per_partition: int) -> dict[tuple[str, int], list[tuple[int, bytes]]]:
    """acks=all through confluent-kafka; {(topic, p): [(offset, value)]} as acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "message.timeout.ms": 30_000})
    reports: list = []
    for topic, count in partitions.items():
        for p in range(count):
            for i in range(per_partition):
                value = f"{topic}-{p}-{i}".encode()
                producer.produce(topic, value=value, partition=p,
                                 on_delivery=lambda err, msg: reports.append((err, msg)))
    assert producer.flush(CLIENT_TIMEOUT_S) == 0, "records left unacknowledged"
    errors = [err for err, _ in reports if err is not None]
    assert not errors, errors[:3]
    acked: dict[tuple[str, int], list[tuple[int, bytes]]] = {}
    for _, msg in reports:
        acked.setdefault((msg.topic(), msg.partition()), []).append((msg.offset(), msg.value()))
    return {key: sorted(values) for key, values in acked.items()}


# -- unclean leader election -----------------------------------------------------------------

@pytest.mark.parametrize("unclean", [False, True], ids=["unclean-off", "unclean-on"])
def test_only_an_out_of_sync_replica_alive_stays_offline_unless_unclean_election_is_on(
        cluster, unclean):
    """RF=2 on brokers 1 (leader) and 2; broker 3 keeps the Raft quorum.  Broker 2 is
    paused while broker 1 takes writes, so it drops out of the ISR; then broker 1 is
    killed and broker 2 resumed: the only live replica is out of sync.  Off: the
    partition stays offline (leader -1, LEADER_NOT_AVAILABLE in Metadata).  On (topic
    config): broker 2 is elected and the controller logs an UNCLEAN warning."""
    configs = {"unclean.leader.election.enable": "true"} if unclean else {}
    mark = _log_mark(cluster)
    topic = cluster.create_topic(f"unclean-{'on' if unclean else 'off'}",
                                 assignments=[[1, 2]], configs=configs)
    with cluster.connect(1) as conn:
        ok = conn.produce(topic, 0, build_batch([(None, b"in-sync", 0, [])]), acks=-1)
        assert (ok.error_code, ok.base_offset) == (NONE, 0)
    cluster.wait_for_isr(topic, 0, [1, 2])

    cluster.pause(2)
    with cluster.connect(1) as conn:
        for i in range(20):
            answer = conn.produce(topic, 0, build_batch([(None, b"only-on-1-%d" % i, 0, [])]),
                                  acks=1)
            assert answer.error_code == NONE
    cluster.wait_for_isr(topic, 0, [1], timeout_s=FAILOVER_BOUND_S)
    cluster.kill(1)
    cluster.resume(2)

    if not unclean:
        cluster.wait_for(lambda s: cluster.find_partition(cluster.freshest(s), topic, 0)
                         ["leader"] == -1 and all(
                             not b["fenced"] for b in cluster.freshest(s)["brokers"]
                             if b["id"] in (2, 3)), FAILOVER_BOUND_S,
                         "partition offline with brokers 2 and 3 live")
        time.sleep(2.0)  # it stays offline: no election is coming
        state = cluster.partition_state(topic, 0)
        assert state["leader"] == -1 and state["isr"] == [1], state
        for node in (2, 3):
            with cluster.connect(node) as conn:
                [meta] = conn.metadata([topic]).topics[0].partitions
            assert (meta.error_code, meta.leader_id) == (LEADER_NOT_AVAILABLE, -1), meta
        with cluster.connect(2) as conn:
            refused = conn.produce(topic, 0, build_batch([(None, b"x", 0, [])]), acks=1)
        assert refused.error_code == NOT_LEADER_OR_FOLLOWER
        return

    cluster.wait_for_leader(topic, 0, not_in=[1], timeout_s=FAILOVER_BOUND_S)
    state = cluster.partition_state(topic, 0)
    assert state["leader"] == 2 and state["isr"] == [2], state
    controller = cluster.controller_id()
    log_text = _log_since(cluster, controller, mark)
    warnings = [line for line in log_text.splitlines() if "WARNING" in line and "UNCLEAN" in line]
    assert warnings, f"no UNCLEAN warning in controller {controller}'s log"
    with cluster.connect(2) as conn:
        answer = conn.produce(topic, 0, build_batch([(None, b"after-unclean", 0, [])]), acks=-1)
        assert answer.error_code == NONE
        values = [r[2] for r in conn.read_partition(topic, 0)]
    assert values[0] == b"in-sync" and values[-1] == b"after-unclean"
    # Broker 2 may hold the first of them (a fetch response already on its way when it
    # was paused), never the last: those were appended after it stopped fetching.
    assert b"only-on-1-19" not in values, "broker 2 cannot have fetched while paused"


# -- controlled shutdown ---------------------------------------------------------------------

def test_sigterm_moves_leadership_away_before_the_broker_exits(cluster):
    """SIGTERM a broker that leads partitions: it exits 0, the other brokers' images
    name another leader right away (no wait for a session timeout), no partition is
    ever without a leader meanwhile, and a producer with acks=all loses nothing."""
    mark = _log_mark(cluster)
    topic = cluster.create_topic("controlled", partitions=3, replication_factor=3)
    for p in range(3):
        cluster.wait_for_isr(topic, p, [1, 2, 3])
    leaders = _leaders(cluster, topic, 3)
    target = leaders[0]
    others = [n for n in cluster.node_ids if n != target]

    offline_seen: list = []
    stop_polling = threading.Event()

    def poll_leaders():
        while not stop_polling.is_set():
            for node, status in cluster.statuses(others, timeout_s=2.0).items():
                for p in range(3):
                    state = cluster.find_partition(status, topic, p)
                    if state["leader"] == -1:
                        offline_seen.append((node, p, state))
            time.sleep(0.05)

    poller = threading.Thread(target=poll_leaders, daemon=True)
    poller.start()
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "linger.ms": 5, "message.timeout.ms": 30_000})
    reports: list = []
    for i in range(300):
        producer.produce(topic, value=b"%d" % i, partition=i % 3,
                         on_delivery=lambda err, msg: reports.append(err))
        producer.poll(0)
    try:
        code = cluster.stop(target)
        for i in range(300, 600):
            producer.produce(topic, value=b"%d" % i, partition=i % 3,
                             on_delivery=lambda err, msg: reports.append(err))
            producer.poll(0)
        state = cluster.wait_for(
            lambda s: all(cluster.find_partition(st, topic, p)["leader"] not in (-1, target)
                          for st in s.values() for p in range(3)) and s, FAILOVER_BOUND_S,
            "other leaders in every live broker's image")
    finally:
        stop_polling.set()
        poller.join(5)
    assert code == 0, cluster.broker(target).log_tail()
    assert not offline_seen, offline_seen[:3]
    assert producer.flush(CLIENT_TIMEOUT_S) == 0
    assert len(reports) == 600 and not [e for e in reports if e is not None], \
        [e for e in reports if e is not None][:3]
    for status in state.values():
        for p in range(3):
            assert target not in cluster.find_partition(status, topic, p)["isr"]
    assert "controlled shutdown: leadership moved" in _log_since(cluster, target, mark)


def test_sigterm_of_a_follower_takes_it_out_of_the_isr_before_it_exits(
        raftwood_cluster_factory):
    """A follower's controlled shutdown removes it from every ISR (Kafka does the same),
    so acks=all writes go on at once instead of stalling until its session or lag time
    expires.  Sessions and lag time (60 s) outlast the bounded wait for the ISR change
    (30 s): only the shutdown itself can explain it."""
    cluster = raftwood_cluster_factory(**{"broker.session.timeout.ms": 60_000,
                                          "replica.lag.time.max.ms": 60_000})
    topic = cluster.create_topic("follower-shutdown", assignments=[[1, 2, 3]])
    cluster.wait_for_isr(topic, 0, [1, 2, 3])
    follower = 3 if cluster.controller_id() != 3 else 2
    assert cluster.stop(follower) == 0
    state = cluster.wait_for_isr(topic, 0, [n for n in (1, 2, 3) if n != follower],
                                 timeout_s=30.0)
    assert state["leader"] == 1
    with cluster.connect(1) as conn:
        answer = conn.produce(topic, 0, build_batch([(None, b"after", 0, [])]), acks=-1,
                              timeout_ms=5_000)
    assert answer.error_code == NONE, answer


def test_a_broker_that_shut_down_stays_fenced(raftwood_cluster_factory):
    """After a controlled shutdown the broker stays fenced: a heartbeat it had in flight
    must not unfence it again (the cluster would then count a stopped broker as live,
    and could elect it).  Heartbeats every 50 ms make that race the common case."""
    cluster = raftwood_cluster_factory(**{"broker.heartbeat.interval.ms": 50,
                                          "broker.session.timeout.ms": 20_000})
    topic = cluster.create_topic("stays-fenced", partitions=3, replication_factor=3)
    for p in range(3):
        cluster.wait_for_isr(topic, p, [1, 2, 3])
    controller = cluster.controller_id()
    for node in [n for n in cluster.node_ids if n != controller]:
        assert cluster.stop(node) == 0
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            for status in cluster.statuses().values():
                [info] = [b for b in status["brokers"] if b["id"] == node]
                assert info["fenced"], \
                    f"broker {node} unfenced after its shutdown: {status['brokers']}"
            time.sleep(0.05)
        cluster.start(node)


def test_sigterm_right_after_the_controller_died_still_exits_cleanly(cluster):
    """Kill -9 the controller and at once SIGTERM another broker: its controlled shutdown
    meets a quorum that is electing a new leader (its commands may be refused), yet the
    broker must exit 0 within the stop bound (its controlled shutdown's own bound and
    slack), not hang until SIGKILL (stop's answer would then be None)."""
    topic = cluster.create_topic("stop-during-election", partitions=3, replication_factor=3)
    for p in range(3):
        cluster.wait_for_isr(topic, p, [1, 2, 3])
    controller = cluster.controller_id()
    cluster.kill(controller)
    survivor, stopped = [n for n in cluster.node_ids if n != controller]
    assert cluster.stop(stopped, timeout_s=40) == 0, cluster.broker(stopped).log_tail()
    log_text = cluster.broker(stopped).log_path.read_text(errors="replace")
    assert "Future exception was never retrieved" not in log_text
    # The survivor alone has no quorum: its own controlled shutdown could only wait out
    # its bound, so it goes the quick way.
    cluster.kill(survivor)


def test_a_broker_reaching_no_majority_of_the_voters_skips_its_controlled_shutdown(
        raftwood_cluster_factory):
    """Four voters (three make a majority).  Two brokers stop cleanly; a third then
    reaches two voters, itself included: fencing itself could not commit, so it exits
    at once, saying why, instead of waiting out its controlled shutdown's bound."""
    cluster = raftwood_cluster_factory(4)
    topic = cluster.create_topic("no-majority", partitions=2, replication_factor=2)
    for p in range(2):
        cluster.wait_for_leader(topic, p)
    controller = cluster.controller_id()
    first, second, third = [n for n in cluster.node_ids if n != controller]
    for node in (first, second):
        assert cluster.stop(node) == 0, cluster.broker(node).log_tail()
        assert "controlled shutdown: leadership moved" in \
            cluster.broker(node).log_path.read_text(errors="replace")
    deadline = time.monotonic() + 20
    while True:  # the third broker's Raft node saw the two go
        connected = [v["id"] for v in cluster.status(third)["quorum"]["voters"]
                     if v["connected"]]
        if sorted(connected) == sorted([third, controller]):
            break
        assert time.monotonic() < deadline, connected
        time.sleep(0.1)
    assert cluster.stop(third) == 0, cluster.broker(third).log_tail()
    log_text = cluster.broker(third).log_path.read_text(errors="replace")
    assert "controlled shutdown skipped: no majority" in log_text
    assert "controlled shutdown: leadership moved" not in log_text


def test_a_broker_in_no_isr_is_fenced_by_its_shutdown_and_leaves_metadata(
        raftwood_cluster_factory):
    """A cleanly stopped broker is fenced at once even when it holds no in-sync replica
    (Kafka fences every broker that completes a controlled shutdown): Metadata stops
    listing it right away instead of after its session (20 s here)."""
    cluster = raftwood_cluster_factory(**{"broker.session.timeout.ms": 20_000})
    stopped = 3 if cluster.controller_id() != 3 else 2
    assert cluster.stop(stopped) == 0
    with cluster.connect(1 if stopped != 1 else 2) as conn:
        listed = sorted(b.node_id for b in conn.metadata([]).brokers)
    assert listed == [n for n in (1, 2, 3) if n != stopped]
    for status in cluster.statuses().values():
        [info] = [b for b in status["brokers"] if b["id"] == stopped]
        assert info["fenced"], status["brokers"]


# -- requests and configs on a shared cluster ------------------------------------------------

def test_replication_factor_above_the_live_brokers_is_refused(shared_cluster):
    with shared_cluster.connect(1) as conn:
        refused = conn.request(_create_request("rf-four", 1, 4))
        fits = conn.request(_create_request("rf-three", 1, 3))
    assert refused.topics[0].error_code == INVALID_REPLICATION_FACTOR
    assert fits.topics[0].error_code == NONE


def test_produce_and_fetch_sent_to_a_non_leader_get_not_leader_or_follower(shared_cluster):
    """A follower and a broker holding no replica both answer NOT_LEADER_OR_FOLLOWER for
    a partition the cluster knows (raw requests, so the client cannot hide the code).
    Fetch before v11 only: from v11 a follower serves consumers below its own high
    watermark (KIP-392), a broker without a replica still refuses."""
    cluster = shared_cluster
    topic = cluster.create_topic("not-leader", assignments=[[2, 3]])
    batch = build_batch([(b"k", b"v", 0, [])])
    with cluster.connect(2) as conn:
        assert conn.produce(topic, 0, batch, acks=1).error_code == NONE
    for node in (3, 1):  # the follower, then a broker without a replica
        with cluster.connect(node) as conn:
            produce = conn.produce(topic, 0, batch, acks=1)
            acks_all = conn.produce(topic, 0, batch, acks=-1)
            fetch = conn.fetch(topic, 0, 0, version=10)
            follower_fetch = conn.fetch(topic, 0, 0, version=11)
            latest = conn.list_offsets(topic, 0, -1)
            epoch_end = conn.request(_epoch_request(topic, 0, leader_epoch=0))
        assert produce.error_code == NOT_LEADER_OR_FOLLOWER, (node, produce)
        assert acks_all.error_code == NOT_LEADER_OR_FOLLOWER, (node, acks_all)
        assert fetch.error_code == NOT_LEADER_OR_FOLLOWER, (node, fetch)
        if node == 3:  # the follower answers v11+ from its own log (KIP-392)
            assert follower_fetch.error_code == NONE, follower_fetch
        else:
            assert follower_fetch.error_code == NOT_LEADER_OR_FOLLOWER, follower_fetch
        assert latest.error_code == NOT_LEADER_OR_FOLLOWER, (node, latest)
        assert epoch_end.topics[0].partitions[0].error_code == NOT_LEADER_OR_FOLLOWER, \
            (node, epoch_end)
    with cluster.connect(1) as conn:  # a partition the cluster does not know
        assert conn.fetch(topic, 5, 0).error_code == UNKNOWN_TOPIC_OR_PARTITION
        assert conn.list_offsets(topic, 5, -1).error_code == UNKNOWN_TOPIC_OR_PARTITION


def _epoch_request(topic: str, partition: int, leader_epoch: int):
    """OffsetForLeaderEpoch v3 as a consumer sends it (replica_id -1)."""
    from kafka.protocol.consumer import OffsetForLeaderEpochRequest

    epoch_topic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    return OffsetForLeaderEpochRequest[3](replica_id=-1, topics=[epoch_topic(
        topic=topic, partitions=[epoch_topic.OffsetForLeaderPartition(
            partition=partition, current_leader_epoch=-1, leader_epoch=leader_epoch)])])


def test_topic_configs_altered_on_one_broker_are_seen_by_every_broker(shared_cluster):
    """IncrementalAlterConfigs (kafka-python's admin client) on min.insync.replicas and
    retention.ms goes through the metadata quorum: DescribeConfigs sent to each broker
    returns the new values as topic overrides, and every broker's image carries them.
    A DELETE brings the default back everywhere."""
    cluster = shared_cluster
    topic = cluster.create_topic("configs", partitions=1, replication_factor=3)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10_000)
    try:
        result = admin.alter_configs([ConfigResource(
            ConfigResourceType.TOPIC, topic,
            configs={"min.insync.replicas": "2", "retention.ms": "3600000"})], incremental=True)
        assert result["topic"][topic] == "OK", result
        cluster.wait_for(lambda s: len(s) == 3 and all(
            next(t for t in st["topics"] if t["name"] == topic)["configs"] ==
            {"min.insync.replicas": "2", "retention.ms": "3600000"} for st in s.values()),
            10, "the new configs in every broker's image")
        for node in cluster.node_ids:
            described = _describe_topic_configs(cluster, node, topic)
            assert described["min.insync.replicas"] == ("2", 1), (node, described)
            assert described["retention.ms"] == ("3600000", 1), (node, described)

        result = admin.alter_configs([ConfigResource(
            ConfigResourceType.TOPIC, topic,
            configs={"retention.ms": (AlterConfigOp.DELETE, None)})], incremental=True)
        assert result["topic"][topic] == "OK", result
    finally:
        admin.close()
    cluster.wait_for(lambda s: len(s) == 3 and all(
        next(t for t in st["topics"] if t["name"] == topic)["configs"] ==
        {"min.insync.replicas": "2"} for st in s.values()), 10, "retention.ms override removed")
    for node in cluster.node_ids:
        described = _describe_topic_configs(cluster, node, topic)
        assert described["min.insync.replicas"] == ("2", 1)
        assert described["retention.ms"][1] != 1, described["retention.ms"]


def _describe_topic_configs(cluster: ClusterProcess, node: int, topic: str) -> dict:
    """{name: (value, config_source)} from DescribeConfigs sent to ``node`` itself."""
    resource = DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=2, resource_name=topic, configuration_keys=None)
    with cluster.connect(node) as conn:
        response = conn.request(DescribeConfigsRequest[4](
            resources=[resource], include_synonyms=False, include_documentation=False))
    [result] = response.results
    assert result.error_code == NONE, result
    return {c.name: (c.value, c.config_source) for c in result.configs}

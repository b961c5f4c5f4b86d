"""ElectLeaders (KIP-460) on three real broker processes, from confluent-kafka's
AdminClient (librdkafka sends it to the controller named in Metadata).

The cluster runs without ``auto.leader.rebalance.enable``, so the only way back for a
preferred leader that died and returned is the request: kill -9 of the preferred
leader, writes go on to the new one, the broker returns and catches up into the ISR,
an UNCLEAN election is refused (the partition has a leader and live ISR members),
a PREFERRED election makes it lead again with the leader epoch bumped, as every
broker's Metadata shows; no record acknowledged with acks=all is lost.  And an UNCLEAN
election on request revives a partition whose only live replica is out of sync.
"""
from __future__ import annotations

import pytest
from confluent_kafka import ElectionType, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from broker.testing import FAST_CLUSTER_SETTINGS, build_batch

NONE = 0
SESSION_S = int(FAST_CLUSTER_SETTINGS["broker.session.timeout.ms"]) / 1000.0
FAILOVER_BOUND_S = SESSION_S + 12.0
CLIENT_TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def shared_cluster(module_cluster_factory):
    """One cluster without auto.leader.rebalance.enable for both tests (a topic each):
    only a request moves leadership back, and nothing moves an offline partition's."""
    return module_cluster_factory(**{"auto.leader.rebalance.enable": "false"})


def _produce(bootstrap: str, topic: str, tag: str, count: int) -> list[tuple[int, bytes]]:
    """acks=all through confluent-kafka; the (offset, value) pairs acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "message.timeout.ms": 30_000, "enable.idempotence": False})
    reports: list = []
    for i in range(count):
        producer.produce(topic, value=f"{tag}-{i:04d}".encode(), partition=0,
                         on_delivery=lambda err, msg: reports.append((err, msg)))
    assert producer.flush(CLIENT_TIMEOUT_S) == 0, "records left unacknowledged"
    assert not [err for err, _ in reports if err is not None]
    return sorted((msg.offset(), msg.value()) for _, msg in reports)


def _elect(bootstrap: str, election_type, topic: str) -> KafkaError | None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    # No request_timeout/operation_timeout: confluent-kafka 2.16.1's binding rejects
    # either keyword (SystemError/TypeError in its C argument parsing).
    future = admin.elect_leaders(election_type, [TopicPartition(topic, 0)])
    [(tp, error)] = future.result(timeout=CLIENT_TIMEOUT_S).items()
    assert (tp.topic, tp.partition) == (topic, 0)
    return error


def test_preferred_election_returns_leadership_to_a_restarted_preferred_leader_losing_nothing(
        cluster):
    controller = cluster.controller_id()
    preferred = next(n for n in cluster.node_ids if n != controller)
    others = [n for n in cluster.node_ids if n != preferred]
    topic = cluster.create_topic("elect", assignments=[[preferred] + others])
    before = cluster.wait_for_isr(topic, 0, [1, 2, 3])
    assert before["leader"] == preferred
    acked = _produce(cluster.bootstrap, topic, "before", 100)

    cluster.kill(preferred)
    cluster.wait_for_leader(topic, 0, not_in=[preferred], timeout_s=FAILOVER_BOUND_S)
    acked += _produce(cluster.bootstrap, topic, "failed-over", 100)
    cluster.start(preferred)
    caught_up = cluster.wait_for_isr(topic, 0, [1, 2, 3], timeout_s=30)
    assert caught_up["leader"] != preferred, "nothing but the request moves it back"

    unclean = _elect(cluster.bootstrap, ElectionType.UNCLEAN, topic)
    assert unclean is not None and unclean.code() == KafkaError.ELECTION_NOT_NEEDED, unclean
    assert cluster.partition_state(topic, 0)["leader_epoch"] == caught_up["leader_epoch"]

    assert _elect(cluster.bootstrap, ElectionType.PREFERRED, topic) is None
    after = cluster.partition_state(topic, 0)
    assert after["leader"] == preferred
    assert after["leader_epoch"] == caught_up["leader_epoch"] + 1
    for node in cluster.node_ids:     # answered once every live broker knows it
        with cluster.connect(node) as conn:
            [meta] = conn.metadata([topic]).topics[0].partitions
        assert (meta.error_code, meta.leader_id) == (NONE, preferred), (node, meta)

    again = _elect(cluster.bootstrap, ElectionType.PREFERRED, topic)
    assert again is not None and again.code() == KafkaError.ELECTION_NOT_NEEDED, again

    acked += _produce(cluster.bootstrap, topic, "back", 100)
    assert [offset for offset, _ in acked] == list(range(300))
    with cluster.connect(preferred) as conn:
        stored = [(r[0], r[2]) for r in conn.read_partition(topic, 0)]
    assert stored == acked


def test_unclean_election_on_request_revives_a_partition_whose_only_live_replica_is_out_of_sync(
        cluster):
    """RF=2 on brokers 1 (leader) and 2, unclean election off (the default); broker 3
    keeps the Raft quorum.  Broker 2 is paused while broker 1 takes writes, so it drops
    out of the ISR; broker 1 is killed and broker 2 resumed: the partition stays offline
    and a PREFERRED election cannot help (its preferred replica is dead).  An UNCLEAN
    election on request elects broker 2, with the ISR reset to it and the epoch bumped,
    and the partition takes writes again."""
    topic = cluster.create_topic("unclean-asked", assignments=[[1, 2]])
    with cluster.connect(1) as conn:
        assert conn.produce(topic, 0, build_batch([(None, b"in-sync", 0, [])]),
                            acks=-1).error_code == NONE
    cluster.wait_for_isr(topic, 0, [1, 2])
    cluster.pause(2)
    with cluster.connect(1) as conn:
        for i in range(5):
            assert conn.produce(topic, 0, build_batch([(None, b"only-on-1-%d" % i, 0, [])]),
                                acks=1).error_code == NONE
    cluster.wait_for_isr(topic, 0, [1], timeout_s=FAILOVER_BOUND_S)
    cluster.kill(1)
    cluster.resume(2)

    def offline_with_2_and_3_live(statuses):
        image = cluster.freshest(statuses)
        partition = cluster.find_partition(image, topic, 0)
        live = all(not b["fenced"] for b in image["brokers"] if b["id"] in (2, 3))
        return partition if partition["leader"] == -1 and live else None

    offline = cluster.wait_for(offline_with_2_and_3_live, FAILOVER_BOUND_S,
                               "partition offline with brokers 2 and 3 live")

    preferred = _elect(cluster.bootstrap, ElectionType.PREFERRED, topic)
    assert preferred is not None
    assert preferred.code() == KafkaError.PREFERRED_LEADER_NOT_AVAILABLE, preferred
    assert _elect(cluster.bootstrap, ElectionType.UNCLEAN, topic) is None
    state = cluster.partition_state(topic, 0)
    assert (state["leader"], state["isr"]) == (2, [2]), state
    assert state["leader_epoch"] == offline["leader_epoch"] + 1
    with cluster.connect(2) as conn:
        assert conn.produce(topic, 0, build_batch([(None, b"after", 0, [])]),
                            acks=-1).error_code == NONE
        values = [r[2] for r in conn.read_partition(topic, 0)]
    assert values[0] == b"in-sync" and values[-1] == b"after"

"""ElectLeaders (KIP-460) on three real broker processes, from confluent-kafka's
AdminClient (librdkafka sends it to the controller named in Metadata).

The cluster runs without ``auto.leader.rebalance.enable``, so the only way back for a
preferred leader that died and returned is the request: kill -9 of the preferred
leader, writes go on to the new one, the broker returns and catches up into the ISR,
an UNCLEAN election is refused (the partition has a leader and live ISR members),
a PREFERRED election makes it lead again with the leader epoch bumped, as every
broker's Metadata shows; no record acknowledged with acks=all is lost.
"""
from __future__ import annotations

from confluent_kafka import ElectionType, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from broker.testing import FAST_CLUSTER_SETTINGS

NONE = 0
SESSION_S = int(FAST_CLUSTER_SETTINGS["broker.session.timeout.ms"]) / 1000.0
FAILOVER_BOUND_S = SESSION_S + 12.0
CLIENT_TIMEOUT_S = 30.0


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
        raftwood_cluster_factory):
    cluster = raftwood_cluster_factory(**{"auto.leader.rebalance.enable": "false"})
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

"""DescribeTopicPartitions (KIP-966) on three real broker processes over the raw test
connection: paging visits every partition exactly once with Kafka's cursors, and what
it says of each partition is what Metadata says, offline replicas included."""
from __future__ import annotations

from kafka.protocol.admin import DescribeTopicPartitionsRequest

from broker.testing import FAST_CLUSTER_SETTINGS

NONE = 0
SESSION_S = int(FAST_CLUSTER_SETTINGS["broker.session.timeout.ms"]) / 1000.0


def _page(conn, names, limit, cursor):
    request = DescribeTopicPartitionsRequest[0](
        topics=[DescribeTopicPartitionsRequest.TopicRequest(name=n) for n in names],
        response_partition_limit=limit,
        cursor=None if cursor is None else DescribeTopicPartitionsRequest.Cursor(
            topic_name=cursor[0], partition_index=cursor[1]))
    return conn.request(request)


def _all_pages(conn, names, limit):
    """[(topic, partition response)], [cursor after each page]."""
    seen, cursors, cursor = [], [], None
    for _ in range(20):
        response = _page(conn, names, limit, cursor)
        assert all(t.error_code == NONE for t in response.topics), response.topics
        assert sum(len(t.partitions) for t in response.topics) <= limit
        seen += [(t.name, p) for t in response.topics for p in t.partitions]
        c = response.next_cursor
        cursor = None if c is None else (c.topic_name, c.partition_index)
        cursors.append(cursor)
        if cursor is None:
            return seen, cursors
    raise AssertionError("paging did not end")


def test_paging_three_topics_of_five_partitions_by_four_returns_each_partition_once(
        raftwood_cluster, topic_name):
    cluster = raftwood_cluster
    names = sorted(cluster.create_topic(topic_name(t), partitions=5, replication_factor=2)
                   for t in ("x", "y", "z"))
    via = next(n for n in cluster.node_ids if n != cluster.controller_id())
    with cluster.connect(via) as conn:
        seen, cursors = _all_pages(conn, [names[2], names[0], names[1]], limit=4)
        assert [(name, p.partition_index) for name, p in seen] == \
            [(n, i) for n in names for i in range(5)]
        assert cursors == [(names[0], 4), (names[1], 3), (names[2], 2), None]
        metadata = {t.name: {p.partition_index: p for p in t.partitions}
                    for t in conn.metadata(names).topics}
    for name, p in seen:
        meta = metadata[name][p.partition_index]
        assert (p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes) == \
            (meta.leader_id, meta.leader_epoch, meta.replica_nodes, meta.isr_nodes)
        assert p.eligible_leader_replicas == [] and p.last_known_elr == []
        assert p.offline_replicas == []

    victim = next(n for n in cluster.node_ids if n != via)
    cluster.kill(victim)
    cluster.wait_for(lambda s: any(b["id"] == victim and b["fenced"]
                                   for b in s[via]["brokers"]),
                     SESSION_S + 12, f"broker {victim} fenced in broker {via}'s image",
                     nodes=[via])
    with cluster.connect(via) as conn:
        everything, _ = _all_pages(conn, [], limit=4)   # all topics, ours among them
    ours = [(name, p) for name, p in everything if name in names]
    assert len(ours) == 15
    for name, p in ours:
        assert p.offline_replicas == ([victim] if victim in p.replica_nodes else []), (name, p)
        assert p.leader_id != victim

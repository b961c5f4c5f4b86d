"""Share groups on three brokers: a long poll woken by records handed back, the renew-only
ShareFetch (raw, and the Java 4.3 share consumer's RENEW), DescribeShareGroupOffsets of
state another broker's share coordinator keeps, and ``raftwood groups describe``'s
per-partition view of a share group.

One cluster for the module (three ``__consumer_offsets`` partitions, so group ids spread
over the brokers, and one ``__share_group_state`` partition); each test uses its own group
and topic.  Raw ShareFetch / ShareAcknowledge through the helpers of
test_share_fetch_wire.py, sent to the partition's leader.  Every wait is bounded; no
assertion depends on how fast the broker is, only on an upper bound far below the long
poll's ``max_wait_ms``.
"""
from __future__ import annotations

import time
import uuid

import pytest
from kafka.protocol.metadata import FindCoordinatorRequest

from protocol.share_fetch_messages import ShareFetchRequest
from protocol.share_state_messages import ReadShareGroupStateSummaryRequest
from tests.integration.test_dynamic_configs import GROUP_R, GROUP_SOURCE, alter, wait_group_value
from tests.integration.test_share_consumer_java import probe  # noqa: F401 (a fixture)
from tests.integration.test_share_fetch_wire import (
    ACCEPT,
    INVALID_REQUEST,
    NONE,
    RELEASE,
    RENEW,
    FetchAck,
    FetchPartition,
    FetchTopic,
    Member,
    acquired,
    fetch_until,
    open_member,
    partition_of,
    produce,
    set_group_configs,
)
from tests.integration.test_share_group_membership import heartbeat, raftwood, start_offsets

STATE_TOPIC = "__share_group_state"
LONG_POLL_MS = 30_000
WOKEN_WITHIN_S = 20.0  # far below the long poll: only a wake answers this early


@pytest.fixture(scope="module")
def shared_cluster(module_cluster_factory):
    return module_cluster_factory(3, **{"offsets.topic.num.partitions": 3,
                                        "share.coordinator.state.topic.num.partitions": 1})


def led_topic(cluster, name: str) -> tuple[int, uuid.UUID]:
    """A one-partition topic (replication 3): its leader and topic id."""
    cluster.create_topic(name, 1, replication_factor=3)
    leader = cluster.wait_for_leader(name, 0)
    with cluster.connect(leader) as conn:
        return leader, conn.metadata([name], version=12).topics[0].topic_id


def test_a_waiting_fetch_is_answered_by_a_release(cluster):
    """A ShareFetch long-polling (max_wait 30 s) with nothing to hand out is answered as
    soon as another member RELEASEs records, holding them (delivery count 2), instead
    of at its max_wait."""
    leader, topic_id = led_topic(cluster, "wake")
    with cluster.connect(leader) as conn_a, \
            cluster.connect(leader, timeout_s=60) as conn_b:
        a = open_member(conn_a, "g-wake", topic_id)
        b = open_member(conn_b, "g-wake", topic_id)
        produce(conn_a, "wake", 2)
        assert acquired(fetch_until(a, acquired)) == [(0, 1, 1)]
        request = ShareFetchRequest[1](
            group_id=b.group, member_id=b.member_id, share_session_epoch=b.epoch,
            max_wait_ms=LONG_POLL_MS, min_bytes=1, max_bytes=1 << 20, max_records=100,
            batch_size=100, topics=[FetchTopic(topic_id=topic_id, partitions=[
                FetchPartition(partition_index=0, acknowledgement_batches=[])])],
            forgotten_topics_data=[])
        started = time.monotonic()
        correlation_id = conn_b.send(request)
        # Only a hint that b's fetch is parked before the release (without it the test
        # still passes, the records then being AVAILABLE when b's fetch is read).
        time.sleep(1.0)
        released = a.acknowledge([(0, 1, [RELEASE])])
        assert partition_of(released).error_code == NONE
        answer = conn_b.receive(request, correlation_id)
        waited_s = time.monotonic() - started
        assert answer.error_code == NONE
        assert acquired(answer) == [(0, 1, 2)], answer
        assert waited_s < WOKEN_WITHIN_S, f"answered after {waited_s:.1f} s, not woken"


RENEW_PROBE = r"""
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;

public class ShareRenewProbe {
    // args: bootstrap topic group.  Prints "got <offset> <delivery count> <first|renewed>"
    // per record the application sees, then accepted=<offset> or nothing.
    public static void main(String[] args) {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("group.id", args[2]);
        p.put("share.acknowledgement.mode", "explicit");
        p.put("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        p.put("value.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        long started = System.currentTimeMillis(), deadline = started + 60_000;
        Set<Long> renewed = new HashSet<>();
        try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(p)) {
            consumer.subscribe(List.of(args[1]));
            while (System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
                boolean done = false;
                for (ConsumerRecord<String, String> r : records) {
                    int count = r.deliveryCount().orElse((short) -1);
                    boolean again = renewed.contains(r.offset());
                    System.out.println("got " + r.offset() + " " + count + " "
                                       + (again ? "renewed" : "first") + " "
                                       + (System.currentTimeMillis() - started) + "ms");
                    if (again) {
                        consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                        System.out.println("accepted=" + r.offset());
                        done = true;
                    } else {
                        consumer.acknowledge(r, AcknowledgeType.RENEW);  // sent by the next poll
                        renewed.add(r.offset());
                    }
                }
                if (done) {
                    for (Map.Entry<?, Optional<org.apache.kafka.common.KafkaException>> e
                             : consumer.commitSync().entrySet())
                        if (e.getValue().isPresent())
                            System.out.println("commit-error " + e.getKey() + " "
                                               + e.getValue().get());
                    return;
                }
            }
        }
        System.exit(1);
    }
}
"""


def test_the_java_43_share_consumer_renews_a_lock(probe, cluster):  # noqa: F811
    """KafkaShareConsumer 4.3 in explicit mode acknowledges a record RENEW; its next poll
    sends the renewal (the renew-only ShareFetch) and hands the same record back with
    its delivery count unchanged; ACCEPT then commits without an error."""
    group = "g-java-renew"
    cluster.create_topic("java-renew", 1, replication_factor=3)
    assert alter(cluster, cluster.node_ids[0], GROUP_R, group,
                 {"share.auto.offset.reset": "earliest"}) == (NONE, None)
    wait_group_value(cluster, group, "share.auto.offset.reset", "earliest", GROUP_SOURCE,
                     nodes=cluster.node_ids)
    leader = cluster.wait_for_leader("java-renew", 0)
    with cluster.connect(leader) as conn:
        produce(conn, "java-renew", 1)
    run = probe.run(RENEW_PROBE, cluster.bootstrap, "java-renew", group, timeout_s=150)
    assert run.passed, run.report()
    print(f"JVM {run.elapsed_s:.1f} s")
    got = [line.split()[1:4] for line in run.stdout.splitlines() if line.startswith("got ")]
    assert got == [["0", "1", "first"], ["0", "1", "renewed"]], run.report()
    assert run.facts().get("accepted") == "0", run.report()
    assert "commit-error" not in run.stdout, run.report()


def long_locks(cluster, group: str) -> None:
    """The group's record locks last 60 s (its maximum), far longer than a test takes,
    as every broker sees it before the group's first fetch."""
    with cluster.connect(cluster.node_ids[0]) as conn:
        set_group_configs(conn, group, {"share.record.lock.duration.ms": "60000"})
    wait_group_value(cluster, group, "share.record.lock.duration.ms", "60000", GROUP_SOURCE,
                     nodes=cluster.node_ids)


def renew_fetch(member: Member, topic_id, acks, **fetch_params):
    """A ShareFetch v2 with IsRenewAck carrying ``acks`` (first, last, [types])."""
    params = {"max_wait_ms": 0, "min_bytes": 0, "max_bytes": 0, "max_records": 0}
    params.update(fetch_params)
    request = ShareFetchRequest[2](
        group_id=member.group, member_id=member.member_id,
        share_session_epoch=member.epoch, batch_size=0, share_acquire_mode=0,
        is_renew_ack=True, topics=[FetchTopic(topic_id=topic_id, partitions=[
            FetchPartition(partition_index=0, acknowledgement_batches=[
                FetchAck(first_offset=f, last_offset=last, acknowledge_types=types)
                for f, last, types in acks])])],
        forgotten_topics_data=[], **params)
    response = member.conn.request(request)
    if response.error_code == NONE:
        member.epoch += 1
    return response


def test_a_renew_only_fetch_renews_and_acquires_nothing(cluster):
    """ShareFetch v2 with IsRenewAck (Java 4.3's renew-only fetch) applies the RENEW and
    hands out no records, though new ones wait; a renew-only fetch asking for records
    (MaxWaitMs, MinBytes, MaxBytes or MaxRecords not 0) is INVALID_REQUEST."""
    leader, topic_id = led_topic(cluster, "renew-only")
    long_locks(cluster, "g-renew-only")  # offset 0 stays a's however loaded the host
    with cluster.connect(leader) as conn:
        a = open_member(conn, "g-renew-only", topic_id)
        b = open_member(conn, "g-renew-only", topic_id)
        produce(conn, "renew-only", 1)
        assert acquired(fetch_until(a, acquired)) == [(0, 0, 1)]
        produce(conn, "renew-only", 2, tag=b"w")
        renewed = renew_fetch(a, topic_id, [(0, 0, [RENEW])])
        assert renewed.error_code == NONE
        partition = partition_of(renewed)
        assert partition.acknowledge_error_code == NONE
        assert acquired(renewed) == [], "a renew-only fetch acquires nothing"
        assert renewed.acquisition_lock_timeout_ms > 0
        refused = renew_fetch(a, topic_id, [(0, 0, [RENEW])], max_records=10)
        assert refused.error_code == INVALID_REQUEST
        # Offset 0 is still a's; offsets 1-2, never handed out, go to b.
        assert acquired(fetch_until(b, acquired)) == [(1, 2, 1)]
        assert partition_of(a.acknowledge([(0, 0, [ACCEPT])])).error_code == NONE


def group_coordinator(cluster, group: str) -> int:
    """The group coordinator FindCoordinator names for ``group`` (bounded retries while
    ``__consumer_offsets`` is created and led)."""
    def found(_statuses):
        with cluster.connect(cluster.node_ids[0]) as conn:
            answer = conn.request(FindCoordinatorRequest[3](key=group, key_type=0))
        return answer.node_id if answer.error_code == NONE else None
    return cluster.wait_for(found, what=f"a coordinator of {group}")


def test_describe_offsets_asks_another_brokers_share_coordinator(cluster, capsys):
    """DescribeShareGroupOffsets at a group coordinator that neither keeps the share
    partition's state nor leads the partition reads the start offset from the share
    coordinator with ReadShareGroupStateSummary (before: COORDINATOR_NOT_AVAILABLE);
    that API answers the start offset and, in v1, the records finished past it; and
    ``raftwood groups describe`` shows the partition's start offset, high watermark,
    lag, records in flight and acknowledged past the start."""
    warm_leader, warm_id = led_topic(cluster, "summary-warm")
    with cluster.connect(warm_leader) as conn:  # the first share fetch makes the state topic
        open_member(conn, "g-summary-warm", warm_id)
    share_coordinator = cluster.wait_for_leader(STATE_TOPIC, 0)
    group = next((g for g in (f"g-summary-{i}" for i in range(40))
                  if group_coordinator(cluster, g) != share_coordinator), None)
    assert group is not None, "every candidate group coordinated by the share coordinator"
    coordinator = group_coordinator(cluster, group)
    leader = next(n for n in cluster.node_ids if n != coordinator)
    cluster.create_topic("summary", assignments=[
        [leader] + [n for n in cluster.node_ids if n != leader]])
    assert cluster.wait_for_leader("summary", 0) == leader
    with cluster.connect(coordinator) as conn:
        member_id = str(uuid.uuid4())
        assert heartbeat(conn, group, member_id, 0, ["summary"]).error_code == NONE
    long_locks(cluster, group)  # the records in flight when the CLI looks are still locked
    # The member's connection stays open until the CLI has looked: closing the connection
    # that opened a share session releases the member's records (as Kafka's leader does).
    member_conn = cluster.connect(leader)
    try:
        _acquire_and_check_summary(cluster, capsys, group, coordinator, leader,
                                   share_coordinator, member_conn)
    finally:
        member_conn.close()


def _acquire_and_check_summary(cluster, capsys, group, coordinator, leader,
                               share_coordinator, member_conn) -> None:
    """The rest of the test above, while ``member_conn`` stays open."""
    topic_id = member_conn.metadata(["summary"], version=12).topics[0].topic_id
    member = open_member(member_conn, group, topic_id)
    produce(member_conn, "summary", 5)
    assert acquired(fetch_until(member, acquired)) == [(0, 4, 1)]
    done = member.acknowledge([(0, 1, [ACCEPT]), (3, 3, [ACCEPT])])
    assert partition_of(done).error_code == NONE  # written before it is answered
    with cluster.connect(coordinator) as conn:
        assert start_offsets(conn, group) == {("summary", 0): 2}
    summary_topic = ReadShareGroupStateSummaryRequest.ReadStateSummaryData
    with cluster.connect(share_coordinator) as conn:
        answer = conn.request(ReadShareGroupStateSummaryRequest[1](group_id=group, topics=[
            summary_topic(topic_id=topic_id, partitions=[
                summary_topic.PartitionData(partition=0, leader_epoch=-1)])]))
    [result] = answer.results[0].partitions
    assert (result.error_code, result.start_offset, result.delivery_complete_count) == \
        (NONE, 2, 1), "offsets 0-1 passed, 3 finished but not passed (2 and 4 in flight)"
    code, out, err = raftwood(capsys, "groups", "describe", group, "--bootstrap-server",
                              cluster.broker(coordinator).bootstrap)
    assert code == 0, err
    rows = [line.split() for line in out.splitlines() if line.startswith("summary ")]
    # TOPIC PARTITION START-OFFSET HIGH-WATERMARK LAG IN-FLIGHT ACKNOWLEDGED
    assert rows == [["summary", "0", "2", "5", "2", "2", "1"]], out

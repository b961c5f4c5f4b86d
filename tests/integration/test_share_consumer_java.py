"""The Java 4.3 ``KafkaShareConsumer`` (kafka-clients 4.3.0) against a real 3-broker cluster.

A one-file Java probe sets the group's ``share.auto.offset.reset`` to earliest with the
Java Admin (a GROUP config, IncrementalAlterConfigs), runs share consumers of one group
in explicit acknowledgement mode and prints one ``got`` line per delivery it saw
(consumer, partition, offset, delivery count, value) and, after the consumers closed,
each partition's share-group start offset (DescribeShareGroupOffsets through the Admin).
The records come from a Python producer; the assertions are on what the JVM printed:

- three consumers of one group on a 3-partition topic: every record delivered exactly
  once across them (delivery count 1 each) and, acknowledged, moving each partition's
  start offset to its log end (the Admin's listShareGroupOffsets reports all three);
- one consumer of a read_committed group with a delivery limit of 2 that RELEASEs each
  record on its first delivery and ACCEPTs it on the next (every record comes back with
  its delivery count raised from 1 to 2), REJECTs one (never delivered again) and
  RELEASEs one at every delivery (archived after its second); an aborted transaction's
  record is never delivered.

The cluster (conftest's shared one) serves both tests (a topic and a group each); one JVM
per test.
"""
from __future__ import annotations

import pytest
from kafka import KafkaProducer

from tests.integration.test_dynamic_configs import (
    GROUP_R,
    GROUP_SOURCE,
    NONE,
    alter,
    wait_group_value,
)

pytestmark = pytest.mark.slow

SHARE_PROBE = r"""
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;

public class ShareConsumerProbe {
    static final long DEADLINE_MS = 60_000;

    // args: bootstrap mode(spread|release) topic group partitions expected consumers
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], mode = args[1], topic = args[2], group = args[3];
        int partitions = Integer.parseInt(args[4]);
        int expected = Integer.parseInt(args[5]);
        int members = Integer.parseInt(args[6]);
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(ap)) {
            ConfigResource res = new ConfigResource(ConfigResource.Type.GROUP, group);
            AlterConfigOp earliest = new AlterConfigOp(
                new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET);
            admin.incrementalAlterConfigs(Map.of(res, List.of(earliest))).all().get();
            Set<String> done = ConcurrentHashMap.newKeySet();
            ExecutorService pool = Executors.newFixedThreadPool(members);
            List<Future<?>> runs = new ArrayList<>();
            for (int i = 0; i < members; i++) {
                final int id = i;
                runs.add(pool.submit(() -> {
                    consume(bootstrap, mode, topic, group, id, expected, done);
                    return null;
                }));
            }
            for (Future<?> run : runs) run.get();
            pool.shutdown();
            System.out.println("acknowledged=" + done.size());
            List<TopicPartition> tps = new ArrayList<>();
            for (int p = 0; p < partitions; p++) tps.add(new TopicPartition(topic, p));
            Map<TopicPartition, SharePartitionOffsetInfo> offsets = admin.listShareGroupOffsets(
                Map.of(group, new ListShareGroupOffsetsSpec().topicPartitions(tps)))
                .partitionsToOffsetInfo(group).get();
            for (Map.Entry<TopicPartition, SharePartitionOffsetInfo> e : offsets.entrySet())
                System.out.println("start." + e.getKey().partition() + "="
                                   + e.getValue().startOffset());
        }
    }

    static void consume(String bootstrap, String mode, String topic, String group, int id,
                        int expected, Set<String> done) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("client.id", "share-" + id);
        p.put("share.acknowledgement.mode", "explicit");
        p.put("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        p.put("value.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(p)) {
            consumer.subscribe(List.of(topic));
            while (done.size() < expected && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
                for (ConsumerRecord<String, String> r : records) {
                    int count = r.deliveryCount().orElse((short) -1);
                    System.out.println("got c" + id + " " + r.partition() + " " + r.offset() + " "
                                       + count + " " + r.value());
                    if (mode.equals("release") && r.value().endsWith("-reject")) {
                        consumer.acknowledge(r, AcknowledgeType.REJECT);
                        done.add(r.partition() + "@" + r.offset());
                    } else if (mode.equals("release") && r.value().endsWith("-poison")) {
                        consumer.acknowledge(r, AcknowledgeType.RELEASE);  // to the limit
                        if (count >= 2) done.add(r.partition() + "@" + r.offset());
                    } else if (mode.equals("release") && count < 2) {
                        consumer.acknowledge(r, AcknowledgeType.RELEASE);
                    } else {
                        consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                        done.add(r.partition() + "@" + r.offset());
                    }
                }
                if (!records.isEmpty()) {
                    for (Map.Entry<?, Optional<org.apache.kafka.common.KafkaException>> e
                             : consumer.commitSync().entrySet())
                        if (e.getValue().isPresent())
                            System.out.println("commit-error c" + id + " " + e.getKey()
                                               + " " + e.getValue().get());
                }
            }
        }
    }
}
"""


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    from compat.java.probe import Probe, ProbeUnavailable
    try:
        return Probe.prepare(build_dir=tmp_path_factory.mktemp("java43-share"))
    except ProbeUnavailable as exc:
        pytest.skip(f"Java 4.3 probe unavailable: {exc}")


def produce(cluster, topic: str, partitions: int, count: int) -> set[tuple[int, str]]:
    """``count`` records round-robin over the partitions; (partition, value) of each."""
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", linger_ms=5)
    sent = set()
    try:
        futures = []
        for i in range(count):
            value = f"{topic}-{i}"
            futures.append(producer.send(topic, value.encode(), partition=i % partitions))
            sent.add((i % partitions, value))
        for future in futures:
            future.get(timeout=60)
    finally:
        producer.close(timeout=10)
    return sent


def deliveries(stdout: str) -> list[tuple[str, int, int, int, str]]:
    """(consumer, partition, offset, delivery count, value) of each ``got`` line."""
    rows = []
    for line in stdout.splitlines():
        if line.startswith("got "):
            _, member, partition, offset, count, value = line.split(" ", 5)
            rows.append((member, int(partition), int(offset), int(count), value))
    return rows


def run_probe(probe, cluster, mode: str, topic: str, partitions: int, count: int,
              members: int, configs: dict[str, str] | None = None):
    # The probe sets earliest with the Java Admin, whose request reaches one broker; a
    # share partition's leader reads the setting at the group's first fetch, from the
    # metadata it has applied.  Set here first and seen by every broker, so no leader
    # starts the group at the log end (latest) before the change reached it.
    group = f"{topic}-group"
    configs = {"share.auto.offset.reset": "earliest", **(configs or {})}
    assert alter(cluster, 1, GROUP_R, group, configs) == (NONE, None)
    for key, value in configs.items():
        wait_group_value(cluster, group, key, value, GROUP_SOURCE, nodes=cluster.node_ids)
    run = probe.run(SHARE_PROBE, cluster.bootstrap, mode, topic, f"{topic}-group",
                    str(partitions), str(count), str(members), timeout_s=150)
    assert run.passed, run.report()
    assert "commit-error" not in run.stdout, run.report()
    return run


def test_three_java_share_consumers_get_and_acknowledge_every_record_once(probe, cluster):
    partitions, count = 3, 300
    cluster.create_topic("java-share-work", partitions)
    sent = produce(cluster, "java-share-work", partitions, count)
    run = run_probe(probe, cluster, "spread", "java-share-work", partitions, count, 3)
    rows = deliveries(run.stdout)
    got = [(partition, value) for _, partition, _, _, value in rows]
    assert sorted(got) == sorted(sent), "every record delivered exactly once across the group"
    assert {count for *_, count, _ in rows} == {1}, "no record delivered twice"
    per_member = {m: sum(1 for row in rows if row[0] == m) for m in ("c0", "c1", "c2")}
    print(f"records per consumer: {per_member} (JVM {run.elapsed_s:.1f} s)")
    facts = run.facts()
    assert facts["acknowledged"] == str(count)
    starts = {p: facts.get(f"start.{p}") for p in range(partitions)}
    print(f"start offsets the Admin reported: {starts}")
    # The group coordinator answers DescribeShareGroupOffsets for every partition, each
    # from its key's share coordinator (ReadShareGroupStateSummary when another broker
    # serves it): acknowledging every record moved each start offset to the log end.
    assert starts == {p: str(count // partitions) for p in range(partitions)}, run.report()


def test_java_release_reject_the_delivery_limit_and_read_committed(probe, cluster):
    """One partition, group configs share.delivery.count.limit=2 and
    share.isolation.level=read_committed; a committed transaction of five records, one
    to REJECT and one RELEASEd at every delivery, then an aborted one.  Each of the five
    comes back once RELEASEd with its delivery count raised from 1 to 2 and is accepted;
    the rejected one is never delivered again; the poison one is delivered twice and
    then archived at the limit; the aborted record is never delivered."""
    from confluent_kafka import Producer

    cluster.create_topic("java-share-release", 1)
    producer = Producer({"bootstrap.servers": cluster.bootstrap,
                         "transactional.id": "java-share-release"})
    producer.init_transactions(30)
    committed = [f"java-share-release-{i}" for i in range(5)] + \
        ["java-share-release-reject", "java-share-release-poison"]
    for values, commit in ((committed, True), (["java-share-release-aborted"], False)):
        producer.begin_transaction()
        for value in values:
            producer.produce("java-share-release", value.encode(), partition=0)
        assert producer.flush(30) == 0
        producer.commit_transaction(30) if commit else producer.abort_transaction(30)
    run = run_probe(probe, cluster, "release", "java-share-release", 1, len(committed), 1,
                    {"share.delivery.count.limit": "2",
                     "share.isolation.level": "read_committed"})
    counts: dict[str, list[int]] = {}
    for _, _, _, delivery_count, value in deliveries(run.stdout):
        counts.setdefault(value, []).append(delivery_count)
    assert counts == {**{v: [1, 2] for v in committed[:5]},
                      "java-share-release-reject": [1], "java-share-release-poison": [1, 2]}, \
        f"{counts}\n{run.report()}"
    assert int(run.facts()["start.0"]) >= len(committed), run.report()

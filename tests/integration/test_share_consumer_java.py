"""The Java 4.3 ``KafkaShareConsumer`` (kafka-clients 4.3.0) against real 3- and 1-broker
clusters.

A one-file Java probe (compiled once per module, every JVM of the module runs it) sets
the group's ``share.auto.offset.reset`` to earliest with the Java Admin (a GROUP config,
IncrementalAlterConfigs), runs share consumers of one group in explicit acknowledgement
mode and prints one ``got`` line per delivery it saw (consumer, partition, offset,
delivery count, value) and, after the consumers closed, each partition's share-group
start offset (DescribeShareGroupOffsets through the Admin).  The records come from a
Python producer; the assertions are on what the JVMs printed.  On 3 brokers and on 1:

- three consumers of one group on a 3-partition topic: every record delivered exactly
  once across them (delivery count 1 each) and, acknowledged, moving each partition's
  start offset to its log end (the Admin's listShareGroupOffsets reports all three);
- one consumer of a read_committed group with a delivery limit of 2 that RELEASEs each
  record on its first delivery and ACCEPTs it on the next (every record comes back with
  its delivery count raised from 1 to 2), REJECTs one (never delivered again) and
  RELEASEs one at every delivery (archived after its second); an aborted transaction's
  record is never delivered;
- a consumer JVM killed with SIGKILL while it holds records (60 s lock): another JVM of
  the group gets them at once, delivered a second time.

On 3 brokers only: two consumers acknowledging across a SIGKILL of the partition leader
lose no acknowledgement (the start offset reaches the log end, nothing is delivered
again after a successful commit of its ACCEPT) and are redelivered at most what was in
flight.  The commits the kill cut off fail (kafka-clients reports UnknownServerException):
their records count as in flight.

The 3-broker cluster is conftest's shared one (healed after the kill), the 1-broker one
is the module's; each test has a topic and a group of its own.
"""
from __future__ import annotations

import time

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
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;

public class ShareConsumerProbe {
    // What the consumers of one run share.  done: records whose ACCEPT (or REJECT, or
    // last RELEASE) a commit confirmed; unsure: records whose commit failed and that were
    // not delivered again since (the leader may have taken the ACCEPT); stop: the group's
    // start offsets reached the expected count, so the unsure ones were acknowledged.
    static final Set<String> done = ConcurrentHashMap.newKeySet();
    static final Set<String> unsure = ConcurrentHashMap.newKeySet();
    static final AtomicBoolean stop = new AtomicBoolean();

    // args: bootstrap mode(spread|release|steady|hold) topic group partitions expected
    //       consumers [deadline ms]
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], mode = args[1], topic = args[2], group = args[3];
        int partitions = Integer.parseInt(args[4]);
        int expected = Integer.parseInt(args[5]);
        int members = Integer.parseInt(args[6]);
        long deadline = System.currentTimeMillis()
            + (args.length > 7 ? Long.parseLong(args[7]) : 60_000);
        if (mode.equals("hold")) {
            hold(bootstrap, topic, group, deadline);
            return;
        }
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(ap)) {
            ConfigResource res = new ConfigResource(ConfigResource.Type.GROUP, group);
            AlterConfigOp earliest = new AlterConfigOp(
                new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET);
            admin.incrementalAlterConfigs(Map.of(res, List.of(earliest))).all().get();
            ExecutorService pool = Executors.newFixedThreadPool(members);
            List<Future<?>> runs = new ArrayList<>();
            for (int i = 0; i < members; i++) {
                final int id = i;
                runs.add(pool.submit(() -> {
                    consume(bootstrap, mode, topic, group, id, expected, deadline);
                    return null;
                }));
            }
            List<TopicPartition> tps = new ArrayList<>();
            for (int p = 0; p < partitions; p++) tps.add(new TopicPartition(topic, p));
            while (!runs.stream().allMatch(Future::isDone)
                   && System.currentTimeMillis() < deadline) {
                Thread.sleep(500);
                if (!unsure.isEmpty() && done.size() + unsure.size() >= expected) {
                    long started = 0;
                    for (SharePartitionOffsetInfo info : starts(admin, group, tps).values())
                        started += info.startOffset();
                    if (started >= expected) stop.set(true);
                }
            }
            for (Future<?> run : runs) run.get();
            pool.shutdown();
            System.out.println("acknowledged=" + done.size());
            for (Map.Entry<TopicPartition, SharePartitionOffsetInfo> e
                     : starts(admin, group, tps).entrySet())
                System.out.println("start." + e.getKey().partition() + "="
                                   + e.getValue().startOffset());
        }
    }

    static Map<TopicPartition, SharePartitionOffsetInfo> starts(
            Admin admin, String group, List<TopicPartition> tps) throws Exception {
        return admin.listShareGroupOffsets(
            Map.of(group, new ListShareGroupOffsetsSpec().topicPartitions(tps)))
            .partitionsToOffsetInfo(group).get();
    }

    static KafkaShareConsumer<String, String> open(String bootstrap, String group, String client,
                                                   String mode) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("client.id", client);
        p.put("share.acknowledgement.mode", "explicit");
        if (mode.equals("steady")) p.put("max.poll.records", "50");
        p.put("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        p.put("value.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        return new KafkaShareConsumer<>(p);
    }

    // One consumer that polls until it gets records, prints them and sleeps holding them
    // (acquired, never acknowledged) until the test kills the JVM.
    static void hold(String bootstrap, String topic, String group, long deadline)
            throws InterruptedException {
        try (KafkaShareConsumer<String, String> consumer = open(bootstrap, group, "holder", "")) {
            consumer.subscribe(List.of(topic));
            while (System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
                if (records.isEmpty()) continue;
                for (ConsumerRecord<String, String> r : records)
                    System.out.println("got h " + r.partition() + " " + r.offset() + " "
                                       + r.deliveryCount().orElse((short) -1) + " " + r.value());
                System.out.println("holding " + records.count());
                System.out.flush();
                Thread.sleep(deadline - System.currentTimeMillis() + 60_000);
            }
        }
    }

    static void consume(String bootstrap, String mode, String topic, String group, int id,
                        int expected, long deadline) {
        boolean polled = false;
        KafkaShareConsumer<String, String> consumer = open(bootstrap, group, "share-" + id, mode);
        try {
            consumer.subscribe(List.of(topic));
            while (System.currentTimeMillis() < deadline && !stop.get()) {
                if (done.size() >= expected) break;
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
                if (!polled) System.out.println("polling c" + id);
                polled = true;
                List<String> batch = new ArrayList<>();
                for (ConsumerRecord<String, String> r : records) {
                    int count = r.deliveryCount().orElse((short) -1);
                    String key = r.partition() + " " + r.offset();
                    unsure.remove(key);
                    System.out.println("got c" + id + " " + key + " " + count + " " + r.value());
                    if (mode.equals("release") && r.value().endsWith("-reject")) {
                        consumer.acknowledge(r, AcknowledgeType.REJECT);
                        done.add(key);
                    } else if (mode.equals("release") && r.value().endsWith("-poison")) {
                        consumer.acknowledge(r, AcknowledgeType.RELEASE);  // to the limit
                        if (count >= 2) done.add(key);
                    } else if (mode.equals("release") && count < 2) {
                        consumer.acknowledge(r, AcknowledgeType.RELEASE);
                    } else {
                        consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                        if (mode.equals("steady")) batch.add(key); else done.add(key);
                    }
                }
                if (records.isEmpty()) continue;
                if (mode.equals("steady")) Thread.sleep(10);  // the work each batch takes
                commit(consumer, id, batch);
            }
        } catch (KafkaException | InterruptedException e) {
            System.out.println("consumer-error c" + id + " " + e);
        } finally {
            // A killed broker's share session cannot be closed: close() would wait for it
            // its whole default 30 s.
            consumer.close(Duration.ofSeconds(mode.equals("steady") ? 5 : 30));
        }
    }

    // Commit the batch's acknowledgements; in steady mode print "acked" for each record
    // whose partition's commit succeeded, "refused" for the others, then the progress.
    static void commit(KafkaShareConsumer<String, String> consumer, int id, List<String> batch) {
        Map<TopicIdPartition, Optional<KafkaException>> result;
        try {
            result = consumer.commitSync();
        } catch (KafkaException e) {
            System.out.println("commit-error c" + id + " " + e);
            result = null;
        }
        Set<Integer> failed = new HashSet<>();
        if (result != null)
            for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : result.entrySet())
                if (e.getValue().isPresent()) {
                    failed.add(e.getKey().partition());
                    System.out.println("commit-error c" + id + " " + e.getKey()
                                       + " " + e.getValue().get());
                }
        for (String key : batch) {
            int partition = Integer.parseInt(key.split(" ")[0]);
            if (result == null || failed.contains(partition)) {
                unsure.add(key);
                System.out.println("refused c" + id + " " + key);
            } else {
                done.add(key);
                System.out.println("acked c" + id + " " + key);
            }
        }
        if (!batch.isEmpty()) System.out.println("PROGRESS acked=" + done.size());
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


@pytest.fixture(scope="module")
def one_broker(module_cluster_factory):
    """A 1-broker cluster beside the module's 3-broker one (started at first use)."""
    return module_cluster_factory(1)


@pytest.fixture(params=["3-brokers", "1-broker"])
def share_cluster(request):
    """The basic scenarios run on both: the conftest's healed 3-broker ``cluster``, then
    ``one_broker``."""
    return request.getfixturevalue("cluster" if request.param == "3-brokers" else "one_broker")


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


def set_group_configs(cluster, topic: str, configs: dict[str, str] | None = None) -> str:
    """Set ``topic``'s group configs (earliest and ``configs``) and wait until every
    broker sees them; the group's name."""
    # The probe sets earliest with the Java Admin, whose request reaches one broker; a
    # share partition's leader reads the setting at the group's first fetch, from the
    # metadata it has applied.  Set here first and seen by every broker, so no leader
    # starts the group at the log end (latest) before the change reached it.
    group = f"{topic}-group"
    configs = {"share.auto.offset.reset": "earliest", **(configs or {})}
    assert alter(cluster, cluster.node_ids[0], GROUP_R, group, configs) == (NONE, None)
    for key, value in configs.items():
        wait_group_value(cluster, group, key, value, GROUP_SOURCE, nodes=cluster.node_ids)
    return group


def probe_args(cluster, mode: str, topic: str, partitions: int, count: int, members: int,
               deadline_s: int = 60) -> tuple[str, ...]:
    return (cluster.bootstrap, mode, topic, f"{topic}-group", str(partitions), str(count),
            str(members), str(deadline_s * 1000))


def run_probe(probe, cluster, mode: str, topic: str, partitions: int, count: int,
              members: int, configs: dict[str, str] | None = None):
    set_group_configs(cluster, topic, configs)
    run = probe.run(SHARE_PROBE, *probe_args(cluster, mode, topic, partitions, count, members),
                    timeout_s=150)
    assert run.passed, run.report()
    assert "commit-error" not in run.stdout, run.report()
    return run


def start_probe(probe, *args: str):
    """The probe's JVM started (compiled once per module), its lines read as printed."""
    from compat.java.harness import LiveHarness
    return LiveHarness(probe.command(SHARE_PROBE, args))


def finished(live, timeout_s: float):
    """A started probe's whole run, with its ``key=value`` facts."""
    from compat.java.probe import ProbeRun
    run = live.finish(timeout_s)
    return ProbeRun(run.returncode, run.stdout, run.stderr, run.elapsed_s)


def test_three_java_share_consumers_get_and_acknowledge_every_record_once(probe, share_cluster):
    cluster = share_cluster
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


def test_java_release_reject_the_delivery_limit_and_read_committed(probe, share_cluster):
    """One partition, group configs share.delivery.count.limit=2 and
    share.isolation.level=read_committed; a committed transaction of five records, one
    to REJECT and one RELEASEd at every delivery, then an aborted one.  Each of the five
    comes back once RELEASEd with its delivery count raised from 1 to 2 and is accepted;
    the rejected one is never delivered again; the poison one is delivered twice and
    then archived at the limit; the aborted record is never delivered."""
    from confluent_kafka import Producer

    cluster = share_cluster
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


def test_a_java_consumer_killed_holding_records_gives_them_to_another(probe, share_cluster):
    """A Java share consumer (its own JVM) acquires records and holds them, unacknowledged,
    under a 60 s lock; a second JVM of the group polls; the first is killed with SIGKILL.
    Its connection closes, the leader releases what it held at once, and the survivor
    gets every record, the held ones delivered a second time (count 2)."""
    cluster, topic, count = share_cluster, "java-share-held", 10
    cluster.create_topic(topic, 1)
    sent = produce(cluster, topic, 1, count)
    set_group_configs(cluster, topic, {"share.record.lock.duration.ms": "60000"})
    holder = start_probe(probe, *probe_args(cluster, "hold", topic, 1, count, 1))
    survivor = None
    try:
        holding = holder.wait_for_line(lambda text: text.startswith("holding"), 90)
        assert holding is not None, finished(holder, 5).report()
        # 45 s, well inside the held records' 60 s lock: only their release when the
        # holder's connection closes gets them to the survivor in time.
        survivor = start_probe(probe, *probe_args(cluster, "spread", topic, 1, count, 1, 45))
        polling = survivor.wait_for_line(lambda text: text.startswith("polling"), 90)
        assert polling is not None, finished(survivor, 5).report()
        holder.kill()
        run = finished(survivor, 150)
    finally:
        holder.kill()
        if survivor is not None:
            survivor.kill()
    held = {value: n for *_, n, value in deliveries(finished(holder, 10).stdout)}
    assert len(held) == int(holding.split()[1]) > 0 and set(held.values()) == {1}, holding
    assert run.passed and "commit-error" not in run.stdout, run.report()
    rows = deliveries(run.stdout)
    assert sorted((partition, value) for _, partition, _, _, value in rows) == sorted(sent), \
        run.report()
    counts = {value: n for *_, n, value in rows}
    assert all(counts[value] == 2 for value in held), f"held {sorted(held)}: {counts}"
    assert set(counts.values()) <= {1, 2}, counts
    print(f"held by the killed JVM: {len(held)}; survivor's delivery counts: "
          f"{sorted(counts.values())}")
    assert run.facts()["start.0"] == str(count), run.report()


def test_java_share_consumers_lose_no_acknowledgement_across_a_leader_kill_9(probe, cluster):
    """Two Java share consumers (max.poll.records 50, explicit ACCEPT, 10 ms of work and a
    commit after each poll) drain a 1-partition RF 3 topic of 3000 records whose leader is
    not the share coordinator; once 400 acknowledgements are committed the leader is
    killed with SIGKILL.  By the end the group's start offset is the log end (every
    record acknowledged), no record is delivered again after a commit carrying its ACCEPT
    succeeded, and the redeliveries are at most the records in flight at the kill
    (delivered, not committed), the records of refused commits and one unreturned fetch
    per consumer.  The cluster fixture starts the victim again."""
    from tests.integration.test_share_state_cluster import share_coordinator

    topic, count, members, max_poll = "java-share-kill", 3000, 2, 50
    coordinator = share_coordinator(cluster, "java-share-warm")
    leader, follower = (n for n in cluster.node_ids if n != coordinator)
    cluster.create_topic(topic, assignments=[[leader, follower, coordinator]])
    sent = produce(cluster, topic, 1, count)
    set_group_configs(cluster, topic, {"share.record.lock.duration.ms": "15000"})
    live = start_probe(probe, *probe_args(cluster, "steady", topic, 1, count, members, 120))
    try:
        line = live.wait_for_line(
            lambda text: text.startswith("PROGRESS") and int(text.split("=")[1]) >= 400, 90)
        assert line is not None, finished(live, 5).report()
        for _ in range(live.lines.qsize()):  # what it printed before the kill, to live.seen
            live.wait_for_line(lambda text: True, 0.01)
        before_kill, killed_at = len(live.seen), time.monotonic()
        cluster.kill(leader)
        cluster.wait_for_leader(topic, 0, not_in=(leader,), timeout_s=60)
        run = finished(live, 180)
    finally:
        live.kill()
    assert run.passed, run.report()
    summary, lost = tally(run.stdout.splitlines(), before_kill, members * max_poll)
    summary.update(start=run.facts().get("start.0"), jvm_s=round(run.elapsed_s, 1),
                   after_kill_s=round(live.start_time + run.elapsed_s - killed_at, 1))
    print(f"Java share consumers across the kill -9 of leader {leader}: {summary}")
    assert not lost, f"delivered again after a committed ACCEPT: {sorted(lost)[:10]}"
    assert summary["acked_after_kill"] > 0, "the consumers acknowledged across the kill"
    assert run.facts()["start.0"] == str(count), f"{summary}\n{run.report()}"
    values = {value for *_, value in deliveries(run.stdout)}
    assert values == {value for _, value in sent}, "every record delivered"
    assert summary["redeliveries"] <= summary["bound"], summary


def tally(lines: list[str], before_kill: int, unreturned: int) -> tuple[dict, set]:
    """The steady run's figures and the records delivered again after a successful commit
    of their ACCEPT (lost acknowledgements).  A record's redeliveries are its deliveries
    seen, or its highest delivery count if higher (acquired by a fetch the consumer never
    returned), less one; their bound is what was in flight at the kill (delivered in the
    first ``before_kill`` lines, not committed), the records of refused commits and
    ``unreturned`` (a fetch each consumer may hold without returning it)."""
    got: dict[tuple[str, str], list[int]] = {}
    acked: dict[tuple[str, str], int] = {}
    lost, refused = set(), 0
    for index, text in enumerate(lines):
        kind, _, rest = text.partition(" ")
        key = tuple(rest.split(" ")[1:3])
        if kind == "got":
            if key in acked:
                lost.add(key)
            got.setdefault(key, []).append(int(rest.split(" ")[3]))
        elif kind == "acked":
            acked[key] = index
        elif kind == "refused":
            refused += 1
    in_flight = outstanding(lines[:before_kill])
    summary = {"acked_before_kill": sum(1 for i in acked.values() if i < before_kill),
               "acked_after_kill": sum(1 for i in acked.values() if i >= before_kill),
               "in_flight_at_kill": len(in_flight), "refused": refused,
               "redeliveries": sum(max(len(c), max(c)) - 1 for c in got.values()),
               "bound": len(in_flight) + refused + unreturned, "lost": len(lost)}
    return summary, lost


def outstanding(lines: list[str]) -> set[tuple[str, str]]:
    """(partition, offset) of the records delivered in ``lines`` and not acknowledged
    there by a successful commit."""
    delivered, acked = set(), set()
    for text in lines:
        kind, _, rest = text.partition(" ")
        if kind in ("got", "acked"):
            (delivered if kind == "got" else acked).add(tuple(rest.split(" ")[1:3]))
    return delivered - acked

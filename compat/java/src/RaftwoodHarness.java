// Raftwood's Java kafka-clients harness: the calls Spark's Kafka connector makes, checked
// against a running broker or cluster.  Compiled at test time (see compat/java/harness.py)
// against kafka-clients 3.9.0, the version Spark 4.0 ships with.
//
// Modes (every option is --name value):
//   suite            --bootstrap B --prefix P [--partitions 3] [--replication-factor 1]
//                    [--min-insync 1] [--records 20] [--brokers 1]
//       Admin createTopics / describeCluster / describeTopics; for each of gzip, snappy,
//       lz4, zstd: an idempotent acks=all producer (explicit partitions, keys, headers,
//       CreateTime timestamps), Admin listOffsets (earliest, latest, forTimestamp,
//       maxTimestamp), and a consumer with a group.id, auto-commit off and
//       assign/seek/poll that reads every record back at its exact offset.
//   produce-numbered --bootstrap B --topic T --count N [--partitions 3] [--batch 20]
//                    [--interval-ms 10] [--compression lz4]
//       Values "0".."N-1", value n to partition n % partitions, paced (batch records per
//       interval) so a test can kill a broker mid-run; prints PROGRESS lines; passes when
//       every send was acknowledged.
//   verify-numbered  --bootstrap B --topic T --count N [--partitions 3]
//       Reads every partition to its end: each number exactly once, on its partition,
//       in increasing order (the idempotent producer's promise).
//   txn-ctp          --bootstrap B --prefix P [--partitions 3] [--count 60] [--replication-factor 1]
//       Transactions (KIP-98/447): a transactional producer writes N numbered inputs to
//       P-in in transactions of 10 with an aborted one among them; a read_committed
//       consumer in group P-group and a transactional producer run consume-transform-
//       produce into P-out (sendOffsetsToTransaction with the group's metadata), the third
//       transaction aborted and the consumer rewound to the committed offsets; the output,
//       read with read_committed, holds every input exactly once, in order per partition,
//       and the group's committed offsets are one past each partition's last input; a
//       second producer with a transactional id fences the first (ProducerFencedException
//       on its commit) and its own transaction is the only one read.
//   admin            --bootstrap B --prefix P [--brokers 1] [--partitions 3] [--records 30]
//                    [--delete-before 10] [--replication-factor min(brokers, 2)]
//       The Admin calls beyond topics and offsets, each answer checked against Kafka's:
//       describeCluster (--brokers nodes, the controller among them, a cluster id,
//       authorized operations only when asked), createPartitions (grow, then describeTopics
//       shows the count and a leader for each; one more on named replicas; shrinking or
//       keeping the count is InvalidPartitionsException, an unregistered broker
//       InvalidReplicaAssignmentException), describeLogDirs of every broker after
//       producing (each replica on exactly its brokers, size > 0; describeReplicaLogDirs),
//       deleteRecords before --delete-before (lowWatermark, listOffsets earliest, a
//       consumer with auto.offset.reset=none seeking below it gets
//       OffsetOutOfRangeException, with earliest is reset to it; past the high watermark is
//       OffsetOutOfRangeException), electLeaders PREFERRED (per partition: elected or
//       ElectionNotNeededException, then every partition led by its preferred replica;
//       null partitions: only elected ones answered; UNCLEAN with a leader:
//       ElectionNotNeededException; an unknown partition: UnknownTopicOrPartitionException).
//       With --brokers >= 3 (otherwise printed as SKIP, not run): alterPartitionReassignments
//       of an RF-2 partition onto other brokers, listPartitionReassignments polled until
//       empty (60 s), describeTopics and describeLogDirs showing the new replica set and
//       the records read back, then electLeaders PREFERRED on it; cancelling a
//       reassignment that no longer exists is NoReassignmentInProgressException; a target
//       with an unregistered broker id is InvalidReplicaAssignmentException, an unknown
//       topic UnknownTopicOrPartitionException; describeMetadataQuorum (DescribeQuorum):
//       the leader is describeCluster's controller and a voter, voters and observers are
//       disjoint and together the cluster's nodes, the high watermark is positive and the
//       leader's log end offset at or above it.
//
// Every mode also takes [--client-config FILE]: a Java properties file of client settings
// (security.protocol, sasl.*, ssl.*) added to every Admin, producer and consumer it makes,
// as Kafka's tools take --command-config.
//
// Output: one "PASS <step> (<ms> ms) <detail>" or "FAIL <step> (<ms> ms): <why>" line per
// step, then "RESULT PASS|FAIL <n> steps".  Exit 0 when every step passed, 1 otherwise,
// 2 on bad usage.  Every wait is bounded.
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.QuorumInfo;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.common.errors.ElectionNotNeededException;
import org.apache.kafka.common.errors.InvalidPartitionsException;
import org.apache.kafka.common.errors.InvalidReplicaAssignmentException;
import org.apache.kafka.common.errors.NoReassignmentInProgressException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class RaftwoodHarness {
    static final String[] CODECS = {"gzip", "snappy", "lz4", "zstd"};
    static final long WAIT_S = 30;           // bound of every single client call
    static final long POLL_DEADLINE_MS = 30_000;

    final Map<String, String> opts;
    final String bootstrap;
    final Properties clientConfig = new Properties();  // --client-config: security settings
    int steps = 0;
    int failures = 0;

    RaftwoodHarness(Map<String, String> opts) {
        this.opts = opts;
        this.bootstrap = require("bootstrap");
        String path = opts.get("client-config");
        if (path != null) {
            try (var in = java.nio.file.Files.newInputStream(java.nio.file.Path.of(path))) {
                clientConfig.load(in);
            } catch (java.io.IOException e) {
                usage("cannot read --client-config " + path + ": " + e);
            }
        }
    }

    public static void main(String[] args) {
        if (args.length < 1 || args.length % 2 != 1) {
            usage("expected: <mode> [--name value]...");
        }
        Map<String, String> opts = new HashMap<>();
        for (int i = 1; i < args.length; i += 2) {
            if (!args[i].startsWith("--")) usage("not an option: " + args[i]);
            opts.put(args[i].substring(2), args[i + 1]);
        }
        RaftwoodHarness harness = new RaftwoodHarness(opts);
        switch (args[0]) {
            case "suite" -> harness.suite();
            case "produce-numbered" -> harness.produceNumbered();
            case "verify-numbered" -> harness.verifyNumbered();
            case "txn-ctp" -> harness.txnConsumeTransformProduce();
            case "admin" -> harness.adminApis();
            default -> usage("unknown mode " + args[0]);
        }
        boolean ok = harness.failures == 0 && harness.steps > 0;
        out("RESULT " + (ok ? "PASS" : "FAIL") + " " + harness.steps + " steps, "
                + harness.failures + " failed");
        System.exit(ok ? 0 : 1);
    }

    static void usage(String why) {
        System.err.println("RaftwoodHarness: " + why);
        System.exit(2);
    }

    static void out(String line) {
        System.out.println(line);
        System.out.flush();
    }

    String require(String name) {
        String value = opts.get(name);
        if (value == null) usage("--" + name + " is required");
        return value;
    }

    int intOpt(String name, int fallback) {
        return opts.containsKey(name) ? Integer.parseInt(opts.get(name)) : fallback;
    }

    // -- steps --------------------------------------------------------------------------------

    interface Body {
        String run() throws Exception;
    }

    static final class CheckFailed extends Exception {
        CheckFailed(String message) {
            super(message);
        }
    }

    static void check(boolean condition, String format, Object... args) throws CheckFailed {
        if (!condition) throw new CheckFailed(String.format(format, args));
    }

    boolean step(String name, Body body) {
        steps++;
        long start = System.nanoTime();
        try {
            String detail = body.run();
            out(String.format("PASS %s (%d ms) %s", name, elapsedMs(start), detail));
            return true;
        } catch (Throwable error) {
            failures++;
            Throwable cause = error;
            while ((cause instanceof ExecutionException) && cause.getCause() != null) {
                cause = cause.getCause();
            }
            String why = cause instanceof CheckFailed ? cause.getMessage()
                    : cause.getClass().getName() + ": " + cause.getMessage();
            out(String.format("FAIL %s (%d ms): %s", name, elapsedMs(start), why));
            if (!(cause instanceof CheckFailed)) cause.printStackTrace(System.err);
            return false;
        }
    }

    static long elapsedMs(long startNanos) {
        return (System.nanoTime() - startNanos) / 1_000_000;
    }

    // -- clients ------------------------------------------------------------------------------

    Admin admin() {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, "raftwood-harness-admin");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        props.putAll(clientConfig);
        return Admin.create(props);
    }

    KafkaProducer<byte[], byte[]> producer(String compression, Map<String, String> extra) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.CLIENT_ID_CONFIG, "raftwood-harness-producer-" + compression);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");  // the 3.x default, said
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.putAll(clientConfig);
        props.putAll(extra);
        return new KafkaProducer<>(props);
    }

    /** A consumer as Spark's source makes one: a group.id, no auto-commit, assign() only. */
    KafkaConsumer<byte[], byte[]> consumer(String groupId) {
        return consumer(groupId, "read_uncommitted");
    }

    KafkaConsumer<byte[], byte[]> consumer(String groupId, String isolation) {
        return consumer(groupId, isolation, Map.of());
    }

    KafkaConsumer<byte[], byte[]> consumer(String groupId, String isolation, Map<String, String> extra) {
        Properties props = new Properties();
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "raftwood-harness-consumer");
        props.put(ConsumerConfig.GROUP_ID_CONFIG, groupId);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        props.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        props.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        props.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");  // quicker end-of-data polls
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.putAll(clientConfig);
        props.putAll(extra);
        return new KafkaConsumer<>(props);
    }

    static byte[] utf8(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }

    static String text(byte[] bytes) {
        return bytes == null ? "null" : new String(bytes, StandardCharsets.UTF_8);
    }

    // -- suite --------------------------------------------------------------------------------

    /** One record the suite writes: partition p, index i (its expected offset). */
    record Expected(int partition, int index, byte[] key, byte[] value, long timestamp,
                    List<Header> headers) {
    }

    void suite() {
        String prefix = require("prefix");
        int partitions = intOpt("partitions", 3);
        short replication = (short) intOpt("replication-factor", 1);
        int minInsync = intOpt("min-insync", 1);
        int records = intOpt("records", 20);
        int brokers = intOpt("brokers", 1);
        long baseTimestamp = (System.currentTimeMillis() / 1000 - 3600) * 1000;  // an hour ago
        Map<String, String> topics = new LinkedHashMap<>();
        for (String codec : CODECS) topics.put(codec, prefix + "-" + codec);

        try (Admin admin = admin()) {
            boolean created = step("admin-create-topics", () -> {
                List<NewTopic> newTopics = new ArrayList<>();
                for (String topic : topics.values()) {
                    newTopics.add(new NewTopic(topic, partitions, replication).configs(
                            Map.of("min.insync.replicas", Integer.toString(minInsync))));
                }
                admin.createTopics(newTopics).all().get(WAIT_S, TimeUnit.SECONDS);
                long waited = waitForLeaders(admin, topics.values(), partitions);
                return topics.size() + " topics x " + partitions + " partitions, rf " + replication
                        + ", leaders after " + waited + " ms";
            });
            if (!created) return;
            step("admin-describe-cluster", () -> describeCluster(admin, brokers));
            step("admin-describe-topics",
                    () -> describeTopics(admin, topics.values(), partitions, replication));
            for (String codec : CODECS) {
                String topic = topics.get(codec);
                List<Expected> expected = expectedRecords(codec, partitions, records, baseTimestamp);
                boolean produced = step("produce-idempotent-" + codec,
                        () -> produce(topic, codec, expected, records));
                if (!produced) continue;
                step("admin-list-offsets-" + codec,
                        () -> listOffsets(admin, topic, partitions, records, baseTimestamp));
                // Spark's default isolation, and read_committed (this producer is not
                // transactional: the last stable offset is the high watermark)
                String isolation = codec.equals("gzip") || codec.equals("lz4")
                        ? "read_uncommitted" : "read_committed";
                step("consume-assign-seek-" + codec,
                        () -> consume(topic, partitions, records, expected, prefix, isolation));
            }
            step("consumer-offset-lookups", () -> consumerLookups(
                    topics.get(CODECS[0]), partitions, records, baseTimestamp, prefix));
        }
    }

    long waitForLeaders(Admin admin, Collection<String> topics, int partitions) throws Exception {
        long start = System.nanoTime();
        String last = "";
        for (int attempt = 0; attempt < 100 && elapsedMs(start) < 20_000; attempt++) {
            try {
                Map<String, TopicDescription> described =
                        admin.describeTopics(topics).allTopicNames().get(WAIT_S, TimeUnit.SECONDS);
                boolean ready = described.size() == topics.size();
                for (TopicDescription d : described.values()) {
                    ready &= d.partitions().size() == partitions;
                    for (TopicPartitionInfo p : d.partitions()) ready &= p.leader() != null;
                }
                if (ready) return elapsedMs(start);
                last = described.toString();
            } catch (ExecutionException e) {
                last = e.getCause().toString();
            }
            Thread.sleep(200);
        }
        throw new CheckFailed("topics have no leader for every partition after 20 s: " + last);
    }

    String describeCluster(Admin admin, int brokers) throws Exception {
        DescribeClusterResult result = admin.describeCluster();
        Collection<Node> nodes = result.nodes().get(WAIT_S, TimeUnit.SECONDS);
        String clusterId = result.clusterId().get(WAIT_S, TimeUnit.SECONDS);
        Node controller = result.controller().get(WAIT_S, TimeUnit.SECONDS);
        check(nodes.size() == brokers, "expected %d brokers, got %s", brokers, nodes);
        for (Node node : nodes) {
            check(node.id() >= 0 && node.port() > 0 && "127.0.0.1".equals(node.host()),
                    "odd node %s", node);
        }
        return nodes.size() + " nodes " + nodes + ", cluster id " + clusterId
                + ", controller " + controller;
    }

    String describeTopics(Admin admin, Collection<String> topics, int partitions, short replication)
            throws Exception {
        Map<String, TopicDescription> described =
                admin.describeTopics(topics).allTopicNames().get(WAIT_S, TimeUnit.SECONDS);
        check(described.keySet().equals(Set.copyOf(topics)), "described %s, asked %s",
                described.keySet(), topics);
        for (TopicDescription d : described.values()) {
            check(!d.isInternal(), "%s is internal", d.name());
            check(d.topicId() != null && !Uuid.ZERO_UUID.equals(d.topicId()), "%s has no topic id",
                    d.name());
            check(d.partitions().size() == partitions, "%s has %d partitions", d.name(),
                    d.partitions().size());
            for (TopicPartitionInfo p : d.partitions()) {
                check(p.leader() != null && p.leader().id() >= 0, "%s-%d has no leader", d.name(),
                        p.partition());
                check(p.replicas().size() == replication, "%s-%d replicas %s", d.name(),
                        p.partition(), p.replicas());
                check(!p.isr().isEmpty() && p.replicas().containsAll(p.isr()),
                        "%s-%d isr %s not within replicas %s", d.name(), p.partition(), p.isr(),
                        p.replicas());
            }
        }
        TopicDescription first = described.get(topics.iterator().next());
        return described.size() + " topics; " + first.name() + " id " + first.topicId()
                + " leaders " + first.partitions().stream().map(p -> p.leader().id()).toList();
    }

    static List<Expected> expectedRecords(String codec, int partitions, int records, long baseTs) {
        List<Expected> result = new ArrayList<>();
        String padding = "x".repeat(64);  // something for the codec to compress
        for (int i = 0; i < records; i++) {
            for (int p = 0; p < partitions; p++) {
                List<Header> headers = List.of(
                        new RecordHeader("seq", utf8(Integer.toString(i))),
                        new RecordHeader("codec", utf8(codec)));
                result.add(new Expected(p, i, utf8("key-" + p + "-" + i),
                        utf8(codec + "-value-" + p + "-" + i + "-" + padding),
                        baseTs + 10L * i, headers));
            }
        }
        return result;
    }

    /** Two halves with a flush between them, so each partition gets several batches and
     * the broker checks sequence continuity across batches; offsets must be dense from 0. */
    String produce(String topic, String codec, List<Expected> expected, int records) throws Exception {
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = producer(codec, Map.of())) {
            int half = expected.size() / 2;
            for (int n = 0; n < expected.size(); n++) {
                Expected e = expected.get(n);
                futures.add(producer.send(new ProducerRecord<>(topic, e.partition(), e.timestamp(),
                        e.key(), e.value(), e.headers())));
                if (n == half) producer.flush();
            }
            producer.flush();
            for (int n = 0; n < expected.size(); n++) {
                Expected e = expected.get(n);
                RecordMetadata meta = futures.get(n).get(WAIT_S, TimeUnit.SECONDS);
                check(meta.partition() == e.partition() && meta.offset() == e.index(),
                        "record %d of partition %d acknowledged at %s-%d@%d", e.index(),
                        e.partition(), meta.topic(), meta.partition(), meta.offset());
                check(meta.timestamp() == e.timestamp(), "record %d timestamp %d, sent %d",
                        e.index(), meta.timestamp(), e.timestamp());
            }
        }
        return expected.size() + " records acked at dense offsets 0.." + (records - 1)
                + " in every partition";
    }

    String listOffsets(Admin admin, String topic, int partitions, int records, long baseTs)
            throws Exception {
        int middle = records / 2;
        Map<String, OffsetSpec> specs = new LinkedHashMap<>();
        specs.put("earliest", OffsetSpec.earliest());
        specs.put("latest", OffsetSpec.latest());
        specs.put("ts-first", OffsetSpec.forTimestamp(baseTs));
        specs.put("ts-middle-exact", OffsetSpec.forTimestamp(baseTs + 10L * middle));
        specs.put("ts-middle-between", OffsetSpec.forTimestamp(baseTs + 10L * middle - 5));
        specs.put("ts-before-all", OffsetSpec.forTimestamp(baseTs - 60_000));
        specs.put("ts-after-all", OffsetSpec.forTimestamp(baseTs + 10L * records + 60_000));
        specs.put("max-timestamp", OffsetSpec.maxTimestamp());
        Map<String, Long> want = Map.of("earliest", 0L, "latest", (long) records, "ts-first", 0L,
                "ts-middle-exact", (long) middle, "ts-middle-between", (long) middle,
                "ts-before-all", 0L, "ts-after-all", -1L, "max-timestamp", (long) records - 1);
        for (Map.Entry<String, OffsetSpec> spec : specs.entrySet()) {
            Map<TopicPartition, OffsetSpec> request = new HashMap<>();
            for (int p = 0; p < partitions; p++) request.put(new TopicPartition(topic, p), spec.getValue());
            Map<TopicPartition, ListOffsetsResultInfo> result =
                    admin.listOffsets(request).all().get(WAIT_S, TimeUnit.SECONDS);
            for (int p = 0; p < partitions; p++) {
                ListOffsetsResultInfo info = result.get(new TopicPartition(topic, p));
                check(info != null && info.offset() == want.get(spec.getKey()),
                        "%s of %s-%d: got %s, want offset %d", spec.getKey(), topic, p, info,
                        want.get(spec.getKey()));
                if (spec.getKey().equals("max-timestamp")) {
                    check(info.timestamp() == baseTs + 10L * (records - 1),
                            "max-timestamp of %s-%d: timestamp %d", topic, p, info.timestamp());
                }
            }
        }
        return "earliest, latest, forTimestamp (exact, between, before, after), maxTimestamp on "
                + partitions + " partitions";
    }

    String consume(String topic, int partitions, int records, List<Expected> expected, String prefix,
                   String isolation) throws Exception {
        Map<Integer, List<Expected>> byPartition = new TreeMap<>();
        for (Expected e : expected) byPartition.computeIfAbsent(e.partition(), k -> new ArrayList<>()).add(e);
        List<TopicPartition> assignment = new ArrayList<>();
        for (int p = 0; p < partitions; p++) assignment.add(new TopicPartition(topic, p));
        try (KafkaConsumer<byte[], byte[]> consumer = consumer("raftwood-harness-" + prefix, isolation)) {
            consumer.assign(assignment);
            for (TopicPartition tp : assignment) consumer.seek(tp, 0);
            Map<Integer, List<ConsumerRecord<byte[], byte[]>>> got = pollAll(consumer, partitions, records);
            for (int p = 0; p < partitions; p++) {
                List<ConsumerRecord<byte[], byte[]>> list = got.get(p);
                for (int i = 0; i < records; i++) {
                    compare(list.get(i), byPartition.get(p).get(i));
                }
                long position = consumer.position(new TopicPartition(topic, p), Duration.ofSeconds(WAIT_S));
                check(position == records, "position of %s-%d is %d after reading %d", topic, p,
                        position, records);
            }
            // seek into the middle of a partition: the next record is exactly there
            int middle = records / 2;
            TopicPartition tp0 = assignment.get(0);
            consumer.seek(tp0, middle);
            Map<Integer, List<ConsumerRecord<byte[], byte[]>>> again = pollAll(consumer, 1, records - middle);
            compare(again.get(0).get(0), byPartition.get(0).get(middle));
        }
        return (partitions * records) + " records read back at their offsets (key, value, "
                + "timestamp, headers, " + isolation + "); seek to " + (records / 2)
                + " re-read exactly there";
    }

    /** Poll until ``partitions`` partitions hold ``count`` records each (bounded). */
    Map<Integer, List<ConsumerRecord<byte[], byte[]>>> pollAll(KafkaConsumer<byte[], byte[]> consumer,
            int partitions, int count) throws CheckFailed {
        Map<Integer, List<ConsumerRecord<byte[], byte[]>>> got = new TreeMap<>();
        for (int p = 0; p < partitions; p++) got.put(p, new ArrayList<>());
        long start = System.nanoTime();
        int polls = 0;
        while (elapsedMs(start) < POLL_DEADLINE_MS && polls++ < 1000) {
            for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                got.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r);
            }
            boolean done = true;
            for (int p = 0; p < partitions; p++) done &= got.get(p).size() >= count;
            if (done) return got;
        }
        Map<Integer, Integer> sizes = new TreeMap<>();
        got.forEach((p, list) -> sizes.put(p, list.size()));
        throw new CheckFailed("records per partition after " + polls + " polls: " + sizes
                + ", want " + count + " each");
    }

    static void compare(ConsumerRecord<byte[], byte[]> r, Expected e) throws CheckFailed {
        String where = r.topic() + "-" + r.partition() + "@" + r.offset();
        check(r.partition() == e.partition() && r.offset() == e.index(),
                "%s: expected record %d of partition %d here", where, e.index(), e.partition());
        check(Arrays.equals(r.key(), e.key()) && Arrays.equals(r.value(), e.value()),
                "%s: key/value %s/%s, sent %s/%s", where, text(r.key()), text(r.value()),
                text(e.key()), text(e.value()));
        check(r.timestamp() == e.timestamp() && r.timestampType() == TimestampType.CREATE_TIME,
                "%s: timestamp %d %s, sent %d", where, r.timestamp(), r.timestampType(), e.timestamp());
        List<Header> headers = Arrays.asList(r.headers().toArray());
        check(headers.size() == e.headers().size(), "%s: %d headers", where, headers.size());
        for (int h = 0; h < headers.size(); h++) {
            Header a = headers.get(h);
            Header b = e.headers().get(h);
            check(a.key().equals(b.key()) && Arrays.equals(a.value(), b.value()),
                    "%s: header %s=%s, sent %s=%s", where, a.key(), text(a.value()), b.key(),
                    text(b.value()));
        }
    }

    /** The consumer's own offset look-ups (Spark's older offset reader uses these). */
    String consumerLookups(String topic, int partitions, int records, long baseTs, String prefix)
            throws Exception {
        List<TopicPartition> tps = new ArrayList<>();
        Map<TopicPartition, Long> times = new HashMap<>();
        for (int p = 0; p < partitions; p++) {
            TopicPartition tp = new TopicPartition(topic, p);
            tps.add(tp);
            times.put(tp, baseTs + 10L * (records / 2));
        }
        try (KafkaConsumer<byte[], byte[]> consumer = consumer("raftwood-harness-" + prefix)) {
            Duration wait = Duration.ofSeconds(WAIT_S);
            Map<TopicPartition, Long> begin = consumer.beginningOffsets(tps, wait);
            Map<TopicPartition, Long> end = consumer.endOffsets(tps, wait);
            Map<TopicPartition, OffsetAndTimestamp> byTime = consumer.offsetsForTimes(times, wait);
            for (TopicPartition tp : tps) {
                check(begin.get(tp) == 0 && end.get(tp) == records, "%s: beginning %s end %s", tp,
                        begin.get(tp), end.get(tp));
                OffsetAndTimestamp found = byTime.get(tp);
                check(found != null && found.offset() == records / 2, "%s: offsetsForTimes %s", tp,
                        found);
            }
            check(consumer.partitionsFor(topic, wait).size() == partitions, "partitionsFor %s",
                    consumer.partitionsFor(topic, wait));
        }
        return "beginningOffsets, endOffsets, offsetsForTimes, partitionsFor on " + topic;
    }

    // -- admin: partitions, cluster, log dirs, records, elections, reassignments ---------------

    void adminApis() {
        String prefix = require("prefix");
        int brokers = intOpt("brokers", 1);
        int partitions = intOpt("partitions", 3);
        int records = intOpt("records", 30);
        int deleteBefore = intOpt("delete-before", 10);
        short replication = (short) intOpt("replication-factor", Math.min(brokers, 2));
        if (deleteBefore <= 0 || deleteBefore >= records) usage("--delete-before must be in 1..records-1");
        String grow = prefix + "-grow";
        String data = prefix + "-data";
        String move = prefix + "-move";
        boolean reassign = brokers >= 3;
        try (Admin admin = admin()) {
            boolean created = step("admin-create-topics", () -> {
                List<NewTopic> newTopics = new ArrayList<>(List.of(
                        new NewTopic(grow, 2, replication), new NewTopic(data, partitions, replication)));
                if (reassign) newTopics.add(new NewTopic(move, 1, (short) 2));
                admin.createTopics(newTopics).all().get(WAIT_S, TimeUnit.SECONDS);
                long waited = waitForLeaders(admin, List.of(grow), 2)
                        + waitForLeaders(admin, List.of(data), partitions)
                        + (reassign ? waitForLeaders(admin, List.of(move), 1) : 0);
                return newTopics.size() + " topics, rf " + replication + ", leaders after " + waited + " ms";
            });
            if (!created) return;
            List<Node> nodes = new ArrayList<>();
            step("admin-describe-cluster", () -> describeClusterFully(admin, brokers, nodes));
            step("admin-create-partitions", () -> createPartitions(admin, grow, 2, 4, replication, nodes));
            step("admin-create-partitions-refused",
                    () -> createPartitionsRefused(admin, grow, 5, replication, nodes));
            boolean produced = step("admin-produce", () -> produceValues(data, partitions, records, "data"));
            if (produced) {
                step("admin-describe-log-dirs", () -> describeLogDirs(admin, data, partitions, nodes));
                step("admin-delete-records", () -> deleteRecords(admin, data, records, deleteBefore));
                step("admin-delete-records-consumer",
                        () -> consumeAfterDelete(data, records, deleteBefore, prefix));
            }
            step("admin-elect-leaders", () -> electLeaders(admin, data, partitions));
            if (!reassign) {
                for (String name : List.of("admin-reassign-partition", "admin-elect-leaders-after-move",
                        "admin-reassign-cancel-none", "admin-reassign-unknown-broker",
                        "admin-describe-metadata-quorum")) {
                    out("SKIP " + name + " needs --brokers >= 3 (got " + brokers + ")");
                }
                return;
            }
            boolean moved = step("admin-reassign-partition", () -> reassignPartition(admin, move, nodes));
            if (moved) step("admin-elect-leaders-after-move", () -> electLeaders(admin, move, 1));
            step("admin-reassign-cancel-none", () -> cancelWithoutReassignment(admin, move));
            step("admin-reassign-unknown-broker", () -> reassignToUnknownBroker(admin, move));
            step("admin-describe-metadata-quorum", () -> describeMetadataQuorum(admin, nodes));
        }
    }

    /** describeMetadataQuorum (DescribeQuorum, forwarded to the quorum leader by whichever
     * broker the client asks): the leader, a voter, is the controller describeCluster
     * names; every node of the cluster is a voter or an observer, never both. */
    String describeMetadataQuorum(Admin admin, List<Node> nodes) throws Exception {
        QuorumInfo quorum = admin.describeMetadataQuorum().quorumInfo().get(WAIT_S, TimeUnit.SECONDS);
        Node controller = admin.describeCluster().controller().get(WAIT_S, TimeUnit.SECONDS);
        Set<Integer> voters = new java.util.TreeSet<>();
        Set<Integer> observers = new java.util.TreeSet<>();
        quorum.voters().forEach(r -> voters.add(r.replicaId()));
        quorum.observers().forEach(r -> observers.add(r.replicaId()));
        Set<Integer> nodeIds = new java.util.TreeSet<>();
        nodes.forEach(n -> nodeIds.add(n.id()));
        check(quorum.leaderId() == controller.id(), "quorum leader %d, controller %s",
                quorum.leaderId(), controller);
        check(voters.contains(quorum.leaderId()), "leader %d is not among the voters %s",
                quorum.leaderId(), voters);
        check(java.util.Collections.disjoint(voters, observers), "voters %s and observers %s overlap",
                voters, observers);
        Set<Integer> members = new java.util.TreeSet<>(voters);
        members.addAll(observers);
        check(members.equals(nodeIds), "voters %s + observers %s are not the nodes %s",
                voters, observers, nodeIds);
        QuorumInfo.ReplicaState leader = quorum.voters().stream()
                .filter(r -> r.replicaId() == quorum.leaderId()).findFirst().orElseThrow();
        check(quorum.highWatermark() > 0 && leader.logEndOffset() >= quorum.highWatermark(),
                "high watermark %d, leader's log end offset %d", quorum.highWatermark(),
                leader.logEndOffset());
        check(quorum.leaderEpoch() > 0, "leader epoch %d", quorum.leaderEpoch());
        return "leader " + quorum.leaderId() + " in epoch " + quorum.leaderEpoch() + ", voters "
                + voters + ", observers " + observers + ", high watermark " + quorum.highWatermark()
                + ", leader's log end " + leader.logEndOffset();
    }

    /** The cause of a future's failure, or CheckFailed when it succeeded. */
    static Throwable failureOf(KafkaFuture<?> future, String what) throws Exception {
        try {
            Object value = future.get(WAIT_S, TimeUnit.SECONDS);
            throw new CheckFailed(what + " succeeded (" + value + "), expected an error");
        } catch (ExecutionException e) {
            return e.getCause();
        }
    }

    static void expectError(KafkaFuture<?> future, Class<? extends Throwable> expected, String what)
            throws Exception {
        Throwable cause = failureOf(future, what);
        check(expected.isInstance(cause), "%s failed with %s, want %s", what, cause,
                expected.getSimpleName());
    }

    /** Grows ``topic`` to ``after`` partitions, then one more on replicas it names (the last
     * ``replication`` brokers, last first). */
    String createPartitions(Admin admin, String topic, int before, int after, short replication,
                            List<Node> nodes) throws Exception {
        check(nodes.size() >= replication, "no nodes from describeCluster: %s", nodes);
        admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(after))).all()
                .get(WAIT_S, TimeUnit.SECONDS);
        long waited = waitForLeaders(admin, List.of(topic), after);
        TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames()
                .get(WAIT_S, TimeUnit.SECONDS).get(topic);
        check(d.partitions().size() == after, "%s has %d partitions after growing to %d", topic,
                d.partitions().size(), after);
        for (TopicPartitionInfo p : d.partitions()) {
            check(p.partition() == d.partitions().indexOf(p), "%s partitions out of order: %s", topic,
                    d.partitions());
            check(p.replicas().size() == replication && p.isr().size() == replication,
                    "%s-%d replicas %s isr %s, want rf %d", topic, p.partition(), p.replicas(), p.isr(),
                    replication);
        }
        // a new partition takes writes at once: its first record lands at offset 0
        try (KafkaProducer<byte[], byte[]> producer = producer("none", Map.of())) {
            RecordMetadata meta = producer.send(new ProducerRecord<>(topic, after - 1, null,
                    utf8("first"))).get(WAIT_S, TimeUnit.SECONDS);
            check(meta.partition() == after - 1 && meta.offset() == 0, "first record of %s-%d at %s",
                    topic, after - 1, meta);
        }
        List<Integer> assignment = new ArrayList<>();
        for (int n = 0; n < replication; n++) assignment.add(nodes.get(nodes.size() - 1 - n).id());
        admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(after + 1, List.of(assignment))))
                .all().get(WAIT_S, TimeUnit.SECONDS);
        waitForLeaders(admin, List.of(topic), after + 1);
        TopicPartitionInfo added = partitionInfos(admin, topic).get(after);
        List<Integer> replicas = added.replicas().stream().map(Node::id).toList();
        check(replicas.equals(assignment) && added.leader() != null && added.leader().id() == assignment.get(0),
                "%s-%d replicas %s leader %s, assigned %s", topic, after, replicas, added.leader(), assignment);
        return topic + " grown " + before + " -> " + after + " partitions, leaders after " + waited
                + " ms; describeTopics shows " + d.partitions().size() + "; partition " + (after - 1)
                + " took a record at offset 0; partition " + after + " added on assigned replicas "
                + assignment + ", led by " + added.leader().id();
    }

    String createPartitionsRefused(Admin admin, String topic, int current, short replication,
                                   List<Node> nodes) throws Exception {
        expectError(admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(current - 2))).all(),
                InvalidPartitionsException.class, "shrinking " + topic + " to " + (current - 2));
        expectError(admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(current))).all(),
                InvalidPartitionsException.class, "growing " + topic + " to its own count " + current);
        List<Integer> unregistered = new ArrayList<>(List.of(9999));
        for (int n = 1; n < replication; n++) unregistered.add(nodes.get(n - 1).id());
        expectError(admin.createPartitions(Map.of(topic,
                        NewPartitions.increaseTo(current + 1, List.of(unregistered)))).all(),
                InvalidReplicaAssignmentException.class, "a new partition on " + unregistered);
        expectError(admin.createPartitions(Map.of(topic + "-missing", NewPartitions.increaseTo(3))).all(),
                org.apache.kafka.common.errors.UnknownTopicOrPartitionException.class,
                "growing the missing topic " + topic + "-missing");
        int count = admin.describeTopics(List.of(topic)).allTopicNames().get(WAIT_S, TimeUnit.SECONDS)
                .get(topic).partitions().size();
        check(count == current, "%s has %d partitions after the refused requests", topic, count);
        return "increaseTo(" + (current - 2) + ") and increaseTo(" + current
                + ") refused with InvalidPartitionsException, a new partition on " + unregistered
                + " with InvalidReplicaAssignmentException, a missing topic with "
                + "UnknownTopicOrPartitionException; still " + count + " partitions";
    }

    String describeClusterFully(Admin admin, int brokers, List<Node> nodesOut) throws Exception {
        String summary = describeCluster(admin, brokers);
        DescribeClusterResult result = admin.describeCluster();
        Collection<Node> nodes = result.nodes().get(WAIT_S, TimeUnit.SECONDS);
        Node controller = result.controller().get(WAIT_S, TimeUnit.SECONDS);
        String clusterId = result.clusterId().get(WAIT_S, TimeUnit.SECONDS);
        check(controller != null && !controller.isEmpty() && nodes.contains(controller),
                "controller %s is not one of the nodes %s", controller, nodes);
        check(clusterId != null && !clusterId.isEmpty(), "cluster id %s", clusterId);
        check(nodes.stream().map(Node::id).distinct().count() == nodes.size(), "repeated ids %s", nodes);
        Set<org.apache.kafka.common.acl.AclOperation> operations = admin.describeCluster(
                new org.apache.kafka.clients.admin.DescribeClusterOptions().includeAuthorizedOperations(true))
                .authorizedOperations().get(WAIT_S, TimeUnit.SECONDS);
        check(operations != null, "no authorized operations when asked for them");
        check(result.authorizedOperations().get(WAIT_S, TimeUnit.SECONDS) == null,
                "authorized operations %s when not asked for", result.authorizedOperations().get());
        nodesOut.clear();
        nodesOut.addAll(nodes);
        nodesOut.sort((a, b) -> Integer.compare(a.id(), b.id()));
        return summary + ", authorized operations " + new java.util.TreeSet<>(operations);
    }

    /** ``count`` records "tag-p-i" into each of ``partitions`` partitions, acks=all, dense from 0. */
    String produceValues(String topic, int partitions, int count, String tag) throws Exception {
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = producer("lz4", Map.of())) {
            for (int i = 0; i < count; i++) {
                for (int p = 0; p < partitions; p++) {
                    futures.add(producer.send(new ProducerRecord<>(topic, p, null,
                            utf8(tag + "-" + p + "-" + i))));
                }
                if (i == count / 2) producer.flush();   // several batches per partition
            }
            producer.flush();
            for (int n = 0; n < futures.size(); n++) {
                RecordMetadata meta = futures.get(n).get(WAIT_S, TimeUnit.SECONDS);
                check(meta.partition() == n % partitions && meta.offset() == n / partitions,
                        "record %d acknowledged at %s", n, meta);
            }
        }
        return partitions * count + " records acked at offsets 0.." + (count - 1) + " of " + topic;
    }

    Map<Integer, TopicPartitionInfo> partitionInfos(Admin admin, String topic) throws Exception {
        Map<Integer, TopicPartitionInfo> result = new TreeMap<>();
        for (TopicPartitionInfo p : admin.describeTopics(List.of(topic)).allTopicNames()
                .get(WAIT_S, TimeUnit.SECONDS).get(topic).partitions()) {
            result.put(p.partition(), p);
        }
        return result;
    }

    /** Each broker's log dirs: broker id -> the topic's partitions it reports, with sizes. */
    Map<Integer, Map<Integer, ReplicaInfo>> logDirReplicas(Admin admin, String topic, List<Node> nodes)
            throws Exception {
        List<Integer> ids = nodes.stream().map(Node::id).toList();
        Map<Integer, Map<String, LogDirDescription>> all =
                admin.describeLogDirs(ids).allDescriptions().get(WAIT_S, TimeUnit.SECONDS);
        check(all.keySet().equals(Set.copyOf(ids)), "log dirs of %s, asked %s", all.keySet(), ids);
        Map<Integer, Map<Integer, ReplicaInfo>> result = new TreeMap<>();
        for (Map.Entry<Integer, Map<String, LogDirDescription>> broker : all.entrySet()) {
            check(!broker.getValue().isEmpty(), "broker %d reports no log dir", broker.getKey());
            Map<Integer, ReplicaInfo> hosted = new TreeMap<>();
            for (Map.Entry<String, LogDirDescription> dir : broker.getValue().entrySet()) {
                LogDirDescription d = dir.getValue();
                check(d.error() == null, "broker %d log dir %s: %s", broker.getKey(), dir.getKey(), d.error());
                check(d.totalBytes().isPresent() && d.usableBytes().isPresent()
                                && d.usableBytes().getAsLong() <= d.totalBytes().getAsLong(),
                        "broker %d log dir %s: total %s usable %s", broker.getKey(), dir.getKey(),
                        d.totalBytes(), d.usableBytes());
                d.replicaInfos().forEach((tp, info) -> {
                    if (tp.topic().equals(topic)) hosted.put(tp.partition(), info);
                });
            }
            result.put(broker.getKey(), hosted);
        }
        return result;
    }

    String describeLogDirs(Admin admin, String topic, int partitions, List<Node> nodes) throws Exception {
        check(!nodes.isEmpty(), "no nodes from describeCluster");
        Map<Integer, TopicPartitionInfo> infos = partitionInfos(admin, topic);
        // followers report once they fetched: allow them a few seconds to catch up
        long start = System.nanoTime();
        String last = "";
        while (true) {
            Map<Integer, Map<Integer, ReplicaInfo>> hosted = logDirReplicas(admin, topic, nodes);
            List<String> problems = new ArrayList<>();
            long total = 0;
            for (Node node : nodes) {
                Map<Integer, ReplicaInfo> mine = hosted.get(node.id());
                for (int p = 0; p < partitions; p++) {
                    boolean replica = infos.get(p).replicas().stream().anyMatch(r -> r.id() == node.id());
                    ReplicaInfo info = mine.get(p);
                    if (replica && (info == null || info.size() <= 0 || info.isFuture())) {
                        problems.add("broker " + node.id() + " " + topic + "-" + p + ": " + info);
                    } else if (!replica && info != null) {
                        problems.add("broker " + node.id() + " reports " + topic + "-" + p
                                + " it is no replica of");
                    } else if (info != null) {
                        total += info.size();
                    }
                }
            }
            if (problems.isEmpty()) {
                String replicaDirs = describeReplicaLogDirs(admin, topic, infos.get(0), hosted);
                return "every replica of " + partitions + " partitions on exactly its brokers "
                        + nodes.stream().map(Node::id).toList() + ", " + total + " bytes in all; "
                        + replicaDirs;
            }
            last = problems.toString();
            check(elapsedMs(start) < 15_000, "after 15 s: %s", last);
            Thread.sleep(300);
        }
    }

    /** describeReplicaLogDirs (DescribeLogDirs naming the partition) for each replica of one
     * partition, and for a broker that is none of its replicas. */
    String describeReplicaLogDirs(Admin admin, String topic, TopicPartitionInfo partition,
                                  Map<Integer, Map<Integer, ReplicaInfo>> hosted) throws Exception {
        List<org.apache.kafka.common.TopicPartitionReplica> asked = new ArrayList<>();
        for (Node replica : partition.replicas()) {
            asked.add(new org.apache.kafka.common.TopicPartitionReplica(topic, partition.partition(), replica.id()));
        }
        Map<org.apache.kafka.common.TopicPartitionReplica,
                org.apache.kafka.clients.admin.DescribeReplicaLogDirsResult.ReplicaLogDirInfo> dirs =
                admin.describeReplicaLogDirs(asked).all().get(WAIT_S, TimeUnit.SECONDS);
        for (org.apache.kafka.common.TopicPartitionReplica replica : asked) {
            var info = dirs.get(replica);
            check(info != null && info.getCurrentReplicaLogDir() != null && info.getCurrentReplicaOffsetLag() >= 0
                            && info.getFutureReplicaLogDir() == null,
                    "describeReplicaLogDirs %s: %s", replica, info);
        }
        return "describeReplicaLogDirs of " + asked.size() + " replicas of " + topic + "-" + partition.partition()
                + " in " + dirs.values().iterator().next().getCurrentReplicaLogDir();
    }

    String deleteRecords(Admin admin, String topic, int records, int before) throws Exception {
        TopicPartition tp = new TopicPartition(topic, 0);
        long low = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(before)))
                .lowWatermarks().get(tp).get(WAIT_S, TimeUnit.SECONDS).lowWatermark();
        check(low == before, "lowWatermark %d after deleting before %d", low, before);
        long earliest = admin.listOffsets(Map.of(tp, OffsetSpec.earliest())).partitionResult(tp)
                .get(WAIT_S, TimeUnit.SECONDS).offset();
        long latest = admin.listOffsets(Map.of(tp, OffsetSpec.latest())).partitionResult(tp)
                .get(WAIT_S, TimeUnit.SECONDS).offset();
        check(earliest == before && latest == records, "listOffsets earliest %d latest %d, want %d %d",
                earliest, latest, before, records);
        // deleting again below the start changes nothing; past the high watermark is refused
        long again = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(before - 1)))
                .lowWatermarks().get(tp).get(WAIT_S, TimeUnit.SECONDS).lowWatermark();
        check(again == before, "lowWatermark %d after deleting before %d again", again, before - 1);
        expectError(admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(records + 5))).all(),
                org.apache.kafka.common.errors.OffsetOutOfRangeException.class,
                "deleteRecords before " + (records + 5) + " (past the high watermark " + records + ")");
        TopicPartition other = new TopicPartition(topic, 1);
        long untouched = admin.listOffsets(Map.of(other, OffsetSpec.earliest())).partitionResult(other)
                .get(WAIT_S, TimeUnit.SECONDS).offset();
        check(untouched == 0, "%s earliest %d, want 0 (not asked to delete)", other, untouched);
        return "lowWatermark " + low + ", listOffsets earliest " + earliest + " latest " + latest
                + "; again below it: " + again + "; past the HW: OffsetOutOfRangeException";
    }

    String consumeAfterDelete(String topic, int records, int before, String prefix) throws Exception {
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<byte[], byte[]> consumer = consumer("raftwood-harness-" + prefix + "-deleted")) {
            consumer.assign(List.of(tp));
            Duration wait = Duration.ofSeconds(WAIT_S);
            long beginning = consumer.beginningOffsets(List.of(tp), wait).get(tp);
            check(beginning == before, "beginningOffsets %d, want %d", beginning, before);
            consumer.seek(tp, 0);
            OffsetOutOfRangeException outOfRange = null;
            long start = System.nanoTime();
            while (outOfRange == null && elapsedMs(start) < POLL_DEADLINE_MS) {
                try {
                    ConsumerRecords<byte[], byte[]> got = consumer.poll(Duration.ofMillis(500));
                    check(got.isEmpty(), "poll from offset 0 returned %d records, first at %d",
                            got.count(), got.isEmpty() ? -1 : got.iterator().next().offset());
                } catch (OffsetOutOfRangeException e) {
                    outOfRange = e;
                }
            }
            check(outOfRange != null, "no OffsetOutOfRangeException polling from 0 in %d ms", elapsedMs(start));
            check(Long.valueOf(0).equals(outOfRange.offsetOutOfRangePartitions().get(tp)),
                    "OffsetOutOfRangeException names %s", outOfRange.offsetOutOfRangePartitions());
            consumer.seekToBeginning(List.of(tp));
            List<ConsumerRecord<byte[], byte[]>> list = pollAll(consumer, 1, records - before).get(0);
            check(list.size() == records - before, "read %d records from the start, want %d", list.size(),
                    records - before);
            for (int n = 0; n < list.size(); n++) {
                ConsumerRecord<byte[], byte[]> r = list.get(n);
                check(r.offset() == before + n && text(r.value()).equals("data-0-" + (before + n)),
                        "record %d from the start: %s@%d", n, text(r.value()), r.offset());
            }
        }
        // with auto.offset.reset=earliest the same seek is reset to the new log start
        try (KafkaConsumer<byte[], byte[]> consumer = consumer("raftwood-harness-" + prefix + "-reset",
                "read_uncommitted", Map.of(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest"))) {
            consumer.assign(List.of(tp));
            consumer.seek(tp, 0);
            ConsumerRecord<byte[], byte[]> first = pollAll(consumer, 1, 1).get(0).get(0);
            check(first.offset() == before && text(first.value()).equals("data-0-" + before),
                    "after a reset to earliest the first record is %s@%d, want offset %d",
                    text(first.value()), first.offset(), before);
        }
        return "beginningOffsets " + before + "; seek(0) + poll: OffsetOutOfRangeException "
                + "(auto.offset.reset=none), reset to " + before + " (earliest); seekToBeginning read "
                + "offsets " + before + ".." + (records - 1);
    }

    String electLeaders(Admin admin, String topic, int partitions) throws Exception {
        Set<TopicPartition> tps = new java.util.HashSet<>();
        for (int p = 0; p < partitions; p++) tps.add(new TopicPartition(topic, p));
        Map<TopicPartition, Optional<Throwable>> result =
                admin.electLeaders(ElectionType.PREFERRED, tps).partitions().get(WAIT_S, TimeUnit.SECONDS);
        check(result.keySet().equals(tps), "answered %s, asked %s", result.keySet(), tps);
        int elected = 0;
        int notNeeded = 0;
        for (Map.Entry<TopicPartition, Optional<Throwable>> e : result.entrySet()) {
            if (e.getValue().isEmpty()) {
                elected++;
            } else {
                check(e.getValue().get() instanceof ElectionNotNeededException, "%s: %s", e.getKey(),
                        e.getValue().get());
                notNeeded++;
            }
        }
        Map<Integer, TopicPartitionInfo> infos = partitionInfos(admin, topic);
        for (TopicPartitionInfo p : infos.values()) {
            check(p.leader() != null && p.leader().id() == p.replicas().get(0).id(),
                    "%s-%d led by %s after the election, preferred %s", topic, p.partition(), p.leader(),
                    p.replicas().get(0));
        }
        // every partition (null): those that needed no election are left out of the answer
        Map<TopicPartition, Optional<Throwable>> everywhere =
                admin.electLeaders(ElectionType.PREFERRED, null).partitions().get(WAIT_S, TimeUnit.SECONDS);
        for (Map.Entry<TopicPartition, Optional<Throwable>> e : everywhere.entrySet()) {
            check(e.getValue().isEmpty() || !(e.getValue().get() instanceof ElectionNotNeededException),
                    "electLeaders(null) answered %s: %s", e.getKey(), e.getValue());
        }
        // UNCLEAN while every partition has a leader: ElectionNotNeededException for each
        Map<TopicPartition, Optional<Throwable>> unclean =
                admin.electLeaders(ElectionType.UNCLEAN, tps).partitions().get(WAIT_S, TimeUnit.SECONDS);
        check(unclean.keySet().equals(tps), "UNCLEAN answered %s, asked %s", unclean.keySet(), tps);
        for (Map.Entry<TopicPartition, Optional<Throwable>> e : unclean.entrySet()) {
            check(e.getValue().isPresent() && e.getValue().get() instanceof ElectionNotNeededException,
                    "UNCLEAN election of %s (it has a leader): %s", e.getKey(), e.getValue());
        }
        // an unknown partition is answered per partition too
        TopicPartition missing = new TopicPartition(topic, partitions + 7);
        Optional<Throwable> unknown = admin.electLeaders(ElectionType.PREFERRED, Set.of(missing))
                .partitions().get(WAIT_S, TimeUnit.SECONDS).get(missing);
        check(unknown != null && unknown.isPresent()
                        && unknown.get() instanceof org.apache.kafka.common.errors.UnknownTopicOrPartitionException,
                "%s: %s", missing, unknown);
        return elected + " elected, " + notNeeded + " ElectionNotNeededException; every partition led by "
                + "its preferred replica; electLeaders(null) answered " + everywhere.size()
                + " partitions, none ElectionNotNeededException; UNCLEAN: ElectionNotNeededException for each; " + missing + " UnknownTopicOrPartitionException";
    }

    String reassignPartition(Admin admin, String topic, List<Node> nodes) throws Exception {
        TopicPartition tp = new TopicPartition(topic, 0);
        int count = 20;
        produceValues(topic, 1, count, "move");
        List<Integer> before = partitionInfos(admin, topic).get(0).replicas().stream().map(Node::id).toList();
        List<Integer> others = nodes.stream().map(Node::id).filter(id -> !before.contains(id)).toList();
        check(!others.isEmpty(), "no broker outside %s among %s", before, nodes);
        // onto other brokers: entirely when there are two others, else one new and one kept
        List<Integer> target = others.size() >= 2 ? List.of(others.get(0), others.get(1))
                : List.of(others.get(0), before.get(0));
        admin.alterPartitionReassignments(Map.of(tp, Optional.of(new NewPartitionReassignment(target))))
                .all().get(WAIT_S, TimeUnit.SECONDS);
        long start = System.nanoTime();
        Map<TopicPartition, PartitionReassignment> ongoing;
        int polls = 0;
        boolean seenInProgress = false;
        while (true) {
            polls++;
            ongoing = admin.listPartitionReassignments(Set.of(tp)).reassignments().get(WAIT_S, TimeUnit.SECONDS);
            if (ongoing.isEmpty()) break;
            PartitionReassignment r = ongoing.get(tp);
            check(r != null && r.replicas().containsAll(target) && r.replicas().containsAll(before)
                            && target.containsAll(r.addingReplicas()) && before.containsAll(r.removingReplicas())
                            && r.addingReplicas().stream().noneMatch(before::contains)
                            && r.removingReplicas().stream().noneMatch(target::contains),
                    "listed %s while moving %s -> %s", ongoing, before, target);
            seenInProgress = true;
            check(elapsedMs(start) < 60_000, "still reassigning after 60 s: %s", ongoing);
            Thread.sleep(200);
        }
        long movedMs = elapsedMs(start);
        TopicPartitionInfo after = partitionInfos(admin, topic).get(0);
        List<Integer> replicas = after.replicas().stream().map(Node::id).toList();
        check(replicas.equals(target), "replicas %s after the move, want %s", replicas, target);
        check(after.leader() != null && target.contains(after.leader().id()), "leader %s not in %s",
                after.leader(), target);
        List<Integer> isr = after.isr().stream().map(Node::id).toList();
        check(Set.copyOf(isr).equals(Set.copyOf(target)), "isr %s, want %s", isr, target);
        // the log dirs follow: the new replicas hold the records, the removed ones let go
        long dirsStart = System.nanoTime();
        String last;
        while (true) {
            Map<Integer, Map<Integer, ReplicaInfo>> hosted = logDirReplicas(admin, topic, nodes);
            List<Integer> holders = new ArrayList<>();
            boolean sized = true;
            for (Map.Entry<Integer, Map<Integer, ReplicaInfo>> e : hosted.entrySet()) {
                ReplicaInfo info = e.getValue().get(0);
                if (info == null) continue;
                holders.add(e.getKey());
                sized &= info.size() > 0;
            }
            if (Set.copyOf(holders).equals(Set.copyOf(target)) && sized) break;
            last = "log dirs hold " + topic + "-0 on " + holders + " (sizes > 0: " + sized + ")";
            check(elapsedMs(dirsStart) < 15_000, "after 15 s: %s, want %s", last, target);
            Thread.sleep(300);
        }
        // every record was copied: read them back from the new replicas
        try (KafkaConsumer<byte[], byte[]> consumer = consumer("raftwood-harness-moved")) {
            consumer.assign(List.of(tp));
            consumer.seek(tp, 0);
            List<ConsumerRecord<byte[], byte[]>> list = pollAll(consumer, 1, count).get(0);
            for (int n = 0; n < count; n++) {
                check(list.get(n).offset() == n && text(list.get(n).value()).equals("move-0-" + n),
                        "record %d after the move: %s@%d", n, text(list.get(n).value()), list.get(n).offset());
            }
        }
        return tp + " moved " + before + " -> " + target + " in " + movedMs + " ms (" + polls
                + " listPartitionReassignments, " + (seenInProgress ? "seen in progress" : "already done")
                + "), leader " + after.leader().id() + ", isr " + isr
                + "; log dirs follow; " + count + " records read back";
    }

    String cancelWithoutReassignment(Admin admin, String topic) throws Exception {
        TopicPartition tp = new TopicPartition(topic, 0);
        List<Integer> before = partitionInfos(admin, topic).get(0).replicas().stream().map(Node::id).toList();
        expectError(admin.alterPartitionReassignments(Map.of(tp, Optional.empty())).values().get(tp),
                NoReassignmentInProgressException.class, "cancelling the finished reassignment of " + tp);
        List<Integer> after = partitionInfos(admin, topic).get(0).replicas().stream().map(Node::id).toList();
        check(after.equals(before), "replicas %s after the refused cancel, were %s", after, before);
        return "Optional.empty() for " + tp + ": NoReassignmentInProgressException, replicas still " + after;
    }

    String reassignToUnknownBroker(Admin admin, String topic) throws Exception {
        TopicPartition tp = new TopicPartition(topic, 0);
        List<Integer> before = partitionInfos(admin, topic).get(0).replicas().stream().map(Node::id).toList();
        int unknown = 9999;
        List<Integer> target = List.of(unknown, before.get(0));
        Throwable cause = failureOf(admin.alterPartitionReassignments(
                Map.of(tp, Optional.of(new NewPartitionReassignment(target)))).values().get(tp),
                "reassigning " + tp + " to " + target);
        check(cause instanceof InvalidReplicaAssignmentException, "reassigning %s to %s failed with %s, "
                + "want InvalidReplicaAssignmentException", tp, target, cause);
        TopicPartition nowhere = new TopicPartition(topic + "-missing", 0);
        expectError(admin.alterPartitionReassignments(Map.of(nowhere,
                        Optional.of(new NewPartitionReassignment(before)))).values().get(nowhere),
                org.apache.kafka.common.errors.UnknownTopicOrPartitionException.class,
                "reassigning " + nowhere);
        Map<TopicPartition, PartitionReassignment> ongoing =
                admin.listPartitionReassignments().reassignments().get(WAIT_S, TimeUnit.SECONDS);
        check(ongoing.isEmpty(), "reassignments in progress after the refused ones: %s", ongoing);
        List<Integer> after = partitionInfos(admin, topic).get(0).replicas().stream().map(Node::id).toList();
        check(after.equals(before), "replicas %s after the refused move, were %s", after, before);
        return "target " + target + ": " + cause.getClass().getSimpleName() + " (" + cause.getMessage()
                + "); unknown topic: UnknownTopicOrPartitionException; nothing in progress";
    }

    // -- numbered run (leader failover) ---------------------------------------------------------

    void produceNumbered() {
        String topic = require("topic");
        int count = Integer.parseInt(require("count"));
        int partitions = intOpt("partitions", 3);
        int batch = intOpt("batch", 20);
        int intervalMs = intOpt("interval-ms", 10);
        String compression = opts.getOrDefault("compression", "lz4");
        step("produce-numbered", () -> {
            AtomicLong acked = new AtomicLong();
            AtomicLong lastAckNanos = new AtomicLong(System.nanoTime());
            AtomicLong longestGapMs = new AtomicLong();
            ConcurrentLinkedQueue<String> errors = new ConcurrentLinkedQueue<>();
            Map<String, String> extra = Map.of(
                    ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "90000",
                    ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000",
                    ProducerConfig.RETRY_BACKOFF_MS_CONFIG, "100",
                    ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "1000",
                    ProducerConfig.MAX_BLOCK_MS_CONFIG, "60000");
            long start = System.nanoTime();
            double retries;
            try (KafkaProducer<byte[], byte[]> producer = producer(compression, extra)) {
                for (int n = 0; n < count; n++) {
                    final int number = n;
                    producer.send(new ProducerRecord<>(topic, n % partitions, null,
                            utf8(Integer.toString(n))), (meta, error) -> {
                        if (error != null) {
                            errors.add(number + ": " + error);
                            return;
                        }
                        long now = System.nanoTime();
                        long gap = (now - lastAckNanos.getAndSet(now)) / 1_000_000;
                        longestGapMs.accumulateAndGet(gap, Math::max);
                        acked.incrementAndGet();
                    });
                    if ((n + 1) % batch == 0) {
                        Thread.sleep(intervalMs);
                        if ((n + 1) % (batch * 10) == 0) {
                            out("PROGRESS sent=" + (n + 1) + " acked=" + acked.get());
                        }
                    }
                }
                out("PROGRESS sent=" + count + " acked=" + acked.get());
                producer.flush();
                retries = metric(producer, "record-retry-total");
            }
            out("PROGRESS sent=" + count + " acked=" + acked.get());
            check(errors.isEmpty(), "%d sends failed, first: %s", errors.size(),
                    errors.stream().limit(3).toList());
            check(acked.get() == count, "%d of %d acknowledged", acked.get(), count);
            return count + " records acked in " + elapsedMs(start) + " ms, longest gap between "
                    + "acks " + longestGapMs.get() + " ms, " + (long) retries + " records retried";
        });
    }

    static double metric(KafkaProducer<byte[], byte[]> producer, String name) {
        for (Map.Entry<MetricName, ? extends Metric> entry : producer.metrics().entrySet()) {
            if (entry.getKey().name().equals(name) && entry.getKey().group().equals("producer-metrics")) {
                Object value = entry.getValue().metricValue();
                return value instanceof Number number ? number.doubleValue() : -1;
            }
        }
        return -1;
    }

    void verifyNumbered() {
        String topic = require("topic");
        int count = Integer.parseInt(require("count"));
        int partitions = intOpt("partitions", 3);
        step("verify-numbered", () -> {
            int[] seen = new int[count];
            List<String> problems = new ArrayList<>();
            List<TopicPartition> tps = new ArrayList<>();
            for (int p = 0; p < partitions; p++) tps.add(new TopicPartition(topic, p));
            long total = 0;
            try (KafkaConsumer<byte[], byte[]> consumer = consumer("raftwood-harness-verify")) {
                consumer.assign(tps);
                consumer.seekToBeginning(tps);
                Map<TopicPartition, Long> end = consumer.endOffsets(tps, Duration.ofSeconds(WAIT_S));
                Map<Integer, Long> lastOffset = new HashMap<>();
                Map<Integer, Integer> lastNumber = new HashMap<>();
                long start = System.nanoTime();
                while (elapsedMs(start) < 60_000) {
                    for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                        total++;
                        int n = Integer.parseInt(text(r.value()));
                        long previousOffset = lastOffset.getOrDefault(r.partition(), -1L);
                        if (r.offset() != previousOffset + 1 && problems.size() < 20) {
                            problems.add("gap in offsets of partition " + r.partition() + ": "
                                    + previousOffset + " then " + r.offset());
                        }
                        lastOffset.put(r.partition(), r.offset());
                        if (n < 0 || n >= count || n % partitions != r.partition()) {
                            problems.add("number " + n + " on partition " + r.partition());
                            continue;
                        }
                        if (n <= lastNumber.getOrDefault(r.partition(), -1) && problems.size() < 20) {
                            problems.add("partition " + r.partition() + ": " + n + " after "
                                    + lastNumber.get(r.partition()) + " at offset " + r.offset());
                        }
                        lastNumber.put(r.partition(), n);
                        seen[n]++;
                    }
                    boolean done = true;
                    for (TopicPartition tp : tps) done &= consumer.position(tp) >= end.get(tp);
                    if (done) break;
                }
                for (TopicPartition tp : tps) {
                    check(consumer.position(tp) >= end.get(tp), "%s read to %d of %d in 60 s", tp,
                            consumer.position(tp), end.get(tp));
                }
            }
            List<Integer> missing = new ArrayList<>();
            List<Integer> duplicated = new ArrayList<>();
            for (int n = 0; n < count; n++) {
                if (seen[n] == 0) missing.add(n);
                if (seen[n] > 1) duplicated.add(n);
            }
            check(missing.isEmpty() && duplicated.isEmpty() && problems.isEmpty(),
                    "%d missing %s, %d duplicated %s, problems %s", missing.size(),
                    missing.stream().limit(10).toList(), duplicated.size(),
                    duplicated.stream().limit(10).toList(), problems);
            check(total == count, "%d records in the topic, want %d", total, count);
            return count + " numbers each exactly once, in order on their partitions";
        });
    }

    // -- transactions: consume-transform-produce ------------------------------------------------

    static final int TXN_SIZE = 10;

    KafkaProducer<byte[], byte[]> txnProducer(String transactionalId) {
        KafkaProducer<byte[], byte[]> producer = producer("none", Map.of(
                ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId,
                ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "60000",
                ProducerConfig.CLIENT_ID_CONFIG, "raftwood-harness-" + transactionalId));
        producer.initTransactions();
        return producer;
    }

    void txnConsumeTransformProduce() {
        String prefix = require("prefix");
        int partitions = intOpt("partitions", 3);
        int count = intOpt("count", 60);
        short replication = (short) intOpt("replication-factor", 1);
        String input = prefix + "-in";
        String output = prefix + "-out";
        String group = prefix + "-group";
        try (Admin admin = admin()) {
            boolean produced = step("txn-produce-input", () -> {
                admin.createTopics(List.of(new NewTopic(input, partitions, replication),
                        new NewTopic(output, partitions, replication))).all().get(WAIT_S, TimeUnit.SECONDS);
                waitForLeaders(admin, List.of(input, output), partitions);
                int aborted = 0;
                try (KafkaProducer<byte[], byte[]> producer = txnProducer(prefix + "-input-tid")) {
                    for (int start = 0; start < count; start += TXN_SIZE) {
                        if (start == 2 * TXN_SIZE) {   // an aborted transaction among the inputs
                            producer.beginTransaction();
                            for (int p = 0; p < partitions; p++) {
                                producer.send(new ProducerRecord<>(input, p, null, utf8("junk-" + p)));
                                aborted++;
                            }
                            producer.flush();
                            producer.abortTransaction();
                        }
                        producer.beginTransaction();
                        for (int n = start; n < Math.min(count, start + TXN_SIZE); n++) {
                            producer.send(new ProducerRecord<>(input, n % partitions, null, utf8("in-" + n)));
                        }
                        producer.commitTransaction();
                    }
                }
                return count + " inputs committed in transactions of " + TXN_SIZE + ", " + aborted
                        + " aborted records among them";
            });
            if (!produced) return;
            boolean transformed = step("txn-consume-transform-produce",
                    () -> consumeTransformProduce(input, output, group, prefix, count));
            if (!transformed) return;
            step("txn-verify-output", () -> verifyTransformed(input, output, group, partitions, count));
            step("txn-fence-zombie", () -> fenceZombie(output, prefix));
        }
    }

    String consumeTransformProduce(String input, String output, String group, String prefix, int count)
            throws Exception {
        int processed = 0;
        int transactions = 0;
        int abortedRecords = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = consumer(group, "read_committed",
                     Map.of(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest",
                            ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "7"));
             KafkaProducer<byte[], byte[]> producer = txnProducer(prefix + "-ctp-tid")) {
            consumer.subscribe(List.of(input));
            long start = System.nanoTime();
            int polls = 0;
            while (processed < count && elapsedMs(start) < 60_000 && polls++ < 600) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) continue;
                transactions++;
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                Map<TopicPartition, Long> firstOffsets = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    check(text(r.value()).startsWith("in-"), "read_committed returned %s at %s-%d@%d",
                            text(r.value()), r.topic(), r.partition(), r.offset());
                    producer.send(new ProducerRecord<>(output, r.partition(), null, utf8("out-" + text(r.value()))));
                    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                    offsets.put(tp, new OffsetAndMetadata(r.offset() + 1));
                    firstOffsets.putIfAbsent(tp, r.offset());
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                if (transactions != 3) {
                    producer.commitTransaction();
                    processed += records.count();
                    continue;
                }
                producer.flush();
                producer.abortTransaction();       // rewind to what the group committed
                abortedRecords += records.count();
                Map<TopicPartition, OffsetAndMetadata> committed =
                        consumer.committed(firstOffsets.keySet(), Duration.ofSeconds(WAIT_S));
                for (TopicPartition tp : firstOffsets.keySet()) {
                    OffsetAndMetadata c = committed.get(tp);
                    long first = firstOffsets.get(tp);
                    // nothing committed on tp yet, or the batch starts at the committed offset
                    // (or past it: only markers and aborted inputs lie between)
                    check(c == null || c.offset() <= first,
                            "%s: committed %s, but the aborted batch started at %d", tp, c, first);
                    if (c == null) consumer.seekToBeginning(List.of(tp));
                    else consumer.seek(tp, c.offset());
                }
            }
            check(processed == count, "%d of %d inputs processed in %d transactions, %d polls", processed,
                    count, transactions, polls);
            check(abortedRecords > 0, "the third transaction was not aborted (%d transactions)", transactions);
        }
        return processed + " inputs transformed in " + transactions + " transactions, " + abortedRecords
                + " records in the aborted one";
    }

    String verifyTransformed(String input, String output, String group, int partitions, int count)
            throws Exception {
        Map<Integer, List<String>> inputs = readCommitted(input, partitions, "raftwood-harness-verify-in");
        Map<Integer, List<String>> outputs = readCommitted(output, partitions, "raftwood-harness-verify-out");
        int total = 0;
        for (int p = 0; p < partitions; p++) {
            List<String> want = new ArrayList<>();
            for (String value : inputs.get(p)) {
                String[] parts = value.split("@");
                check(parts[0].startsWith("in-"), "input %d holds %s", p, value);
                want.add("out-" + parts[0]);
            }
            List<String> got = new ArrayList<>();
            for (String value : outputs.get(p)) got.add(value.split("@")[0]);
            check(got.equals(want), "output partition %d is %s, want %s", p, got, want);
            total += got.size();
        }
        check(total == count, "%d outputs, want %d", total, count);
        List<TopicPartition> tps = new ArrayList<>();
        for (int p = 0; p < partitions; p++) tps.add(new TopicPartition(input, p));
        try (KafkaConsumer<byte[], byte[]> consumer = consumer(group, "read_committed")) {
            Map<TopicPartition, OffsetAndMetadata> committed =
                    consumer.committed(Set.copyOf(tps), Duration.ofSeconds(WAIT_S));
            for (int p = 0; p < partitions; p++) {
                List<String> in = inputs.get(p);
                long lastOffset = Long.parseLong(in.get(in.size() - 1).split("@")[1]);
                OffsetAndMetadata c = committed.get(tps.get(p));
                check(c != null && c.offset() == lastOffset + 1,
                        "group %s committed %s on %s, want %d", group, c, tps.get(p), lastOffset + 1);
            }
        }
        return total + " outputs, each input exactly once in order; the group's offsets one past "
                + "each partition's last input";
    }

    /** Every partition of ``topic`` read with read_committed to its end (the LSO): per
     * partition the values as "value@offset". */
    Map<Integer, List<String>> readCommitted(String topic, int partitions, String groupId) throws Exception {
        Map<Integer, List<String>> got = new TreeMap<>();
        List<TopicPartition> tps = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            tps.add(new TopicPartition(topic, p));
            got.put(p, new ArrayList<>());
        }
        try (KafkaConsumer<byte[], byte[]> consumer = consumer(groupId, "read_committed")) {
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> end = consumer.endOffsets(tps, Duration.ofSeconds(WAIT_S));
            long start = System.nanoTime();
            int polls = 0;
            while (elapsedMs(start) < POLL_DEADLINE_MS && polls++ < 1000) {
                boolean done = true;
                for (TopicPartition tp : tps) done &= consumer.position(tp) >= end.get(tp);
                if (done) return got;
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    got.get(r.partition()).add(text(r.value()) + "@" + r.offset());
                }
            }
            Map<TopicPartition, Long> positions = new HashMap<>();
            for (TopicPartition tp : tps) positions.put(tp, consumer.position(tp));
            throw new CheckFailed(topic + " not read to its end " + end + " (read_committed): positions "
                    + positions);
        }
    }

    String fenceZombie(String topic, String prefix) throws Exception {
        String tid = prefix + "-zombie-tid";
        KafkaProducer<byte[], byte[]> zombie = txnProducer(tid);
        try {
            zombie.beginTransaction();
            zombie.send(new ProducerRecord<>(topic, 0, null, utf8("zombie-a"))).get(WAIT_S, TimeUnit.SECONDS);
            try (KafkaProducer<byte[], byte[]> successor = txnProducer(tid)) {
                boolean fenced = false;
                try {
                    zombie.commitTransaction();
                } catch (ProducerFencedException expected) {
                    fenced = true;
                }
                check(fenced, "the first producer committed after a second one with its "
                        + "transactional id initialised");
                successor.beginTransaction();
                successor.send(new ProducerRecord<>(topic, 0, null, utf8("zombie-b")));
                successor.commitTransaction();
            }
        } finally {
            zombie.close(Duration.ofSeconds(5));
        }
        List<String> values = new ArrayList<>();
        for (String value : readCommitted(topic, 1, "raftwood-harness-verify-zombie").get(0)) {
            String v = value.split("@")[0];
            if (v.startsWith("zombie-")) values.add(v);
        }
        check(values.equals(List.of("zombie-b")), "read_committed zombie records %s, want [zombie-b]",
                values);
        return "commitTransaction of the fenced producer threw ProducerFencedException; only the "
                + "successor's transaction is read";
    }
}

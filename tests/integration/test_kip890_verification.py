"""KIP-890 part 1 on a 3-broker cluster, through raw requests: a partition leader appends
a producer's first transactional write to a partition only once the transaction's
coordinator confirmed the partition is in the ongoing transaction.

The partitions of the topics are spread over the three brokers, so some leaders are the
coordinator (answered in place) and some ask it over the inter-broker listener
(AddPartitionsToTxn v4, VerifyOnly).  The last test runs the Java 4.3 producer and a
read_committed consumer (one JVM, a one-file probe) on the same cluster.
"""
from __future__ import annotations

import time

import pytest
from kafka.protocol.admin import CreateTopicsRequest, DescribeTransactionsRequest
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import (
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ProduceRequest,
)
from kafka.record.default_records import DefaultRecordBatchBuilder

NONE = 0
INVALID_TXN_STATE = 48
NOT_ENOUGH_REPLICAS = 19
CORRUPT_MESSAGE = 2
RETRIABLE = {14, 15, 16, 51}  # LOAD_IN_PROGRESS, NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT
PARTITIONS = 3
WAIT_S = 30.0


def until(send, done, what: str):
    """``send()`` until ``done(answer)``, for at most WAIT_S; the last answer."""
    deadline = time.monotonic() + WAIT_S
    while True:
        answer = send()
        if done(answer):
            return answer
        assert time.monotonic() < deadline, f"{what}: last answer {answer}"
        time.sleep(0.2)


def create_topic(conn, name: str) -> None:
    Topic = CreateTopicsRequest.CreatableTopic
    response = conn.request(CreateTopicsRequest[4](topics=[Topic(
        name=name, num_partitions=PARTITIONS, replication_factor=3, assignments=[],
        configs=[])], timeout_ms=15_000, validate_only=False))
    assert response.topics[0].error_code == NONE


def leaders(cluster, conn, topic: str) -> dict[int, int]:
    """Partition -> leader node id, once every partition has one in ``conn``'s broker."""
    def led(metadata):
        [t] = metadata.topics
        return t.error_code == NONE and len(t.partitions) == PARTITIONS \
            and all(p.leader_id >= 0 for p in t.partitions)
    metadata = until(lambda: conn.metadata([topic]), led, f"leaders of {topic}")
    return {p.partition_index: p.leader_id for p in metadata.topics[0].partitions}


def coordinator(cluster, txn_id: str):
    """A connection to the transaction coordinator of ``txn_id``."""
    with cluster.connect(cluster.node_ids[0]) as conn:
        found = until(lambda: conn.request(FindCoordinatorRequest[3](key=txn_id, key_type=1)),
                      lambda r: r.error_code not in RETRIABLE, f"coordinator of {txn_id}")
    assert found.error_code == NONE
    return cluster.connect(found.node_id)


def init_producer(conn, txn_id: str) -> tuple[int, int]:
    answer = until(lambda: conn.request(InitProducerIdRequest[3](
        transactional_id=txn_id, transaction_timeout_ms=60_000, producer_id=-1,
        producer_epoch=-1)), lambda r: r.error_code not in RETRIABLE, "InitProducerId")
    assert answer.error_code == NONE
    return answer.producer_id, answer.producer_epoch


def add_partitions(conn, txn_id: str, producer: tuple[int, int], topic: str,
                   partitions: list[int]) -> list[int]:
    answer = until(lambda: conn.request(AddPartitionsToTxnRequest[3](
        v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=producer[0],
        v3_and_below_producer_epoch=producer[1],
        v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(
            name=topic, partitions=partitions)])),
        lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0]
        .partition_error_code not in RETRIABLE, "AddPartitionsToTxn")
    return [p.partition_error_code
            for p in answer.results_by_topic_v3_and_below[0].results_by_partition]


def end_txn(conn, txn_id: str, producer: tuple[int, int], commit: bool) -> None:
    answer = until(lambda: conn.request(EndTxnRequest[3](
        transactional_id=txn_id, producer_id=producer[0], producer_epoch=producer[1],
        committed=commit)), lambda r: r.error_code not in RETRIABLE, "EndTxn")
    assert answer.error_code == NONE
    until(lambda: conn.request(DescribeTransactionsRequest[0](transactional_ids=[txn_id])),
          lambda r: r.transaction_states[0].transaction_state
          == ("CompleteCommit" if commit else "CompleteAbort"), "the markers written")


def txn_batch(producer: tuple[int, int], value: bytes, sequence: int = 0) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True,
                                        producer_id=producer[0], producer_epoch=producer[1],
                                        base_sequence=sequence, batch_size=1 << 20)
    builder.append(0, timestamp=int(time.time() * 1000), key=None, value=value, headers=[])
    return bytes(builder.build())


def txn_produce_request(txn_id: str, topic: str, batches: dict[int, bytes]):
    data = ProduceRequest.TopicProduceData
    return ProduceRequest[9](
        transactional_id=txn_id, acks=-1, timeout_ms=15_000, topic_data=[data(
            name=topic, partition_data=[data.PartitionProduceData(index=i, records=b)
                                        for i, b in batches.items()])])


def errors_of(answer) -> dict[int, int]:
    return {p.index: p.error_code for p in answer.responses[0].partition_responses}


def produce_txn(conn, txn_id: str, topic: str, batches: dict[int, bytes]) -> dict[int, int]:
    """One transactional Produce (acks=all) of ``batches`` by partition; errors by partition."""
    return errors_of(conn.request(txn_produce_request(txn_id, topic, batches)))


def stable_everywhere(cluster, topic: str, led: dict[int, int]) -> None:
    """Every partition's last stable offset reaches its high watermark (no transaction
    left open), asked of each leader."""
    for index, leader in led.items():
        with cluster.connect(leader) as conn:
            def stable(_, conn=conn, index=index):
                hw = conn.list_offsets(topic, index, -1)
                lso = conn.request(_list_offsets_committed(topic, index)).topics[0] \
                    .partitions[0]
                return hw.error_code == NONE and lso.error_code == NONE \
                    and lso.offset == hw.offset and hw.offset > 0
            until(lambda: None, stable, f"{topic}-{index} stable")


def _list_offsets_committed(topic: str, index: int):
    T = ListOffsetsRequest.ListOffsetsTopic
    return ListOffsetsRequest[7](replica_id=-1, isolation_level=1, topics=[T(
        name=topic, partitions=[T.ListOffsetsPartition(
            partition_index=index, current_leader_epoch=-1, timestamp=-1)])])


def test_a_write_delayed_past_its_transactions_abort_is_refused(shared_cluster):
    """The delayed-commit scenario: the producer added the partitions, its writes were
    delayed, the transaction was aborted (markers on every partition); the late writes
    then reach the leaders.  Without verification they open a transaction nobody ends
    and the last stable offset stays behind it."""
    cluster, txn_id, topic = shared_cluster, "kip890-late", "kip890-late-topic"
    with cluster.connect(cluster.node_ids[0]) as conn:
        create_topic(conn, topic)
        led = leaders(cluster, conn, topic)
    with coordinator(cluster, txn_id) as coord:
        producer = init_producer(coord, txn_id)
        assert add_partitions(coord, txn_id, producer, topic, list(led)) == [NONE] * PARTITIONS
        end_txn(coord, txn_id, producer, commit=False)
    for index, leader in led.items():
        with cluster.connect(leader) as conn:
            errors = produce_txn(conn, txn_id, topic, {index: txn_batch(producer, b"late")})
            assert errors == {index: INVALID_TXN_STATE}, f"partition {index} on {leader}"
    stable_everywhere(cluster, topic, led)


def test_a_malformed_transactional_batch_gets_corrupt_message_and_the_connection_serves_on(
        shared_cluster):
    """Verification reads each batch's header before the append: a batch whose length
    field cannot hold a header is CORRUPT_MESSAGE for its partition, as for any producer,
    never an exception that closes the connection (the fuzzer found it)."""
    cluster, txn_id, topic = shared_cluster, "kip890-bad", "kip890-bad-topic"
    with cluster.connect(cluster.node_ids[0]) as conn:
        create_topic(conn, topic)
        led = leaders(cluster, conn, topic)
    index, leader = next(iter(led.items()))
    with coordinator(cluster, txn_id) as coord:
        producer = init_producer(coord, txn_id)
    torn = bytearray(txn_batch(producer, b"x"))
    torn[8:12] = (0).to_bytes(4, "big")  # batchLength 0
    with cluster.connect(leader) as conn:
        assert produce_txn(conn, txn_id, topic, {index: bytes(torn)}) == {index: CORRUPT_MESSAGE}
        assert conn.api_versions().error_code == NONE, "the connection serves on"


def test_only_the_partitions_of_the_ongoing_transaction_take_its_writes(shared_cluster):
    cluster, txn_id, topic = shared_cluster, "kip890-some", "kip890-some-topic"
    with cluster.connect(cluster.node_ids[0]) as conn:
        create_topic(conn, topic)
        led = leaders(cluster, conn, topic)
    with coordinator(cluster, txn_id) as coord:
        producer = init_producer(coord, txn_id)
        assert add_partitions(coord, txn_id, producer, topic, [0, 1]) == [NONE, NONE]
        for index, leader in led.items():
            with cluster.connect(leader) as conn:
                errors = produce_txn(conn, txn_id, topic, {index: txn_batch(producer, b"v")})
                assert errors == {index: INVALID_TXN_STATE if index == 2 else NONE}, \
                    f"partition {index} on {leader}"
        # The batched form as a leader sends it: in the transaction or not.
        Request = AddPartitionsToTxnRequest[4]
        Txn = Request.AddPartitionsToTxnTransaction
        answer = coord.request(Request(transactions=[Txn(
            transactional_id=txn_id, producer_id=producer[0], producer_epoch=producer[1],
            verify_only=True, topics=[Txn.AddPartitionsToTxnTopic(name=topic,
                                                                  partitions=[0, 2])])]))
        assert answer.error_code == NONE
        [result] = answer.results_by_transaction
        assert {p.partition_index: p.partition_error_code
                for p in result.topic_results[0].results_by_partition} \
            == {0: NONE, 2: INVALID_TXN_STATE}
        end_txn(coord, txn_id, producer, commit=True)
    stable_everywhere(cluster, topic, {i: led[i] for i in (0, 1)})


def test_pipelined_first_writes_of_a_transaction_all_land(shared_cluster):
    """A producer has several requests in flight: the second write to a partition is
    verified while the first still is; neither may void the other's answer."""
    cluster, txn_id, topic = shared_cluster, "kip890-pipelined", "kip890-pipelined-topic"
    with cluster.connect(cluster.node_ids[0]) as conn:
        create_topic(conn, topic)
        led = leaders(cluster, conn, topic)
    with coordinator(cluster, txn_id) as coord:
        producer = init_producer(coord, txn_id)
        assert add_partitions(coord, txn_id, producer, topic, list(led)) == [NONE] * PARTITIONS
        for index, leader in led.items():
            with cluster.connect(leader) as conn:
                requests = [txn_produce_request(txn_id, topic, {
                    index: txn_batch(producer, b"v%d" % sequence, sequence)})
                    for sequence in range(3)]
                sent = [(r, conn.send(r)) for r in requests]
                answers = [errors_of(conn.receive(r, c)) for r, c in sent]
                assert answers == [{index: NONE}] * 3, f"partition {index} on {leader}"
        end_txn(coord, txn_id, producer, commit=True)
    stable_everywhere(cluster, topic, led)


def test_a_stalled_coordinator_costs_a_retriable_answer_and_no_hanging_transaction(cluster):
    """The coordinator stops answering (SIGSTOP) while another broker's partition gets
    the transaction's first write there: the leader answers it (NONE if a new coordinator
    confirmed it, else the retriable NOT_ENOUGH_REPLICAS), and once the coordinator is
    back the producer's retry lands and the commit leaves nothing open."""
    txn_id, topic = "kip890-stall", "kip890-stall-topic"
    with cluster.connect(cluster.node_ids[0]) as conn:
        create_topic(conn, topic)
        led = leaders(cluster, conn, topic)
    with coordinator(cluster, txn_id) as coord:
        producer = init_producer(coord, txn_id)
        assert add_partitions(coord, txn_id, producer, topic, list(led)) == [NONE] * PARTITIONS
        stalled = coord.request(FindCoordinatorRequest[3](key=txn_id, key_type=1)).node_id
    index, leader = next((i, n) for i, n in sorted(led.items()) if n != stalled)
    batch = txn_batch(producer, b"during the stall")
    cluster.pause(stalled)
    try:
        with cluster.connect(leader, timeout_s=60.0) as conn:
            first = produce_txn(conn, txn_id, topic, {index: batch})
    finally:
        cluster.resume(stalled)
    assert first[index] in (NONE, NOT_ENOUGH_REPLICAS), first
    with cluster.connect(leader, timeout_s=60.0) as conn:  # the producer's retry
        until(lambda: produce_txn(conn, txn_id, topic, {index: batch}),
              lambda errors: errors[index] != NOT_ENOUGH_REPLICAS, "the retried write")
        assert produce_txn(conn, txn_id, topic, {index: batch}) == {index: NONE}
    with coordinator(cluster, txn_id) as coord:
        end_txn(coord, txn_id, producer, commit=True)
    stable_everywhere(cluster, topic, {index: leader})


TXN_PROBE = r"""
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.*;

public class TxnProbe {
    // args: bootstrap topic transactional-id transactions records-per-transaction
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], txnId = args[2];
        int txns = Integer.parseInt(args[3]), perTxn = Integer.parseInt(args[4]);
        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("transactional.id", txnId);
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            producer.initTransactions();
            for (int t = 0; t < txns; t++) {
                producer.beginTransaction();
                for (int r = 0; r < perTxn; r++)
                    producer.send(new ProducerRecord<>(topic, r % 3, null, "t" + t + "-" + r));
                producer.flush();
                if (t % 2 == 0) producer.commitTransaction(); else producer.abortTransaction();
                System.out.println("ended=" + t);
            }
        }
        Properties cp = new Properties();
        cp.put("bootstrap.servers", bootstrap);
        cp.put("isolation.level", "read_committed");
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int p = 0; p < 3; p++) tps.add(new TopicPartition(topic, p));
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> end = consumer.endOffsets(tps);
            long deadline = System.currentTimeMillis() + 60_000;
            while (System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> rec : consumer.poll(Duration.ofMillis(500)))
                    System.out.println("got " + rec.partition() + " " + rec.value());
                boolean done = true;
                for (TopicPartition tp : tps) done &= consumer.position(tp) >= end.get(tp);
                if (done) break;
            }
            System.out.println("read-to-end");
        }
    }
}
"""


@pytest.fixture(scope="module")
def java43(tmp_path_factory):
    from compat.java.probe import Probe, ProbeUnavailable
    try:
        return Probe.prepare(build_dir=tmp_path_factory.mktemp("java43-kip890"))
    except ProbeUnavailable as exc:
        pytest.skip(f"Java 4.3 probe unavailable: {exc}")


def test_java_43_transactions_are_exactly_once_with_verification(java43, shared_cluster):
    """The Java 4.3 producer (on transaction version 2, which the cluster finalizes: each
    first write per partition adds it) commits and aborts transactions over three
    partitions; a read_committed consumer reads each committed record once and no
    aborted one."""
    cluster, topic, txns, per_txn = shared_cluster, "kip890-java-topic", 4, 6
    with cluster.connect(cluster.node_ids[0]) as conn:
        create_topic(conn, topic)
        leaders(cluster, conn, topic)
    run = java43.run(TXN_PROBE, cluster.bootstrap, topic, "kip890-java", str(txns),
                     str(per_txn), timeout_s=150)
    assert run.passed, run.report()
    assert "read-to-end" in run.stdout, run.report()
    got = [line.split(" ", 2)[2] for line in run.stdout.splitlines() if line.startswith("got ")]
    committed = [f"t{t}-{r}" for t in range(0, txns, 2) for r in range(per_txn)]
    assert sorted(got) == sorted(committed), run.report()

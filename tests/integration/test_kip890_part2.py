"""KIP-890 part 2 (transaction version 2) on one 3-broker cluster.

* ApiVersions finalizes ``transaction.version`` 2 (supported 0-2); UpdateFeatures can
  take it down to 1 (clients then use version 1) and back.
* Jepsen's delayed commit, through raw requests: a transaction's EndTxn (and a write)
  held back while the producer moves on to its next transaction.  With version 2
  (Produce v12's implicit add, EndTxn v5) the late EndTxn is PRODUCER_FENCED and the
  late write INVALID_PRODUCER_EPOCH: the next transaction is neither ended early nor
  given the stray record; every committed record is read once, no other.  With version
  1 (AddPartitionsToTxn, EndTxn v3) the late write reaching a partition between the two
  transactions is refused INVALID_TXN_STATE (part 1's verification).
* kafka-clients 4.3.0 (compat/java, ``txn-ctp``): a consume-transform-produce run with
  sendOffsetsToTransaction, an abort and a fenced zombie is exact, and the brokers'
  request metrics show the client on version 2 (EndTxn v5, Produce v12, TxnOffsetCommit
  v5, no AddPartitionsToTxn from a client).
"""
from __future__ import annotations

import time
import urllib.request

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.protocol.admin import (
    CreateTopicsRequest,
    DescribeTransactionsRequest,
    UpdateFeaturesRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import (
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ProduceRequest,
)
from kafka.record.default_records import DefaultRecordBatchBuilder
from prometheus_client.parser import text_string_to_metric_families

from broker.testing import free_ports

NONE = 0
NOT_ENOUGH_REPLICAS = 19
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
PRODUCER_FENCED = 90
# Retried as a client would: NOT_ENOUGH_REPLICAS (a first write's coordinator busy),
# LOAD_IN_PROGRESS, NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS.
RETRIABLE = {NOT_ENOUGH_REPLICAS, 14, 15, 16, 51}
WAIT_S = 60.0
TRANSACTION_VERSION = "transaction.version"
SAFE_DOWNGRADE, UPGRADE = 2, 1
JAVA_CLIENT = "4.3.0"


@pytest.fixture(scope="module")
def metered(module_cluster_factory):
    """(cluster, {node id: metrics port}): one 3-broker cluster serving metrics.port."""
    ports = dict(zip((1, 2, 3), free_ports(3)))
    cluster = module_cluster_factory(
        broker_settings={node: {"metrics.port": str(port)} for node, port in ports.items()})
    return cluster, ports


def until(send, done, what: str):
    """``send()`` until ``done(answer)``, for at most WAIT_S; the last answer."""
    deadline = time.monotonic() + WAIT_S
    while True:
        answer = send()
        if done(answer):
            return answer
        assert time.monotonic() < deadline, f"{what}: last answer {answer}"
        time.sleep(0.2)


def create_topic(cluster, name: str, partitions: int = 1) -> dict[int, int]:
    """Create ``name`` (replication 3); partition -> leader once every one has a leader."""
    Topic = CreateTopicsRequest.CreatableTopic
    with cluster.connect(cluster.node_ids[0]) as conn:
        response = conn.request(CreateTopicsRequest[4](topics=[Topic(
            name=name, num_partitions=partitions, replication_factor=3, assignments=[],
            configs=[])], timeout_ms=15_000, validate_only=False))
        assert response.topics[0].error_code == NONE

        def led(metadata):
            [t] = metadata.topics
            return t.error_code == NONE and len(t.partitions) == partitions \
                and all(p.leader_id >= 0 for p in t.partitions)
        metadata = until(lambda: conn.metadata([name]), led, f"leaders of {name}")
    return {p.partition_index: p.leader_id for p in metadata.topics[0].partitions}


def coordinator(cluster, txn_id: str):
    with cluster.connect(cluster.node_ids[0]) as conn:
        found = until(lambda: conn.request(FindCoordinatorRequest[3](key=txn_id, key_type=1)),
                      lambda r: r.error_code not in RETRIABLE, f"coordinator of {txn_id}")
    assert found.error_code == NONE
    return cluster.connect(found.node_id)


def init_producer(conn, txn_id: str) -> tuple[int, int]:
    answer = until(lambda: conn.request(InitProducerIdRequest[5](
        transactional_id=txn_id, transaction_timeout_ms=60_000, producer_id=-1,
        producer_epoch=-1)), lambda r: r.error_code not in RETRIABLE, "InitProducerId")
    assert answer.error_code == NONE
    return answer.producer_id, answer.producer_epoch


def txn_batch(producer: tuple[int, int], value: bytes, sequence: int) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True,
                                        producer_id=producer[0], producer_epoch=producer[1],
                                        base_sequence=sequence, batch_size=1 << 20)
    builder.append(0, timestamp=int(time.time() * 1000), key=None, value=value, headers=[])
    return bytes(builder.build())


def produce_request(version: int, txn_id: str, topic: str, batch: bytes):
    data = ProduceRequest.TopicProduceData
    return ProduceRequest[version](
        transactional_id=txn_id, acks=-1, timeout_ms=15_000, topic_data=[data(
            name=topic, partition_data=[data.PartitionProduceData(index=0, records=batch)])])


def produce(conn, version: int, txn_id: str, topic: str, batch: bytes) -> int:
    """One transactional acks=all Produce of partition 0, retried while retriable."""
    request = produce_request(version, txn_id, topic, batch)
    answer = until(lambda: conn.request(request),
                   lambda r: r.responses[0].partition_responses[0].error_code not in RETRIABLE,
                   f"Produce v{version}")
    return answer.responses[0].partition_responses[0].error_code


def end_txn(conn, version: int, txn_id: str, producer: tuple[int, int], commit: bool):
    """EndTxn, retried while retriable; the answer."""
    return until(lambda: conn.request(EndTxnRequest[version](
        transactional_id=txn_id, producer_id=producer[0], producer_epoch=producer[1],
        committed=commit)), lambda r: r.error_code not in RETRIABLE, f"EndTxn v{version}")


def describe(conn, txn_id: str):
    return conn.request(DescribeTransactionsRequest[0](
        transactional_ids=[txn_id])).transaction_states[0]


def read_committed(cluster, topic: str) -> list[bytes]:
    """Every committed value of partition 0, read to the end with read_committed."""
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap.split(","),
                             isolation_level="read_committed", enable_auto_commit=False,
                             request_timeout_ms=30_000)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        values: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        while consumer.position(tp) < end:
            assert time.monotonic() < deadline, f"{topic}: read {values}, end {end}"
            for records in consumer.poll(timeout_ms=500).values():
                values += [r.value for r in records]
        return values
    finally:
        consumer.close()


def finalized(conn, version: int = 3) -> dict[str, int]:
    return {f.name: f.max_version_level for f in conn.api_versions(version).finalized_features}


def test_transaction_version_2_is_finalized_and_can_go_down_to_1(metered):
    cluster, _ports = metered
    with cluster.connect(cluster.node_ids[0]) as conn:
        answer = conn.api_versions(4)
        supported = {f.name: (f.min_version, f.max_version) for f in answer.supported_features}
        assert supported[TRANSACTION_VERSION] == (0, 2)
        assert finalized(conn)[TRANSACTION_VERSION] == 2
        update = UpdateFeaturesRequest[1]
        Key = update.FeatureUpdateKey
        for level, kind in ((1, SAFE_DOWNGRADE), (2, UPGRADE)):
            result = conn.request(update(timeout_ms=15_000, feature_updates=[Key(
                feature=TRANSACTION_VERSION, max_version_level=level, upgrade_type=kind)],
                validate_only=False))
            assert result.error_code == NONE, result
            for node in cluster.node_ids:
                with cluster.connect(node) as each:
                    until(lambda each=each: finalized(each).get(TRANSACTION_VERSION),
                          lambda got, level=level: got == level,
                          f"broker {node} finalizing {TRANSACTION_VERSION} {level}")


def test_delayed_commit_and_write_are_fenced_with_transaction_version_2(metered):
    cluster, _ports = metered
    txn_id, topic = "kip890-2-delayed", "kip890-2-delayed-topic"
    leader = create_topic(cluster, topic)[0]
    with coordinator(cluster, txn_id) as coord, cluster.connect(leader) as conn:
        first = init_producer(coord, txn_id)
        assert produce(conn, 12, txn_id, topic, txn_batch(first, b"t1-a", 0)) == NONE
        late_write = txn_batch(first, b"t1-late", 1)
        late_commit = EndTxnRequest[5](transactional_id=txn_id, producer_id=first[0],
                                       producer_epoch=first[1], committed=True)
        ended = end_txn(coord, 5, txn_id, first, commit=True)
        assert ended.error_code == NONE
        second = (ended.producer_id, ended.producer_epoch)
        assert second == (first[0], first[1] + 1), "the epoch is bumped at every commit"
        assert produce(conn, 12, txn_id, topic, txn_batch(second, b"t2-b", 0)) == NONE
        # The held-back requests of the first transaction arrive now.
        assert coord.request(late_commit).error_code == PRODUCER_FENCED
        assert produce(conn, 12, txn_id, topic, late_write) == INVALID_PRODUCER_EPOCH
        state = describe(coord, txn_id)
        assert (state.transaction_state, state.producer_epoch) == ("Ongoing", second[1])
        assert produce(conn, 12, txn_id, topic, txn_batch(second, b"t2-c", 1)) == NONE
        ended = end_txn(coord, 5, txn_id, second, commit=True)
        assert (ended.error_code, ended.producer_epoch) == (NONE, second[1] + 1)
        retried = end_txn(coord, 5, txn_id, second, commit=True)
        assert (retried.error_code, retried.producer_id, retried.producer_epoch) \
            == (NONE, second[0], second[1] + 1), "a retried commit is recognised"
        until(lambda: describe(coord, txn_id), lambda s: s.transaction_state
              == "CompleteCommit", "the second commit's markers")
    assert read_committed(cluster, topic) == [b"t1-a", b"t2-b", b"t2-c"]


def test_a_version_2_transaction_opens_on_a_partition_with_sequence_0(metered):
    """The Java producer pipelines a transaction's batches: a later batch may reach the
    leader before the first one's partition was added.  It must not be appended first
    (the first batch would then be out of order for good): NOT_ENOUGH_REPLICAS, which the
    producer retries after the first."""
    cluster, _ports = metered
    txn_id, topic = "kip890-2-order", "kip890-2-order-topic"
    leader = create_topic(cluster, topic)[0]
    with coordinator(cluster, txn_id) as coord, cluster.connect(leader) as conn:
        producer = init_producer(coord, txn_id)
        for epoch in (producer[1], producer[1] + 1):  # a first and a bumped epoch
            current = (producer[0], epoch)
            early = conn.request(produce_request(12, txn_id, topic,
                                                 txn_batch(current, b"second", 1)))
            assert early.responses[0].partition_responses[0].error_code \
                == NOT_ENOUGH_REPLICAS, "retriable: the producer sends it again"
            assert produce(conn, 12, txn_id, topic, txn_batch(current, b"first", 0)) == NONE
            assert produce(conn, 12, txn_id, topic, txn_batch(current, b"second", 1)) == NONE
            ended = end_txn(coord, 5, txn_id, current, commit=True)
            assert (ended.error_code, ended.producer_epoch) == (NONE, epoch + 1)
        until(lambda: describe(coord, txn_id), lambda s: s.transaction_state
              == "CompleteCommit", "the last commit's markers")
    assert read_committed(cluster, topic) == [b"first", b"second"] * 2


def test_delayed_write_between_transactions_is_refused_with_transaction_version_1(metered):
    cluster, _ports = metered
    txn_id, topic = "kip890-1-delayed", "kip890-1-delayed-topic"
    leader = create_topic(cluster, topic)[0]
    Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic

    def add(producer):
        answer = until(lambda: coord.request(AddPartitionsToTxnRequest[3](
            v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=producer[0],
            v3_and_below_producer_epoch=producer[1],
            v3_and_below_topics=[Topic(name=topic, partitions=[0])])),
            lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0]
            .partition_error_code not in RETRIABLE, "AddPartitionsToTxn")
        assert answer.results_by_topic_v3_and_below[0].results_by_partition[0] \
            .partition_error_code == NONE

    with coordinator(cluster, txn_id) as coord, cluster.connect(leader) as conn:
        producer = init_producer(coord, txn_id)
        add(producer)
        assert produce(conn, 11, txn_id, topic, txn_batch(producer, b"t1-a", 0)) == NONE
        assert end_txn(coord, 3, txn_id, producer, commit=True).error_code == NONE
        until(lambda: describe(coord, txn_id), lambda s: s.transaction_state
              == "CompleteCommit", "the first commit's markers")
        assert describe(coord, txn_id).producer_epoch == producer[1], "version 1: no bump"
        assert produce(conn, 11, txn_id, topic, txn_batch(producer, b"t1-late", 1)) \
            == INVALID_TXN_STATE
        add(producer)
        assert produce(conn, 11, txn_id, topic, txn_batch(producer, b"t2-b", 1)) == NONE
        assert end_txn(coord, 3, txn_id, producer, commit=True).error_code == NONE
        until(lambda: describe(coord, txn_id), lambda s: s.transaction_state
              == "CompleteCommit", "the second commit's markers")
    assert read_committed(cluster, topic) == [b"t1-a", b"t2-b"]


def requests_seen(ports: dict[int, int]) -> dict[tuple[str, int], float]:
    """(API, version) -> requests answered, summed over the brokers' /metrics."""
    seen: dict[tuple[str, int], float] = {}
    for port in ports.values():
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name == "kafka_network_requestmetrics_requests_total":
                    key = (s.labels["request"], int(s.labels["version"]))
                    seen[key] = seen.get(key, 0) + s.value
    return seen


@pytest.fixture(scope="module")
def java43(tmp_path_factory):
    """The harness compiled against kafka-clients 4.3.0 (skip when no JDK or no jars)."""
    from compat.java.harness import HarnessUnavailable, prepare

    try:
        return prepare(build_dir=tmp_path_factory.mktemp("java43-kip890-2"),
                       client_version=JAVA_CLIENT)
    except HarnessUnavailable as exc:
        pytest.skip(f"Java {JAVA_CLIENT} harness unavailable: {exc}")


def test_java43_consume_transform_produce_on_transaction_version_2(java43, metered):
    cluster, ports = metered
    before = requests_seen(ports)
    run = java43.run("txn-ctp", bootstrap=cluster.bootstrap, prefix="kip890-2-java",
                     partitions=3, count=90, replication_factor=3, timeout_s=180.0)
    assert run.passed, run.report()
    assert list(run.steps()) == ["txn-produce-input", "txn-consume-transform-produce",
                                 "txn-verify-output", "txn-fence-zombie"], run.report()
    assert set(run.steps().values()) == {"PASS"}, run.report()
    after = requests_seen(ports)
    used = {key: after[key] - before.get(key, 0) for key in after
            if after[key] > before.get(key, 0)}
    assert used.get(("EndTxn", 5)), used
    assert used.get(("Produce", 12)), used
    assert used.get(("TxnOffsetCommit", 5)), used
    client_adds = {k: n for k, n in used.items() if k[0] == "AddPartitionsToTxn" and k[1] < 4}
    assert not client_adds, f"a version 2 client sends no AddPartitionsToTxn: {used}"

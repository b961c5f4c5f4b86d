"""Transactions on replicated partitions (RF 3, a 3-broker cluster), end to end.

A marker on a partition with followers is acknowledged only once every in-sync replica
has it (WriteTxnMarkers waits as acks=all); the coordinator then completes the
transaction and the next one may start.  A sequence of transactions with short client
timeouts therefore only passes when each marker's wait ends as the high watermark passes
it (a wait that never wakes holds the transaction in PrepareCommit, and the next one gets
CONCURRENT_TRANSACTIONS until the client gives up).  Every committed record is then
read once under read_committed, from every partition; aborted ones never.
"""
from __future__ import annotations

import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")

TXN_TIMEOUT_S = 10.0
WAIT_S = 30.0


def test_transactions_on_rf3_partitions_complete_one_after_another(raftwood_cluster_factory):
    cluster = raftwood_cluster_factory(3)
    cluster.create_topic("replicated-txn", 3, replication_factor=3)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap,
                                         "transactional.id": "replicated-txn"})
    producer.init_transactions(WAIT_S)
    committed, aborted = set(), set()
    for n in range(8):
        producer.begin_transaction()
        values = {f"t{n}-{i}".encode() for i in range(6)}
        for i, value in enumerate(sorted(values)):
            producer.produce("replicated-txn", value, partition=i % 3)
        if n % 4 == 3:
            # Delivered first: librdkafka (issue 4849) makes an abort fatal
            # (INVALID_TXN_STATE) when its EndTxn overtakes the AddPartitionsToTxn still
            # in flight right after a commit, against Kafka too.  The delivery proves the
            # partitions were added, so the abort ends the transaction this test means.
            assert producer.flush(WAIT_S) == 0
            producer.abort_transaction(TXN_TIMEOUT_S)
            aborted |= values
        else:
            producer.commit_transaction(TXN_TIMEOUT_S)
            committed |= values

    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": cluster.bootstrap, "group.id": "replicated-txn-reader",
        "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition("replicated-txn", p,
                                                    confluent_kafka.OFFSET_BEGINNING)
                     for p in range(3)])
    seen = []
    deadline = time.monotonic() + WAIT_S
    try:
        while time.monotonic() < deadline and len(set(seen)) < len(committed):
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                seen.append(message.value())
    finally:
        consumer.close()
    assert sorted(seen) == sorted(committed), "each committed record once, no aborted one"
    assert not aborted & set(seen)

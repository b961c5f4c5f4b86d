"""DescribeProducers (KIP-664) through kafka-python's admin client, on a real broker.

The answer comes from the partition log's producer state: an idempotent producer shows
its id, epoch, last sequence and last timestamp; a transactional producer with an open
transaction shows the transaction's first offset, which is exactly where read_committed
readers stop (the last stable offset); after the commit it shows none, and the commit
marker's coordinator epoch.
"""
from __future__ import annotations

import time

import pytest
from kafka import KafkaAdminClient, TopicPartition

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import IsolationLevel  # noqa: E402
from confluent_kafka.admin import AdminClient, OffsetSpec  # noqa: E402

from broker.testing import KafkaConnection  # noqa: E402

WAIT_S = 15.0


def lso(bootstrap: str, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = confluent_kafka.TopicPartition(topic, 0)
    result = admin.list_offsets({tp: OffsetSpec.latest()},
                                isolation_level=IsolationLevel.READ_COMMITTED,
                                request_timeout=WAIT_S)
    return result[tp].result(WAIT_S).offset


def producers_of(bootstrap: str, topic: str):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        answer = admin.describe_producers([TopicPartition(topic, 0)])
    finally:
        admin.close()
    return {p.producer_id: p for p in answer[TopicPartition(topic, 0)].active_producers}


def test_describe_producers_shows_idempotent_and_transactional_producers(module_broker):
    bootstrap = module_broker.bootstrap
    with KafkaConnection(bootstrap) as conn:
        assert conn.create_topic("described", 1) == 0
    plain = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                      "enable.idempotence": True})
    before_ms = int(time.time() * 1000) - 1
    for i in range(5):
        plain.produce("described", f"p{i}".encode(), partition=0)
    assert plain.flush(WAIT_S) == 0
    txn = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                    "transactional.id": "described-txn"})
    txn.init_transactions(WAIT_S)
    txn.begin_transaction()
    txn.produce("described", b"t0", partition=0)
    assert txn.flush(WAIT_S) == 0

    producers = producers_of(bootstrap, "described")
    assert len(producers) == 2
    idempotent = [p for p in producers.values() if p.current_transaction_start_offset == -1]
    open_txn = [p for p in producers.values() if p.current_transaction_start_offset >= 0]
    assert len(idempotent) == 1 and len(open_txn) == 1
    assert idempotent[0].last_sequence == 4
    assert idempotent[0].last_timestamp >= before_ms
    assert open_txn[0].current_transaction_start_offset == 5 == lso(bootstrap, "described")

    txn.commit_transaction(WAIT_S)
    # EndTxn answers once PrepareCommit is written; the marker follows (bounded wait).
    deadline = time.monotonic() + WAIT_S
    while True:
        after = producers_of(bootstrap, "described")[open_txn[0].producer_id]
        if after.current_transaction_start_offset == -1 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert after.current_transaction_start_offset == -1
    assert after.coordinator_epoch >= 0
    assert lso(bootstrap, "described") == 7  # 5 plain records, 1 committed, its marker

"""Kafka transactions end to end, with the real clients, on one real broker process.

Kafka's behaviour is the reference (KIP-98, KIP-447, KIP-664):

* a committed transaction is seen whole by ``isolation.level=read_committed``; an
  aborted one never is, while ``read_uncommitted`` sees its records; consumers read past
  aborted data and the control markers, which take an offset each (gaps in the offsets a
  consumer sees: a transaction of k records on a partition is followed by one marker);
* ListOffsets latest under read_committed answers the last stable offset (the first
  offset of the oldest open transaction), read_uncommitted the high watermark;
* InitProducerId with a transactional id bumps the epoch: the older producer is fenced
  (a fatal error), its open transaction aborted;
* consume-transform-produce with ``send_offsets_to_transaction``: the output and the
  group's offsets commit together, so each input is in the output exactly once;
* a transaction left open past ``transaction.timeout.ms`` is aborted by the coordinator;
* DescribeTransactions / ListTransactions show a transactional id's state, DescribeProducers
  the open transaction's first offset; OffsetFetch with require_stable answers
  UNSTABLE_OFFSET_COMMIT for offsets an open transaction holds;
* a compacted topic loses the aborted records, never a committed value.

Clients: confluent-kafka (librdkafka), aiokafka, kafka-python 3.x (which has a
transactional producer and the transaction admin calls), and the Java kafka-clients 3.9
through compat/java's ``txn-ctp`` mode.  A test is skipped (with the API named) only
while the broker does not advertise an API it needs in ApiVersions.
"""
from __future__ import annotations

import asyncio
import collections
import time

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from broker.testing import BrokerError, BrokerProcess, KafkaConnection
from tests.conftest import create_topic

WAIT_S = 30.0
CLEANUP_INTERVAL_MS = 500          # the coordinator's timed-out-transaction sweep
CORE_APIS = {22: "InitProducerId", 24: "AddPartitionsToTxn", 26: "EndTxn"}
OFFSET_APIS = {25: "AddOffsetsToTxn", 28: "TxnOffsetCommit"}
ADMIN_APIS = {61: "DescribeProducers", 65: "DescribeTransactions", 66: "ListTransactions"}
UNSTABLE_OFFSET_COMMIT = 88
FENCED_CODES = (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)


# -- the broker ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory):
    """One broker for the module, sweeping timed-out transactions every 0.5 s,
    rebalancing new groups at once and looking for logs to clean every 0.1 s."""
    home = tmp_path_factory.mktemp("raftwood-txn")
    broker = BrokerProcess(home / "data", log_path=home / "broker.log", extra_settings={
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": str(CLEANUP_INTERVAL_MS),
        "group.initial.rebalance.delay.ms": "100", "log.cleaner.backoff.ms": "100"}).start()
    yield broker
    was_running = broker.is_running()
    code = broker.stop()
    if was_running and code != 0:
        raise BrokerError(f"txn broker exited with {code} after SIGTERM\n{broker.log_tail()}")


def missing_apis(bootstrap: str, wanted: dict[int, str]) -> list[str]:
    """The names of the APIs of ``wanted`` that the broker does not advertise."""
    with KafkaConnection(bootstrap.split(",")[0]) as conn:
        served = {k.api_key for k in conn.api_versions().api_keys}
    return [f"{name} ({key})" for key, name in wanted.items() if key not in served]


def serving(broker, *apis: dict[int, str]) -> str:
    """The broker's bootstrap; the test is skipped while an API it needs is not served."""
    wanted = {k: v for group in apis for k, v in group.items()}
    missing = missing_apis(broker.bootstrap, wanted)
    if missing:
        pytest.skip(f"the broker does not serve {', '.join(missing)} yet")
    return broker.bootstrap


# -- confluent-kafka helpers ---------------------------------------------------------------
def txn_producer(bootstrap: str, transactional_id: str, **extra) -> Producer:
    """A confluent transactional producer, init_transactions done."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "linger.ms": 5, "socket.timeout.ms": 10_000, **extra})
    producer.init_transactions(WAIT_S)
    return producer


def run_txn(producer: Producer, topic: str, records, *, commit: bool = True) -> None:
    """One transaction of ``(partition, value)`` records; an aborted one is flushed first,
    so its records are in the log (read_uncommitted sees them) before the abort."""
    producer.begin_transaction()
    for partition, value in records:
        producer.produce(topic, value=value, partition=partition)
    if commit:
        producer.commit_transaction(WAIT_S)
    else:
        assert producer.flush(WAIT_S) == 0, "aborted transaction's records not delivered"
        producer.abort_transaction(WAIT_S)


def values(tag: str, partitions: int, per_partition: int):
    """``(partition, b"tag-p-i")`` for i in range(per_partition), interleaved over partitions."""
    return [(p, f"{tag}-{p}-{i}".encode()) for i in range(per_partition) for p in range(partitions)]


def txn_consumer(bootstrap: str, isolation: str, group: str = "txn-reader", **extra) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "isolation.level": isolation, "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "enable.partition.eof": False,
                     "fetch.wait.max.ms": 100, "socket.timeout.ms": 10_000, **extra})


def read_until(bootstrap: str, topic: str, partitions: int, isolation: str, want,
               *, timeout_s: float = WAIT_S) -> dict[int, list[tuple[int, bytes]]]:
    """Read every partition from offset 0 until each value of ``want`` was seen; per
    partition the ``(offset, value)`` pairs read, in order.  AssertionError (with what was
    read) when ``want`` is not complete within ``timeout_s``."""
    want = set(want)
    consumer = txn_consumer(bootstrap, isolation)
    got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=0.2):
                assert msg.error() is None, f"{isolation} read of {topic}: {msg.error()}"
                got[msg.partition()].append((msg.offset(), msg.value()))
            if want <= {v for pairs in got.values() for _, v in pairs}:
                return got
    finally:
        consumer.close()
    seen = {v for pairs in got.values() for _, v in pairs}
    raise AssertionError(f"{isolation} read of {topic}: {len(want - seen)} wanted values never "
                         f"seen in {timeout_s} s (e.g. {sorted(want - seen)[:5]}); read {got}")


def latest(admin: AdminClient, topic: str, partition: int, isolation: IsolationLevel) -> int:
    """ListOffsets latest of one partition under ``isolation`` (the LSO for read_committed)."""
    tp = TopicPartition(topic, partition)
    futures = admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=isolation,
                                 request_timeout=10)
    (future,) = futures.values()
    return future.result(timeout=WAIT_S).offset


def wait_latest(admin, topic, partition, isolation, want: int) -> None:
    """Bounded wait for ListOffsets latest == want (markers are written after EndTxn answers)."""
    seen = []
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        seen.append(latest(admin, topic, partition, isolation))
        if seen[-1] == want:
            return
        time.sleep(0.1)
    raise AssertionError(f"{topic}-{partition} latest ({isolation}) never {want}: last answers "
                         f"{seen[-5:]}")


def kafka_error(exc: KafkaException) -> KafkaError:
    return exc.args[0]


# -- confluent-kafka: commit, abort, commit -------------------------------------------------
def test_read_committed_skips_aborted_transactions_and_markers(txn_broker, topic_name):
    bootstrap = serving(txn_broker, CORE_APIS)
    topic = create_topic(bootstrap, topic_name("txn"), partitions=3)
    k = 4                                               # records per partition per txn
    first, aborted, third = values("c1", 3, k), values("a2", 3, k), values("c3", 3, k)
    producer = txn_producer(bootstrap, f"{topic}-tid")
    run_txn(producer, topic, first)

    got = read_until(bootstrap, topic, 3, "read_committed", [v for _, v in first])
    for p in range(3):
        assert got[p] == [(i, f"c1-{p}-{i}".encode()) for i in range(k)], f"partition {p}"

    run_txn(producer, topic, aborted, commit=False)
    run_txn(producer, topic, third)
    producer.flush(WAIT_S)

    # per partition: c1 at 0..k-1, marker k; a2 at k+1..2k, marker 2k+1; c3 from 2k+2
    committed = read_until(bootstrap, topic, 3, "read_committed", [v for _, v in third])
    uncommitted = read_until(bootstrap, topic, 3, "read_uncommitted", [v for _, v in third])
    for p in range(3):
        c1 = [(i, f"c1-{p}-{i}".encode()) for i in range(k)]
        a2 = [(k + 1 + i, f"a2-{p}-{i}".encode()) for i in range(k)]
        c3 = [(2 * k + 2 + i, f"c3-{p}-{i}".encode()) for i in range(k)]
        assert committed[p] == c1 + c3, f"read_committed, partition {p}"
        assert uncommitted[p] == c1 + a2 + c3, f"read_uncommitted, partition {p}"


def test_list_offsets_latest_is_the_last_stable_offset_under_read_committed(txn_broker,
                                                                             topic_name):
    bootstrap = serving(txn_broker, CORE_APIS)
    topic = create_topic(bootstrap, topic_name("lso"), partitions=1)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    rc, ru = IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED
    producer = txn_producer(bootstrap, f"{topic}-tid")
    run_txn(producer, topic, [(0, f"A{i}".encode()) for i in range(5)])   # 0..4, marker 5
    wait_latest(admin, topic, 0, rc, 6)
    assert latest(admin, topic, 0, ru) == 6

    producer.begin_transaction()                                          # open: 6..8
    for i in range(3):
        producer.produce(topic, value=f"B{i}".encode(), partition=0)
    assert producer.flush(WAIT_S) == 0
    assert latest(admin, topic, 0, ru) == 9, "read_uncommitted latest is the high watermark"
    assert latest(admin, topic, 0, rc) == 6, "read_committed latest is the open txn's start"
    got = read_until(bootstrap, topic, 1, "read_committed", [b"A4"])
    assert [v for _, v in got[0]] == [f"A{i}".encode() for i in range(5)]

    producer.commit_transaction(WAIT_S)                                   # marker 9
    wait_latest(admin, topic, 0, rc, 10)
    assert latest(admin, topic, 0, ru) == 10
    got = read_until(bootstrap, topic, 1, "read_committed", [b"B2"])
    assert got[0] == [(i, f"A{i}".encode()) for i in range(5)] + \
        [(6 + i, f"B{i}".encode()) for i in range(3)]


# -- two producers' transactions interleaved on one partition -------------------------------
def test_interleaved_transactions_of_two_producers_on_one_partition(txn_broker, topic_name):
    """An aborted transaction around a committed one of another producer: the LSO is held
    at the open transaction's first offset after the other commits; every client's
    read_committed (librdkafka, aiokafka and kafka-python filter with the aborted
    transactions of the Fetch answer) returns only the committed producer's records."""
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as AioTopicPartition
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition

    bootstrap = serving(txn_broker, CORE_APIS)
    topic = create_topic(bootstrap, topic_name("interleaved"), partitions=1)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    rc, ru = IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED
    doomed = txn_producer(bootstrap, f"{topic}-doomed")
    kept = txn_producer(bootstrap, f"{topic}-kept")
    doomed.begin_transaction()
    kept.begin_transaction()
    for producer, value in ((doomed, b"a-0"), (kept, b"c-0"), (doomed, b"a-1"), (kept, b"c-1")):
        producer.produce(topic, value=value, partition=0)
        assert producer.flush(WAIT_S) == 0             # offsets 0, 1, 2, 3 in this order
    kept.commit_transaction(WAIT_S)                     # its marker at 4
    wait_latest(admin, topic, 0, ru, 5)
    assert latest(admin, topic, 0, rc) == 0, "the open transaction holds the LSO at 0"
    doomed.abort_transaction(WAIT_S)                    # its marker at 5
    wait_latest(admin, topic, 0, rc, 6)
    run_txn(kept, topic, [(0, b"c-end")])               # 6, marker 7

    committed = read_until(bootstrap, topic, 1, "read_committed", [b"c-end"])
    assert committed[0] == [(1, b"c-0"), (3, b"c-1"), (6, b"c-end")]
    uncommitted = read_until(bootstrap, topic, 1, "read_uncommitted", [b"c-end"])
    assert [v for _, v in uncommitted[0]] == [b"a-0", b"c-0", b"a-1", b"c-1", b"c-end"]

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                             enable_auto_commit=False, fetch_max_wait_ms=100)
    kp_values: list[tuple[int, bytes]] = []
    try:
        consumer.assign([KpTopicPartition(topic, 0)])
        consumer.seek(KpTopicPartition(topic, 0), 0)
        deadline = time.monotonic() + WAIT_S
        while b"c-end" not in [v for _, v in kp_values] and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                kp_values += [(r.offset, r.value) for r in records]
    finally:
        consumer.close(autocommit=False)
    assert kp_values == [(1, b"c-0"), (3, b"c-1"), (6, b"c-end")], "kafka-python"

    async def aiokafka_read():
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                                    enable_auto_commit=False, fetch_max_wait_ms=100)
        await consumer.start()
        got: list[tuple[int, bytes]] = []
        try:
            tp = AioTopicPartition(topic, 0)
            consumer.assign([tp])
            consumer.seek(tp, 0)
            deadline = time.monotonic() + WAIT_S
            while b"c-end" not in [v for _, v in got] and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    got += [(r.offset, r.value) for r in records]
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(asyncio.wait_for(aiokafka_read(), 60)) == \
        [(1, b"c-0"), (3, b"c-1"), (6, b"c-end")], "aiokafka"


# -- compaction ----------------------------------------------------------------------------
def test_compaction_drops_aborted_records_and_keeps_the_committed_values(txn_broker,
                                                                         topic_name):
    """A compacted topic written by transactions: the cleaner (which stops at the LSO)
    removes aborted records, and an aborted write that is a key's newest record never
    shadows the key's committed value (Kafka's cleaner rules for transactional data)."""
    bootstrap = serving(txn_broker, CORE_APIS)
    topic = create_topic(bootstrap, topic_name("compact"), partitions=1, configs={
        "cleanup.policy": "compact", "segment.bytes": 1024, "min.cleanable.dirty.ratio": 0.01})
    producer = txn_producer(bootstrap, f"{topic}-tid")
    keys = [f"k{i}".encode() for i in range(5)]

    def txn(pairs, *, commit=True):
        producer.begin_transaction()
        for key, value in pairs:
            producer.produce(topic, key=key, value=value, partition=0)
        if commit:
            producer.commit_transaction(WAIT_S)
        else:
            assert producer.flush(WAIT_S) == 0
            producer.abort_transaction(WAIT_S)

    txn([(k, b"v1") for k in keys])
    txn([(k, b"aborted") for k in keys], commit=False)
    txn([(keys[0], b"v2"), (keys[1], b"v2")])
    txn([(keys[2], b"aborted-late")], commit=False)      # k2's newest record, aborted
    for j in range(40):                                  # roll the segments on
        txn([(f"filler-{j}".encode(), b"f" * 100)])
    want = {keys[0]: [b"v2"], keys[1]: [b"v2"], keys[2]: [b"v1"], keys[3]: [b"v1"],
            keys[4]: [b"v1"]}

    def by_key(isolation: str) -> dict[bytes, list[bytes]]:
        consumer = txn_consumer(bootstrap, isolation)
        result: dict[bytes, list[bytes]] = collections.defaultdict(list)
        try:
            consumer.assign([TopicPartition(topic, 0, 0)])
            deadline = time.monotonic() + WAIT_S
            while b"filler-39" not in result and time.monotonic() < deadline:
                for msg in consumer.consume(num_messages=1000, timeout=0.2):
                    assert msg.error() is None, msg.error()
                    result[msg.key()].append(msg.value())
        finally:
            consumer.close()
        assert b"filler-39" in result, f"{isolation}: the last transaction never read"
        return {k: v for k, v in result.items() if k in want}

    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        raw = by_key("read_uncommitted")
        if raw == want:
            break                                        # cleaned: aborted and old gone
        time.sleep(0.5)
    assert raw == want, f"after cleaning, read_uncommitted per key: {raw}"
    assert by_key("read_committed") == want


# -- fencing -------------------------------------------------------------------------------
def test_second_producer_with_the_same_transactional_id_fences_the_first(txn_broker,
                                                                         topic_name):
    bootstrap = serving(txn_broker, CORE_APIS)
    topic = create_topic(bootstrap, topic_name("fence"), partitions=1)
    tid = f"{topic}-tid"
    first = txn_producer(bootstrap, tid)
    first.begin_transaction()
    for i in range(3):
        first.produce(topic, value=f"old-{i}".encode(), partition=0)
    assert first.flush(WAIT_S) == 0

    second = txn_producer(bootstrap, tid)      # bumps the epoch, aborts first's transaction

    first.produce(topic, value=b"old-late", partition=0)
    with pytest.raises(KafkaException) as raised:
        first.commit_transaction(WAIT_S)
    error = kafka_error(raised.value)
    assert error.fatal(), f"a fenced producer's error is fatal: {error}"
    assert error.code() in FENCED_CODES, f"fenced, not {error}"

    run_txn(second, topic, [(0, f"new-{i}".encode()) for i in range(3)])
    committed = read_until(bootstrap, topic, 1, "read_committed", [b"new-2"])
    assert [v for _, v in committed[0]] == [b"new-0", b"new-1", b"new-2"]
    uncommitted = read_until(bootstrap, topic, 1, "read_uncommitted", [b"new-2"])
    # the fenced epoch's late record is refused; the old records were written and aborted
    assert [v for _, v in uncommitted[0]] == [b"old-0", b"old-1", b"old-2",
                                              b"new-0", b"new-1", b"new-2"]


def test_a_transaction_timeout_above_the_broker_maximum_is_refused(txn_broker, topic_name):
    bootstrap = serving(txn_broker, CORE_APIS)
    producer = Producer({"bootstrap.servers": bootstrap,
                         "transactional.id": f"{topic_name('too-long')}-tid",
                         "transaction.timeout.ms": 900_001})   # transaction.max.timeout.ms + 1
    with pytest.raises(KafkaException) as raised:
        producer.init_transactions(WAIT_S)
    assert kafka_error(raised.value).code() == KafkaError.INVALID_TRANSACTION_TIMEOUT, \
        kafka_error(raised.value)


# -- consume-transform-produce (exactly once) -----------------------------------------------
def test_consume_transform_produce_is_exactly_once_with_an_abort(txn_broker, topic_name):
    bootstrap = serving(txn_broker, CORE_APIS, OFFSET_APIS)
    partitions, per_partition = 3, 20
    total = partitions * per_partition
    source = create_topic(bootstrap, topic_name("ctp-in"), partitions=partitions)
    sink = create_topic(bootstrap, topic_name("ctp-out"), partitions=partitions)
    group = f"{source}-group"
    plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    inputs = values("in", partitions, per_partition)
    for p, v in inputs:
        plain.produce(source, value=v, partition=p)
    assert plain.flush(WAIT_S) == 0

    consumer = txn_consumer(bootstrap, "read_committed", group=group,
                            **{"session.timeout.ms": 10_000, "heartbeat.interval.ms": 500})
    producer = txn_producer(bootstrap, f"{group}-tid")
    consumer.subscribe([source])
    done, batches, aborted_values = 0, 0, []
    try:
        deadline = time.monotonic() + 2 * WAIT_S
        for _ in range(500):
            if done >= total or time.monotonic() > deadline:
                break
            msgs = consumer.consume(num_messages=7, timeout=0.5)
            for msg in msgs:
                assert msg.error() is None, msg.error()
            if not msgs:
                continue
            batches += 1
            producer.begin_transaction()
            for msg in msgs:
                producer.produce(sink, value=b"out-" + msg.value(), partition=msg.partition())
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(),
                                                 WAIT_S)
            if batches != 3:
                producer.commit_transaction(WAIT_S)
                done += len(msgs)
                continue
            # the third batch is aborted: rewind to the group's committed offsets
            assert producer.flush(WAIT_S) == 0
            producer.abort_transaction(WAIT_S)
            aborted_values += [b"out-" + m.value() for m in msgs]
            first = {}
            for msg in msgs:
                first.setdefault(msg.partition(), msg.offset())
            committed = consumer.committed([TopicPartition(source, p) for p in first],
                                           timeout=WAIT_S)
            for tp in committed:
                # everything before this batch was committed by the earlier transactions
                want = first[tp.partition]
                assert tp.offset == want or (tp.offset < 0 and want == 0), \
                    f"committed {tp} before the aborted batch starting at {want}"
                consumer.seek(TopicPartition(source, tp.partition,
                                             tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))
        assert done == total, f"{done} of {total} inputs committed in {batches} batches"
        run_txn(producer, sink, [(p, b"end") for p in range(partitions)])
    finally:
        consumer.close()
    assert batches > 3 and aborted_values, "the third batch was aborted"

    output = read_until(bootstrap, sink, partitions, "read_committed", [b"end"])
    for p in range(partitions):
        assert [v for _, v in output[p]] == \
            [f"out-in-{p}-{i}".encode() for i in range(per_partition)] + [b"end"], \
            f"output partition {p}: each input once, in order"
    raw = read_until(bootstrap, sink, partitions, "read_uncommitted", [b"end"])
    raw_counts = collections.Counter(v for pairs in raw.values() for _, v in pairs)
    for value in aborted_values:            # the aborted batch is in the log, twice
        assert raw_counts[value] == 2, (value, raw_counts[value])

    checker = txn_consumer(bootstrap, "read_committed", group=group)
    try:
        offsets = checker.committed([TopicPartition(source, p) for p in range(partitions)],
                                    timeout=WAIT_S)
    finally:
        checker.close()
    assert {tp.partition: tp.offset for tp in offsets} == \
        dict.fromkeys(range(partitions), per_partition)
    assert sum(tp.offset for tp in offsets) == total


def test_offsets_of_an_open_transaction_are_unstable_under_require_stable(txn_broker,
                                                                          topic_name):
    """KIP-447: while a transaction holds offsets for a group, OffsetFetch with
    require_stable answers UNSTABLE_OFFSET_COMMIT for them and without it the last
    committed offset; a commit makes them the group's, an abort drops them."""
    from kafka.protocol.consumer import OffsetFetchRequest

    bootstrap = serving(txn_broker, CORE_APIS, OFFSET_APIS)
    topic = create_topic(bootstrap, topic_name("stable"), partitions=1)
    group = f"{topic}-group"

    def offset_fetch(require_stable: bool) -> tuple[int, int, int]:
        request = OffsetFetchRequest[7](group_id=group, require_stable=require_stable, topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])])
        with KafkaConnection(bootstrap) as conn:
            answer = conn.request(request)
        partition = answer.topics[0].partitions[0]
        return answer.error_code, partition.error_code, partition.committed_offset

    def wait_stable(want: int) -> None:
        seen = []
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            seen.append(offset_fetch(True))
            if seen[-1] == (0, 0, want):
                return
            time.sleep(0.1)
        raise AssertionError(f"require_stable OffsetFetch never {want}: {seen[-5:]}")

    member = txn_consumer(bootstrap, "read_committed", group=group)   # never joins
    producer = txn_producer(bootstrap, f"{topic}-tid")
    try:
        metadata = member.consumer_group_metadata()
        producer.begin_transaction()
        producer.produce(topic, value=b"x", partition=0)
        producer.send_offsets_to_transaction([TopicPartition(topic, 0, 5)], metadata, WAIT_S)
        assert offset_fetch(True)[:2] == (0, UNSTABLE_OFFSET_COMMIT)
        assert offset_fetch(False) == (0, 0, -1)
        producer.commit_transaction(WAIT_S)
        wait_stable(5)

        producer.begin_transaction()
        producer.produce(topic, value=b"y", partition=0)
        producer.send_offsets_to_transaction([TopicPartition(topic, 0, 9)], metadata, WAIT_S)
        assert offset_fetch(True)[:2] == (0, UNSTABLE_OFFSET_COMMIT)
        assert offset_fetch(False) == (0, 0, 5)
        producer.abort_transaction(WAIT_S)
        wait_stable(5)
    finally:
        member.close()


# -- aiokafka and kafka-python ---------------------------------------------------------------
def test_aiokafka_transactions_commit_and_abort(txn_broker, topic_name):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as AioTopicPartition

    bootstrap = serving(txn_broker, CORE_APIS)
    topic = create_topic(bootstrap, topic_name("aio"), partitions=2)

    async def produce():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"{topic}-tid",
                                    enable_idempotence=True, request_timeout_ms=15_000)
        await producer.start()
        try:
            async with producer.transaction():
                for p, v in values("c1", 2, 3):
                    await producer.send(topic, v, partition=p)
            await producer.begin_transaction()
            for p, v in values("a2", 2, 3):
                await producer.send_and_wait(topic, v, partition=p)
            await producer.abort_transaction()
            async with producer.transaction():
                for p, v in values("c3", 2, 3):
                    await producer.send(topic, v, partition=p)
        finally:
            await producer.stop()

    async def consume(isolation: str) -> dict[int, list[bytes]]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                                    enable_auto_commit=False, fetch_max_wait_ms=100)
        await consumer.start()
        got: dict[int, list[bytes]] = {0: [], 1: []}
        try:
            tps = [AioTopicPartition(topic, p) for p in range(2)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:
                for tp, records in (await consumer.getmany(timeout_ms=200)).items():
                    got[tp.partition] += [r.value for r in records]
                if all(f"c3-{p}-2".encode() in got[p] for p in range(2)):
                    return got
        finally:
            await consumer.stop()
        raise AssertionError(f"{isolation}: the last committed transaction never read: {got}")

    async def scenario():
        await produce()
        return await consume("read_committed"), await consume("read_uncommitted")

    committed, uncommitted = asyncio.run(asyncio.wait_for(scenario(), 120))
    for p in range(2):
        c1, a2, c3 = ([f"{t}-{p}-{i}".encode() for i in range(3)] for t in ("c1", "a2", "c3"))
        assert committed[p] == c1 + c3, f"read_committed partition {p}"
        assert uncommitted[p] == c1 + a2 + c3, f"read_uncommitted partition {p}"


def test_kafka_python_transactions_commit_and_abort(txn_broker, topic_name):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KpTopicPartition

    bootstrap = serving(txn_broker, CORE_APIS)
    topic = create_topic(bootstrap, topic_name("kp"), partitions=2)
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"{topic}-tid",
                             request_timeout_ms=15_000, max_block_ms=30_000)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for p, v in values("c1", 2, 3):
            producer.send(topic, v, partition=p)
        producer.commit_transaction()
        producer.begin_transaction()
        for p, v in values("a2", 2, 3):
            producer.send(topic, v, partition=p)
        producer.flush(timeout=WAIT_S)
        producer.abort_transaction()
        producer.begin_transaction()
        for p, v in values("c3", 2, 3):
            producer.send(topic, v, partition=p)
        producer.commit_transaction()
    finally:
        producer.close(timeout=10)

    def consume(isolation: str) -> dict[int, list[bytes]]:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                                 enable_auto_commit=False, fetch_max_wait_ms=100)
        got: dict[int, list[bytes]] = {0: [], 1: []}
        try:
            tps = [KpTopicPartition(topic, p) for p in range(2)]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:
                for tp, records in consumer.poll(timeout_ms=200).items():
                    got[tp.partition] += [r.value for r in records]
                if all(f"c3-{p}-2".encode() in got[p] for p in range(2)):
                    return got
        finally:
            consumer.close(autocommit=False)
        raise AssertionError(f"{isolation}: the last committed transaction never read: {got}")

    committed, uncommitted = consume("read_committed"), consume("read_uncommitted")
    for p in range(2):
        c1, a2, c3 = ([f"{t}-{p}-{i}".encode() for i in range(3)] for t in ("c1", "a2", "c3"))
        assert committed[p] == c1 + c3, f"read_committed partition {p}"
        assert uncommitted[p] == c1 + a2 + c3, f"read_uncommitted partition {p}"


# -- the coordinator's timeout ----------------------------------------------------------------
def test_a_stalled_transaction_is_aborted_by_the_coordinator_after_its_timeout(txn_broker,
                                                                              topic_name):
    bootstrap = serving(txn_broker, CORE_APIS)
    topic = create_topic(bootstrap, topic_name("timeout"), partitions=1)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    rc, ru = IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED
    stalled = txn_producer(bootstrap, f"{topic}-stalled",
                           **{"transaction.timeout.ms": 2000, "socket.timeout.ms": 1500})
    stalled.begin_transaction()
    for i in range(3):
        stalled.produce(topic, value=f"stalled-{i}".encode(), partition=0)
    assert stalled.flush(WAIT_S) == 0                   # at 0..2, then nothing: it stalls

    # the coordinator aborts it: the abort marker (offset 3) moves the LSO to the end
    wait_latest(admin, topic, 0, rc, 4)
    assert latest(admin, topic, 0, ru) == 4

    other = txn_producer(bootstrap, f"{topic}-other")
    run_txn(other, topic, [(0, b"after-0"), (0, b"after-1")])
    got = read_until(bootstrap, topic, 1, "read_committed", [b"after-1"])
    assert got[0] == [(4, b"after-0"), (5, b"after-1")]

    with pytest.raises(KafkaException) as raised:   # its epoch was bumped by the abort
        stalled.commit_transaction(WAIT_S)
    print(f"the stalled producer's commit: {kafka_error(raised.value)}")
    got = read_until(bootstrap, topic, 1, "read_committed", [b"after-1"])
    assert [v for _, v in got[0]] == [b"after-0", b"after-1"]


# -- DescribeTransactions / ListTransactions / DescribeProducers --------------------------
def test_describe_and_list_transactions_and_producers_show_the_state(txn_broker, topic_name):
    from kafka import TopicPartition as KpTopicPartition
    from kafka.admin import KafkaAdminClient, TransactionState
    from kafka.errors import TransactionalIdNotFoundError

    bootstrap = serving(txn_broker, CORE_APIS, ADMIN_APIS)
    topic = create_topic(bootstrap, topic_name("describe"), partitions=2)
    tid = f"{topic}-tid"
    producer = txn_producer(bootstrap, tid, **{"transaction.timeout.ms": 45_000})
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
    try:
        producer.begin_transaction()
        for p in range(2):
            producer.produce(topic, value=b"v", partition=p)
        assert producer.flush(WAIT_S) == 0

        described = admin.describe_transactions([tid])[tid]
        assert described.state == TransactionState.ONGOING, described
        assert described.topic_partitions == {KpTopicPartition(topic, 0),
                                              KpTopicPartition(topic, 1)}, described
        assert described.producer_id >= 0 and described.producer_epoch >= 0, described
        assert described.transaction_timeout_ms == 45_000, described
        assert described.transaction_start_time_ms > 0, described
        assert described.coordinator_id == txn_broker.node_id, described

        tp0 = KpTopicPartition(topic, 0)
        producers = admin.describe_producers([tp0])[tp0].active_producers
        assert [p.current_transaction_start_offset for p in producers
                if p.producer_id == described.producer_id] == [0], producers

        listed = [t for ts in admin.list_transactions().values() for t in ts
                  if t.transactional_id == tid]
        assert [(t.producer_id, t.state) for t in listed] == \
            [(described.producer_id, TransactionState.ONGOING)], listed

        producer.commit_transaction(WAIT_S)
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            after = admin.describe_transactions([tid])[tid]
            if after.state == TransactionState.COMPLETE_COMMIT:
                break
            time.sleep(0.1)
        assert after.state == TransactionState.COMPLETE_COMMIT, after
        assert after.producer_id == described.producer_id and not after.topic_partitions, after
        producers = admin.describe_producers([tp0])[tp0].active_producers
        assert [p.current_transaction_start_offset for p in producers
                if p.producer_id == described.producer_id] == [-1], producers
        ongoing = [t for ts in admin.list_transactions(state_filters=["Ongoing"]).values()
                   for t in ts if t.transactional_id == tid]
        assert ongoing == []

        with pytest.raises(TransactionalIdNotFoundError):
            admin.describe_transactions([f"{tid}-never-used"])
    finally:
        admin.close()


# -- the Java kafka-clients -----------------------------------------------------------------
def test_java_consume_transform_produce_with_send_offsets_to_transaction(txn_broker,
                                                                         java_harness,
                                                                         topic_name):
    """compat/java ``txn-ctp``: a transactional input with an aborted transaction in it,
    a consume-transform-produce loop (read_committed, sendOffsetsToTransaction, an abort
    and a rewind to the committed offsets), the output read back each input exactly
    once, the group's offsets at the input's end, and a fenced zombie."""
    bootstrap = serving(txn_broker, CORE_APIS, OFFSET_APIS)
    prefix = topic_name("java-txn")
    run = java_harness.run("txn-ctp", bootstrap=bootstrap, prefix=prefix, partitions=3,
                           count=60, timeout_s=180.0)
    assert run.passed, run.report()
    verdicts = run.steps()
    assert list(verdicts) == ["txn-produce-input", "txn-consume-transform-produce",
                              "txn-verify-output", "txn-fence-zombie"], run.report()
    assert set(verdicts.values()) == {"PASS"}, run.report()

"""Compacted topics (cleanup.policy=compact) on real broker processes with real clients.

* 100k updates to 1k keys (confluent-kafka, small segment.bytes so segments roll) end with
  one record per key below the active segment; a consumer reading from 0 sees every key's
  latest value and never an older value of a key after a newer one;
* tombstones disappear once delete.retention.ms has passed after they were cleaned;
* every replica of an RF 3 topic compacts its own log, and a follower that was down
  fetches below the leader's compacted range, takes the gaps, and holds what the leader
  has;
* a broker killed at each step of the cleaner's swap (RAFTWOOD_TEST_CLEANER_CRASH_AT)
  restarts with the old or the new segments and every latest value;
* cleanup.policy=compact is refused when the broker runs without its cleaner, and a
  compacted topic refuses records without a key (INVALID_RECORD), as Kafka does.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch

from broker.harness.process import BrokerProcess
from broker.testing import KafkaConnection, build_batch
from protocol.records import valid_prefix

confluent_kafka = pytest.importorskip("confluent_kafka")

KEYS = 1_000
UPDATES = 100_000
WAIT_S = 60.0
CLEANER = {"log.cleaner.backoff.ms": "100"}
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "65536",
           "min.cleanable.dirty.ratio": "0.01"}


def produce_updates(bootstrap: str, topic: str, updates: int, keys: int, *, start: int = 0,
                    tombstones: range = range(0), prefix: bytes = b"key"
                    ) -> dict[bytes, bytes | None]:
    """``updates`` records cycling over ``keys`` keys, value = the update's serial; then a
    tombstone per key in ``tombstones``.  Returns the latest value per key."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                                         "acks": "all", "enable.idempotence": True,
                                         "batch.num.messages": 500})
    latest: dict[bytes, bytes | None] = {}
    for serial in range(start, start + updates):
        key, value = prefix + b"-%04d" % (serial % keys), b"%08d" % serial
        while True:
            try:
                producer.produce(topic, key=key, value=value)
                break
            except BufferError:
                producer.poll(0.05)
        latest[key] = value
    for k in tombstones:
        producer.produce(topic, key=b"key-%04d" % k, value=None)
        latest[b"key-%04d" % k] = None
    assert producer.flush(60) == 0, "records left unacknowledged"
    return latest


def read_all(bootstrap: str, topic: str, partition: int = 0) -> list[tuple[int, bytes, bytes]]:
    """(offset, key, value) of every record from offset 0 to the high watermark, read by
    a confluent-kafka consumer (assigned, no group)."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                                         "enable.auto.commit": False,
                                         "enable.partition.eof": True})
    try:
        _, high = consumer.get_watermark_offsets(
            confluent_kafka.TopicPartition(topic, partition), timeout=10)
        consumer.assign([confluent_kafka.TopicPartition(topic, partition, 0)])
        rows = []
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error():
                if message.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    if message.offset() >= high:
                        return rows
                    continue
                raise AssertionError(f"consumer error {message.error()}")
            rows.append((message.offset(), message.key(), message.value()))
        raise AssertionError(f"{topic} not read to {high} in {WAIT_S} s")
    finally:
        consumer.close()


def segment_records(partition_dir: Path) -> tuple[list[tuple[int, bytes, bytes]], int]:
    """(offset, key, value) of every record in the replica's files (CRCs checked), and
    the base offset of its active (last) segment.

    The cleaner swaps segments while this reads (``.cleaned`` → ``.swap``, old files
    ``.deleted``, then renames), so a listing taken mid-swap can miss a segment or name
    one that is gone by the time it is opened: read only when no swap is in flight and
    the listing is the same before and after."""
    deadline = time.monotonic() + WAIT_S
    while True:
        before = sorted(p.name for p in partition_dir.iterdir())
        if not any(name.endswith((".cleaned", ".swap", ".deleted")) for name in before):
            try:
                rows = [row for name in before if name.endswith(".log")
                        for row in file_records(partition_dir / name)]
            except FileNotFoundError:
                rows = None
            if rows is not None and sorted(p.name for p in partition_dir.iterdir()) == before:
                logs = [name for name in before if name.endswith(".log")]
                return rows, int(logs[-1][:20])
        assert time.monotonic() < deadline, f"{partition_dir.name}: no quiet listing"
        time.sleep(0.05)


def file_records(path: Path) -> list[tuple[int, bytes, bytes]]:
    """(offset, key, value) of every record in one segment file, CRCs checked."""
    data = path.read_bytes()
    headers, valid = valid_prefix(data, check_crc=True)
    assert valid == len(data), f"{path}: invalid bytes at {valid}"
    return [(r.offset, r.key, r.value) for header in headers for r in
            DefaultRecordBatch(data[header.position:header.position + header.size])]


def assert_latest_wins(rows, latest: dict[bytes, bytes | None]) -> None:
    """Offsets increase; per key, values (update serials) never go back; every key ends
    at its latest value."""
    offsets = [offset for offset, _, _ in rows]
    assert offsets == sorted(set(offsets)), "offsets repeat or go back"
    last: dict[bytes, bytes | None] = {}
    for offset, key, value in rows:
        previous = last.get(key)
        assert previous is None or value is None or value > previous, \
            f"{key!r} at {offset}: {value!r} after {previous!r}"
        last[key] = value
    for key, value in latest.items():
        if value is not None:
            assert last.get(key) == value, f"{key!r}: {last.get(key)!r}, expected {value!r}"


def wait_compacted(partition_dir: Path, timeout_s: float = WAIT_S, *, gone=()) -> tuple:
    """Wait until below the active segment every key appears once (and no key of
    ``gone`` appears at all); returns ``segment_records``."""
    deadline = time.monotonic() + timeout_s
    while True:
        rows, active_base = segment_records(partition_dir)
        below = [key for offset, key, _ in rows if offset < active_base]
        if len(below) == len(set(below)) and not set(gone) & {k for _, k, _ in rows}:
            return rows, active_base
        if time.monotonic() > deadline:
            raise AssertionError(f"{partition_dir.name}: {len(below) - len(set(below))} "
                                 f"superseded records still below the active segment")
        time.sleep(0.2)


@pytest.mark.slow
def test_100k_updates_to_1k_keys_leave_one_record_per_key_below_the_active_segment(
        raftwood_broker_factory, new_topic):
    broker = raftwood_broker_factory(**CLEANER)
    topic = new_topic(broker, configs=COMPACT)
    started = time.monotonic()
    latest = produce_updates(broker.bootstrap, topic, UPDATES, KEYS)
    produced_s = time.monotonic() - started
    partition_dir = broker.data_dir / f"{topic}-0"
    rows, active_base = wait_compacted(partition_dir)
    compacted_s = time.monotonic() - started - produced_s
    below = [row for row in rows if row[0] < active_base]
    print(f"\n{UPDATES} updates to {KEYS} keys: {len(rows)} records left ({len(below)} below "
          f"the active segment at {active_base}), {sum(1 for _ in partition_dir.glob('*.log'))} "
          f"segments; produced in {produced_s:.1f} s, compacted {compacted_s:.1f} s later")
    assert len(below) <= KEYS
    assert len(rows) < KEYS + UPDATES // 10
    consumed = read_all(broker.bootstrap, topic)
    assert_latest_wins(consumed, latest)
    assert {key for _, key, _ in consumed} == set(latest)
    assert consumed == [row for row in rows if row[0] >= consumed[0][0]]


@pytest.mark.slow
def test_readers_during_cleaning_never_see_an_older_value_after_a_newer_one(
        raftwood_broker_factory, new_topic):
    """Swaps happen while consumers read from 0 and producers append: every read is
    ordered per key, whichever segment list it met."""
    import threading

    broker = raftwood_broker_factory(**CLEANER)
    topic = new_topic(broker, configs={**COMPACT, "segment.bytes": "32768"})
    result = {}
    producer = threading.Thread(target=lambda: result.update(
        produce_updates(broker.bootstrap, topic, 60_000, 500)))
    producer.start()
    reads = 0
    while producer.is_alive() or reads < 2:
        assert_latest_wins(read_all(broker.bootstrap, topic), {})
        reads += 1
    producer.join()
    wait_compacted(broker.data_dir / f"{topic}-0")
    assert_latest_wins(read_all(broker.bootstrap, topic), result)
    assert "cleaned" in broker.log_path.read_text()


@pytest.mark.slow
def test_tombstones_disappear_after_delete_retention_ms(raftwood_broker_factory, new_topic):
    broker = raftwood_broker_factory(**CLEANER)
    topic = new_topic(broker, configs={**COMPACT, "segment.bytes": "16384",
                                       "delete.retention.ms": "2000"})
    latest = produce_updates(broker.bootstrap, topic, 2_000, 100, tombstones=range(50))
    partition_dir = broker.data_dir / f"{topic}-0"
    deleted = {b"key-%04d" % k for k in range(50)}
    # Cleaned once: the tombstones are the only records of their keys left.
    produce_updates(broker.bootstrap, topic, 2_000, 40, start=1_000_000, prefix=b"filler")
    rows, _ = wait_compacted(partition_dir)
    assert {key for _, key, value in rows if key in deleted} == deleted
    assert all(value is None for _, key, value in rows if key in deleted)
    # After delete.retention.ms, later passes drop them.
    deadline = time.monotonic() + WAIT_S
    serial = 2_000_000
    while {key for _, key, _ in segment_records(partition_dir)[0]} & deleted:
        assert time.monotonic() < deadline, "tombstones outlived delete.retention.ms"
        produce_updates(broker.bootstrap, topic, 600, 40, start=serial,  # keeps it dirty
                        prefix=b"filler")
        serial += 600
        time.sleep(0.5)
    consumed = read_all(broker.bootstrap, topic)
    assert not {key for _, key, _ in consumed} & deleted
    latest = {k: v for k, v in latest.items() if v is not None}
    assert {key for _, key, _ in consumed} >= set(latest)


def test_cleanup_policy_compact_is_refused_without_the_cleaner(raftwood_broker_factory):
    broker = raftwood_broker_factory(**{"log.cleaner.enable": "false"})
    with KafkaConnection(broker.bootstrap) as conn:
        assert conn.create_topic("refused", 1, {"cleanup.policy": "compact"}) == 40
        assert conn.create_topic("accepted", 1, {"cleanup.policy": "delete"}) == 0


def test_a_record_without_a_key_is_refused_by_a_compacted_topic(raftwood_broker_factory,
                                                                 new_topic):
    broker = raftwood_broker_factory()
    compacted, plain = new_topic(broker, configs=COMPACT), new_topic(broker)
    keyless = build_batch([(b"k", b"v", None, []), (None, b"no key", None, [])])
    with KafkaConnection(broker.bootstrap) as conn:
        assert conn.produce(compacted, 0, keyless).error_code == 87  # INVALID_RECORD
        assert conn.produce(compacted, 0, build_batch([(b"k", b"v", None, [])])).error_code == 0
        assert conn.produce(plain, 0, keyless).error_code == 0


@pytest.mark.slow
@pytest.mark.parametrize("step", ["cleaned", "swap", "deleted", "renamed"])
def test_a_broker_killed_at_each_swap_step_restarts_with_every_latest_value(
        tmp_path, new_topic, step):
    env = {**os.environ, "RAFTWOOD_TEST_CLEANER_CRASH_AT": step}
    home = tmp_path / "raftwood"
    broker = BrokerProcess(home / "data", log_path=home / "broker.log", env=env,
                           extra_settings=CLEANER)
    broker.start()
    try:
        # Nothing is cleanable until 3 s after it was written: all is produced first.
        topic = new_topic(broker, configs={**COMPACT, "min.compaction.lag.ms": "3000"})
        latest = produce_updates(broker.bootstrap, topic, 20_000, 200)
        deadline = time.monotonic() + WAIT_S
        while broker.is_running():  # the first pass crashes at ``step``
            assert time.monotonic() < deadline, "the cleaner never reached " + step
            time.sleep(0.1)
        assert broker.returncode == 86, broker.log_tail()
        partition_dir = broker.data_dir / f"{topic}-0"
        suffixes = {p.suffix for p in partition_dir.iterdir()}
        # Later groups of the pass may still be ``.cleaned``; the crashed one is past it.
        assert step != "cleaned" or ".cleaned" in suffixes
        assert (".swap" in suffixes) == (step in ("swap", "deleted"))
        broker.env = None
        broker.start()
        assert not [p for p in partition_dir.iterdir()
                    if p.suffix in (".cleaned", ".swap", ".deleted")]
        consumed = read_all(broker.bootstrap, topic)
        assert_latest_wins(consumed, latest)
        assert {key for _, key, _ in consumed} == set(latest)
    finally:
        broker.stop()


@pytest.mark.slow
def test_each_replica_compacts_and_a_follower_fetching_below_the_compacted_range_catches_up(
        raftwood_cluster_factory, topic_name):
    cluster = raftwood_cluster_factory(3, **CLEANER)
    topic = cluster.create_topic(topic_name("rf3"), 1, 3, COMPACT)
    deadline = time.monotonic() + WAIT_S
    while (state := cluster.partition_state(topic, 0)) is None or len(state["isr"]) < 3:
        assert time.monotonic() < deadline, f"{topic} never had a full ISR: {state}"
        time.sleep(0.1)
    leader = state["leader"]
    follower = next(n for n in cluster.node_ids if n != leader)
    cluster.stop(follower)
    latest = produce_updates(cluster.bootstrap, topic, 30_000, 300)
    leader_rows, _ = wait_compacted(cluster.partition_dir(leader, topic, 0))
    cluster.start(follower)  # it fetches from its log end, below the compacted range
    deadline = time.monotonic() + WAIT_S
    while follower not in (cluster.partition_state(topic, 0) or {}).get("isr", []):
        assert time.monotonic() < deadline, "the follower never caught up into the ISR"
        time.sleep(0.2)
    leader_by_offset = {offset: (key, value) for offset, key, value in leader_rows}
    for node in cluster.node_ids:
        rows, _ = wait_compacted(cluster.partition_dir(node, topic, 0))
        assert_latest_wins(rows, latest)
        if node == follower:  # what it fetched is exactly the leader's records
            for offset, key, value in rows:
                if offset in leader_by_offset:
                    assert leader_by_offset[offset] == (key, value)
    consumed = read_all(cluster.bootstrap, topic)
    assert_latest_wins(consumed, latest)


def offsets_keys_of(partition_dir: Path, group: bytes) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every __consumer_offsets record whose key names ``group``."""
    rows, _ = segment_records(partition_dir)
    return [(offset, value) for offset, key, value in rows if key and group in key]


@pytest.mark.slow
def test_consumer_offsets_is_compacted_and_deleted_groups_vanish_after_their_retention(
        raftwood_broker_factory, new_topic):
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    broker = raftwood_broker_factory(**CLEANER, **{"offsets.topic.num.partitions": "1",
                                                   "offsets.topic.replication.factor": "1"})
    topic = new_topic(broker)
    tp = confluent_kafka.TopicPartition

    def committer(group: str):
        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap,
                                             "group.id": group, "enable.auto.commit": False})
        consumer.assign([tp(topic, 0, 0)])
        return consumer

    kept, doomed = committer("kept-group"), committer("doomed-group")
    kept.commit(offsets=[tp(topic, 0, 1)], asynchronous=False)  # creates the offsets topic
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    entries = [ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
               for name, value in (("segment.bytes", "8192"), ("delete.retention.ms", "1000"),
                                   ("min.cleanable.dirty.ratio", "0.01"))]
    resource = ConfigResource("TOPIC", "__consumer_offsets", incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=10)
    for n in range(2, 1_500):
        kept.commit(offsets=[tp(topic, 0, n)], asynchronous=False)
        if n < 300:
            doomed.commit(offsets=[tp(topic, 0, n)], asynchronous=False)
    doomed.close()
    offsets_dir = broker.data_dir / "__consumer_offsets-0"
    wait_compacted(offsets_dir)
    assert len(offsets_keys_of(offsets_dir, b"kept-group")) < 1_500 // 4
    for future in admin.delete_consumer_groups(["doomed-group"]).values():
        future.result(timeout=10)
    deadline = time.monotonic() + WAIT_S
    n = 1_500
    while offsets_keys_of(offsets_dir, b"doomed-group"):  # values, then tombstones, then none
        assert time.monotonic() < deadline, "the deleted group's records outlived retention"
        for _ in range(100):
            kept.commit(offsets=[tp(topic, 0, n)], asynchronous=False)
            n += 1
        time.sleep(0.2)
    kept.close()
    broker.stop()
    broker.start()  # the coordinator loads what survived
    reader = committer("kept-group")
    assert reader.committed([tp(topic, 0)], timeout=10)[0].offset == n - 1
    reader.close()
    groups = [g.group_id for g in admin.list_consumer_groups().result(timeout=10).valid]
    assert "doomed-group" not in groups and "kept-group" in groups

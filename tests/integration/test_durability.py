"""Durability of one broker's log across crashes, damaged tails, rolls and retention.

Records go in through raw Produce requests (broker.testing.KafkaConnection) so the test
knows exactly which batch was acknowledged at which offset, and come back through raw
Fetch so every key, value, header and timestamp is compared byte for byte.
"""
from __future__ import annotations

import random
import time
from pathlib import Path

from broker.testing import KafkaConnection, build_batch
from protocol.records import HEADER_SIZE, iter_headers

OFFSET_OUT_OF_RANGE = 1
WAIT_S = 15.0


def _batch_records(rng: random.Random, partition: int, serial: int, count: int, base_ms: int):
    """``count`` records (key, value, timestamp_ms, headers) that name where they belong."""
    return [(None if i % 7 == 3 else f"k-{partition}-{serial}-{i}".encode(),
             f"v-{partition}-{serial}-{i}-".encode() + rng.randbytes(rng.randrange(0, 200)),
             base_ms + serial * 100 + i,
             [("serial", str(serial).encode()), ("i", str(i).encode())])
            for i in range(count)]


def _produce_acked(conn: KafkaConnection, topic: str, partitions: int, total_records: int,
                   seed: int = 7) -> dict[int, list[tuple]]:
    """Produce ~``total_records`` in batches of 1..60 (codecs and acks=1/all vary);
    returns per partition the acknowledged records as (offset, key, value, ts, headers)."""
    rng = random.Random(seed)
    acked: dict[int, list[tuple]] = {p: [] for p in range(partitions)}
    base_ms = int(time.time() * 1000) - 3_600_000
    serial = produced = 0
    while produced < total_records:
        partition, count = serial % partitions, rng.randrange(1, 61)
        records = _batch_records(rng, partition, serial, count, base_ms)
        answer = conn.produce(topic, partition, build_batch(records, compression=serial % 5),
                              acks=(1, -1)[serial % 2])
        assert answer.error_code == 0, f"batch {serial}: error {answer.error_code}"
        assert answer.base_offset == len(acked[partition]), \
            f"batch {serial} acked at {answer.base_offset}, expected {len(acked[partition])}"
        acked[partition] += [(answer.base_offset + i, *r) for i, r in enumerate(records)]
        serial += 1
        produced += count
    return acked


def _assert_log_is(conn: KafkaConnection, topic: str, partition: int, expected: list[tuple]):
    """The partition holds exactly ``expected`` (offset, key, value, ts, headers) from 0."""
    got = conn.read_partition(topic, partition)
    assert len(got) == len(expected), f"{topic}-{partition}: {len(got)} records, expected {len(expected)}"
    for g, e in zip(got, expected):
        assert g == e, f"{topic}-{partition} offset {e[0]}: got {g!r}, expected {e!r}"
    latest = conn.list_offsets(topic, partition, -1)
    assert (latest.error_code, latest.offset) == (0, len(expected)), \
        f"{topic}-{partition}: latest offset {latest.offset} (error {latest.error_code})"


def _assert_appends_continue(conn: KafkaConnection, topic: str, partition: int, next_offset: int):
    records = [(b"after", b"restart-%d" % i, int(time.time() * 1000), []) for i in range(3)]
    answer = conn.produce(topic, partition, build_batch(records), acks=-1)
    assert (answer.error_code, answer.base_offset) == (0, next_offset), \
        f"{topic}-{partition}: new batch at {answer.base_offset} (error {answer.error_code})"
    fetched = conn.read_partition(topic, partition, next_offset)
    assert [(r[0], r[2]) for r in fetched] == [(next_offset + i, records[i][1]) for i in range(3)]


def test_acked_records_survive_kill_9(raftwood_broker_factory, new_topic):
    """Every acknowledged record (acks=1 and acks=all, compressed or not) is back at its
    acknowledged offset with its key, value, headers and timestamp after SIGKILL and
    restart, and after a clean stop and restart; new appends continue at the next offset."""
    broker = raftwood_broker_factory()
    topic = new_topic(broker, partitions=4)
    with KafkaConnection(broker.bootstrap) as conn:
        acked = _produce_acked(conn, topic, 4, total_records=4000)
    broker.kill()
    broker.start()
    with KafkaConnection(broker.bootstrap) as conn:
        for partition, expected in acked.items():
            _assert_log_is(conn, topic, partition, expected)
    assert broker.stop() == 0, f"SIGTERM exit code\n{broker.log_tail()}"
    broker.start()
    with KafkaConnection(broker.bootstrap) as conn:
        for partition, expected in acked.items():
            _assert_log_is(conn, topic, partition, expected)
            _assert_appends_continue(conn, topic, partition, len(expected))


def _active_segment(data_dir: Path, topic: str, partition: int) -> Path:
    segments = sorted((data_dir / f"{topic}-{partition}").glob("*.log"))
    assert segments, f"no segment under {data_dir / f'{topic}-{partition}'}"
    return segments[-1]


def _damage_last_batch_and_restart(broker, new_topic, damage) -> None:
    """Write 12 batches to partition 0 (and 4 to partition 1), SIGKILL, ``damage(path,
    last_batch_header)`` the active segment of partition 0, restart, then check: every batch
    before the last is intact, the latest offset is the last batch's base offset, appends
    continue densely from there, and partition 1 is untouched."""
    topic = new_topic(broker, partitions=2)
    rng = random.Random(11)
    expected: dict[int, list[tuple]] = {0: [], 1: []}
    with KafkaConnection(broker.bootstrap) as conn:
        for serial in range(16):
            partition = 0 if serial < 12 else 1
            records = _batch_records(rng, partition, serial, 5 + serial % 4, 1_700_000_000_000)
            answer = conn.produce(topic, partition, build_batch(records, compression=serial % 5))
            assert answer.error_code == 0
            expected[partition] += [(answer.base_offset + i, *r) for i, r in enumerate(records)]
    broker.kill()
    segment = _active_segment(broker.data_dir, topic, 0)
    headers = list(iter_headers(segment.read_bytes()))
    assert headers and headers[-1].next_offset == len(expected[0]), \
        f"{segment} does not end with the last acknowledged batch"
    last = headers[-1]
    damage(segment, last)
    broker.start()
    intact = [r for r in expected[0] if r[0] < last.base_offset]
    with KafkaConnection(broker.bootstrap) as conn:
        _assert_log_is(conn, topic, 0, intact)
        _assert_log_is(conn, topic, 1, expected[1])
        _assert_appends_continue(conn, topic, 0, last.base_offset)


def test_torn_tail_is_cut_at_last_whole_batch(raftwood_broker_factory, new_topic):
    def tear(segment: Path, last) -> None:
        with open(segment, "r+b") as f:
            f.truncate(last.position + last.size - 10)

    _damage_last_batch_and_restart(raftwood_broker_factory(), new_topic, tear)


def test_crc_corrupted_tail_is_cut(raftwood_broker_factory, new_topic):
    def flip(segment: Path, last) -> None:
        position = last.position + HEADER_SIZE + (last.size - HEADER_SIZE) // 2
        with open(segment, "r+b") as f:
            f.seek(position)
            byte = f.read(1)
            f.seek(position)
            f.write(bytes([byte[0] ^ 0x5A]))

    _damage_last_batch_and_restart(raftwood_broker_factory(), new_topic, flip)


def _fill_segments(conn: KafkaConnection, topic: str, batches: int, timestamp_ms: int) -> list:
    """``batches`` uncompressed ~1 KiB batches to partition 0; returns the records."""
    rng = random.Random(3)
    expected = []
    for serial in range(batches):
        records = [(b"k%d" % serial, rng.randbytes(1000), timestamp_ms, [])]
        answer = conn.produce(topic, 0, build_batch(records))
        assert answer.error_code == 0, f"batch {serial}: error {answer.error_code}"
        expected.append((answer.base_offset, *records[0]))
    return expected


def _wait_log_start_above_zero(conn: KafkaConnection, topic: str) -> int:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        earliest = conn.list_offsets(topic, 0, -2)
        assert earliest.error_code == 0
        if earliest.offset > 0:
            return earliest.offset
        time.sleep(0.1)
    raise AssertionError(f"earliest offset of {topic}-0 still 0 after {WAIT_S} s")


def _assert_retained_suffix(conn: KafkaConnection, topic: str, expected: list) -> None:
    """Below the log start offset Fetch answers OFFSET_OUT_OF_RANGE; from it on, the
    records are intact up to the unchanged latest offset."""
    log_start = _wait_log_start_above_zero(conn, topic)
    gone = conn.fetch(topic, 0, 0)
    assert gone.error_code == OFFSET_OUT_OF_RANGE, f"Fetch at 0: error {gone.error_code}"
    assert gone.log_start_offset in (-1, log_start)
    assert conn.read_partition(topic, 0, log_start) == expected[log_start:]
    assert conn.list_offsets(topic, 0, -1).offset == len(expected)


def test_segments_roll_and_size_retention_deletes_oldest(raftwood_broker_factory, new_topic):
    """With 4 KiB segments several segment files appear; size retention then deletes the
    oldest ones, moving the log start offset up while later records stay intact."""
    broker = raftwood_broker_factory(**{
        "log.segment.bytes": 4096, "log.retention.bytes": 12288,
        "log.retention.check.interval.ms": 200})
    topic = new_topic(broker)
    with KafkaConnection(broker.bootstrap) as conn:
        expected = _fill_segments(conn, topic, 40, int(time.time() * 1000))
        segments = list((broker.data_dir / f"{topic}-0").glob("*.log"))
        assert len(segments) >= 3, f"only {len(segments)} segments for ~44 KiB"
        _assert_retained_suffix(conn, topic, expected)


def test_time_retention_deletes_old_segments(raftwood_broker_factory, new_topic):
    """Segments whose newest record is older than log.retention.ms are deleted; as in
    Kafka that includes the active segment (a new one is rolled), so the log start offset
    reaches the latest offset and appends continue there."""
    broker = raftwood_broker_factory(**{
        "log.segment.bytes": 4096, "log.retention.ms": 60_000,
        "log.retention.check.interval.ms": 200})
    topic = new_topic(broker)
    with KafkaConnection(broker.bootstrap) as conn:
        expected = _fill_segments(conn, topic, 20, int(time.time() * 1000) - 3_600_000)
        _assert_retained_suffix(conn, topic, expected)
        _assert_appends_continue(conn, topic, 0, len(expected))
        assert conn.list_offsets(topic, 0, -2).offset <= len(expected)

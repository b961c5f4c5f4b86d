"""One list of client scenarios, run by every real client against a real broker.

A client is wrapped in a :class:`ClientDriver` (produce, consume from an offset, list
offsets, metadata); each test file under tests/integration/test_clients_*.py implements one
driver and runs ``scenarios_for(driver_class)``.  Scenarios only talk to the broker through
the driver, except for two client-neutral helpers on :class:`CompatEnv`: creating topics
(raw CreateTopics) and seeding records with explicit timestamps for clients that cannot
set them (kcat).  What a scenario asserts is the broker's contract, stated in its
docstring; see compat/README.md.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from broker.testing import KafkaConnection, build_batch

ACKS = (0, 1, "all")
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CODEC_IDS = {name: index for index, name in enumerate(CODECS)}
PARTITIONS = 3
RECORDS_PER_PARTITION = 12
WAIT_S = 15.0


@dataclass(frozen=True)
class Rec:
    """A record to produce, with the partition it must go to."""

    partition: int
    key: bytes | None
    value: bytes
    timestamp_ms: int | None = None
    headers: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True)
class Got:
    """A consumed record."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: tuple[tuple[str, bytes], ...] = ()


class ClientDriver:
    """What a scenario needs from a client.  Subclasses declare what the client can do.

    ``produce`` returns, in input order, the offset the client reported for each record, or
    None where it reports none (acks=0, or a client that never reports offsets).
    ``consume`` returns up to ``count`` records of one partition starting at ``offset``,
    stopping at the end of the partition or after ``WAIT_S``.  ``offset_for_time`` returns
    None when no record has a timestamp >= ``timestamp_ms``.
    """

    name = "client"
    codecs: tuple[str, ...] = CODECS
    sets_timestamps = True       # can produce with an explicit CreateTime per record
    sets_headers = True          # can produce headers per record
    reports_offsets = True       # produce reports each record's offset for acks=1/all
    lists_max_timestamp = False  # ListOffsets MAX_TIMESTAMP (-3)
    idempotent = True            # an idempotent producer (InitProducerId, sequence numbers)

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap

    def close(self) -> None:
        pass

    def produce(self, topic: str, recs: list[Rec], *, acks, compression: str,
                idempotent: bool = False) -> list[int | None]:
        raise NotImplementedError

    def consume(self, topic: str, partition: int, offset: int, count: int) -> list[Got]:
        raise NotImplementedError

    def consume_from_time(self, topic: str, partition: int, timestamp_ms: int,
                          count: int) -> list[Got]:
        offset = self.offset_for_time(topic, partition, timestamp_ms)
        assert offset is not None, f"no offset for timestamp {timestamp_ms}"
        return self.consume(topic, partition, offset, count)

    def earliest_offset(self, topic: str, partition: int) -> int:
        raise NotImplementedError

    def latest_offset(self, topic: str, partition: int) -> int:
        raise NotImplementedError

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        raise NotImplementedError

    def max_timestamp(self, topic: str, partition: int) -> tuple[int, int | None]:
        """(offset, timestamp) of the record with the largest timestamp (timestamp None
        when the client does not show it)."""
        raise NotImplementedError

    def topic_partitions(self, topic: str) -> int:
        """The partition count the client sees in Metadata."""
        raise NotImplementedError

    def brokers(self) -> list[tuple[int, str, int]]:
        """(node_id, host, port) of every broker in Metadata."""
        raise NotImplementedError


class CompatEnv:
    """Client-neutral helpers around one running broker (raw protocol, no client library)."""

    def __init__(self, bootstrap: str, node_id: int = 1):
        self.bootstrap = bootstrap
        self.node_id = node_id
        self._topics = 0

    def new_topic(self, partitions: int = PARTITIONS, prefix: str = "compat") -> str:
        self._topics += 1
        name = f"{prefix}-{self._topics}-{time.monotonic_ns() % 10**9}"
        with KafkaConnection(self.bootstrap) as conn:
            error = conn.create_topic(name, partitions)
            assert error == 0, f"CreateTopics {name} answered error {error}"
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:
                topic = conn.metadata([name]).topics[0]
                if topic.error_code == 0 and len(topic.partitions) == partitions:
                    return name
                time.sleep(0.05)
        raise AssertionError(f"topic {name} not in Metadata {WAIT_S} s after CreateTopics")

    def seed(self, topic: str, partition: int, recs: list[Rec], batches: int = 1) -> list[int]:
        """Produce ``recs`` (acks=all) in ``batches`` batches; returns their offsets."""
        offsets: list[int] = []
        size = -(-len(recs) // batches)
        with KafkaConnection(self.bootstrap) as conn:
            for start in range(0, len(recs), size):
                chunk = recs[start:start + size]
                batch = build_batch([(r.key, r.value, r.timestamp_ms, r.headers) for r in chunk])
                answer = conn.produce(topic, partition, batch, acks=-1)
                assert answer.error_code == 0, f"seed produce error {answer.error_code}"
                offsets += range(answer.base_offset, answer.base_offset + len(chunk))
        return offsets


@dataclass(frozen=True)
class Scenario:
    name: str
    run: Callable[[ClientDriver, CompatEnv], None]
    needs: tuple[str, ...] = ()
    params: dict = field(default_factory=dict)

    def applies_to(self, driver_class: type[ClientDriver]) -> bool:
        if "codec" in self.params and self.params["codec"] not in driver_class.codecs:
            return False
        return all(getattr(driver_class, need) for need in self.needs)

    def __call__(self, driver: ClientDriver, env: CompatEnv) -> None:
        self.run(driver, env, **self.params)

    def __str__(self) -> str:
        return self.name


# -- helpers ------------------------------------------------------------------------------
def _records(driver: ClientDriver, per_partition: int, base_ms: int) -> list[Rec]:
    """Records spread round-robin over the partitions; some null keys, some long values."""
    recs = []
    for i in range(PARTITIONS * per_partition):
        key = None if i % 5 == 4 else f"key-{i}".encode()
        value = (f"value-{i}|" * (1 + i % 7)).encode()
        headers = (("h", f"{i}".encode()), ("src", b"compat")) if driver.sets_headers else ()
        ts = base_ms + i if driver.sets_timestamps else None
        recs.append(Rec(i % PARTITIONS, key, value, ts, headers))
    return recs


def _assert_same(got: Got, rec: Rec, driver: ClientDriver, where: str) -> None:
    assert (got.key, got.value) == (rec.key, rec.value), \
        f"{where}: got key/value {got.key!r}/{got.value!r}, sent {rec.key!r}/{rec.value!r}"
    if rec.headers:
        assert got.headers == rec.headers, f"{where}: headers {got.headers} != {rec.headers}"
    if rec.timestamp_ms is not None:
        assert got.timestamp_ms == rec.timestamp_ms, \
            f"{where}: timestamp {got.timestamp_ms} != {rec.timestamp_ms}"
    else:
        assert got.timestamp_ms > 0, f"{where}: timestamp {got.timestamp_ms}"


def _wait_latest(driver: ClientDriver, topic: str, partition: int, expected: int) -> int:
    deadline = time.monotonic() + WAIT_S
    latest = driver.latest_offset(topic, partition)
    while latest < expected and time.monotonic() < deadline:
        time.sleep(0.1)
        latest = driver.latest_offset(topic, partition)
    return latest


def _by_partition(recs: list[Rec], offsets: list[int | None]) -> dict[int, list[Rec]]:
    """Each partition's records in offset order: by reported offset, else in send order."""
    result: dict[int, list[Rec]] = {p: [] for p in range(PARTITIONS)}
    if all(offset is not None for offset in offsets):
        for p in result:
            pairs = sorted((o, r) for o, r in zip(offsets, recs) if r.partition == p)
            assert [o for o, _ in pairs] == list(range(len(pairs))), \
                f"partition {p}: reported offsets {[o for o, _ in pairs]} are not 0..n-1"
            result[p] = [r for _, r in pairs]
    else:
        for rec in recs:
            result[rec.partition].append(rec)
    return result


# -- scenarios ----------------------------------------------------------------------------
def produce_and_read_back(driver: ClientDriver, env: CompatEnv, *, acks, codec: str,
                          idempotent: bool = False) -> None:
    """Every produced record is stored once, at dense offsets from 0 in its partition, with
    the bytes that were sent; reading from the start and from a middle offset agrees; the
    earliest offset is 0 and the latest equals the count."""
    topic = env.new_topic(PARTITIONS)
    recs = _records(driver, RECORDS_PER_PARTITION, int(time.time() * 1000) - 60_000)
    offsets = driver.produce(topic, recs, acks=acks, compression=codec, idempotent=idempotent)
    assert len(offsets) == len(recs)
    if acks != 0 and driver.reports_offsets:
        assert None not in offsets, f"acks={acks}: client reported no offset for {offsets}"
    if acks == 0:
        # No response, so no offsets: whatever a client reports (kafka-python gives
        # positions within its own batches) says nothing about the log.
        offsets = [None] * len(recs)
    expected = _by_partition(recs, offsets)
    for partition, wanted in expected.items():
        where = f"{driver.name} acks={acks} {codec} {topic}-{partition}"
        latest = _wait_latest(driver, topic, partition, len(wanted))
        assert latest == len(wanted), f"{where}: latest offset {latest}, produced {len(wanted)}"
        assert driver.earliest_offset(topic, partition) == 0, f"{where}: earliest offset"
        got = driver.consume(topic, partition, 0, len(wanted))
        assert [g.offset for g in got] == list(range(len(wanted))), f"{where}: offsets"
        for g in got:
            _assert_same(g, wanted[g.offset], driver, f"{where} offset {g.offset}")
        middle = len(wanted) // 2
        got = driver.consume(topic, partition, middle, len(wanted) - middle)
        assert [g.offset for g in got] == list(range(middle, len(wanted))), \
            f"{where}: offsets read from {middle}"
        for g in got:
            _assert_same(g, wanted[g.offset], driver, f"{where} offset {g.offset} (from middle)")


def _timed_records(count: int, base_ms: int, step_ms: int = 10) -> list[Rec]:
    return [Rec(1, f"k{i}".encode(), f"at-{base_ms + step_ms * i}".encode(), base_ms + step_ms * i)
            for i in range(count)]


def _write_timed(driver: ClientDriver, env: CompatEnv, topic: str, recs: list[Rec]) -> None:
    """Write ``recs`` to partition 1 in three batches, by the client when it can set
    timestamps, else by the raw seeding helper."""
    if driver.sets_timestamps:
        third = -(-len(recs) // 3)
        for start in range(0, len(recs), third):
            offsets = driver.produce(topic, recs[start:start + third], acks="all",
                                     compression="none")
            if driver.reports_offsets:
                assert offsets == list(range(start, start + len(recs[start:start + third])))
    else:
        assert env.seed(topic, 1, recs, batches=3) == list(range(len(recs)))


def list_offsets_by_timestamp(driver: ClientDriver, env: CompatEnv) -> None:
    """ListOffsets by timestamp answers the first offset whose timestamp is >= the target
    (within a batch and across batches), and none past the last timestamp; earliest and
    latest are 0 and the count."""
    topic = env.new_topic(PARTITIONS)
    base = int(time.time() * 1000) - 3_600_000
    recs = _timed_records(15, base)
    _write_timed(driver, env, topic, recs)
    assert driver.earliest_offset(topic, 1) == 0
    assert driver.latest_offset(topic, 1) == len(recs)
    for i in (0, 1, 4, 5, 7, 10, 14):
        ts = recs[i].timestamp_ms
        assert driver.offset_for_time(topic, 1, ts) == i, f"timestamp {ts} (record {i})"
        assert driver.offset_for_time(topic, 1, ts - 5) == i, f"timestamp {ts - 5} (before {i})"
    assert driver.offset_for_time(topic, 1, base - 100_000) == 0
    assert driver.offset_for_time(topic, 1, recs[-1].timestamp_ms + 1) is None
    got = driver.consume_from_time(topic, 1, recs[7].timestamp_ms - 3, 3)
    assert [(g.offset, g.value) for g in got] == [(i, recs[i].value) for i in (7, 8, 9)]


def list_offsets_max_timestamp(driver: ClientDriver, env: CompatEnv) -> None:
    """ListOffsets MAX_TIMESTAMP (-3) answers the offset and timestamp of the record with
    the largest timestamp, even when it is not the last record."""
    topic = env.new_topic(PARTITIONS)
    base = int(time.time() * 1000) - 3_600_000
    recs = _timed_records(15, base)
    peak = 8
    recs[peak] = Rec(1, b"peak", b"peak", base + 1_000_000)
    _write_timed(driver, env, topic, recs)
    offset, timestamp = driver.max_timestamp(topic, 1)
    assert offset == peak, f"max timestamp offset {offset}, expected {peak}"
    assert timestamp in (None, base + 1_000_000), f"max timestamp {timestamp}"


def metadata_lists_broker_and_topic(driver: ClientDriver, env: CompatEnv) -> None:
    """Metadata names the broker at the address the client bootstrapped from, and the
    topic with its partition count."""
    topic = env.new_topic(PARTITIONS)
    host, _, port = env.bootstrap.rpartition(":")
    assert (env.node_id, host, int(port)) in driver.brokers()
    assert driver.topic_partitions(topic) == PARTITIONS


SCENARIOS: list[Scenario] = [
    *(Scenario(f"produce-acks{acks}-{codec}", produce_and_read_back,
               params={"acks": acks, "codec": codec})
      for acks in ACKS for codec in CODECS),
    *(Scenario(f"produce-idempotent-{codec}", produce_and_read_back, needs=("idempotent",),
               params={"acks": "all", "codec": codec, "idempotent": True})
      for codec in ("none", "lz4")),
    Scenario("list-offsets-by-timestamp", list_offsets_by_timestamp),
    Scenario("list-offsets-max-timestamp", list_offsets_max_timestamp,
             needs=("lists_max_timestamp",)),
    Scenario("metadata", metadata_lists_broker_and_topic),
]


def scenarios_for(driver_class: type[ClientDriver]) -> list[Scenario]:
    """The scenarios a client can run (codecs it lacks and features it has not are left out)."""
    return [s for s in SCENARIOS if s.applies_to(driver_class)]

"""A client's records are checked like Kafka's LogValidator does, and a stored batch
that does not decode is one request's error, never a storage failure.

Found by a fuzzer against three real brokers: a Produce whose batch claims gzip but is
not gzip (valid CRC) was stored; the next ListOffsets by timestamp that reached it took
the log directory offline and stopped the broker, then every new leader in turn.  A batch
claiming 2^31-1 records while holding one was stored too, and moved the next offset by
2^31-1.

Invariants protected here, against real broker processes over real sockets:

* a batch whose records do not decode (bad compression, records that do not parse, a
  record count the records contradict) is refused: CORRUPT_MESSAGE for content that
  does not decompress, INVALID_RECORD for records that break the format's rules;
* nothing of a refused batch is stored: the next good batch gets the next offset;
* ListOffsets by timestamp and by max timestamp keep answering, the broker keeps running;
* a batch already on disk that does not decode makes ListOffsets answer CORRUPT_MESSAGE
  for that partition only; the log directory stays online and everything else works.
"""
from __future__ import annotations

import struct
import time
from pathlib import Path

import crc32c
import pytest
from kafka import codec
from kafka.protocol.consumer import ListOffsetsResponse
from kafka.protocol.producer import ProduceResponse

from broker.testing import BrokerProcess, KafkaConnection, build_batch
from protocol.primitives import varint as zigzag

CORRUPT_MESSAGE = 2
INVALID_RECORD = 87
NONE = 0
MAX_TIMESTAMP = -3
LATEST = -1
BASE_TS = 1_700_000_000_000
GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
CODECS = {"gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
ENCODERS = {GZIP: codec.gzip_encode, SNAPPY: codec.snappy_encode, LZ4: codec.lz4_encode,
            ZSTD: codec.zstd_encode}
HEADER = struct.Struct(">qiibIhiqqqhii")

# The fuzzer's two frames, as found (each with its 4-byte size): Produce v3 of topic fz-t
# whose batch says gzip and holds "garbage-not-gzip" (CRC valid), then ListOffsets v1 by a
# timestamp just below the batch's.
FUZZ_PRODUCE = bytes.fromhex(
    "0000008000000003000000010009667a2d636c69656e74ffff000100000bb8000000010004667a2d74"
    "00000001000000000000004f000000000000000000000043ffffffff020efb75b00001000000000000"
    "018bcfe568000000018bcfe56800ffffffffffffffffffffffffffff0000000131b7676172626167"
    "652d6e6f742d677a6970")
FUZZ_LIST_OFFSETS = bytes.fromhex(
    "0000003100020001000000020009667a2d636c69656e74ffffffff000000010004667a2d7400000001"
    "000000000000018bcfe56418")
FUZZ_TOPIC = "fz-t"
FUZZ_TIMESTAMP = 0x18bcfe56418


# -- batches as a misbehaving client builds them ---------------------------------------------

def record(offset_delta: int, value: bytes = b"v", key: bytes | None = b"k") -> bytes:
    """One record of a RecordBatch v2, length prefix included (timestamp delta 0)."""
    body = b"\x00" + zigzag(0) + zigzag(offset_delta)
    body += zigzag(-1) if key is None else zigzag(len(key)) + key
    body += zigzag(len(value)) + value + zigzag(0)
    return zigzag(len(body)) + body


def batch(payload: bytes, count: int, *, compression: int = 0,
          last_offset_delta: int | None = None, timestamp: int = BASE_TS,
          base_offset: int = 0, leader_epoch: int = -1) -> bytes:
    """A batch around ``payload`` (already compressed if ``compression``), CRC right."""
    delta = count - 1 if last_offset_delta is None else last_offset_delta
    data = bytearray(HEADER.pack(base_offset, HEADER.size - 12 + len(payload), leader_epoch, 2,
                                 0, compression, delta, timestamp, timestamp, -1, -1, -1,
                                 count) + payload)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


def good_batch(n: int = 3, timestamp: int = BASE_TS) -> bytes:
    return build_batch([(b"k%d" % i, b"good-%d" % i, timestamp + i, []) for i in range(n)])


# Uncompressed batches whose records do not parse or contradict the header; every one
# has a valid CRC and a header a header-only check accepts.  (The produce path walks
# lengths and offset deltas only; a record's key, value and headers are parsed on the
# cold paths, see protocol/record_validation.py and the stored-batch test below.)
def _three() -> bytes:
    return record(0) + record(1) + record(2)


UNPARSABLE = {
    "records-cut-short": lambda: batch(_three()[:-3], 3),
    "trailing-bytes": lambda: batch(_three() + b"\x00\x00", 3),
    "one-record-more": lambda: batch(_three() + record(3), 3),
    "one-record-less": lambda: batch(record(0) + record(1), 3),
    "length-past-end": lambda: batch(zigzag(200) + record(0)[1:], 1),
    "negative-length": lambda: batch(zigzag(-7) + b"\x00" * 8, 1),
    "overlong-varint": lambda: batch(b"\xff" * 11 + b"\x01", 1),
    "key-past-record": lambda: batch(zigzag(5) + b"\x00\x00\x00" + zigzag(40) + b"\x00", 1),
    "offset-deltas-out-of-order": lambda: batch(record(1) + record(0) + record(2), 3),
    "offset-delta-gap": lambda: batch(record(0) + record(1) + record(5), 3),
    "lying-count": lambda: batch(record(0), 2**31 - 1),
}


# -- the broker --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    home = tmp_path_factory.mktemp("record-validation")
    broker = BrokerProcess(home / "data", log_path=home / "broker.log",
                           extra_settings={"auto.create.topics.enable": False})
    broker.start()
    yield broker
    code = broker.stop()
    assert code == 0, f"broker exited {code} after SIGTERM\n{broker.log_tail()}"


def _alive(broker: BrokerProcess) -> None:
    assert broker.is_running(), f"broker stopped\n{broker.log_tail()}"
    text = Path(broker.log_path).read_text(errors="replace")
    assert "taking it offline" not in text, "a log directory went offline"
    assert "Traceback" not in text, "a traceback was logged"


def _fresh_topic(conn: KafkaConnection, name: str) -> str:
    assert conn.create_topic(name, 1) == 0
    return name


def _lookups_answer(conn: KafkaConnection, topic: str, expected_latest: int) -> None:
    """ListOffsets by timestamp, by max timestamp and latest all answer NONE."""
    for timestamp in (BASE_TS - 10, MAX_TIMESTAMP, LATEST):
        answer = conn.list_offsets(topic, 0, timestamp)
        assert answer.error_code == NONE, f"ListOffsets {timestamp}: error {answer.error_code}"
    assert conn.list_offsets(topic, 0, LATEST).offset == expected_latest


def _refused_then_good_lands_next(conn, topic: str, bad: bytes, error: int) -> None:
    """``bad`` is refused with ``error``; nothing of it is stored: lookups still answer and
    the next good batch lands at the old latest offset."""
    before = conn.list_offsets(topic, 0, LATEST).offset
    answer = conn.produce(topic, 0, bad, acks=-1)
    assert answer.error_code == error, f"produce: error {answer.error_code}, wanted {error}"
    _lookups_answer(conn, topic, before)
    good = conn.produce(topic, 0, good_batch(), acks=-1)
    assert (good.error_code, good.base_offset) == (NONE, before)
    _lookups_answer(conn, topic, before + 3)
    assert conn.list_offsets(topic, 0, BASE_TS).offset == 0


# -- the fuzzer's finding, replayed -------------------------------------------------------------

def test_fuzzer_frames_bad_gzip_is_refused_and_lookups_keep_working(broker):
    with KafkaConnection(broker.bootstrap) as conn:
        _fresh_topic(conn, FUZZ_TOPIC)
        conn.send_raw(FUZZ_PRODUCE)
        produced = ProduceResponse.decode(conn.read_frame(), version=3, header=True)
        partition = produced.responses[0].partition_responses[0]
        assert partition.error_code == CORRUPT_MESSAGE, partition
        conn.send_raw(FUZZ_LIST_OFFSETS)
        listed = ListOffsetsResponse.decode(conn.read_frame(), version=1, header=True)
        answer = listed.topics[0].partitions[0]
        assert (answer.error_code, answer.offset) == (NONE, -1), answer
        _lookups_answer(conn, FUZZ_TOPIC, 0)
        good = conn.produce(FUZZ_TOPIC, 0, good_batch(timestamp=FUZZ_TIMESTAMP + 10))
        assert (good.error_code, good.base_offset) == (NONE, 0)
        conn.send_raw(FUZZ_LIST_OFFSETS)
        listed = ListOffsetsResponse.decode(conn.read_frame(), version=1, header=True)
        answer = listed.topics[0].partitions[0]
        assert (answer.error_code, answer.offset) == (NONE, 0), answer
        assert conn.list_offsets(FUZZ_TOPIC, 0, MAX_TIMESTAMP).offset == 2
    _alive(broker)


@pytest.mark.parametrize("name", CODECS)
def test_garbage_compressed_payload_is_corrupt_message(broker, name):
    garbage = b"garbage-not-%s-" % name.encode() + bytes(range(256))
    with KafkaConnection(broker.bootstrap) as conn:
        topic = _fresh_topic(conn, f"garbage-{name}")
        _refused_then_good_lands_next(conn, topic, batch(garbage, 1, compression=CODECS[name]),
                                      CORRUPT_MESSAGE)
    _alive(broker)


@pytest.mark.parametrize("name", CODECS)
def test_compressed_records_that_do_not_parse_are_invalid_record(broker, name):
    """Compression intact, records inside broken (cut short, then one too few)."""
    compression = CODECS[name]
    with KafkaConnection(broker.bootstrap) as conn:
        topic = _fresh_topic(conn, f"unparsable-{name}")
        for payload, count in ((_three()[:-3], 3), (record(0), 2)):
            _refused_then_good_lands_next(
                conn, topic, batch(ENCODERS[compression](payload), count,
                                   compression=compression), INVALID_RECORD)
        good = build_batch([(b"k", b"v%d" % i, BASE_TS, []) for i in range(5)],
                           compression=compression)
        assert conn.produce(topic, 0, good).error_code == NONE, "a good batch of that codec"
    _alive(broker)


@pytest.mark.parametrize("name", UNPARSABLE)
def test_uncompressed_records_that_do_not_parse_are_invalid_record(broker, name):
    with KafkaConnection(broker.bootstrap) as conn:
        topic = _fresh_topic(conn, f"bad-records-{name}")
        _refused_then_good_lands_next(conn, topic, UNPARSABLE[name](), INVALID_RECORD)
    _alive(broker)


def test_lying_record_count_does_not_move_the_next_offset(broker):
    """The fuzzer's second finding: a header claiming 2^31-1 records around one record."""
    with KafkaConnection(broker.bootstrap) as conn:
        topic = _fresh_topic(conn, "lying-count")
        assert conn.produce(topic, 0, good_batch()).base_offset == 0
        answer = conn.produce(topic, 0, batch(record(0), 2**31 - 1))
        assert answer.error_code == INVALID_RECORD
        good = conn.produce(topic, 0, good_batch())
        assert (good.error_code, good.base_offset) == (NONE, 3)
        assert conn.list_offsets(topic, 0, LATEST).offset == 6
    _alive(broker)


def test_good_batches_of_every_codec_are_accepted_and_found_by_timestamp(broker):
    with KafkaConnection(broker.bootstrap) as conn:
        topic = _fresh_topic(conn, "every-codec")
        for compression in (0, GZIP, SNAPPY, LZ4, ZSTD):
            records = [(b"k%d" % i, b"x" * (i * 100), BASE_TS + 10 * compression + i,
                        [("h", b"v")] * (i % 3)) for i in range(7)]
            answer = conn.produce(topic, 0, build_batch(records, compression=compression))
            assert (answer.error_code, answer.base_offset) == (NONE, 7 * compression)
        for compression in (0, GZIP, SNAPPY, LZ4, ZSTD):
            found = conn.list_offsets(topic, 0, BASE_TS + 10 * compression + 3)
            assert (found.error_code, found.offset) == (NONE, 7 * compression + 3)
        found = conn.list_offsets(topic, 0, MAX_TIMESTAMP)
        assert (found.error_code, found.offset) == (NONE, 34)
    _alive(broker)


# -- a 3-broker cluster, replication factor 3 ------------------------------------------------

def test_cluster_refuses_bad_gzip_and_every_broker_keeps_serving(raftwood_cluster_factory):
    cluster = raftwood_cluster_factory(3)
    cluster.create_topic(FUZZ_TOPIC, 1, replication_factor=3)
    leader = cluster.leader_of(FUZZ_TOPIC, 0)
    with cluster.connect(leader) as conn:
        conn.send_raw(FUZZ_PRODUCE)
        produced = ProduceResponse.decode(conn.read_frame(), version=3, header=True)
        assert produced.responses[0].partition_responses[0].error_code == CORRUPT_MESSAGE
        good = conn.produce(FUZZ_TOPIC, 0, good_batch(timestamp=FUZZ_TIMESTAMP + 10))
        assert (good.error_code, good.base_offset) == (NONE, 0)
        for timestamp, offset in ((FUZZ_TIMESTAMP, 0), (MAX_TIMESTAMP, 2)):
            answer = conn.list_offsets(FUZZ_TOPIC, 0, timestamp)
            assert (answer.error_code, answer.offset) == (NONE, offset)
    cluster.wait_for_isr(FUZZ_TOPIC, 0, [1, 2, 3])
    # Every replica holds the same log; a new leader must answer the same lookups.
    cluster.stop(leader)
    new_leader = cluster.wait_for_leader(FUZZ_TOPIC, 0, not_in=[leader])
    with cluster.connect(new_leader) as conn:
        for _ in range(100):
            answer = conn.list_offsets(FUZZ_TOPIC, 0, FUZZ_TIMESTAMP)
            if answer.error_code == NONE:
                break
            # leadership still settling: LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER,
            # FENCED/UNKNOWN_LEADER_EPOCH, OFFSET_NOT_AVAILABLE
            assert answer.error_code in (5, 6, 74, 75, 78), f"error {answer.error_code}"
            time.sleep(0.1)
        assert (answer.error_code, answer.offset) == (NONE, 0)
    cluster.start(leader)
    assert sorted(cluster.running()) == [1, 2, 3]


# -- a batch already on disk that does not decode ------------------------------------------

def _append_to_segment(partition_dir: Path, data: bytes) -> None:
    """Append ``data`` to the partition's only segment and drop its indexes, so recovery
    scans the segment (CRC and offsets only) and rebuilds them."""
    segments = sorted(partition_dir.glob("*.log"))
    assert len(segments) == 1, segments
    with open(segments[0], "ab") as f:
        f.write(data)
    for suffix in ("*.index", "*.timeindex"):
        for index in partition_dir.glob(suffix):
            index.unlink()


@pytest.mark.parametrize("bad", ["gzip-garbage", "zstd-garbage", "records-cut-short"])
def test_stored_batch_that_does_not_decode_is_a_per_request_error(raftwood_broker_factory, bad):
    broker = raftwood_broker_factory(auto_create_topics_enable=False)
    with KafkaConnection(broker.bootstrap) as conn:
        for topic in ("stored", "other"):
            assert conn.create_topic(topic, 1) == 0
            assert conn.produce(topic, 0, good_batch()).base_offset == 0
    assert broker.stop() == 0
    partition_dir = broker.data_dir / "stored-0"
    first = next(partition_dir.glob("*.log")).read_bytes()
    leader_epoch = struct.unpack_from(">i", first, 12)[0]
    payload, count, compression = {
        "gzip-garbage": (b"garbage-not-gzip", 1, GZIP),
        "zstd-garbage": (b"garbage-not-zstd" * 4, 1, ZSTD),
        "records-cut-short": (_three()[:-3], 3, 0),
    }[bad]
    _append_to_segment(partition_dir, batch(payload, count, compression=compression,
                                            timestamp=BASE_TS + 1000, base_offset=3,
                                            leader_epoch=leader_epoch))
    broker.start()
    with KafkaConnection(broker.bootstrap) as conn:
        assert conn.list_offsets("stored", 0, LATEST).offset == 3 + count
        for timestamp in (BASE_TS + 500, MAX_TIMESTAMP):
            for _ in range(2):  # the answer repeats: nothing went offline in between
                answer = conn.list_offsets("stored", 0, timestamp)
                assert answer.error_code == CORRUPT_MESSAGE, \
                    f"ListOffsets {timestamp}: error {answer.error_code}"
        answer = conn.list_offsets("stored", 0, BASE_TS + 1)
        assert (answer.error_code, answer.offset) == (NONE, 1), "lookups before it still work"
        assert conn.fetch("stored", 0, 0).error_code == NONE
        for timestamp in (BASE_TS, MAX_TIMESTAMP):
            assert conn.list_offsets("other", 0, timestamp).error_code == NONE
        answer = conn.produce("other", 0, good_batch())
        assert (answer.error_code, answer.base_offset) == (NONE, 3)
        answer = conn.produce("stored", 0, good_batch())
        assert (answer.error_code, answer.base_offset) == (NONE, 3 + count)
    _alive(broker)

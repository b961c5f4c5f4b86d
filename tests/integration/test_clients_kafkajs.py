"""compat scenarios run by KafkaJS 2.2 (Node), plus its admin calls and its group consumer.

The client is driven by ``compat/kafkajs/driver.js``, one ``node driver.js --serve``
process per driver speaking JSON lines (bytes as base64); every answer is awaited with a
timeout and the process is ended on close.  ``make test`` installs KafkaJS and its codec
packages (``make compat-node``: ``npm ci --prefix compat/kafkajs``); without node or those
modules the tests skip.

KafkaJS has no ``assign()``: its public consumer is a group member.  The scenarios read a
partition from an offset through the cluster object that consumer runs on (KafkaJS's own
metadata, leader lookup, Fetch v11 and record batch decoder); one test below also reads
through the public group consumer.  KafkaJS's ListOffsets stops at v3, so it cannot ask for
MAX_TIMESTAMP (v7).
"""
from __future__ import annotations

import base64
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from broker.testing import KafkaConnection, read_records
from compat.scenarios import CODECS, WAIT_S, ClientDriver, Got, Rec, scenarios_for

ROOT = Path(__file__).resolve().parents[2]
DRIVER_DIR = ROOT / "compat" / "kafkajs"
NODE = shutil.which("node")
CALL_TIMEOUT_S = WAIT_S + 15  # one command; the driver's own waits are shorter


def _missing() -> str | None:
    if NODE is None:
        return "node is not installed: the KafkaJS compat tests need Node.js and npm"
    if not (DRIVER_DIR / "node_modules" / "kafkajs").is_dir():
        return "compat/kafkajs/node_modules is missing: run `make compat-node` (npm ci)"
    return None


pytestmark = pytest.mark.skipif(_missing() is not None, reason=_missing() or "")


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


class KafkaJSError(AssertionError):
    def __init__(self, command: dict, answer: dict):
        super().__init__(f"kafkajs {command.get('op')} {command.get('method', '')}: "
                         f"{answer.get('name')}: {answer.get('error')} "
                         f"(type {answer.get('type')}, partitions {answer.get('partitions')})")
        self.answer = answer


class NodeProcess:
    """``node driver.js --serve``: one JSON command per line in, one answer per line out."""

    def __init__(self):
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [NODE or "node", str(DRIVER_DIR / "driver.js"), "--serve"], cwd=DRIVER_DIR,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
            env={**{k: v for k, v in os.environ.items() if not k.startswith("KAFKAJS_")},
                 "RAFTWOOD_KAFKAJS_MAX_SECONDS": "600"})
        self._lines: queue.Queue = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def stderr_tail(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-3000:]

    def call_raw(self, command: dict, timeout: float = CALL_TIMEOUT_S) -> dict:
        assert self.proc.poll() is None, \
            f"driver.js exited {self.proc.returncode}\n{self.stderr_tail()}"
        self.proc.stdin.write(json.dumps(command).encode() + b"\n")
        self.proc.stdin.flush()
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            self.close()
            raise AssertionError(f"kafkajs {command.get('op')}: no answer in {timeout} s\n"
                                 f"{self.stderr_tail()}") from None
        assert line is not None, f"driver.js exited {self.proc.wait()}\n{self.stderr_tail()}"
        return json.loads(line)

    def call(self, command: dict, timeout: float = CALL_TIMEOUT_S):
        answer = self.call_raw(command, timeout)
        if not answer["ok"]:
            raise KafkaJSError(command, answer)
        return answer.get("result")

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()  # the driver disconnects and exits at end of input
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._reader.join(timeout=5)
        self._stderr.close()


class KafkaJSDriver(ClientDriver):
    name = "kafkajs"
    lists_max_timestamp = False  # ListOffsets v3 at most: no MAX_TIMESTAMP (-3, v7)

    def __init__(self, bootstrap: str):
        super().__init__(bootstrap)
        self.node = NodeProcess()

    def close(self) -> None:
        self.node.close()

    def call(self, op: str, **fields):
        return self.node.call({"op": op, "bootstrap": self.bootstrap, **fields})

    def admin(self, method: str, *args):
        return self.call("admin", method=method, args=list(args))

    def produce(self, topic: str, recs: list[Rec], *, acks, compression: str,
                idempotent: bool = False) -> list[int | None]:
        records = [{"partition": r.partition, "key": b64(r.key), "value": b64(r.value),
                    "timestamp": r.timestamp_ms,
                    "headers": [[k, b64(v)] for k, v in r.headers]} for r in recs]
        result = self.call("produce", topic=topic, records=records, acks=acks,
                           compression=compression, idempotent=idempotent)
        return result["offsets"]

    def consume(self, topic: str, partition: int, offset: int, count: int) -> list[Got]:
        result = self.call("consume", topic=topic, partition=partition, offset=offset,
                           count=count, waitMs=int(WAIT_S * 1000))
        return [Got(r["partition"], r["offset"], unb64(r["key"]), unb64(r["value"]),
                    r["timestamp"], tuple((k, unb64(v)) for k, v in r["headers"]))
                for r in result["records"]]

    def earliest_offset(self, topic: str, partition: int) -> int:
        return self.call("offsets", topic=topic, partition=partition, which="earliest")["offset"]

    def latest_offset(self, topic: str, partition: int) -> int:
        return self.call("offsets", topic=topic, partition=partition, which="latest")["offset"]

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        offset = self.call("offsets", topic=topic, partition=partition, which="timestamp",
                           timestamp=timestamp_ms)["offset"]
        return None if offset < 0 else offset

    def topic_partitions(self, topic: str) -> int:
        [entry] = self.call("metadata", topics=[topic])["topics"]
        return len(entry["partitions"])

    def brokers(self) -> list[tuple[int, str, int]]:
        return [(b["nodeId"], b["host"], b["port"]) for b in self.call("metadata")["brokers"]]


@pytest.fixture
def kafkajs(compat_env):
    driver = KafkaJSDriver(compat_env.bootstrap)
    try:
        yield driver
    finally:
        driver.close()


@pytest.mark.parametrize("scenario", scenarios_for(KafkaJSDriver), ids=str)
def test_kafkajs(scenario, compat_env, kafkajs):
    scenario(kafkajs, compat_env)


def _wait_for(what: str, probe, timeout: float = WAIT_S):
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value or time.monotonic() >= deadline:
            assert value, f"{what}: not within {timeout} s"
            return value
        time.sleep(0.1)


def test_kafkajs_admin(compat_env, kafkajs):
    """KafkaJS's Admin against the broker: every call answers, and its effect is seen."""
    topic = f"kafkajs-admin-{time.monotonic_ns() % 10**9}"
    host, _, port = compat_env.bootstrap.rpartition(":")

    # describeCluster (Metadata): the broker, as bootstrapped, is the controller.
    cluster = kafkajs.admin("describeCluster")
    assert cluster["brokers"] == [{"nodeId": compat_env.node_id, "host": host, "port": int(port)}]
    assert cluster["controller"] == compat_env.node_id
    assert cluster["clusterId"]

    # createTopics (CreateTopics v3) with a config; true when created, false when it exists.
    assert kafkajs.admin("createTopics", {
        "topics": [{"topic": topic, "numPartitions": 2, "replicationFactor": 1,
                    "configEntries": [{"name": "retention.ms", "value": "3600000"}]}],
        "waitForLeaders": True, "timeout": 10_000}) is True
    again = {"topics": [{"topic": topic, "numPartitions": 2}]}
    assert kafkajs.admin("createTopics", again) is False
    assert topic in kafkajs.admin("listTopics")
    assert kafkajs.topic_partitions(topic) == 2

    # describeConfigs (DescribeConfigs v2): the topic's override and a default.
    [resource] = kafkajs.admin("describeConfigs", {
        "resources": [{"type": 2, "name": topic,
                       "configNames": ["retention.ms", "cleanup.policy"]}],
        "includeSynonyms": False})["resources"]
    assert resource["errorCode"] == 0 and resource["resourceName"] == topic
    entries = {e["configName"]: e for e in resource["configEntries"]}
    assert entries["retention.ms"]["configValue"] == "3600000"
    assert entries["retention.ms"]["isDefault"] is False
    assert entries["cleanup.policy"]["configValue"] == "delete"
    [broker_resource] = kafkajs.admin("describeConfigs", {
        "resources": [{"type": 4, "name": str(compat_env.node_id)}]})["resources"]
    assert broker_resource["errorCode"] == 0 and broker_resource["configEntries"]

    # createPartitions (CreatePartitions v1): 2 -> 4, seen in Metadata and ListOffsets;
    # shrinking is refused with INVALID_PARTITIONS.
    kafkajs.admin("createPartitions", {"topicPartitions": [{"topic": topic, "count": 4}]})
    _wait_for("4 partitions in Metadata", lambda: kafkajs.topic_partitions(topic) == 4)
    with pytest.raises(KafkaJSError) as refused:
        kafkajs.admin("createPartitions", {"topicPartitions": [{"topic": topic, "count": 3}]})
    assert refused.value.answer["type"] == "INVALID_PARTITIONS"

    # fetchTopicOffsets (ListOffsets v3 earliest and latest) after a produce to partition 3,
    # one of the new partitions.
    recs = [Rec(3, f"k{i}".encode(), f"v{i}".encode(), 1_700_000_000_000 + i) for i in range(5)]
    assert kafkajs.produce(topic, recs, acks="all", compression="gzip") == list(range(5))
    offsets = {o["partition"]: o for o in kafkajs.admin("fetchTopicOffsets", topic)}
    assert sorted(offsets) == [0, 1, 2, 3]
    assert (offsets[3]["low"], offsets[3]["high"], offsets[3]["offset"]) == ("0", "5", "5")
    assert all((offsets[p]["low"], offsets[p]["high"]) == ("0", "0") for p in (0, 1, 2))
    by_time = {o["partition"]: o["offset"]
               for o in kafkajs.admin("fetchTopicOffsetsByTimestamp", topic, 1_700_000_000_002)}
    assert by_time[3] == "2"
    # Past the last timestamp the broker answers -1, which KafkaJS's Admin replaces by the
    # high watermark.
    late = {o["partition"]: o["offset"]
            for o in kafkajs.admin("fetchTopicOffsetsByTimestamp", topic, 1_800_000_000_000)}
    assert late[3] == "5"

    # deleteTopicRecords (DeleteRecords v1): the earliest offset moves to 3, reading below
    # it is OFFSET_OUT_OF_RANGE, reading from it gives the rest.  (KafkaJS looks the leader
    # up in its metadata cache before loading the topic: the fetchTopicOffsets above did.)
    kafkajs.admin("deleteTopicRecords",
                  {"topic": topic, "partitions": [{"partition": 3, "offset": "3"}]})
    assert kafkajs.earliest_offset(topic, 3) == 3
    assert kafkajs.latest_offset(topic, 3) == 5
    with pytest.raises(KafkaJSError) as out_of_range:
        kafkajs.consume(topic, 3, 0, 5)
    assert out_of_range.value.answer["type"] == "OFFSET_OUT_OF_RANGE"
    rest = kafkajs.consume(topic, 3, 3, 5)
    assert [(g.offset, g.value) for g in rest] == [(3, b"v3"), (4, b"v4")]
    # offset -1 deletes up to the high watermark
    kafkajs.admin("deleteTopicRecords",
                  {"topic": topic, "partitions": [{"partition": 3, "offset": "-1"}]})
    assert kafkajs.earliest_offset(topic, 3) == 5

    # deleteTopics (DeleteTopics v1): gone from listTopics and Metadata.
    kafkajs.admin("deleteTopics", {"topics": [topic], "timeout": 10_000})
    _wait_for("topic gone from listTopics", lambda: topic not in kafkajs.admin("listTopics"))
    # KafkaJS's Admin asks Metadata with allow_auto_topic_creation=true (it has no option
    # for it) and this broker auto-creates topics: the deleted topic must stay deleted.
    time.sleep(0.5)
    with KafkaConnection(compat_env.bootstrap) as conn:
        [gone] = conn.metadata([topic]).topics
        assert gone.error_code == 3, f"{topic} after deleteTopics: error {gone.error_code}"
    assert topic not in kafkajs.admin("listTopics")

    # The versions KafkaJS 2.2.4 picks from our ApiVersions answer (its highest, all served).
    seen = kafkajs.call("requests")
    for request in ("ApiVersions v2", "Metadata v6", "CreateTopics v3", "DescribeConfigs v2",
                    "CreatePartitions v1", "ListOffsets v3", "Produce v7", "Fetch v11",
                    "DeleteRecords v1", "DeleteTopics v1"):
        assert request in seen, (request, seen)


def test_kafkajs_group_consumer(compat_env, kafkajs):
    """KafkaJS's public consumer (a group member: FindCoordinator, JoinGroup, SyncGroup,
    Heartbeat, OffsetCommit) subscribed from the beginning reads every record once."""
    topic = compat_env.new_topic(2, prefix="kafkajs-group")
    recs = [Rec(i % 2, f"k{i}".encode(), f"v{i}".encode(), None, (("n", str(i).encode()),))
            for i in range(10)]
    kafkajs.produce(topic, recs, acks=1, compression="snappy")
    result = kafkajs.call("groupConsume", topic=topic, groupId=f"{topic}-group", count=10,
                          waitMs=int(WAIT_S * 1000))
    got = sorted((r["partition"], r["offset"], unb64(r["value"]), tuple(map(tuple, r["headers"])))
                 for r in result["records"])
    expected = sorted((r.partition, i // 2, r.value, (("n", b64(r.headers[0][1])),))
                      for i, r in enumerate(recs))
    assert got == expected
    seen = kafkajs.call("requests")
    for request in ("GroupCoordinator v2", "JoinGroup v5", "SyncGroup v3", "OffsetFetch v4",
                    "OffsetCommit v5", "LeaveGroup v3"):
        assert request in seen, (request, seen)


@pytest.mark.parametrize("codec", KafkaJSDriver.codecs)
def test_kafkajs_codec_reaches_the_log(codec, compat_env, kafkajs):
    """The batch KafkaJS writes carries its codec (snappy, lz4 and zstd come from the npm
    codec packages, not the client), and another decoder (kafka-python's) reads it back."""
    topic = compat_env.new_topic(1, prefix=f"kafkajs-{codec}")
    recs = [Rec(0, f"k{i}".encode(), (f"value-{i} " * 40).encode(), 1_700_000_000_000 + i)
            for i in range(20)]
    assert kafkajs.produce(topic, recs, acks="all", compression=codec) == list(range(20))
    with KafkaConnection(compat_env.bootstrap) as conn:
        data = conn.fetch(topic, 0, 0)
        assert data.error_code == 0
        raw = bytes(data.records)
        assert raw[16] == 2, f"magic {raw[16]}"
        attributes = int.from_bytes(raw[21:23], "big")
        assert attributes & 0x07 == CODECS.index(codec), f"{codec}: attributes {attributes:#x}"
        got = [(o, k, v, ts) for o, k, v, ts, _ in read_records(raw)]
    assert got == [(i, r.key, r.value, r.timestamp_ms) for i, r in enumerate(recs)]

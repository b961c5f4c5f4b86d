"""compat scenarios run by kcat (librdkafka's command-line client), plus ``kcat -L``.

kcat cannot set a timestamp per message and applies ``-p``/``-H`` to a whole invocation;
so the driver runs one ``kcat -P`` per partition and header set, and records with explicit
timestamps are seeded by the raw helper.  With ``-vvv`` kcat prints one "Message delivered
to partition P (offset N)" line per message, in order: those are the reported offsets.
Consuming is ``kcat -C -J -e`` from an offset (``-o N``) or a timestamp (``-o s@TS``);
offsets come from ``kcat -Q`` (-2 earliest, -1 latest, -3 max timestamp, or a timestamp).
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from compat.scenarios import WAIT_S, ClientDriver, Got, Rec, scenarios_for

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
DELIVERED = re.compile(r"Message delivered to partition (\d+) \(offset (-?\d+)\)")
pytestmark = pytest.mark.skipif(KCAT is None, reason="kcat is not installed (make system-deps)")


def kcat(*args: str, stdin: bytes | None = None, stderr: list | None = None) -> str:
    """Run kcat; its stdout (stderr appended to ``stderr`` when given)."""
    result = subprocess.run([KCAT or "kcat", *args], input=stdin, capture_output=True,
                            timeout=WAIT_S + 10)
    assert result.returncode == 0, (f"kcat {' '.join(args)} exited {result.returncode}\n"
                                    f"{result.stderr.decode(errors='replace')[-2000:]}")
    if stderr is not None:
        stderr.append(result.stderr.decode(errors="replace"))
    return result.stdout.decode()


class KcatDriver(ClientDriver):
    name = "kcat"
    sets_timestamps = False
    lists_max_timestamp = True

    def _base(self, mode: str) -> list[str]:
        return [mode, "-b", self.bootstrap, "-m", "10", "-q"]

    def produce(self, topic: str, recs: list[Rec], *, acks, compression: str,
                idempotent: bool = False) -> list[int | None]:
        groups: dict[tuple, list[int]] = {}
        for index, r in enumerate(recs):
            groups.setdefault((r.partition, r.headers), []).append(index)
        offsets: list[int | None] = [None] * len(recs)
        for (partition, headers), indexes in groups.items():
            header_args = [arg for k, v in headers for arg in ("-H", f"{k}={v.decode()}")]
            lines = b"".join((recs[i].key + b"\t" if recs[i].key is not None else b"")
                             + recs[i].value + b"\n" for i in indexes)
            stderr: list[str] = []
            kcat("-P", "-b", self.bootstrap, "-m", "10", "-v", "-v", "-v", "-t", topic,
                 "-p", str(partition), "-K", "\t", "-z", compression, "-X", f"acks={acks}",
                 "-X", "linger.ms=5", "-X", f"enable.idempotence={str(idempotent).lower()}",
                 *header_args, stdin=lines, stderr=stderr)
            delivered = DELIVERED.findall(stderr[0])
            assert len(delivered) == len(indexes), \
                f"{len(delivered)} delivery reports:\n{stderr[0]}"
            assert {int(p) for p, _ in delivered} == {partition}
            for i, (_, offset) in zip(indexes, delivered):
                offsets[i] = int(offset) if int(offset) >= 0 else None
        return offsets

    def _consume(self, topic: str, partition: int, start: str, count: int) -> list[Got]:
        out = kcat(*self._base("-C"), "-t", topic, "-p", str(partition), "-o", start,
                   "-c", str(count), "-e", "-J")
        got = []
        for line in out.splitlines():
            msg = json.loads(line)
            raw_headers = msg.get("headers") or []
            headers = tuple((raw_headers[i], raw_headers[i + 1].encode())
                            for i in range(0, len(raw_headers), 2))
            key = None if msg["key"] is None else msg["key"].encode()
            value = None if msg["payload"] is None else msg["payload"].encode()
            got.append(Got(msg["partition"], msg["offset"], key, value, msg["ts"], headers))
        return got

    def consume(self, topic: str, partition: int, offset: int, count: int) -> list[Got]:
        return self._consume(topic, partition, str(offset), count)

    def consume_from_time(self, topic: str, partition: int, timestamp_ms: int,
                          count: int) -> list[Got]:
        return self._consume(topic, partition, f"s@{timestamp_ms}", count)

    def _query(self, topic: str, partition: int, timestamp: int) -> int:
        """``kcat -Q`` (offsets_for_times); -1 and -2 ask for latest and earliest."""
        out = kcat("-Q", "-b", self.bootstrap, "-m", "10", "-J",
                   "-t", f"{topic}:{partition}:{timestamp}")
        answer = json.loads(out)
        entry = answer[topic][str(partition)] if topic in answer else answer
        assert "error" not in entry, f"kcat -Q {topic}:{partition}:{timestamp}: {entry}"
        return entry["offset"]

    def earliest_offset(self, topic: str, partition: int) -> int:
        return self._query(topic, partition, -2)

    def latest_offset(self, topic: str, partition: int) -> int:
        return self._query(topic, partition, -1)

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        offset = self._query(topic, partition, timestamp_ms)
        return None if offset < 0 else offset

    def max_timestamp(self, topic: str, partition: int) -> tuple[int, int | None]:
        return self._query(topic, partition, -3), None  # kcat -Q prints no timestamp

    def _metadata(self, topic: str | None = None) -> dict:
        args = ["-L", "-b", self.bootstrap, "-m", "10", "-J"] + (["-t", topic] if topic else [])
        return json.loads(kcat(*args))

    def topic_partitions(self, topic: str) -> int:
        [entry] = [t for t in self._metadata(topic)["topics"] if t["topic"] == topic]
        return len(entry["partitions"])

    def brokers(self) -> list[tuple[int, str, int]]:
        brokers = []
        for b in self._metadata()["brokers"]:
            host, _, port = b["name"].rpartition(":")
            brokers.append((b["id"], host, int(port)))
        return brokers


@pytest.mark.parametrize("scenario", scenarios_for(KcatDriver), ids=str)
def test_kcat(scenario, compat_env):
    scenario(KcatDriver(compat_env.bootstrap), compat_env)


def test_kcat_list_shows_broker_and_topic(compat_env):
    """Plain ``kcat -L`` (text, as people run it) lists the broker and the topic."""
    topic = compat_env.new_topic(3)
    out = kcat("-L", "-b", compat_env.bootstrap, "-m", "10")
    assert f"broker {compat_env.node_id} at {compat_env.bootstrap}" in out, out
    assert f'topic "{topic}" with 3 partitions' in out, out

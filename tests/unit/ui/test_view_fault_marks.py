"""The replication view's fault events: ``FaultReader`` follows the JSON-lines file
``raftwood dev`` appends to (complete lines only, bad lines skipped, a truncated or
missing file is no faults) and ``ReplicationFeed`` hands them out with its snapshots."""
from __future__ import annotations

import asyncio
import json

from broker.ui.faults import FAULT, FIRST_READ_BYTES, FaultReader, fault_event
from broker.ui.feed import ReplicationFeed


def _line(action: str, broker: int, ts: int = 1_000, by: str = "command") -> str:
    return json.dumps({"ts": ts, "action": action, "broker": broker, "pid": 7, "by": by}) + "\n"


def test_complete_lines_become_fault_events_once(tmp_path):
    path = tmp_path / "faults.jsonl"
    reader = FaultReader(path)
    assert reader.new_events() == [], "no file yet: no faults"
    path.write_text(_line("kill", 2) + "not json\n" + _line("jump", 1) + '{"action": "pause"')
    events = reader.new_events()
    assert [(e["kind"], e["action"], e["broker"], e["topic"]) for e in events] == [
        (FAULT, "kill", 2, None)]
    assert events[0]["text"] == "fault: kill -9 broker 2"
    with open(path, "a") as file:   # the half-written line is finished
        file.write(', "broker": 1, "ts": 5, "by": "key"}\n')
    (event,) = reader.new_events()
    assert (event["action"], event["broker"], event["ts"]) == ("pause", 1, 5)
    assert event["text"].endswith("(key)")
    assert reader.new_events() == []


def test_a_file_started_again_is_read_from_its_start(tmp_path):
    path = tmp_path / "faults.jsonl"
    path.write_text(_line("kill", 1) + _line("restart", 1))
    reader = FaultReader(path)
    assert len(reader.new_events()) == 2
    path.write_text(_line("pause", 3))
    assert [e["action"] for e in reader.new_events()] == ["pause"]


def test_a_late_first_read_takes_only_the_end_of_a_long_file(tmp_path):
    path = tmp_path / "faults.jsonl"
    line = _line("resume", 2)
    path.write_text(line * (2 * FIRST_READ_BYTES // len(line)))
    events = FaultReader(path).new_events()
    assert 0 < len(events) <= FIRST_READ_BYTES // len(line)


def test_fault_event_refuses_what_is_not_a_fault():
    assert fault_event([]) is None
    assert fault_event({"action": "kill", "broker": "2", "ts": 1}) is None
    assert fault_event({"action": "kill", "broker": 2}) is None


def test_the_feed_publishes_faults_with_the_next_snapshot(tmp_path):
    path = tmp_path / "faults.jsonl"
    path.write_text(_line("kill", 2))

    async def collect() -> dict:
        return {"ts": 1, "brokers": [], "partitions": []}

    async def scenario():
        feed = ReplicationFeed(collect, interval_s=0.01, faults=FaultReader(path))
        first = feed.publish(await collect())
        with open(path, "a") as file:
            file.write(_line("restart", 2))
        second = feed.publish(await collect())
        return first, second, list(feed.events)

    first, second, kept = asyncio.run(scenario())
    assert [e["action"] for e in first] == ["kill"]
    assert [e["action"] for e in second] == ["restart"]
    assert [(e["action"], e["seq"]) for e in kept] == [("kill", 1), ("restart", 2)]

"""log.format=json on a real broker: every line it writes is one JSON object, and a
partition's state changes carry their fields (partition, leader epoch, ISR, reason)."""
from __future__ import annotations

import json

from broker.testing import KafkaConnection


def test_a_broker_logs_json_lines_with_state_change_fields(raftwood_broker_factory):
    broker = raftwood_broker_factory(**{"log.format": "json"})
    with KafkaConnection(broker.bootstrap) as conn:
        assert conn.create_topic("logged", 1) == 0
    entries = []
    for line in broker.log_path.read_text().splitlines():
        if line.startswith("### raftwood-testing"):  # the harness's own marker line
            continue
        entries.append(json.loads(line))
    assert entries and all({"ts", "level", "logger", "message"} <= set(e) for e in entries)
    became = [e for e in entries if e.get("reason") == "became-leader"
              and e.get("partition") == "logged-0"]
    assert became, [e["message"] for e in entries][-10:]
    assert became[-1]["leader_epoch"] >= 0 and became[-1]["isr"] == [broker.node_id]

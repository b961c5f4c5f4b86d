"""``raftwood groups list|describe`` against a real broker with a live kafka-python group."""
from __future__ import annotations

import subprocess
import sys
import time

from kafka import KafkaConsumer, KafkaProducer

from tests.conftest import ROOT, create_topic

WAIT_S = 30.0


def raftwood(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "broker.cli", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=60)


def test_groups_list_and_describe_show_members_committed_offsets_and_lag(raftwood_broker_factory):
    broker = raftwood_broker_factory(group_initial_rebalance_delay_ms=100)
    create_topic(broker.bootstrap, "cli-topic", partitions=2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(10):
        producer.send("cli-topic", b"x", partition=i % 2)
    producer.flush(timeout=WAIT_S)
    consumer = KafkaConsumer("cli-topic", bootstrap_servers=broker.bootstrap, group_id="cli-group",
                             client_id="cli-test-client", auto_offset_reset="earliest",
                             enable_auto_commit=False)
    try:
        got = 0
        deadline = time.monotonic() + WAIT_S
        while got < 10 and time.monotonic() < deadline:
            got += sum(len(v) for v in consumer.poll(timeout_ms=500).values())
        assert got == 10
        consumer.commit()
        for i in range(4):  # lag 2 on each partition
            producer.send("cli-topic", b"y", partition=i % 2)
        producer.flush(timeout=WAIT_S)

        listed = raftwood("groups", "list", "--bootstrap-server", broker.bootstrap)
        assert listed.returncode == 0, listed.stderr
        rows = [line.split() for line in listed.stdout.splitlines()]
        assert ["cli-group", "Stable", "consumer", "1"] in rows

        described = raftwood("groups", "describe", "cli-group", "--bootstrap-server",
                             broker.bootstrap)
        assert described.returncode == 0, described.stderr
        lines = [line.split() for line in described.stdout.splitlines()]
        assert lines[0][:4] == ["group:", "cli-group", "state:", "Stable"]
        rows = {tuple(row[:2]): row for row in lines if row and row[0] == "cli-topic"}
        member = next(row for row in lines if row and row[0].startswith("cli-test-client-"))
        for partition in ("0", "1"):
            row = rows[("cli-topic", partition)]
            assert row[2:5] == ["5", "7", "2"]  # committed, log end, lag
            assert row[5] == member[0] and row[6:8] == ["/127.0.0.1", "cli-test-client"]
        assert member[-1] == "cli-topic:0,1"
    finally:
        consumer.close(autocommit=False)
        producer.close()

    after = raftwood("groups", "describe", "cli-group", "--bootstrap-server", broker.bootstrap)
    assert after.returncode == 0, after.stderr
    assert after.stdout.split()[3] == "Empty"
    missing = raftwood("groups", "describe", "no-such-group", "--bootstrap-server",
                       broker.bootstrap)
    assert missing.returncode == 1 and "GROUP_ID_NOT_FOUND" in missing.stderr

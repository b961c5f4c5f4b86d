"""Isolating a broker of ``raftwood dev --faults-network`` (issue #32): ``raftwood dev
isolate N`` / ``heal`` and the keys ``i`` N / ``h`` cut a real dev broker from the other
brokers and from clients through the loopback proxy and heal it; the partition it led
gets a new leader and a shrunk ISR, heal brings it back into the ISR, and every cut and
heal is recorded where the replication view serves it.

One two-broker ``raftwood dev --faults-network --voters 1`` for the module (broker 1 the
only metadata voter, so the controller stays while broker 2 is cut off), its stdin a
pseudo terminal so its keys are live.  Every wait is bounded; everything started is
stopped.
"""
from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from broker.cli.client import answers_api_versions, fetch_statuses
from broker.cli.dev_network import REAL_KAFKA_OFFSET, REAL_RAFT_OFFSET
from tests.integration.dev_keyboard import KeyedDevRun
from tests.integration.dev_keyboard import first_feed_message as _first_feed_message
from tests.integration.dev_keyboard import recorded as _recorded
from tests.integration.dev_keyboard import row as _row
from tests.integration.test_cli import START_TIMEOUT_S, ports_free, raftwood

pytestmark = pytest.mark.slow

ACTION_TIMEOUT_S = START_TIMEOUT_S + 30
PARTITION_TIMEOUT_S = 90.0    # fencing takes broker.session.timeout.ms (9 s) when idle
TOPIC = "isolated-leader"


def _free_block() -> int:
    """A port P with every port of a two-broker ``dev --faults-network`` free a moment
    ago: the proxy's P.., P+100.., the metrics P+300.., the brokers' P+400.., P+500.."""
    for _ in range(200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            base = sock.getsockname()[1]
        if base + REAL_RAFT_OFFSET + 2 > 65535:
            continue
        if ports_free([base + offset + i for offset in (0, 100, 300, REAL_KAFKA_OFFSET,
                                                         REAL_RAFT_OFFSET) for i in (0, 1)]):
            return base
    raise RuntimeError("no free block of ports")


class NetworkDevRun(KeyedDevRun):
    """``raftwood dev --brokers 2 --voters 1 --faults-network`` with a pseudo terminal
    as stdin: ``press`` types keys into it."""

    def __init__(self, tmp_path: Path):
        super().__init__(tmp_path, _free_block(), ("--faults-network",))

    def own_port(self, node_id: int) -> int:
        """Broker ``node_id``'s own Kafka port, behind the proxy."""
        return self.port + REAL_KAFKA_OFFSET + node_id - 1


@pytest.fixture(scope="module")
def dev(tmp_path_factory):
    run = NetworkDevRun(tmp_path_factory.mktemp("dev-isolate"))
    try:
        match = run.wait_for_line(r"^bootstrap servers: (\S+)", START_TIMEOUT_S * 2 + 10)
        assert match.group(1) == f"127.0.0.1:{run.port},127.0.0.1:{run.port + 1}", \
            "the proxy serves the ports a plain dev would"
        run.wait_for_line(r"^keys: 1-2 restart that broker, .*, i1-2 isolate, h heal", 30)
        _create_topic_led_by_2(run)
        yield run
    finally:
        run.close()


def _create_topic_led_by_2(dev: NetworkDevRun) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=dev.bootstrap, request_timeout_ms=30_000)
    try:
        admin.create_topics([NewTopic(TOPIC, -1, -1, replica_assignments={0: [2, 1]})])
    finally:
        admin.close()
    _wait_partition(dev, lambda p: p["leader"] == 2 and sorted(p["isr"]) == [1, 2],
                    "broker 2 leading with both in sync")


def _partition(dev: NetworkDevRun) -> dict | None:
    """The partition as broker 1 (the controller) sees it, asked on its own port."""
    status = fetch_statuses([("127.0.0.1", dev.own_port(1))], 5.0)[0]
    if not isinstance(status, dict):
        return None
    for topic in status.get("topics") or []:
        if topic["name"] == TOPIC:
            return topic["partitions"][0]
    return None


def _wait_partition(dev: NetworkDevRun, predicate, what: str) -> dict:
    deadline = time.monotonic() + PARTITION_TIMEOUT_S
    state = None
    while time.monotonic() < deadline:
        state = _partition(dev)
        if state is not None and predicate(state):
            return state
        time.sleep(0.5)
    raise AssertionError(f"never {what} within {PARTITION_TIMEOUT_S} s: {state}\n"
                         f"{dev.output()}")


def _answers_through_proxy(dev: NetworkDevRun, node_id: int, timeout_s: float) -> bool:
    return answers_api_versions(("127.0.0.1", dev.port + node_id - 1), timeout_s)


def test_isolating_the_leader_elects_another_and_heal_brings_it_back_in_sync(dev):
    before = _wait_partition(dev, lambda p: p["leader"] == 2 and sorted(p["isr"]) == [1, 2],
                             "broker 2 leading with both in sync")
    isolated = raftwood("dev", "isolate", "2", "--data-dir", str(dev.data_dir),
                        timeout_s=ACTION_TIMEOUT_S)
    assert isolated.returncode == 0, isolated
    assert "broker 2 isolated" in isolated.stdout
    _row(dev, 2, "isolated")
    assert not _answers_through_proxy(dev, 2, 2.0), "clients are cut from broker 2"
    assert answers_api_versions(("127.0.0.1", dev.own_port(2)), 10.0), "it still runs"
    after = _wait_partition(dev, lambda p: p["leader"] == 1 and p["isr"] == [1],
                            "broker 1 leading alone")
    assert after["leader_epoch"] > before["leader_epoch"]
    assert _recorded(dev) == [("isolate", 2, "command")]
    message = _first_feed_message(dev.port + 300)    # broker 1's metrics port
    faults = [e for e in message["events"] if e["kind"] == "fault"]
    assert [(e["action"], e["broker"]) for e in faults] == [("isolate", 2)]
    assert faults[0]["text"] == "fault: isolate (network) broker 2"

    healed = raftwood("dev", "heal", "--data-dir", str(dev.data_dir),
                      timeout_s=ACTION_TIMEOUT_S)
    assert healed.returncode == 0, healed
    assert "1 broker(s) healed" in healed.stdout
    _wait_partition(dev, lambda p: sorted(p["isr"]) == [1, 2], "broker 2 back in the ISR")
    assert _recorded(dev)[-1] == ("heal", 2, "command")
    _row(dev, 2, "up")
    assert _answers_through_proxy(dev, 2, 30.0)


def test_keys_i_and_h_isolate_and_heal(dev):
    dev.press("i2")
    _row(dev, 2, "isolated")
    dev.press("i2")
    dev.wait_for_line(r"^cannot isolate broker 2: broker 2 is isolated already", 30)
    dev.press("h")
    dev.wait_for_line(r"^healed broker\(s\) 2: every link open again", 30)
    _row(dev, 2, "up")
    assert _recorded(dev)[-2:] == [("isolate", 2, "key"), ("heal", 2, "key")]
    nothing = raftwood("dev", "heal", "--data-dir", str(dev.data_dir),
                       timeout_s=ACTION_TIMEOUT_S)
    assert nothing.returncode == 0 and "0 broker(s) healed" in nothing.stdout, nothing
    assert _recorded(dev)[-1] == ("heal", 2, "key"), "healing nothing records nothing"
    _wait_partition(dev, lambda p: sorted(p["isr"]) == [1, 2], "both in sync again")

"""``raftwood dev`` tells the truth about its own processes, restarts a broker on request,
gives new topics safe replication defaults, serves metrics and the replication view, and
spreads leadership again soon after a restart.

Real ``raftwood dev`` subprocesses on free ports (``DevRun`` of test_cli); every wait is
bounded; every process started here is stopped at teardown.
"""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.integration.test_cli import (
    START_TIMEOUT_S,
    DevRun,
    assert_ok,
    cli_env,
    free_port_block,
    process_gone,
    raftwood,
)

BUSY_EXIT_WAIT_S = 60.0    # dev should refuse within ~10 s; the bound allows a slow machine
SPREAD_WAIT_S = 90.0
ROW = r"^\s*{id}\s+127\.0\.0\.1:\d+\s+(\d+)\s+(up|down \(-?\d+\))\s.*\s(\d+)\s*$"


def _dev(tmp_path, brokers: int, **kwargs) -> DevRun:
    run = DevRun(tmp_path, brokers, **kwargs)
    try:
        run.wait_for_line(r"^bootstrap servers: ", START_TIMEOUT_S * brokers + 10)
    except BaseException:
        run.kill_all()
        raise
    return run


def _stop(run: DevRun) -> None:
    if run.process.poll() is None:
        run.interrupt()
    run.kill_all()


def _leaders(bootstrap: str, topic: str) -> dict[int, int]:
    """partition -> leader id per Metadata (kafka-python's admin client)."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        (described,) = admin.describe_topics([topic])
    finally:
        admin.close()
    return {p["partition_index"]: p["leader_id"] for p in described["partitions"]}


# -- ports --------------------------------------------------------------------------------------

def test_dev_on_a_busy_port_names_it_and_exits_non_zero_before_anything_is_ready(tmp_path):
    port = free_port_block(3, raft=True)
    data_dir = tmp_path / "data"
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", port + 1))          # broker 2's Kafka port
        squatter.listen()
        started = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", "broker.cli", "dev", "--brokers", "3", "--port", str(port),
             "--data-dir", str(data_dir)], capture_output=True, text=True,
            timeout=BUSY_EXIT_WAIT_S, env=cli_env(), stdin=subprocess.DEVNULL)
        elapsed = time.monotonic() - started
    assert result.returncode != 0, result
    error_lines = result.stderr.strip().splitlines()
    assert len(error_lines) == 1, result.stderr
    assert f"port {port + 1}" in error_lines[0] and "broker 2" in error_lines[0]
    assert f"pid {os.getpid()}" in error_lines[0], "the owner is named (same user here)"
    assert "--port" in error_lines[0]
    assert "ready" not in result.stdout and "bootstrap servers" not in result.stdout
    assert not list(data_dir.glob("broker-*/broker.log")), "no broker was launched"
    print(f"dev refused a busy port after {elapsed:.1f} s")


@pytest.mark.slow
def test_dev_never_reports_another_clusters_broker_as_its_own(tmp_path):
    """A second dev on the first one's ports refuses them: it never prints ready, the
    bootstrap line or a table built from the other cluster's answers."""
    first = _dev(tmp_path, 1)
    try:
        second = subprocess.run(
            [sys.executable, "-m", "broker.cli", "dev", "--brokers", "1", "--port",
             str(first.port), "--data-dir", str(tmp_path / "other")], capture_output=True,
            text=True, timeout=BUSY_EXIT_WAIT_S, env=cli_env(), stdin=subprocess.DEVNULL)
        assert second.returncode != 0
        (pid,) = first.broker_pids()
        assert f"port {first.port}" in second.stderr and f"pid {pid}" in second.stderr
        assert "bootstrap servers" not in second.stdout and "ID " not in second.stdout
    finally:
        _stop(first)


@pytest.mark.slow
def test_a_broker_that_exits_while_starting_fails_dev_with_the_reason_from_its_log(tmp_path):
    port = free_port_block(1, raft=False)
    result = subprocess.run(
        [sys.executable, "-m", "broker.cli", "dev", "--brokers", "1", "--port", str(port),
         "--data-dir", str(tmp_path / "data"), "--set", "metrics.host=192.0.2.1"],
        capture_output=True, text=True, timeout=START_TIMEOUT_S + 60, env=cli_env(),
        stdin=subprocess.DEVNULL)   # the metrics port cannot bind an address not ours
    assert result.returncode == 1, result
    assert "broker 1 exited with 1 while starting" in result.stderr
    assert "192.0.2.1" in result.stderr, "the end of its log says why"
    assert "bootstrap servers" not in result.stdout and " up " not in result.stdout


# -- one three-broker cluster: defaults, URLs, restart ---------------------------------------

@pytest.fixture(scope="module")
def dev3(tmp_path_factory):
    run = _dev(tmp_path_factory.mktemp("dev3"), 3)
    yield run
    _stop(run)


@pytest.mark.slow
def test_three_broker_dev_gives_new_topics_rf_3_and_min_insync_2(dev3):
    assert any(line.startswith("new topics: replication factor 3, min.insync.replicas 2")
               for line in dev3.lines), dev3.output()
    created = assert_ok(raftwood("topics", "create", "no-rf-given", "--partitions", "2",
                                 "--bootstrap-server", dev3.bootstrap))
    assert "replication factor: 3" in created
    from kafka import KafkaAdminClient, KafkaProducer

    producer = KafkaProducer(bootstrap_servers=dev3.bootstrap, acks="all")
    try:
        producer.send("auto-created", b"x").get(timeout=60)   # auto-creates the topic
    finally:
        producer.close()
    admin = KafkaAdminClient(bootstrap_servers=dev3.bootstrap, request_timeout_ms=10_000)
    try:
        (topic,) = admin.describe_topics(["auto-created"])
    finally:
        admin.close()
    assert {len(p["replica_nodes"]) for p in topic["partitions"]} == {3}
    for node_id in (1, 2, 3):   # a topic without overrides takes min.insync.replicas from here
        configs = _broker_configs(dev3.port + node_id - 1, node_id)
        assert configs["min.insync.replicas"] == "2"
        assert configs["default.replication.factor"] == "3"


def _broker_configs(port: int, node_id: int) -> dict[str, str]:
    """DescribeConfigs of one broker, over the raw wire."""
    from kafka.protocol.admin import DescribeConfigsRequest

    from broker.cli.client import Connection

    request = DescribeConfigsRequest[1]
    with Connection(("127.0.0.1", port)) as conn:
        answer = conn.request(request(resources=[request.DescribeConfigsResource(
            resource_type=4, resource_name=str(node_id), configuration_keys=None)],
            include_synonyms=False))
    (result,) = answer.results
    assert result.error_code == 0, result
    return {c.name: c.value for c in result.configs}


def test_dev_prints_metrics_and_view_urls_that_answer_200(dev3):
    urls = {}
    for name in ("metrics", "replication view"):
        pattern = rf"^{name}: (http://127\.0\.0\.1:\d+/\S+)"
        match = next((m for line in dev3.lines for m in [re.match(pattern, line)] if m), None)
        urls[name] = (match or dev3.wait_for_line(pattern, 30)).group(1)
    assert urls["metrics"].endswith("/metrics") and urls["replication view"].endswith(
        "/replication")
    for url in urls.values():
        with urllib.request.urlopen(url, timeout=20) as answer:
            assert answer.status == 200


@pytest.mark.slow
def test_a_killed_dev_broker_comes_back_with_dev_restart(dev3):
    old_pid = dev3.broker_pids()[1]
    os.kill(old_pid, signal.SIGKILL)
    dev3.wait_for_line(r"^broker 2 exited with -9", 30)
    dev3.wait_for_line(ROW.format(id=2).replace(r"(up|down \(-?\d+\))", r"down \(-9\)"), 30)
    assert "raftwood dev restart N" in "\n".join(dev3.lines), "the footer shows how"
    result = raftwood("dev", "restart", "2", "--data-dir", str(dev3.data_dir),
                      timeout_s=START_TIMEOUT_S + 30)
    assert result.returncode == 0, result
    new_pid = int(re.search(r"broker 2 restarted \(pid (\d+)\)", result.stdout).group(1))
    assert new_pid != old_pid
    deadline = time.monotonic() + 60
    while True:
        match = dev3.wait_for_line(ROW.format(id=2), max(1.0, deadline - time.monotonic()))
        if (int(match.group(1)), match.group(2), match.group(3)) == (new_pid, "up", "1"):
            break
    assert dev3.interrupt() == 0, dev3.output()
    assert process_gone(new_pid), "Ctrl-C stops a restarted broker too"


def test_dev_restart_without_a_running_dev_is_one_clear_line(tmp_path):
    result = raftwood("dev", "restart", "1", "--data-dir", str(tmp_path / "none"))
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0
    assert "no raftwood dev is running" in result.stderr


# -- leadership after a restart of the whole dev cluster --------------------------------------

@pytest.mark.slow
def test_leaders_are_spread_soon_after_the_whole_dev_cluster_restarts(tmp_path):
    first = _dev(tmp_path, 3, name="first")
    try:
        assert_ok(raftwood("topics", "create", "spread", "--partitions", "6",
                           "--bootstrap-server", first.bootstrap))
        assert first.interrupt() == 0, first.output()
    finally:
        _stop(first)
    again = _dev(tmp_path, 3, port=first.port, data_dir=first.data_dir, name="again")
    try:
        deadline = time.monotonic() + SPREAD_WAIT_S
        while True:
            leaders = _leaders(again.bootstrap, "spread")
            if set(leaders.values()) == {1, 2, 3}:
                break
            assert time.monotonic() < deadline, f"leaders still {leaders}\n{again.output()}"
            time.sleep(1.0)
    finally:
        _stop(again)

"""``raftwood produce`` and ``raftwood consume`` as a user runs them: subprocesses of the
installed command line against a real broker.

One broker serves the module (the missing-topic test has its own, without auto-creation).

Invariants: every line given to ``produce`` comes back from ``consume --from-beginning``
in order (one partition), keys split at ``--key-separator`` come back with
``--print-key``; a group's committed offsets make a second ``consume --group`` print only
what was written since; no broker at the address, or a topic that does not exist, is one
line on standard error and exit status 1, well before the request timeout.
"""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.testing import BrokerProcess

ROOT = Path(__file__).resolve().parents[2]
COMMAND_TIMEOUT_S = 90


def raftwood(*argv: str, stdin: str = "") -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, "-m", "broker.cli", *argv], input=stdin,
                          capture_output=True, text=True, env=env, timeout=COMMAND_TIMEOUT_S,
                          cwd=ROOT)


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory) -> Iterator[str]:
    """One broker for the module (each test has topics of its own), its first group
    rebalance not delayed: ``consume --group`` joins an Empty group, which the default
    ``group.initial.rebalance.delay.ms`` holds 3 s each time."""
    home = tmp_path_factory.mktemp("console")
    broker = BrokerProcess(home / "data", log_path=home / "broker.log",
                           extra_settings={"group.initial.rebalance.delay.ms": "0"}).start()
    yield broker.bootstrap
    assert broker.stop() == 0, broker.log_tail()


@pytest.mark.slow
def test_lines_produced_come_back_in_order(bootstrap):
    lines = [f"line {i}" for i in range(25)]
    made = raftwood("topics", "create", "console", "--partitions", "1",
                    "--bootstrap-server", bootstrap)
    assert made.returncode == 0, made.stderr
    sent = raftwood("produce", "console", "--bootstrap-server", bootstrap,
                    stdin="\n".join(lines) + "\n")
    assert sent.returncode == 0, sent.stderr
    assert "25 records written to console" in sent.stderr
    read = raftwood("consume", "console", "--from-beginning", "--max-messages", "25",
                    "--timeout-ms", "20000", "--bootstrap-server", bootstrap)
    assert read.returncode == 0, read.stderr
    assert read.stdout.splitlines() == lines


def test_keys_split_at_the_separator_and_printed_back(bootstrap):
    sent = raftwood("produce", "keyed", "--key-separator", ":", "--partition", "0",
                    "--bootstrap-server", bootstrap, stdin="k1:v1\nk2:v:2\nnokey\n")
    assert sent.returncode == 0, sent.stderr
    read = raftwood("consume", "keyed", "--from-beginning", "--print-key", "--max-messages",
                    "3", "--timeout-ms", "20000", "--bootstrap-server", bootstrap)
    assert read.returncode == 0, read.stderr
    assert read.stdout.splitlines() == ["k1\tv1", "k2\tv:2", "\tnokey"]


@pytest.mark.slow
def test_a_group_resumes_from_its_committed_offsets(bootstrap):
    first = raftwood("produce", "grouped", "--partition", "0", "--bootstrap-server", bootstrap,
                     stdin="a\nb\n")
    assert first.returncode == 0, first.stderr
    read = raftwood("consume", "grouped", "--group", "g1", "--from-beginning",
                    "--max-messages", "2", "--timeout-ms", "30000",
                    "--bootstrap-server", bootstrap)
    assert read.stdout.splitlines() == ["a", "b"], read.stderr
    second = raftwood("produce", "grouped", "--partition", "0", "--bootstrap-server",
                      bootstrap, stdin="c\n")
    assert second.returncode == 0, second.stderr
    again = raftwood("consume", "grouped", "--group", "g1", "--from-beginning",
                     "--max-messages", "1", "--timeout-ms", "30000",
                     "--bootstrap-server", bootstrap)
    assert again.stdout.splitlines() == ["c"], again.stderr


def test_no_broker_at_the_address_is_one_line(free_port):
    result = raftwood("produce", "t", "--bootstrap-server", f"127.0.0.1:{free_port}",
                      stdin="x\n")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"raftwood: no broker answers at 127.0.0.1:{free_port}: is a cluster running "
        f"there? `make run` starts one on 127.0.0.1:9092"]


@pytest.mark.slow
def test_a_missing_topic_is_one_line(raftwood_broker_factory):
    broker = raftwood_broker_factory(auto_create_topics_enable="false")
    result = raftwood("consume", "absent", "--timeout", "3", "--timeout-ms", "1000",
                      "--bootstrap-server", broker.bootstrap)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "topic absent does not exist" in lines[0], result.stderr


@pytest.fixture
def free_port() -> int:
    from broker.testing import free_ports
    return free_ports(1)[0]

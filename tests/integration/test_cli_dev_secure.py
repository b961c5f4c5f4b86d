"""``raftwood dev --secure``: a 3-broker cluster with SASL_SSL + SCRAM-SHA-512 on
self-made certificates and an encrypted quorum; the settings it prints are enough for
confluent-kafka to produce and consume, and its client.properties for the ``raftwood``
commands (``--command-config``).  A wrong password is refused."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.integration.test_cli import START_TIMEOUT_S, DevRun, cli_env, free_port_block, ports_free

pytest.importorskip("cryptography", reason="dev --secure makes its certificates with it")
BROKERS = 3


class SecureDevRun(DevRun):
    def __init__(self, tmp_path, brokers: int):
        self._secure = True
        super().__init__(tmp_path, brokers)


@pytest.fixture
def secure_dev(tmp_path, monkeypatch):
    real_popen = subprocess.Popen

    def popen_with_secure(args, *rest, **kwargs):
        return real_popen([*args, "--secure"], *rest, **kwargs)

    port = next(p for p in (free_port_block(BROKERS, raft=True) for _ in range(50))
                if ports_free(range(p + 200, p + 200 + BROKERS)))
    monkeypatch.setattr("tests.integration.test_cli.free_port_block", lambda *a, **k: port)
    monkeypatch.setattr(subprocess, "Popen", popen_with_secure)
    run = DevRun(tmp_path, BROKERS)
    monkeypatch.setattr(subprocess, "Popen", real_popen)
    try:
        run.wait_for_line(r"^bootstrap servers: ", START_TIMEOUT_S * BROKERS + 10)
        yield run
    finally:
        if run.process.poll() is None:
            run.interrupt()
        run.kill_all()


def printed_settings(run: DevRun) -> dict[str, str]:
    start = run.lines.index(next(line for line in run.lines if line.startswith("librdkafka")))
    settings = {}
    for line in run.lines[start + 1:]:
        match = re.match(r"^  ([a-z.]+)=(.*)$", line)
        if not match:
            break
        settings[match.group(1)] = match.group(2)
    return settings


@pytest.mark.slow
def test_dev_secure_prints_settings_that_work_for_clients_and_the_cli(secure_dev):
    from confluent_kafka import Consumer, Producer

    settings = printed_settings(secure_dev)
    assert settings["security.protocol"] == "SASL_SSL"
    assert all(int(a.rsplit(":", 1)[1]) >= secure_dev.port + 200
               for a in settings["bootstrap.servers"].split(","))
    properties = secure_dev.data_dir / "client.properties"
    created = subprocess.run(
        [sys.executable, "-m", "broker.cli", "topics", "create", "secure-dev", "--partitions",
         "1", "--replication-factor", "3", "--bootstrap-server",
         settings["bootstrap.servers"].split(",")[0], "--command-config", str(properties)],
        capture_output=True, text=True, timeout=60, env=cli_env())
    assert created.returncode == 0, created.stderr
    producer = Producer({**settings, "acks": "all"})
    for i in range(5):
        producer.produce("secure-dev", value=f"v{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({**settings, "group.id": "secure-dev", "auto.offset.reset": "earliest"})
    consumer.subscribe(["secure-dev"])
    values = []
    for _ in range(60):
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            values.append(msg.value())
        if len(values) == 5:
            break
    consumer.close()
    assert values == [f"v{i}".encode() for i in range(5)]

    wrong = dict(settings, **{"sasl.password": "not-the-password"})
    refused = Producer({**wrong, "message.timeout.ms": 3000})
    errors = []
    refused.produce("secure-dev", value=b"x", on_delivery=lambda err, msg: errors.append(err))
    refused.flush(10)
    assert errors and errors[0] is not None

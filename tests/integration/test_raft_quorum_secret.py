"""``raftwood start`` and the quorum secret: a quorum with a Raft address beyond loopback
and no ``controller.quorum.password`` does not start (one line naming the setting,
exit 2); with ``controller.quorum.allow.unauthenticated=true`` it starts and warns;
loopback only, it starts and says so at INFO.  ``raftwood dev`` makes a secret once
and reuses it.
"""
from __future__ import annotations

import signal
import subprocess
import sys
import time

from broker.testing import free_ports
from tests.integration.test_cli import cli_env

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0


def start_command(tmp_path, voters: str, *extra: str) -> list[str]:
    kafka_port = free_ports(1)[0]
    return [sys.executable, "-m", "broker.cli", "start", "--set", "node.id=1",
            "--set", f"listeners=PLAINTEXT://127.0.0.1:{kafka_port}",
            "--set", f"log.dirs={tmp_path / 'data'}",
            "--set", f"controller.quorum.voters={voters}", *[a for x in extra
                                                              for a in ("--set", x)]]


def test_start_refuses_a_quorum_beyond_loopback_without_secret(tmp_path):
    raft_port = free_ports(1)[0]
    result = subprocess.run(start_command(tmp_path, f"1@127.0.0.1:{raft_port},2@192.0.2.7:9093"),
                            capture_output=True, text=True, timeout=START_TIMEOUT_S,
                            env=cli_env(), stdin=subprocess.DEVNULL)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("raftwood: controller.quorum.password (or "
                               "controller.quorum.password.file) is required")
    assert "192.0.2.7:9093" in lines[0]
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())


def run_until_line(command: list[str], wanted: str) -> str:
    """Start ``command``, read its stderr until ``wanted`` shows (bounded), stop it."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL, text=True, env=cli_env(),
                               start_new_session=True)
    seen = []
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            line = process.stderr.readline()
            if not line:
                break
            seen.append(line)
            if wanted in line:
                return line
        raise AssertionError(f"no line with {wanted!r}:\n{''.join(seen)[-4000:]}")
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def test_the_opt_out_starts_with_a_loud_warning(tmp_path):
    raft_port = free_ports(1)[0]
    line = run_until_line(start_command(tmp_path, f"1@127.0.0.1:{raft_port},2@192.0.2.7:9093",
                                        "controller.quorum.allow.unauthenticated=true"),
                          "NO controller.quorum.password")
    assert "WARNING" in line and "192.0.2.7:9093" in line


def test_a_loopback_quorum_starts_without_secret_and_says_so(tmp_path):
    ports = free_ports(2)
    line = run_until_line(start_command(tmp_path, f"1@127.0.0.1:{ports[0]},"
                                                  f"2@127.0.0.1:{ports[1]}"),
                          "no controller.quorum.password")
    assert "INFO" in line and "loopback only" in line


def test_dev_makes_its_quorum_secret_once_and_keeps_it_private(tmp_path):
    from broker.cli import dev

    layout = dev.plan_cluster(3, 9092, tmp_path / "data")
    first = dev.quorum_secret(tmp_path / "data")
    text = first.read_text()
    assert first == tmp_path / "data" / "quorum.secret" and len(text.strip()) >= 24
    assert first.stat().st_mode & 0o077 == 0
    first.chmod(0o644)
    again = dev.quorum_secret(tmp_path / "data")
    assert again.read_text() == text, "a restart reuses the secret"
    assert again.stat().st_mode & 0o077 == 0
    settings = dev.broker_settings(layout, layout[0], {}, secret_file=again)
    assert settings["controller.quorum.password.file"] == str(again)
    assert text.strip() not in " ".join(settings.values())
    mine = dev.broker_settings(layout, layout[0], {"controller.quorum.password": "own"},
                               secret_file=again)
    assert "controller.quorum.password.file" not in mine

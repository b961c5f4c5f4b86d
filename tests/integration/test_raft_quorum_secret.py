"""``raftwood start`` and the quorum secret: a quorum (``controller.quorum.voters`` set)
without ``controller.quorum.password`` does not start, on loopback or beyond (one line
naming the setting and how to make a secret, exit 2); with
``controller.quorum.allow.unauthenticated=true`` it starts and warns; with a secret file
it starts and says its traffic is authenticated.  ``raftwood dev`` makes a secret once
and reuses it.
"""
from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

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


@pytest.mark.parametrize("second", ["127.0.0.1", "192.0.2.7"])
def test_start_refuses_a_quorum_without_secret_even_on_loopback(tmp_path, second):
    raft_ports = free_ports(2)
    voters = f"1@127.0.0.1:{raft_ports[0]},2@{second}:{raft_ports[1]}"
    result = subprocess.run(start_command(tmp_path, voters),
                            capture_output=True, text=True, timeout=START_TIMEOUT_S,
                            env=cli_env(), stdin=subprocess.DEVNULL)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("raftwood: controller.quorum.password (or "
                               "controller.quorum.password.file) is required")
    assert "--set controller.quorum.password.file=quorum.secret" in lines[0]
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
    raft_ports = free_ports(2)
    voters = f"1@127.0.0.1:{raft_ports[0]},2@127.0.0.1:{raft_ports[1]}"
    line = run_until_line(start_command(tmp_path, voters,
                                        "controller.quorum.allow.unauthenticated=true"),
                          "NO controller.quorum.password")
    assert "WARNING" in line and f"127.0.0.1:{raft_ports[1]}" in line


def test_a_quorum_with_a_secret_file_starts_authenticated(tmp_path):
    pytest.importorskip("cryptography")
    secret = tmp_path / "quorum.secret"
    secret.write_text("correct-horse-battery-staple\n")
    secret.chmod(0o600)
    ports = free_ports(2)
    line = run_until_line(start_command(tmp_path, f"1@127.0.0.1:{ports[0]},"
                                                  f"2@127.0.0.1:{ports[1]}",
                                        f"controller.quorum.password.file={secret}"),
                          "metadata quorum:")
    assert "INFO" in line and "encrypted and authenticated" in line


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

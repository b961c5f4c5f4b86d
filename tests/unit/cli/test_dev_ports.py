"""raftwood dev's plan checks: busy ports named with their owner, the replication
defaults, the restart request files (``ports.py``, ``dev_layout.py``, ``dev_control.py``)."""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading

import pytest

from broker.cli import dev_control
from broker.cli.dev_console import footer
from broker.cli.dev_layout import (
    DevError,
    check_ports_free,
    plan_cluster,
    port_uses,
    replication_defaults,
    replication_line,
)
from broker.cli.ports import PortUse, busy_message, busy_ports, port_is_free, port_owner


@pytest.fixture
def listener():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_a_listening_port_is_busy_and_its_owner_is_this_process(listener):
    assert not port_is_free("127.0.0.1", listener)
    busy = busy_ports("127.0.0.1", [PortUse(listener, "Kafka listener of broker 1")])
    assert busy == [PortUse(listener, "Kafka listener of broker 1")]
    owner = port_owner(listener)
    assert owner is not None and owner[0] == os.getpid()
    message = busy_message("127.0.0.1", busy, "pick another --port")
    assert "\n" not in message
    assert f"port {listener} on 127.0.0.1 (Kafka listener of broker 1)" in message
    assert f"pid {os.getpid()}" in message and message.endswith("pick another --port")


def test_a_released_port_is_free_again(listener):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert port_is_free("127.0.0.1", port)
    assert port_owner(port) is None


def test_every_port_of_a_dev_broker_is_checked(listener, tmp_path):
    layout = plan_cluster(3, 9092, tmp_path)
    uses = port_uses(layout, layout[1], None, 9392)
    assert [(u.port, u.purpose) for u in uses] == [
        (9093, "Kafka listener of broker 2"), (9094 + 99, "Raft port of broker 2"),
        (9393, "metrics port of broker 2")]
    assert [u.port for u in port_uses(plan_cluster(1, 9092, tmp_path),
                                      plan_cluster(1, 9092, tmp_path)[0])] == [9092]
    taken = plan_cluster(2, listener - 1, tmp_path)   # broker 2's Kafka port is taken
    with pytest.raises(DevError, match=f"port {listener} .*broker 2"):
        check_ports_free(taken, [taken[1]])


@pytest.mark.parametrize("brokers, factor, min_insync", [(1, "1", "1"), (2, "2", "1"),
                                                         (3, "3", "2"), (5, "3", "2")])
def test_new_topics_get_rf_min_n_3_and_min_insync_2_from_3_brokers(brokers, factor,
                                                                   min_insync):
    defaults = replication_defaults(brokers, {})
    assert defaults == {"default.replication.factor": factor,
                        "min.insync.replicas": min_insync}
    assert f"replication factor {factor}, min.insync.replicas {min_insync}" in \
        replication_line(defaults)


def test_a_set_replication_setting_wins_over_the_dev_default():
    assert replication_defaults(3, {"min.insync.replicas": "1"}) == {
        "default.replication.factor": "3"}


def test_the_footer_names_the_keys_only_when_they_work():
    assert footer(3, "./data", keys_on=True).startswith("keys: 1-3 restart that broker")
    assert "raftwood dev restart N --data-dir ./data" in footer(3, "./data", keys_on=False)
    assert "keys" not in footer(3, "./data", keys_on=False)


@contextlib.contextmanager
def stand_in(*args: str):
    """A live process whose argv ends with ``args``, until the block ends."""
    process = subprocess.Popen(
        [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)", *args],
        stdout=subprocess.PIPE, text=True)
    try:
        # Its first line comes after exec: until then /proc/<pid>/cmdline can still be
        # the forking pytest's, or empty (a real dev writes its pid file from its own
        # process).
        assert process.stdout.readline().strip() == "up"
        yield process.pid
    finally:
        process.kill()
        process.wait(10)
        process.stdout.close()


def pid_file(data_dir):
    return dev_control.control_dir(data_dir) / dev_control.PID_FILE


@pytest.fixture
def supervised(tmp_path):
    """``tmp_path`` claimed, its pid file naming a live process whose argv has ``dev``
    (this thread answers for it)."""
    dev_control.claim(tmp_path)
    with stand_in("dev") as pid:
        pid_file(tmp_path).write_text(f"{pid}\n")
        yield tmp_path


def test_a_pid_file_of_a_process_that_is_no_dev_names_no_supervisor(tmp_path):
    # Not this pytest process: its argv holds "dev" when run with ``-k dev``.
    dev_control.claim(tmp_path)
    with stand_in() as pid:                 # alive, but not a dev
        pid_file(tmp_path).write_text(f"{pid}\n")
        assert dev_control.supervisor_pid(tmp_path) is None
    pid_file(tmp_path).write_text(f"{os.getpid()}\n")
    dev_control.release(tmp_path)           # the pid file is this process's: removed
    assert not pid_file(tmp_path).exists()


def test_a_restart_request_is_answered_through_the_control_files(supervised):
    tmp_path = supervised
    assert dev_control.supervisor_pid(tmp_path) is not None
    answered = []

    def supervisor():
        for _ in range(200):
            for node_id, token in dev_control.take_requests(tmp_path):
                dev_control.answer(tmp_path, node_id, token, f"ok {1000 + node_id}")
                answered.append(node_id)
                return
            threading.Event().wait(0.05)

    thread = threading.Thread(target=supervisor)
    thread.start()
    assert dev_control.request_restart(tmp_path, 2, timeout_s=20) == 1002
    thread.join(20)
    assert answered == [2]
    assert not list(dev_control.control_dir(tmp_path).glob("restart-*")), "nothing left over"


def test_a_refused_restart_raises_the_supervisors_reason(supervised):
    tmp_path = supervised

    def refuse():
        for _ in range(200):
            for node_id, token in dev_control.take_requests(tmp_path):
                dev_control.answer(tmp_path, node_id, token, "error no broker 7")
                return
            threading.Event().wait(0.05)

    thread = threading.Thread(target=refuse)
    thread.start()
    with pytest.raises(dev_control.ControlError, match="no broker 7"):
        dev_control.request_restart(tmp_path, 7, timeout_s=20)
    thread.join(20)


def test_without_a_supervisor_a_restart_request_fails_at_once(tmp_path):
    with pytest.raises(dev_control.ControlError, match="no raftwood dev is running"):
        dev_control.request_restart(tmp_path, 1, timeout_s=20)


@pytest.mark.parametrize("argv, prog", [(["dev", "--brokers", "x"], "raftwood dev"),
                                        (["dev", "restart", "x"], "raftwood dev restart")])
def test_a_bad_dev_option_is_one_line_saying_where_help_is(argv, prog, capsys):
    import argparse

    from broker.cli import dev

    parser = argparse.ArgumentParser(prog="raftwood")
    dev.add_command(parser.add_subparsers(dest="command"))
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"{prog}: ")
    assert f"(see {prog} --help)" in err

"""raftwood dev: the port layout, each broker's settings and command line, the live table."""
import io
from pathlib import Path

import pytest

from broker import config as config_module
from broker.cli.dev import (
    DevError,
    StatusPrinter,
    bootstrap_line,
    broker_command,
    broker_settings,
    plan_cluster,
    render_status,
    voters,
)
from broker.cli.main import build_parser


def test_three_brokers_get_consecutive_kafka_ports_and_raft_ports_100_above():
    layout = plan_cluster(3, 9092, "./data")
    assert [(b.node_id, b.port, b.raft_port) for b in layout] == [
        (1, 9092, 9192), (2, 9093, 9193), (3, 9094, 9194)]
    assert [b.data_dir for b in layout] == [Path("data/broker-1"), Path("data/broker-2"),
                                            Path("data/broker-3")]
    assert layout[1].log_path == Path("data/broker-2/broker.log")
    assert bootstrap_line(layout) == \
        "bootstrap servers: 127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094"


def test_raft_port_base_moves_the_quorum_ports_only():
    layout = plan_cluster(2, 20000, "/tmp/x", raft_port_base=31000)
    assert [(b.port, b.raft_port) for b in layout] == [(20000, 31000), (20001, 31001)]
    assert voters(layout) == "1@127.0.0.1:31000,2@127.0.0.1:31001"


def test_overlapping_or_out_of_range_ports_are_refused():
    with pytest.raises(DevError, match="overlap"):
        plan_cluster(3, 9092, "d", raft_port_base=9093)
    with pytest.raises(DevError, match="65535"):
        plan_cluster(3, 65534, "d")
    with pytest.raises(DevError, match="at least 1"):
        plan_cluster(0, 9092, "d")


def test_every_broker_gets_the_same_voters_and_its_own_id_listener_and_dir(tmp_path):
    layout = plan_cluster(3, 9092, "d")
    secret = tmp_path / "quorum.secret"
    secret.write_text("the-dev-secret\n")
    settings = [broker_settings(layout, b, {"num.partitions": "3"}, secret_file=secret)
                for b in layout]
    assert {s["controller.quorum.password.file"] for s in settings} == {str(secret)}
    assert {s["controller.quorum.voters"] for s in settings} == {
        "1@127.0.0.1:9192,2@127.0.0.1:9193,3@127.0.0.1:9194"}
    assert [s["node.id"] for s in settings] == ["1", "2", "3"]
    assert [s["listeners"] for s in settings] == [
        "PLAINTEXT://127.0.0.1:9092", "PLAINTEXT://127.0.0.1:9093", "PLAINTEXT://127.0.0.1:9094"]
    assert [s["log.dirs"] for s in settings] == ["d/broker-1", "d/broker-2", "d/broker-3"]
    assert all(s["num.partitions"] == "3" for s in settings)
    for s in settings:  # the broker's own parser accepts every one
        config = config_module.build(s)
        assert config.listener[1] in (9092, 9093, 9094)
    without_secret = broker_settings(layout, layout[0], {})
    with pytest.raises(config_module.ConfigError, match="controller.quorum.password"):
        config_module.build(without_secret)  # why dev always passes a secret file


def test_voters_n_makes_the_other_brokers_observers():
    layout = plan_cluster(5, 9092, "d")
    settings = [broker_settings(layout, b, {}, voter_count=3) for b in layout]
    assert {s["controller.quorum.voters"] for s in settings} == {
        "1@127.0.0.1:9192,2@127.0.0.1:9193,3@127.0.0.1:9194"}
    assert [s["node.id"] for s in settings] == ["1", "2", "3", "4", "5"]


def test_a_lone_broker_has_no_voters_setting():
    layout = plan_cluster(1, 9092, "d")
    assert voters(layout) == ""
    assert "controller.quorum.voters" not in broker_settings(layout, layout[0], {})


@pytest.mark.parametrize("name", ["node.id", "listeners", "log.dirs", "controller.quorum.voters"])
def test_managed_settings_are_refused_in_set(name):
    layout = plan_cluster(2, 9092, "d")
    with pytest.raises(DevError, match=name):
        broker_settings(layout, layout[0], {name: "x"})


def test_broker_command_runs_broker_cli_start_with_one_set_per_setting():
    argv = broker_command({"node.id": "2", "log.dirs": "d/broker-2"}, python="/py")
    assert argv == ["/py", "-m", "broker.cli", "start", "--set", "node.id=2",
                    "--set", "log.dirs=d/broker-2"]


def test_dev_arguments_and_defaults():
    args = build_parser().parse_args(["dev"])
    assert (args.brokers, args.data_dir, args.port, args.raft_port_base, args.set) == \
        (3, "./data", 9092, None, [])
    args = build_parser().parse_args(["dev", "--brokers", "1", "--data-dir", "/x", "--port",
                                      "1234", "--raft-port-base", "2000", "--set", "a=b",
                                      "--set", "c=d", "--start-timeout", "5"])
    assert (args.brokers, args.data_dir, args.port, args.raft_port_base, args.set,
            args.start_timeout) == (1, "/x", 1234, 2000, ["a=b", "c=d"], 5.0)


def test_dev_refuses_a_bad_setting_before_starting_anything(tmp_path, capsys):
    args = build_parser().parse_args(["dev", "--brokers", "1", "--data-dir", str(tmp_path / "d"),
                                      "--set", "no.such.setting=1"])
    assert args.func(args) == 2
    assert "no.such.setting" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()


def test_dev_refuses_more_voters_than_brokers(tmp_path, capsys):
    args = build_parser().parse_args(["dev", "--brokers", "3", "--voters", "4",
                                      "--data-dir", str(tmp_path / "d")])
    assert args.func(args) == 2
    assert "--voters 4" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()


def test_dev_refuses_a_managed_setting(tmp_path, capsys):
    args = build_parser().parse_args(["dev", "--data-dir", str(tmp_path), "--set", "node.id=4"])
    assert args.func(args) == 2
    assert "node.id" in capsys.readouterr().err


ROWS = [[1, "127.0.0.1:9092", 100, "up", True, "voter", 3, 2, 0, 1],
        [2, "127.0.0.1:9093", 101, "down (-9)", None, None, None, None, None, 0]]


def test_status_table_has_one_row_per_broker():
    lines = render_status(ROWS).splitlines()
    assert lines[0].split() == ["ID", "ADDRESS", "PID", "STATE", "CONTROLLER", "QUORUM",
                                "HOSTED", "LEADERS", "UNDER_REPLICATED", "RESTARTS"]
    assert lines[1].split() == ["1", "127.0.0.1:9092", "100", "up", "yes", "voter", "3", "2",
                                "0", "1"]
    assert lines[2].split()[:5] == ["2", "127.0.0.1:9093", "101", "down", "(-9)"]


def test_without_a_tty_an_unchanged_table_is_reprinted_only_every_10_s():
    out = io.StringIO()
    printer = StatusPrinter(out, is_tty=False)
    assert printer.show("T1", now=0.0)
    assert not printer.show("T1", now=2.0)
    assert not printer.show("T1", now=9.9)
    assert printer.show("T1", now=10.1)
    assert printer.show("T2", now=11.0)      # a change prints at once
    assert "\x1b[" not in out.getvalue()
    assert out.getvalue().count("T1") == 2


def test_on_a_tty_the_table_is_redrawn_in_place():
    out = io.StringIO()
    printer = StatusPrinter(out, is_tty=True)
    assert printer.show("a\nb", now=0.0)
    assert printer.show("a\nb", now=2.0)     # refreshed even when unchanged
    assert "\x1b[3F\x1b[J" in out.getvalue()  # status line + 2 table lines moved over
    printer.forget_drawing()
    before = out.getvalue()
    printer.show("c", now=4.0)
    assert "\x1b[" not in out.getvalue()[len(before):]



def test_each_dev_broker_runs_exactly_the_command_of_its_settings(tmp_path):
    """DevCluster starts its brokers through broker.harness.BrokerProcess: the command
    line must still be ``broker_command`` of the layout's settings, in their order."""
    from broker.cli.dev import DevCluster

    layout = plan_cluster(3, 9092, tmp_path, raft_port_base=9192)
    cluster = DevCluster(layout, {"num.partitions": "3"}, out=io.StringIO())
    assert cluster.commands == [broker_command(s) for s in cluster.settings]
    assert [b.log_path for b in cluster.brokers] == [m.log_path for m in layout]
    assert all(b.log_marker == "raftwood dev" for b in cluster.brokers)

"""``raftwood dev --faults-network``'s plan and keys: the proxy takes the ports of a plain
``dev``, the brokers move behind it and advertise it (Kafka listener and voter entries),
``i`` then N isolates and ``h`` heals, and without the option ``i`` says how to get it."""
from __future__ import annotations

import argparse

import pytest

from broker.cli import dev
from broker.cli.dev_console import HINT, KeyParser, footer
from broker.cli.dev_layout import DevError
from broker.cli.dev_network import ENABLE_HINT, plan_layouts


def _args(tmp_path, **options) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    dev.add_command(parser.add_subparsers())
    argv = ["dev", "--brokers", "3", "--voters", "2", "--port", "40000", "--data-dir",
            str(tmp_path / "data"), "--faults-network"]
    for key, value in options.items():
        argv += [f"--{key}"] + ([] if value is True else [str(value)])
    return parser.parse_args(argv)


def test_the_proxy_takes_the_usual_ports_and_the_brokers_move_behind_it(tmp_path):
    real, public = plan_layouts(3, 40000, tmp_path, None)
    assert [(p.port, p.raft_port) for p in public] == [(40000, 40100), (40001, 40101),
                                                       (40002, 40102)]
    assert [(p.port, p.raft_port) for p in real] == [(40400, 40500), (40401, 40501),
                                                     (40402, 40502)]
    with pytest.raises(DevError, match="clash"):
        plan_layouts(3, 40000, tmp_path, 40400)


def test_each_broker_advertises_its_proxy_and_voters_bind_their_own_raft_port(tmp_path):
    cluster, _ = dev.plan_run(_args(tmp_path))
    first, third = cluster.settings[0], cluster.settings[2]
    assert first["listeners"] == "PLAINTEXT://127.0.0.1:40400"
    assert first["advertised.listeners"] == "PLAINTEXT://127.0.0.1:40000"
    assert first["controller.quorum.voters"] == "1@127.0.0.1:40100,2@127.0.0.1:40101"
    assert first["controller.quorum.bind.address"] == "127.0.0.1:40500"
    assert third["advertised.listeners"] == "PLAINTEXT://127.0.0.1:40002"
    assert "controller.quorum.bind.address" not in third   # an observer
    assert [p.address for p in cluster.public] == [f"127.0.0.1:{40000 + i}" for i in range(3)]
    assert {u.port for u in cluster.network.port_uses()} == {40000, 40001, 40002, 40100,
                                                             40101, 40102}


def test_settings_the_proxy_owns_and_secure_are_refused(tmp_path):
    with pytest.raises(DevError, match="advertised.listeners"):
        dev.plan_run(_args(tmp_path, set="advertised.listeners=PLAINTEXT://x:1"))
    with pytest.raises(DevError, match="--secure"):
        dev.plan_run(_args(tmp_path, secure=True))


def test_keys_i_then_n_isolates_and_h_heals():
    parser = KeyParser(3, network=True)
    assert parser.feed("i2h", 0.0) == [("isolate", 2), ("heal", 0)]
    assert parser.feed("i", 1.0) == []
    assert parser.feed("3", 2.0) == [("isolate", 3)]


def test_without_the_option_i_asks_for_it_at_once():
    assert KeyParser(3).feed("i2", 0.0) == [(HINT, 0), ("restart", 2)]
    assert "--faults-network" in ENABLE_HINT
    assert "i isolate (needs --faults-network)" in footer(3, "./data", keys_on=True)
    with_network = footer(3, "./data", keys_on=True, network=True)
    assert "i1-3 isolate, h heal" in with_network
    assert "isolate N, heal)" in with_network

"""How a ChaosCluster picks its mode (argument, then $RAFTWOOD_CHAOS_MODE, then netns
where namespaces can be built, else proxy) and how the proxy mode plans its brokers:
each advertises its proxy's Kafka port, lists the proxies' Raft ports as the voters and
binds its real Raft port; clients bootstrap through the proxies.  Nothing is started."""
from __future__ import annotations

import pytest

from broker.harness import ChaosCluster, pick_chaos_mode
from broker.harness.chaos import MODE_ENVIRONMENT
from broker.harness.netns import netns_available


def test_the_argument_wins_then_the_environment_then_what_can_run(monkeypatch):
    monkeypatch.setenv(MODE_ENVIRONMENT, "netns")
    assert pick_chaos_mode("proxy") == "proxy"
    assert pick_chaos_mode() == "netns"
    monkeypatch.setenv(MODE_ENVIRONMENT, " Proxy ")
    assert pick_chaos_mode() == "proxy"
    monkeypatch.delenv(MODE_ENVIRONMENT)
    expected = "netns" if netns_available()[0] else "proxy"
    assert pick_chaos_mode() == expected == pick_chaos_mode("auto")
    with pytest.raises(ValueError, match="netns, proxy or auto"):
        pick_chaos_mode("iptables")


def test_a_proxy_cluster_advertises_its_proxies_and_binds_its_real_raft_ports(tmp_path):
    cluster = ChaosCluster(tmp_path, 3, mode="proxy")
    try:
        assert cluster.mode == cluster.chaos_mode == "proxy"
        proxies = cluster.bootstrap.split(",")
        real = [b.bootstrap for b in cluster.brokers]
        assert len(set(proxies + real)) == 6
        voters = dict(v.split("@") for v in cluster.voters.split(","))
        assert sorted(voters) == ["1", "2", "3"]
        for broker, plan, proxy in zip(cluster.brokers, cluster.plans, proxies, strict=True):
            own = broker.extra_settings
            assert own["advertised.listeners"] == f"PLAINTEXT://{proxy}"
            assert own["controller.quorum.voters"] == cluster.voters
            assert own["controller.quorum.bind.address"] == f"127.0.0.1:{plan.raft_port}"
            assert voters[str(plan.node_id)] != f"127.0.0.1:{plan.raft_port}"
    finally:
        cluster.stop_all()


def test_observers_get_no_bind_address_and_advertised_listeners_stay_managed(tmp_path):
    cluster = ChaosCluster(tmp_path / "a", 3, mode="proxy", voters=2)
    try:
        assert [v.split("@")[0] for v in cluster.voters.split(",")] == ["1", "2"]
        assert "controller.quorum.bind.address" not in cluster.broker(3).extra_settings
        assert cluster.broker(3).extra_settings["controller.quorum.voters"] == cluster.voters
    finally:
        cluster.stop_all()
    with pytest.raises(ValueError, match="advertised.listeners"):
        ChaosCluster(tmp_path / "b", 3, mode="proxy",
                     settings={"advertised.listeners": "PLAINTEXT://127.0.0.1:1"})

"""``controller.quorum.password``: three broker processes, two sharing the Raft secret
(one from the setting, one from ``controller.quorum.password.file``) and one with
another.  The two elect a controller and register; the odd one never registers and
never learns of a controller: the quorum cannot hear it, and it cannot hear the quorum.
"""
from __future__ import annotations

import time

import pytest

pytest.importorskip("cryptography", reason="pysyncobj's encryption needs cryptography")

WAIT_S = 60.0
ODD_WATCH_S = 6.0   # several election timeouts


def launch_all(cluster) -> None:
    """Start every broker and wait until each answers (not until each registers: the
    one with another secret never does)."""
    for broker in cluster.brokers:
        broker.launch()
    for broker in cluster.brokers:
        broker.wait_ready(WAIT_S)


def test_a_broker_with_another_quorum_secret_never_joins(raftwood_cluster_factory, tmp_path):
    secret_file = tmp_path / "quorum.secret"
    secret_file.write_text("the-quorum-secret\n")
    cluster = raftwood_cluster_factory(3, start=False, broker_settings={
        1: {"controller.quorum.password": "the-quorum-secret"},
        2: {"controller.quorum.password.file": str(secret_file)},
        3: {"controller.quorum.password": "another-secret"}})
    launch_all(cluster)

    def two_registered_with_a_controller(statuses):
        if sorted(statuses) != [1, 2, 3]:
            return False
        for node_id in (1, 2):
            known = {b["id"]: b for b in statuses[node_id]["brokers"]}
            if statuses[node_id]["controller_id"] not in (1, 2):
                return False
            if any(n not in known or known[n]["fenced"] for n in (1, 2)):
                return False
        return True

    cluster.wait_for(two_registered_with_a_controller, WAIT_S,
                     "brokers 1 and 2 registered with a controller among them")
    deadline = time.monotonic() + ODD_WATCH_S
    while time.monotonic() < deadline:
        statuses = cluster.statuses()
        odd = statuses[3]
        assert odd["controller_id"] == -1, f"broker 3 sees controller {odd['controller_id']}"
        for node_id in (1, 2):
            ids = [b["id"] for b in statuses[node_id]["brokers"]]
            assert 3 not in ids, f"broker 3 registered, as broker {node_id} sees it"
        time.sleep(0.5)
    cluster.kill(3)  # it never joined: no clean shutdown through the quorum to check


def test_observers_join_only_with_the_quorum_secret(raftwood_cluster_factory):
    """Brokers 3 and 4 are observers (not in controller.quorum.voters): the one with the
    secret receives the log and registers through the leader; the one without is not
    heard, so it never registers, and it never learns of a controller."""
    cluster = raftwood_cluster_factory(4, voters=2, start=False,
                                       **{"controller.quorum.password": "the-quorum-secret"},
                                       broker_settings={
                                           4: {"controller.quorum.password": "another-secret"}})
    launch_all(cluster)

    def observer_3_registered(statuses):
        return sorted(statuses) == [1, 2, 3, 4] and all(
            {b["id"] for b in statuses[n]["brokers"] if not b["fenced"]} == {1, 2, 3}
            for n in (1, 2, 3)) and statuses[3]["quorum"]["role"] == "observer"

    cluster.wait_for(observer_3_registered, WAIT_S, "observer 3 registered, 4 not")
    deadline = time.monotonic() + ODD_WATCH_S
    while time.monotonic() < deadline:
        statuses = cluster.statuses()
        assert statuses[4]["controller_id"] == -1, statuses[4]["controller_id"]
        assert 4 not in [b["id"] for b in statuses[1]["brokers"]]
        time.sleep(0.5)
    cluster.kill(4)

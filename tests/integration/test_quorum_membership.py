"""The metadata quorum's membership at run time: observers, AddRaftVoter, RemoveRaftVoter.

Real brokers, `raftwood quorum` and `raftwood brokers decommission` as a user runs them,
an idempotent acks=all confluent-kafka producer writing throughout:

* growing 3 → 5: brokers 4 and 5 start as observers (their node ids are not in
  ``controller.quorum.voters``), join the cluster, become voters, take replicas; then
  two of the three original voters are killed (kill -9) and the cluster still has a
  controller and still commits metadata — impossible with three voters, so the quorum
  really has five.  Broker 4, restarted with its old configuration (an observer's),
  finds it is a voter and takes its place again;
* decommissioning voter 3 under load: its replicas move to broker 4, then it leaves the
  voters and carries on as an observer; restarted with a configuration that still
  lists it as a voter, it steps down to an observer on its own;
* the refusals: a duplicate voter, an unknown voter, a directory id, another cluster's
  id, the last voter, a lone broker.

Each load ends with every acknowledged record in the log at its offset, and the
replicas identical below the high watermark.
"""
from __future__ import annotations

import subprocess
import sys
import uuid

import pytest

pytest.importorskip("confluent_kafka")

from broker.harness import KafkaConnection  # noqa: E402
from protocol.errors import ErrorCode  # noqa: E402
from protocol.raft_voter_messages import AddRaftVoterRequest, RemoveRaftVoterRequest, VoterListener  # noqa: E402
from tests.faults.test_faults_replication import PacedProducer  # noqa: E402
from tests.integration.test_reassignment import TOPIC, assert_every_ack_present, replicas_become  # noqa: E402

COMMAND_TIMEOUT_S = 120
ROLE_TIMEOUT_S = 30.0


def raftwood(cluster, *args, via: int | None = None) -> subprocess.CompletedProcess:
    broker = cluster.broker(via if via is not None else cluster.running()[0])
    return subprocess.run([sys.executable, "-m", "broker.cli", *args, "--bootstrap-server",
                           broker.bootstrap], capture_output=True, text=True,
                          timeout=COMMAND_TIMEOUT_S)


def voters_of(status: dict) -> list[int]:
    return sorted(v["id"] for v in status["quorum"]["voters"])


def wait_roles(cluster, voters: list[int], observers: list[int]) -> None:
    """Every running broker sees exactly ``voters`` as the voter set; each broker
    reports its own role accordingly."""
    def settled(statuses):
        return all(voters_of(s) == sorted(voters) for s in statuses.values()) and all(
            statuses[n]["quorum"]["role"] == ("voter" if n in voters else "observer")
            for n in statuses if n in voters + observers) and len(statuses) == len(
            cluster.running())
    cluster.wait_for(settled, ROLE_TIMEOUT_S, f"voters {voters}, observers {observers}")


def add_voter(cluster, node_id: int) -> subprocess.CompletedProcess:
    plan = cluster.plans[node_id - 1]
    return raftwood(cluster, "quorum", "add-voter", str(node_id), "--raft-address",
                    f"{plan.host}:{plan.raft_port}")


def test_a_cluster_grows_from_three_to_five_voters_under_load(raftwood_cluster_factory):
    cluster = raftwood_cluster_factory(5, voters=3, start=False)
    cluster.start_all(nodes=[1, 2, 3])
    cluster.create_topic(TOPIC, assignments=[[1, 2, 3]], configs={"min.insync.replicas": "2"})
    producer = PacedProducer(cluster.bootstrap, TOPIC, 40_000, per_tick=100).start()
    cluster.wait_for(lambda s: len(producer.acked) > 500, 30, "the first acknowledgements")

    cluster.start(4)
    cluster.start(5)
    wait_roles(cluster, [1, 2, 3], [4, 5])
    listed = raftwood(cluster, "quorum")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "observer" in listed.stdout and "controller.quorum.voters=1@" in listed.stdout

    for node_id in (4, 5):
        added = add_voter(cluster, node_id)
        assert added.returncode == 0, added.stdout + added.stderr
    wait_roles(cluster, [1, 2, 3, 4, 5], [])
    listed = raftwood(cluster, "quorum", via=4)
    assert listed.returncode == 0 and listed.stdout.count(" voter ") == 5, listed.stdout

    # The partition moves onto 4, 5 and one original voter that does not lead the quorum;
    # the other two original voters, the controller among them, are then killed.
    controller = cluster.controller_id()
    keep = next(b for b in (1, 2, 3) if b != controller)
    doomed = [b for b in (1, 2, 3) if b != keep]
    target = sorted([keep, 4, 5])
    moved = raftwood(cluster, "reassign", "--topics", TOPIC, "--brokers",
                     ",".join(map(str, target)), "--execute")
    assert moved.returncode == 0, moved.stdout + moved.stderr
    replicas_become(cluster, target)

    # Five voters survive two of them; three would not.
    for node_id in doomed:
        cluster.kill(node_id)
    cluster.wait_for(lambda s: any(st["controller_id"] in s for st in s.values()),
                     ROLE_TIMEOUT_S, "a controller among the three voters left")
    cluster.create_topic("after-two-voters-died", assignments=[[keep]], via=keep)

    # Broker 4's own configuration still makes it an observer: restarted, it finds it
    # is a voter (the voter set lives in the Raft log) and votes again.
    cluster.restart(4)
    cluster.wait_for(lambda s: 4 in s and s[4]["quorum"]["role"] == "voter",
                     ROLE_TIMEOUT_S, "broker 4 back as a voter")
    producer.join(180)
    assert_every_ack_present(cluster, producer, target)


def test_decommissioning_a_voter_under_load_leaves_it_an_observer(raftwood_cluster_factory):
    cluster = raftwood_cluster_factory(4, voters=3)
    cluster.create_topic(TOPIC, assignments=[[1, 2, 3]], configs={"min.insync.replicas": "2"})
    producer = PacedProducer(cluster.bootstrap, TOPIC, 30_000, per_tick=100).start()
    cluster.wait_for(lambda s: len(producer.acked) > 500, 30, "the first acknowledgements")

    done = raftwood(cluster, "brokers", "decommission", "3", "--execute", via=1)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "broker 3 holds no replica" in done.stdout, done.stdout
    assert "left the metadata quorum's voters" in done.stdout, done.stdout
    wait_roles(cluster, [1, 2], [3, 4])
    again = raftwood(cluster, "quorum", "remove-voter", "3", via=2)
    assert again.returncode == 1 and "VOTER_NOT_FOUND" in again.stdout, again.stdout
    state = replicas_become(cluster, [1, 2, 4])
    assert 3 not in state["replicas"]

    # Its configuration still lists it as a voter; restarted, it steps down by itself.
    cluster.restart(3)
    wait_roles(cluster, [1, 2], [3, 4])
    cluster.stop(3)
    cluster.create_topic("after-decommission", assignments=[[1, 2]], via=1)
    producer.join(180)
    assert_every_ack_present(cluster, producer, [1, 2, 4])


def test_voter_changes_are_refused_with_kafkas_errors(raftwood_cluster_factory):
    cluster = raftwood_cluster_factory(3, voters=2)
    cluster_id = cluster.status(1)["cluster_id"]
    plan = cluster.plans[2]

    def add(node_id, **fields):
        with cluster.connect(1) as conn:
            return conn.request(AddRaftVoterRequest[0](
                voter_id=node_id, listeners=[VoterListener("CONTROLLER", plan.host,
                                                           plan.raft_port)], **fields))

    def remove(node_id, via=1, **fields):
        with cluster.connect(via, timeout_s=45) as conn:
            return conn.request(RemoveRaftVoterRequest[0](voter_id=node_id, **fields))

    assert add(2).error_code == ErrorCode.DUPLICATE_VOTER
    assert add(9).error_code == ErrorCode.INVALID_REQUEST  # not a registered broker
    assert add(3, voter_directory_id=uuid.uuid4()).error_code == ErrorCode.INVALID_REQUEST
    assert add(3, cluster_id="another").error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
    assert remove(3).error_code == ErrorCode.VOTER_NOT_FOUND
    assert remove(3, cluster_id=cluster_id).error_code == ErrorCode.VOTER_NOT_FOUND
    assert voters_of(cluster.status(3)) == [1, 2]
    # Down to one voter, then that one may not leave.
    assert remove(2, via=2).error_code == ErrorCode.NONE
    wait_roles(cluster, [1], [2, 3])
    answer = remove(1, via=1)
    assert answer.error_code == ErrorCode.INVALID_REQUEST, answer
    assert "last voter" in answer.error_message


def test_a_lone_broker_has_no_quorum_to_change(raftwood_broker):
    with KafkaConnection(raftwood_broker.bootstrap) as conn:
        answer = conn.request(RemoveRaftVoterRequest[0](voter_id=1))
    assert answer.error_code == ErrorCode.INVALID_REQUEST
    assert "not in a Raft quorum" in answer.error_message

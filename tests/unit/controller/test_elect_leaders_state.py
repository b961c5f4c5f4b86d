"""ElectLeaders as the metadata applies it (broker/controller/elections.py): each
partition's outcome is Kafka's, every election bumps both epochs, and a partition that
needs no election, or cannot have one, is left exactly as it was."""
from __future__ import annotations

import pytest

from broker.controller.commands import ElectLeaders, decode
from broker.controller.state import NO_LEADER, ClusterState

PREFERRED, UNCLEAN = 0, 1


def cluster() -> ClusterState:
    state = ClusterState()
    for broker_id in (1, 2, 3):
        state.apply_register_broker(broker_id, "h", 9090 + broker_id, f"i-{broker_id}")
    state.apply_create_topic("t", "id-t", [[1, 2, 3], [2, 3, 1]], {})
    return state


def restarted(state: ClusterState, broker_id: int) -> None:
    state.apply_register_broker(broker_id, "h", 9090 + broker_id, f"i-{broker_id}-again")


def test_preferred_election_returns_leadership_to_the_first_replica_and_bumps_epochs():
    state = cluster()
    state.apply_fence_brokers([1], {})
    restarted(state, 1)
    moved = state.topics["t"].partitions[0]
    assert moved.leader == 2
    # Back in the ISR (the leader's AlterPartition once it caught up).
    state.apply_alter_partition("t", 0, 2, moved.leader_epoch, moved.partition_epoch, [1, 2, 3])
    epochs = (moved.leader_epoch, moved.partition_epoch)
    version = state.version
    results = state.apply_elect_leaders(PREFERRED, [["t", 0], ["t", 1]])
    assert results == [["t", 0, "NONE", None], ["t", 1, "ELECTION_NOT_NEEDED", None]]
    assert moved.leader == 1
    assert (moved.leader_epoch, moved.partition_epoch) == (epochs[0] + 1, epochs[1] + 1)
    assert state.version == version + 1


def test_preferred_replica_out_of_the_isr_or_fenced_is_not_available_and_nothing_changes():
    state = cluster()
    state.apply_fence_brokers([1], {})
    before = state.to_dict()
    assert state.apply_elect_leaders(PREFERRED, [["t", 0]])[0][2] == \
        "PREFERRED_LEADER_NOT_AVAILABLE"                              # fenced
    restarted(state, 1)                                               # alive, not in the ISR
    before = state.to_dict()
    assert state.apply_elect_leaders(PREFERRED, [["t", 0]])[0][2] == \
        "PREFERRED_LEADER_NOT_AVAILABLE"
    assert state.to_dict() == before


@pytest.mark.parametrize("election_type", [PREFERRED, UNCLEAN])
def test_unknown_topics_and_partitions_are_answered_as_such(election_type):
    state = cluster()
    results = state.apply_elect_leaders(election_type, [["nope", 0], ["t", 7]])
    assert [r[2] for r in results] == ["UNKNOWN_TOPIC_OR_PARTITION"] * 2


def test_unclean_election_is_not_needed_while_a_leader_exists():
    state = cluster()
    state.apply_fence_brokers([1], {})             # t-0 elects 2 from the ISR
    before = state.to_dict()
    assert state.apply_elect_leaders(UNCLEAN, [["t", 0]]) == [["t", 0, "ELECTION_NOT_NEEDED", None]]
    assert state.to_dict() == before


def test_unclean_election_takes_a_replica_outside_the_isr_only_when_no_isr_member_lives():
    state = cluster()
    state.apply_fence_brokers([2], {})
    state.apply_fence_brokers([3], {})
    state.apply_fence_brokers([1], {})             # t-0: ISR [1], offline
    partition = state.topics["t"].partitions[0]
    assert (partition.leader, partition.isr) == (NO_LEADER, [1])
    assert state.apply_elect_leaders(UNCLEAN, [["t", 0]])[0][2] == "ELIGIBLE_LEADERS_NOT_AVAILABLE"
    # Broker 3 returns (not in the ISR; unclean election is off for the topic by default).
    state.apply_heartbeat(3, state.brokers[3].broker_epoch)
    assert partition.leader == NO_LEADER
    epoch = partition.leader_epoch
    assert state.apply_elect_leaders(UNCLEAN, [["t", 0]]) == [["t", 0, "NONE", None]]
    assert (partition.leader, partition.isr, partition.leader_epoch) == (3, [3], epoch + 1)


def test_all_partitions_when_targets_are_null():
    state = cluster()
    results = state.apply_elect_leaders(PREFERRED, None)
    assert results == [["t", 0, "ELECTION_NOT_NEEDED", None], ["t", 1, "ELECTION_NOT_NEEDED", None]]


def test_replaying_the_command_on_another_copy_decides_the_same():
    state = cluster()
    state.apply_fence_brokers([1], {})
    restarted(state, 1)
    p = state.topics["t"].partitions[0]
    state.apply_alter_partition("t", 0, 2, p.leader_epoch, p.partition_epoch, [1, 2, 3])
    replica = ClusterState.from_dict(state.to_dict())
    command = decode(*ElectLeaders(PREFERRED, [["t", 0]], controller_term=3).to_wire())
    assert command.apply(state) == command.apply(replica)
    assert state.to_dict() == replica.to_dict()

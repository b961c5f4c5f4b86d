"""ClusterState's apply methods (broker/controller/state.py): the replicated metadata.

Each test names the rule it protects: elections pick the in-sync replica with the
greatest known LEO (ties by assignment order) and bump both epochs; an ISR never
empties; no live in-sync replica means offline unless unclean election is enabled;
stale AlterPartition proposals are refused with Kafka's error codes; deletion walks
the replica state machine; producer-id blocks never overlap; and applying the same
commands to fresh states always gives the same state (replay safety).
"""
from __future__ import annotations

import pytest

from broker.controller import state as state_module
from broker.controller.commands import Heartbeat
from broker.controller.replica_state import ReplicaState
from broker.controller.state import NO_LEADER, ApplyError, ClusterState, assign_replicas

ONLINE = ReplicaState.ONLINE.value
OFFLINE = ReplicaState.OFFLINE.value


def cluster(*brokers: int) -> ClusterState:
    state = ClusterState()
    state.apply_init_cluster("test-cluster")
    for broker_id in brokers:
        state.apply_register_broker(broker_id, "127.0.0.1", 9000 + broker_id, f"inc-{broker_id}")
    return state


def with_topic(assignment, configs=None, brokers=(1, 2, 3)) -> ClusterState:
    state = cluster(*brokers)
    state.apply_create_topic("t", "id-t", assignment, configs or {})
    return state


def part(state: ClusterState, index: int = 0, topic: str = "t"):
    return state.topics[topic].partitions[index]


def shrink_isr(state: ClusterState, isr: list[int], index: int = 0) -> None:
    """The current leader proposes ``isr`` with the current epochs (accepted)."""
    p = part(state, index)
    state.apply_alter_partition("t", index, p.leader, p.leader_epoch, p.partition_epoch, isr)


# -- cluster, brokers, topics --------------------------------------------------------------

def test_the_cluster_id_is_set_once():
    state = ClusterState()
    assert state.apply_init_cluster("first") == "first"
    version = state.version
    assert state.apply_init_cluster("second") == "first"
    assert state.version == version


def test_create_topic_leads_with_the_first_replica_and_starts_with_every_replica_in_sync():
    state = with_topic([[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    for index, first in enumerate((1, 2, 3)):
        p = part(state, index)
        assert p.leader == first
        assert p.isr == p.replicas
        assert (p.leader_epoch, p.partition_epoch) == (0, 0)
        assert p.replica_states == {1: ONLINE, 2: ONLINE, 3: ONLINE}
    assert state.topics["t"].topic_id == "id-t"


def test_create_topic_with_a_fenced_replica_leads_with_the_first_live_one_and_marks_it_offline():
    state = cluster(1, 2, 3)
    state.apply_fence_brokers([1], {})
    state.apply_create_topic("t", "id", [[1, 2, 3]], {})
    p = part(state)
    assert p.leader == 2
    assert p.replica_states[1] == OFFLINE and p.replica_states[2] == ONLINE


def test_creating_an_existing_topic_is_refused_and_changes_nothing():
    state = with_topic([[1, 2, 3]])
    version = state.version
    with pytest.raises(ApplyError) as refused:
        state.apply_create_topic("t", "other", [[2, 3, 1]], {})
    assert refused.value.code == "TOPIC_ALREADY_EXISTS"
    assert state.version == version and part(state).replicas == [1, 2, 3]


@pytest.mark.parametrize("brokers,partitions,rf", [(3, 3, 3), (3, 6, 2), (5, 10, 3), (3, 1, 1)])
def test_assignment_balances_leaders_and_never_repeats_a_broker_in_a_partition(
        brokers, partitions, rf):
    ids = list(range(1, brokers + 1))
    assignment = assign_replicas(ids, partitions, rf)
    assert len(assignment) == partitions
    for replicas in assignment:
        assert len(replicas) == rf == len(set(replicas)) and set(replicas) <= set(ids)
    leaders = [replicas[0] for replicas in assignment]
    counts = [leaders.count(b) for b in ids]
    assert max(counts) - min(counts) <= 1


def test_topic_config_overrides_are_set_and_removed():
    state = with_topic([[1, 2, 3]], {"retention.ms": "1000"})
    state.apply_alter_topic_configs("t", {"min.insync.replicas": "2", "retention.ms": None})
    assert state.topics["t"].configs == {"min.insync.replicas": "2"}
    with pytest.raises(ApplyError) as refused:
        state.apply_alter_topic_configs("nope", {"retention.ms": "1"})
    assert refused.value.code == "UNKNOWN_TOPIC_OR_PARTITION"


# -- fencing and elections -----------------------------------------------------------------

def test_fencing_the_leader_elects_the_in_sync_replica_with_the_greatest_known_leo():
    state = with_topic([[1, 2, 3]])
    elections = state.apply_fence_brokers([1], {"t:0": {2: 50, 3: 70}})
    p = part(state)
    assert [(e.topic, e.partition, e.leader) for e in elections] == [("t", 0, 3)]
    assert p.leader == 3 and not elections[0].unclean
    assert (p.leader_epoch, p.partition_epoch) == (1, 1)
    assert p.isr == [2, 3]
    assert p.replica_states[1] == OFFLINE
    assert state.brokers[1].fenced and state.live_brokers() == [2, 3]


def test_hints_may_use_string_broker_ids_as_they_come_from_json():
    state = with_topic([[1, 2, 3]])
    state.apply_fence_brokers([1], {"t:0": {"2": 9, "3": 4}})
    assert part(state).leader == 2


@pytest.mark.parametrize("replicas,expected", [([1, 2, 3], 2), ([1, 3, 2], 3)])
def test_election_ties_are_broken_by_assignment_order(replicas, expected):
    state = with_topic([replicas])
    state.apply_fence_brokers([1], {"t:0": {2: 10, 3: 10}})
    assert part(state).leader == expected
    other = with_topic([replicas])
    other.apply_fence_brokers([1], {})  # no hints at all: assignment order alone
    assert part(other).leader == expected


def test_a_replica_outside_the_isr_is_never_elected_cleanly_whatever_its_leo():
    state = with_topic([[1, 2, 3]])
    shrink_isr(state, [1, 2])
    state.apply_fence_brokers([1], {"t:0": {2: 1, 3: 1_000}})
    assert part(state).leader == 2


def test_fencing_a_follower_shrinks_the_isr_and_bumps_only_the_partition_epoch():
    state = with_topic([[1, 2, 3]])
    assert state.apply_fence_brokers([3], {}) == []
    p = part(state)
    assert (p.leader, p.leader_epoch, p.partition_epoch, p.isr) == (1, 0, 1, [1, 2])
    assert p.replica_states[3] == OFFLINE


def test_fencing_brokers_that_are_already_fenced_changes_nothing():
    state = with_topic([[1, 2, 3]])
    state.apply_fence_brokers([3], {})
    version = state.version
    assert state.apply_fence_brokers([3, 7], {}) == []
    assert state.version == version


def test_the_last_isr_member_stays_in_the_isr_and_the_partition_goes_offline():
    state = with_topic([[1, 2, 3]])
    shrink_isr(state, [1])
    before = part(state).leader_epoch
    assert state.apply_fence_brokers([1], {}) == []
    p = part(state)
    assert p.isr == [1], "an ISR never becomes empty: its last member may return cleanly"
    assert p.leader == NO_LEADER and p.leader_epoch == before + 1


def test_without_a_live_in_sync_replica_the_partition_stays_offline_when_unclean_is_off():
    state = with_topic([[1, 2]])
    shrink_isr(state, [1])
    state.apply_fence_brokers([1], {"t:0": {2: 100}})
    p = part(state)
    assert (p.leader, p.isr) == (NO_LEADER, [1])
    # Broker 2 stays live and in sync with nothing: heartbeats do not elect it either.
    assert state.apply_heartbeat(2, state.brokers[2].broker_epoch)
    assert part(state).leader == NO_LEADER


@pytest.mark.parametrize("default,topic_config,elected", [
    (True, None, True), (False, "true", True), (True, "false", False), (False, None, False)])
def test_unclean_election_only_when_enabled_by_broker_default_or_topic_config(
        default, topic_config, elected):
    configs = {} if topic_config is None else {"unclean.leader.election.enable": topic_config}
    state = with_topic([[1, 2]], configs)
    shrink_isr(state, [1])
    elections = state.apply_fence_brokers([1], {}, default)
    p = part(state)
    if elected:
        assert [(e.leader, e.unclean) for e in elections] == [(2, True)]
        assert (p.leader, p.isr, p.leader_epoch) == (2, [2], 1)
    else:
        assert elections == [] and p.leader == NO_LEADER


def test_a_returning_isr_member_is_registered_online_and_leads_the_offline_partition():
    state = with_topic([[1, 2, 3]])
    shrink_isr(state, [1])
    state.apply_fence_brokers([1], {})
    offline_epoch = part(state).leader_epoch
    old_epoch = state.brokers[1].broker_epoch
    new_epoch = state.apply_register_broker(1, "127.0.0.1", 9001, "inc-1-restarted")
    p = part(state)
    assert new_epoch > old_epoch and not state.brokers[1].fenced
    assert (p.leader, p.leader_epoch) == (1, offline_epoch + 1)
    assert p.replica_states[1] == ONLINE


def test_a_returning_out_of_sync_replica_does_not_lead_unless_unclean_is_enabled():
    state = with_topic([[1, 2]])
    shrink_isr(state, [1])
    state.apply_fence_brokers([1, 2], {})
    state.apply_register_broker(2, "127.0.0.1", 9002, "inc-2b")
    assert part(state).leader == NO_LEADER
    state.apply_fence_brokers([2], {})
    state.apply_register_broker(2, "127.0.0.1", 9002, "inc-2c", True)
    assert (part(state).leader, part(state).isr) == (2, [2])


def test_a_new_incarnation_of_a_live_broker_is_treated_as_a_restart():
    """A broker restarted within its session registers again with a new incarnation: the
    old one is fenced first, so partitions it led elect again (epochs move) instead of
    trusting the new process with the old one's leadership."""
    state = with_topic([[1, 2, 3]])
    old_epoch = state.brokers[1].broker_epoch
    new_epoch = state.apply_register_broker(1, "127.0.0.1", 9001, "inc-1-new")
    p = part(state)
    assert new_epoch > old_epoch
    assert p.leader == 2 and p.leader_epoch == 1
    assert 1 not in p.isr and p.replica_states[1] == ONLINE
    assert not state.brokers[1].fenced


def test_a_retried_registration_of_the_same_incarnation_changes_nothing():
    state = with_topic([[1, 2, 3]])
    epoch, version = state.brokers[1].broker_epoch, state.version
    assert state.apply_register_broker(1, "127.0.0.1", 9001, "inc-1") == epoch
    assert state.version == version


def test_heartbeats_need_the_current_epoch_and_unfence_a_paused_broker():
    state = with_topic([[1, 2, 3]])
    epoch = state.brokers[3].broker_epoch
    assert not state.apply_heartbeat(3, epoch - 1)
    assert not state.apply_heartbeat(42, 1)
    version = state.version
    assert state.apply_heartbeat(3, epoch) and state.version == version, \
        "a heartbeat of a live broker is a no-op"
    state.apply_fence_brokers([3], {})
    assert state.apply_heartbeat(3, epoch)
    assert not state.brokers[3].fenced and part(state).replica_states[3] == ONLINE
    assert 3 not in part(state).isr, "unfencing does not put it back in sync"


# -- AlterPartition (ISR changes proposed by leaders) --------------------------------------

def test_alter_partition_from_the_current_leader_and_epochs_is_accepted():
    state = with_topic([[1, 2, 3]])
    assert state.apply_alter_partition("t", 0, 1, 0, 0, [3, 1]) == 1
    assert part(state).isr == [1, 3], "the ISR is kept in assignment order"
    assert state.apply_alter_partition("t", 0, 1, 0, 1, [1, 2, 3]) == 2


@pytest.mark.parametrize("leader,leader_epoch,partition_epoch,isr,code", [
    (1, 0, 0, [1, 2], "FENCED_LEADER_EPOCH"),       # a deposed leader's old epoch
    (3, 0, 1, [3], "FENCED_LEADER_EPOCH"),          # the leader, but an older epoch
    (2, 1, 1, [2], "FENCED_LEADER_EPOCH"),          # not the leader
    (3, 1, 0, [3], "INVALID_UPDATE_VERSION"),       # stale partition epoch
    (3, 1, 1, [2], "INVALID_REQUEST"),              # the leader left out
    (3, 1, 1, [3, 4], "INVALID_REQUEST"),           # not a replica
    (3, 1, 1, [1, 3], "INELIGIBLE_REPLICA"),        # adding a fenced broker
])
def test_stale_or_invalid_alter_partition_is_refused_and_changes_nothing(
        leader, leader_epoch, partition_epoch, isr, code):
    state = with_topic([[1, 2, 3]])
    state.apply_fence_brokers([1], {"t:0": {3: 10}})   # leader 3 in epoch 1
    shrink_isr(state, [3])
    p = part(state)
    assert (p.leader, p.leader_epoch) == (3, 1)
    # partition_epoch in the table: 1 = the current one, 0 = the one before it.
    partition_epoch = p.partition_epoch if partition_epoch == 1 else p.partition_epoch - 1
    before = (list(p.isr), p.partition_epoch, state.version)
    with pytest.raises(ApplyError) as refused:
        state.apply_alter_partition("t", 0, leader, leader_epoch, partition_epoch, isr)
    assert refused.value.code == code
    assert (part(state).isr, part(state).partition_epoch, state.version) == before


def test_alter_partition_for_an_unknown_partition_is_refused():
    state = with_topic([[1, 2, 3]])
    with pytest.raises(ApplyError) as refused:
        state.apply_alter_partition("t", 9, 1, 0, 0, [1])
    assert refused.value.code == "UNKNOWN_TOPIC_OR_PARTITION"


# -- preferred leaders ---------------------------------------------------------------------

def test_preferred_election_restores_the_first_replica_once_it_is_live_and_in_sync():
    state = with_topic([[1, 2, 3]])
    state.apply_fence_brokers([1], {})
    state.apply_register_broker(1, "127.0.0.1", 9001, "inc-1b")
    assert part(state).leader == 2
    version = state.version
    assert state.apply_elect_preferred([("t", 0)]) == [], "1 is not in the ISR yet"
    assert state.version == version
    p = part(state)
    state.apply_alter_partition("t", 0, 2, p.leader_epoch, p.partition_epoch, [1, 2, 3])
    before = part(state)
    epochs = (before.leader_epoch, before.partition_epoch)
    elections = state.apply_elect_preferred([("t", 0), ("gone", 0), ("t", 5)])
    assert [(e.topic, e.partition, e.leader) for e in elections] == [("t", 0, 1)]
    after = part(state)
    assert (after.leader, after.leader_epoch, after.partition_epoch) == \
        (1, epochs[0] + 1, epochs[1] + 1)
    assert state.apply_elect_preferred([("t", 0)]) == [], "already the preferred leader"


def test_preferred_election_skips_a_fenced_preferred_replica():
    state = with_topic([[1, 2, 3]])
    state.apply_fence_brokers([1], {})
    assert state.apply_elect_preferred([("t", 0)]) == []
    assert part(state).leader == 2


# -- deletion, producer ids ----------------------------------------------------------------

def test_delete_walks_every_replica_through_the_replica_state_machine(monkeypatch):
    moves: list[tuple[str, str]] = []
    real = state_module.transition

    def recording(current, target):
        moves.append((current.value, target.value))
        return real(current, target)

    state = with_topic([[1, 2, 3]])
    monkeypatch.setattr(state_module, "transition", recording)
    assert state.apply_delete_topic("t") == "id-t"
    assert "t" not in state.topics
    walk = [("OnlineReplica", "OfflineReplica"), ("OfflineReplica", "ReplicaDeletionStarted"),
            ("ReplicaDeletionStarted", "ReplicaDeletionSuccessful"),
            ("ReplicaDeletionSuccessful", "NonExistentReplica")]
    assert moves == walk * 3
    with pytest.raises(ApplyError) as refused:
        state.apply_delete_topic("t")
    assert refused.value.code == "UNKNOWN_TOPIC_OR_PARTITION"


def test_delete_of_a_topic_with_offline_replicas_walks_from_offline():
    state = with_topic([[1, 2, 3]])
    state.apply_fence_brokers([2], {})
    state.apply_delete_topic("t")
    state.apply_create_topic("t", "id-2", [[1, 2, 3]], {})
    assert part(state).replica_states == {1: ONLINE, 2: OFFLINE, 3: ONLINE}


def test_producer_id_blocks_never_overlap():
    state = cluster(1, 2, 3)
    blocks = [(state.apply_allocate_producer_ids(n), n) for n in (1000, 1, 500, 1000)]
    ids = [pid for first, n in blocks for pid in range(first, first + n)]
    assert len(ids) == len(set(ids)) == 2501
    assert blocks[0][0] == 0


# -- replay determinism --------------------------------------------------------------------

COMMANDS = [
    ("init_cluster", ("c1",)),
    ("register_broker", (1, "h", 1, "a")),
    ("register_broker", (2, "h", 2, "b")),
    ("register_broker", (3, "h", 3, "c")),
    ("create_topic", ("t", "id-t", [[1, 2, 3], [2, 3, 1]], {"retention.ms": "10"})),
    ("create_topic", ("t", "dup", [[1]], {})),                        # refused
    ("heartbeat", (1, 1, False, {"t:0": 3})),
    ("alter_partition", ("t", 0, 1, 0, 0, [1, 2])),
    ("alter_partition", ("t", 0, 1, 0, 0, [1])),                      # stale: refused
    ("fence_brokers", ([1], {"t:0": {2: 5}, "t:1": {2: 1, 3: 2}}, False)),
    ("allocate_producer_ids", (1000,)),
    ("register_broker", (1, "h", 1, "a2")),
    ("alter_partition", ("t", 0, 2, 1, 2, [1, 2])),
    ("elect_preferred", ([("t", 0), ("t", 1)],)),
    ("alter_topic_configs", ("t", {"retention.ms": None, "min.insync.replicas": "2"})),
    ("create_topic", ("u", "id-u", [[3]], {})),
    ("fence_brokers", ([3], {}, True)),
    ("delete_topic", ("u",)),
    ("register_broker", (3, "h", 3, "c2", True)),
]


def replay(commands) -> tuple[ClusterState, list]:
    state = ClusterState()
    outcomes = []
    for method, args in commands:
        try:
            outcomes.append(("ok", getattr(state, "apply_" + method)(*args)))
        except ApplyError as exc:
            outcomes.append(("error", exc.code))
    return state, outcomes


def test_replaying_the_same_commands_on_fresh_states_gives_equal_states_and_results():
    first, first_outcomes = replay(COMMANDS)
    second, second_outcomes = replay(COMMANDS)
    assert first_outcomes == second_outcomes
    assert vars(first) == vars(second)
    assert [o for o in first_outcomes if o[0] == "error"] == [
        ("error", "TOPIC_ALREADY_EXISTS"), ("error", "INVALID_UPDATE_VERSION")]
    assert vars(first.snapshot()) == vars(first), "a snapshot is an equal, independent copy"
    snapshot = first.snapshot()
    snapshot.apply_fence_brokers([2], {})
    assert vars(snapshot) != vars(first)


def test_every_prefix_of_the_command_log_replays_to_the_same_state():
    for cut in range(len(COMMANDS) + 1):
        assert vars(replay(COMMANDS[:cut])[0]) == vars(replay(COMMANDS[:cut])[0])


# -- how commands reach the state: RaftStore.submit ----------------------------------------

class _AnsweringConsumer:
    """Stands in for the pysyncobj consumer: "applies" each command at once and calls
    back the way the Raft thread does (the answer reaches the loop a moment later)."""

    def command(self, method, args, controller_term, callback):
        callback(("ok", True), 0)


def test_a_cancelled_submit_is_cancelled_even_when_its_answer_arrived_meanwhile(tmp_path):
    """A task cancelled while its command's answer is already on its way must see the
    cancellation.  (asyncio.wait_for on Python 3.11 returns the answer instead and the
    cancellation is lost: a cancelled heartbeat loop then ran on and the broker's shutdown
    hung until SIGKILL.)"""
    import asyncio

    from broker.controller.store import RaftStore

    async def scenario():
        store = RaftStore(str(tmp_path), 1, {1: "127.0.0.1:1"})
        store._syncobj, store._consumer = object(), _AnsweringConsumer()
        task = asyncio.get_running_loop().create_task(store.submit(Heartbeat(1, 1)))
        await asyncio.sleep(0)   # the command is sent; its answer is queued on the loop
        task.cancel()            # ...and the cancellation right behind it
        try:
            await task
        except asyncio.CancelledError:
            return "cancelled"
        return "answered"

    assert asyncio.run(scenario()) == "cancelled"


class _LeaderlessThenAnswering:
    """No leader for the first ``refusals`` submissions (pysyncobj refuses before
    appending), then applies; a refusal after which the outcome is unknown never retries."""

    def __init__(self, refusals: int, reason: int = 2):
        self.refusals = refusals
        self.reason = reason
        self.calls = 0

    def command(self, method, args, controller_term, callback):
        self.calls += 1
        if self.calls <= self.refusals:
            callback(None, self.reason)
        else:
            callback(("ok", self.calls), 0)


def _submit_with(consumer, tmp_path, timeout_s=5.0):
    import asyncio

    from broker.controller.store import RaftStore

    async def scenario():
        store = RaftStore(str(tmp_path), 1, {1: "127.0.0.1:1"})
        store._syncobj, store._consumer = object(), consumer
        return await store.submit(Heartbeat(1, 1), timeout_s=timeout_s)

    return asyncio.run(scenario())


def test_a_command_refused_for_want_of_a_leader_is_submitted_again(tmp_path):
    consumer = _LeaderlessThenAnswering(refusals=3)  # MISSING_LEADER three times
    assert _submit_with(consumer, tmp_path) == 4
    assert consumer.calls == 4


def test_a_command_whose_outcome_is_unknown_is_not_submitted_again(tmp_path):
    from broker.controller.store import MetadataUnavailable

    consumer = _LeaderlessThenAnswering(refusals=1, reason=5)  # LEADER_CHANGED
    with pytest.raises(MetadataUnavailable):
        _submit_with(consumer, tmp_path)
    assert consumer.calls == 1


def test_without_a_leader_a_submit_gives_up_at_its_deadline(tmp_path):
    from broker.controller.store import MetadataUnavailable

    consumer = _LeaderlessThenAnswering(refusals=10 ** 6)
    with pytest.raises(MetadataUnavailable):
        _submit_with(consumer, tmp_path, timeout_s=0.3)
    assert 1 < consumer.calls < 100


def test_scram_credentials_are_set_removed_and_survive_the_plain_dict_form():
    from broker.controller.state import ClusterState as State

    state = State()
    credential = {"salt": "c2FsdA==", "iterations": 4096, "stored_key": "a2V5",
                  "server_key": "a2V5"}
    state.apply_alter_scram_credentials([["alice", "SCRAM-SHA-256", credential],
                                         ["alice", "SCRAM-SHA-512", credential]], [])
    state.apply_alter_scram_credentials(
        [], [["alice", "SCRAM-SHA-256"], ["nobody", "SCRAM-SHA-256"]])
    assert state.scram_credentials == {"alice": {"SCRAM-SHA-512": credential}}
    assert State.from_dict(state.to_dict()).scram_credentials == state.scram_credentials
    state.apply_alter_scram_credentials([], [["alice", "SCRAM-SHA-512"]])
    assert state.scram_credentials == {}
    old = state.to_dict()
    del old["scram_credentials"]  # a metadata file written before credentials existed
    assert State.from_dict(old).scram_credentials == {}


def test_registration_keeps_the_endpoint_of_each_listener():
    from broker.controller.state import ClusterState as State

    state = State()
    state.apply_register_broker(1, "h", 1, "inc", False, {"PLAINTEXT": ["h", 1], "SSL": ["h", 2]})
    info = State.from_dict(state.to_dict()).brokers[1]
    assert info.endpoint("SSL") == ("h", 2) and info.endpoint("SASL_SSL") is None
    state.apply_register_broker(2, "old", 7, "inc")  # registered before listeners had names
    assert state.brokers[2].endpoint("ANY") == ("old", 7)

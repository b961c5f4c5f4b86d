"""Typed metadata commands (broker/controller/commands.py) and the journal's wire form.

Rules protected: every command survives ``to_wire``/``decode`` unchanged; the wire form
holds only plain values (journal entries are pickled and must not name this module's
classes); controller decisions carry their term in the wire form's third element, not
in the apply arguments; and entries in the form Raftwood journaled before commands were
typed — ``(method, args, controller_term)`` with string method names, trailing
defaults left out — still apply, directly and through a pysyncobj node replaying them.
"""
from __future__ import annotations

import pickle

import pytest
from pysyncobj import SyncObj, SyncObjConf
from pysyncobj.syncobj import _COMMAND_TYPE

from broker.controller.commands import (
    COMMANDS,
    AllocateProducerIds,
    AlterClientQuotas,
    AlterPartition,
    AlterReassignments,
    AlterResourceConfigs,
    AlterScramCredentials,
    AlterTopicConfigs,
    Command,
    CreateAcls,
    CreatePartitions,
    CreateTopic,
    DeleteAcls,
    DeleteTopic,
    ElectLeaders,
    ElectPreferred,
    FenceBrokers,
    Heartbeat,
    InitCluster,
    RecordVoter,
    RegisterBroker,
    UpdateFeatures,
    decode,
)
from broker.controller.raft import MetadataConsumer
from broker.controller.state import ApplyError, ClusterState
from broker.testing import free_ports
from tests.unit.controller.test_controller_state import COMMANDS as OLD_FORM_LOG
from tests.unit.controller.test_controller_state import replay

EXAMPLES: list[Command] = [
    InitCluster("c1"),
    RegisterBroker(1, "h", 9092, "inc-1"),
    RegisterBroker(2, "h", 9093, "inc-2", True),
    Heartbeat(1, 3),
    Heartbeat(1, 3, False, {"t:0": 12}),
    FenceBrokers([2], {"t:0": {1: 5}}, False),
    FenceBrokers([2, 3], {}, True, controller_term=7),
    ElectPreferred([("t", 0), ("t", 1)]),
    ElectPreferred([("t", 0)], controller_term=4),
    ElectLeaders(0, [["t", 0], ["t", 1]], controller_term=4),
    ElectLeaders(1, None, controller_term=2),
    CreateTopic("t", "id-t", [[1, 2], [2, 1]], {"retention.ms": "10"}),
    CreatePartitions("t", "id-t", 3, [[1, 2]]),
    Heartbeat(1, 3, False, {"t:0": 12}, [2, 40, 17]),
    DeleteTopic("t"),
    AlterTopicConfigs("t", {"retention.ms": None, "min.insync.replicas": "2"}),
    AlterPartition("t", 0, 1, 2, 3, [1, 2]),
    AllocateProducerIds(1000),
    RegisterBroker(3, "h", 9094, "inc-3", False, {"PLAINTEXT": ["h", 9094], "SSL": ["h", 9095]}),
    AlterScramCredentials([["alice", "SCRAM-SHA-256",
                            {"salt": "c2FsdA==", "iterations": 4096,
                             "stored_key": "a2V5", "server_key": "a2V5"}]],
                          [["bob", "SCRAM-SHA-512"]]),
    CreateAcls([[2, "orders", 3, "User:alice", "*", 3, 3],
                [3, "app-", 4, "User:*", "10.0.0.1", 2, 2]]),
    DeleteAcls([[2, "orders", 3, "User:alice", "*", 3, 3]]),
    AlterReassignments([["t", 0, [2, 3]], ["t", 1, None]], controller_term=5),
    RegisterBroker(4, "h", 9096, "inc-4", False, None, "rack-b"),
    RecordVoter(4, "127.0.0.1:9196"),
    RecordVoter(3, None),
    AlterResourceConfigs(4, "", {"log.retention.ms": "60000", "max.connections": None}),
    UpdateFeatures([["group.version", 0, 2]], {"group.version": [0, 1]},
                   {"group.version": 1}),
    AlterClientQuotas([[[["user", "alice"], ["client-id", None]],
                        {"producer_byte_rate": 1024.0, "request_percentage": None}]]),
]


def test_the_examples_cover_every_command():
    assert {type(c) for c in EXAMPLES} == set(COMMANDS.values())
    assert set(COMMANDS) == {name[len("apply_"):] for name in dir(ClusterState)
                             if name.startswith("apply_")}, "one command per apply method"


@pytest.mark.parametrize("command", EXAMPLES, ids=lambda c: type(c).__name__)
def test_every_command_round_trips_through_the_wire_form(command):
    wire = command.to_wire()
    assert wire[0] == command.method and isinstance(wire[1], tuple)
    assert decode(*wire) == command
    pickled = pickle.dumps(wire)       # what pysyncobj journals
    assert b"commands" not in pickled, "a journal entry must not name the command classes"
    assert decode(*pickle.loads(pickled)) == command


def test_only_controller_decisions_carry_a_term_and_never_as_an_apply_argument():
    fence = FenceBrokers([2], {}, False, controller_term=9)
    assert fence.to_wire() == ("fence_brokers", ([2], {}, False), 9)
    assert ElectPreferred([("t", 0)], controller_term=3).to_wire()[2] == 3
    assert FenceBrokers([2], {}).to_wire()[2] is None, "a controlled shutdown: no term"
    decisions = {cls for cls in COMMANDS.values() if cls.controller_decision}
    assert decisions == {FenceBrokers, ElectPreferred, ElectLeaders, AlterReassignments}
    assert all(c.to_wire()[2] is None for c in EXAMPLES if not c.controller_decision)
    assert decode("init_cluster", ("c",), 5) == InitCluster("c"), \
        "a term on another command is the consumer's to check, not the command's"


def test_old_form_entries_with_trailing_defaults_left_out_decode():
    assert decode("heartbeat", (1, 1)) == Heartbeat(1, 1, False, None)
    assert decode("register_broker", (1, "h", 1, "a")) == RegisterBroker(1, "h", 1, "a", False)
    assert decode("fence_brokers", ([1], {})) == FenceBrokers([1], {}, False)
    with pytest.raises(ApplyError) as refused:
        decode("alloc_stale", ())
    assert refused.value.code == "UNKNOWN_SERVER_ERROR"
    with pytest.raises(TypeError):
        decode("delete_topic", ("t", "extra"))


def test_the_old_form_log_replays_through_commands_to_the_same_state_and_results():
    direct_state, direct_outcomes = replay(OLD_FORM_LOG)
    state, outcomes = ClusterState(), []
    for method, args in OLD_FORM_LOG:
        try:
            outcomes.append(("ok", decode(method, args).apply(state)))
        except ApplyError as exc:
            outcomes.append(("error", exc.code))
    assert outcomes == direct_outcomes
    assert vars(state) == vars(direct_state)


# -- the Raft consumer applies old-form entries ----------------------------------------------

def _consumer():
    seen = []
    consumer = MetadataConsumer(lambda method, args, image: seen.append((method, args, image)))
    return consumer, seen


def test_the_consumer_applies_an_entry_in_the_old_form():
    consumer, seen = _consumer()
    apply = consumer.command
    assert apply("init_cluster", ("c1",), _doApply=True) == ("ok", "c1")  # no term at all
    assert apply("register_broker", (1, "h", 1, "a"), None, _doApply=True) == ("ok", 2)
    assert apply("heartbeat", (1, 2), _doApply=True) == ("ok", True)
    outcome = apply("create_topic", ("t", "id", [[1]], {}), None, _doApply=True)
    assert outcome == ("ok", "id") and consumer.state.topics["t"].partitions[0].leader == 1
    assert [m for m, _, image in seen if image is not None] == \
        ["init_cluster", "register_broker", "create_topic"], "a no-op publishes no image"
    assert seen[2][:2] == ("heartbeat", (1, 2)), "observers get the entry as journaled"


def test_the_consumer_refuses_unknown_entries_and_decisions_of_another_term():
    consumer, _ = _consumer()
    assert consumer.command("alloc_stale", (), _doApply=True)[:2] == \
        ("error", "UNKNOWN_SERVER_ERROR")
    assert consumer.command("delete_topic", ("a", "b"), _doApply=True)[:2] == \
        ("error", "UNKNOWN_SERVER_ERROR")
    refused = consumer.command("fence_brokers", ([1], {}, False), 5, _doApply=True)
    assert refused[:2] == ("error", "NOT_CONTROLLER")
    assert consumer.state.version == 0


def test_a_pysyncobj_node_replays_a_journal_entry_written_in_the_old_form(tmp_path):
    """The entry's bytes are built as a Raftwood before typed commands journaled them:
    (function id, (method, args, controller_term)) pickled behind the command type."""
    ports = free_ports(2)
    consumer, _ = _consumer()
    node = SyncObj(f"127.0.0.1:{ports[0]}", [f"127.0.0.1:{ports[1]}"],
                   SyncObjConf(autoTick=False), consumers=[consumer])
    try:
        leader = next(iter(node._SyncObj__otherNodes))
        func_id = next(iter(node._methodToID.values()))
        old_form = [("init_cluster", ("c-old",)), ("register_broker", (1, "h", 1, "a")),
                    ("create_topic", ("t", "id-t", [[1]], {"retention.ms": "5"})),
                    ("allocate_producer_ids", (1000,))]
        entries = [(bytes([_COMMAND_TYPE.REGULAR]) + pickle.dumps((func_id, (m, a, None))),
                    i + 2, 1) for i, (m, a) in enumerate(old_form)]
        SyncObj._SyncObj__onMessageReceived(node, leader, {
            "type": "append_entries", "term": 1, "commit_index": 1 + len(entries),
            "prevLogIdx": 1, "prevLogTerm": 0, "entries": entries})
        node.doTick(0)
        state = consumer.state
        assert (state.cluster_id, state.next_producer_id) == ("c-old", 1000)
        assert state.topics["t"].configs == {"retention.ms": "5"}
        assert state.position()[:2] == (1, 1 + len(entries))
    finally:
        node.destroy()

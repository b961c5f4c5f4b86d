"""Dynamic BROKER and GROUP configs in the metadata state: set, remove, forget an
emptied resource, survive the plain-dict form and the journal's wire form."""
from broker.controller.commands import AlterResourceConfigs, decode
from broker.controller.state import ClusterState


def test_set_then_remove_forgets_the_resource():
    state = ClusterState()
    AlterResourceConfigs(4, "", {"log.retention.ms": "1000"}).apply(state)
    AlterResourceConfigs(4, "2", {"max.connections": "5"}).apply(state)
    AlterResourceConfigs(32, "g", {"consumer.session.timeout.ms": "50000"}).apply(state)
    assert state.resource_configs == {
        4: {"": {"log.retention.ms": "1000"}, "2": {"max.connections": "5"}},
        32: {"g": {"consumer.session.timeout.ms": "50000"}}}
    AlterResourceConfigs(4, "2", {"max.connections": None}).apply(state)
    AlterResourceConfigs(32, "g", {"consumer.session.timeout.ms": None}).apply(state)
    assert state.resource_configs == {4: {"": {"log.retention.ms": "1000"}}}


def test_version_moves_and_a_snapshot_is_private():
    state = ClusterState()
    before = state.version
    AlterResourceConfigs(4, "1", {"max.connections": "7"}).apply(state)
    image = state.snapshot()
    AlterResourceConfigs(4, "1", {"max.connections": "8"}).apply(state)
    assert state.version == before + 2
    assert image.resource_configs[4]["1"]["max.connections"] == "7"


def test_plain_dict_and_wire_round_trips():
    state = ClusterState()
    AlterResourceConfigs(4, "", {"log.retention.ms": "1000"}).apply(state)
    AlterResourceConfigs(32, "g", {"share.delivery.count.limit": "3"}).apply(state)
    assert ClusterState.from_dict(state.to_dict()).resource_configs == state.resource_configs
    command = AlterResourceConfigs(32, "g", {"a": None})
    assert decode(*command.to_wire()) == command


def test_older_dicts_have_none():
    data = ClusterState().to_dict()
    del data["resource_configs"]
    assert ClusterState.from_dict(data).resource_configs == {}

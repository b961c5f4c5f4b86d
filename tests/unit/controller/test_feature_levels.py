"""Finalized feature levels (broker/controller/features.py): Kafka's UpdateFeatures rules.

Invariants: a level outside the supported range, a downgrade asked as an UPGRADE and an
upgrade asked as a downgrade are refused with INVALID_UPDATE_VERSION; metadata.version
downgrades pass only across levels that did not change the metadata records; the first
refused update refuses the whole command and nothing is applied; a finalized level
survives a replay through the command's wire form.
"""
from __future__ import annotations

import pytest

from broker.controller import features
from broker.controller.commands import UpdateFeatures, decode
from broker.controller.state import ApplyError, ClusterState

SUPPORTED = {"metadata.version": [7, 25], "kraft.version": [0, 1], "group.version": [0, 1],
             "transaction.version": [0, 0], "share.version": [0, 0]}
DEFAULTS = {name: high for name, (_low, high) in SUPPORTED.items()}


def _level(state, name):
    return features.current_level(state.finalized_features, name, DEFAULTS)


def _apply(state, *updates):
    return decode(*UpdateFeatures(list(updates), SUPPORTED, DEFAULTS).to_wire()).apply(state)


def test_a_feature_nobody_updated_is_at_its_default():
    assert {n: _level(ClusterState(), n) for n in SUPPORTED} == DEFAULTS


def test_a_safe_downgrade_and_an_upgrade_back_are_finalized_in_the_state():
    state = ClusterState()
    assert _apply(state, ["group.version", 0, features.SAFE_DOWNGRADE]) == {"group.version": 0}
    assert _level(state, "group.version") == 0
    before = state.version
    _apply(state, ["group.version", 1, features.UPGRADE])
    assert _level(state, "group.version") == 1 and state.version == before + 1


@pytest.mark.parametrize("update, words", [
    (["group.version", 0, features.UPGRADE], "without setting the upgrade type"),
    (["group.version", 2, features.UPGRADE], "only supports versions 0-1"),
    (["transaction.version", 2, features.UPGRADE], "no versions of this feature"),
    (["no.such.feature", 1, features.UPGRADE], "no versions of this feature"),
    (["group.version", -1, features.SAFE_DOWNGRADE], "cannot be less than 0"),
    (["group.version", 1, 7], "does not support the given upgrade type"),
    (["metadata.version", 6, features.SAFE_DOWNGRADE], "only supports versions 7-25"),
    (["metadata.version", 22, features.SAFE_DOWNGRADE], "might delete metadata"),
    (["metadata.version", 22, features.UNSAFE_DOWNGRADE], "Unsafe metadata downgrade"),
    (["kraft.version", 0, features.SAFE_DOWNGRADE], "kraft.version is not supported"),
])
def test_refused_updates_answer_invalid_update_version_and_change_nothing(update, words):
    state = ClusterState()
    with pytest.raises(ApplyError) as refused:
        _apply(state, ["share.version", 0, features.UPGRADE], update)
    assert refused.value.code == "INVALID_UPDATE_VERSION"
    assert words in str(refused.value)
    assert state.finalized_features == {} and state.version == 0


def test_a_metadata_version_downgrade_across_unchanged_levels_is_safe():
    state = ClusterState()
    _apply(state, ["metadata.version", 23, features.SAFE_DOWNGRADE])  # 24, 25 changed nothing
    assert _level(state, "metadata.version") == 23
    with pytest.raises(ApplyError):  # 23 (4.0-IV1) changed the records
        _apply(state, ["metadata.version", 22, features.SAFE_DOWNGRADE])
    _apply(state, ["metadata.version", 25, features.UPGRADE])
    assert _level(state, "metadata.version") == 25


def test_an_upgrade_asked_as_a_downgrade_is_refused():
    state = ClusterState()
    _apply(state, ["group.version", 0, features.SAFE_DOWNGRADE])
    assert features.first_problem(state.finalized_features,
                                  [["group.version", 1, features.SAFE_DOWNGRADE]],
                                  SUPPORTED, DEFAULTS).endswith("Can't downgrade to a newer "
                                                                "version.")

"""Client quota entities (broker/quotas/entities.py): Kafka's validation and filters.

Invariants: only user / client-id / (user, client-id) / ip entities pass, with the keys
each may have and positive (whole, for byte rates) values; describe filters match
exactly, the default or any named entity, strictly or not; the plain form round-trips.
"""
from __future__ import annotations

import pytest

from broker.controller.state import ClusterState
from broker.quotas import entities as q


@pytest.mark.parametrize("pairs, code", [
    ([], "INVALID_REQUEST"),
    ([("user", "a"), ("user", "b")], "INVALID_REQUEST"),
    ([("ip", "1.2.3.4"), ("user", "a")], "INVALID_REQUEST"),
    ([("ip", "not-an-address")], "INVALID_REQUEST"),
    ([("ip", "10.0.0.256")], "INVALID_REQUEST"),
    ([("group", "g")], "UNSUPPORTED_VERSION"),
])
def test_refused_entities(pairs, code):
    with pytest.raises(q.QuotaError) as refused:
        q.entity_of(pairs)
    assert refused.value.code == code


@pytest.mark.parametrize("key, value", [("no_such_key", 1.0), ("producer_byte_rate", 10.5),
                                        ("consumer_byte_rate", 0.0),
                                        ("request_percentage", -1.0),
                                        ("request_percentage", 0.0),
                                        ("connection_creation_rate", 5.0)])
def test_refused_values(key, value):
    with pytest.raises(q.QuotaError) as refused:
        q.check_value(q.entity_of([("user", "a")]), key, value)
    assert refused.value.code == "INVALID_REQUEST"


def test_request_percentage_is_any_positive_number():
    q.check_value(q.entity_of([("user", "a")]), "request_percentage", 0.5)
    q.check_value(q.entity_of([("client-id", None)]), "request_percentage", 250.0)


def test_describe_filters_and_the_plain_form():
    state = ClusterState()
    state.apply_alter_client_quotas([
        [[["user", "alice"]], {"producer_byte_rate": 1024.0}],
        [[["user", "alice"], ["client-id", "app"]], {"request_percentage": 50.0}],
        [[["client-id", None]], {"consumer_byte_rate": 10.0}],
    ])
    quotas = state.client_quotas
    alice = (("user", "alice"),)
    pair = (("client-id", "app"), ("user", "alice"))
    assert [e for e, _ in q.describe(quotas, [("user", 0, "alice")], False)] == [pair, alice]
    assert [e for e, _ in q.describe(quotas, [("user", 0, "alice")], True)] == [alice]
    assert [e for e, _ in q.describe(quotas, [("client-id", 1, None)], False)] == [
        (("client-id", None),)]
    assert [e for e, _ in q.describe(quotas, [("client-id", 2, None)], False)] == [pair]
    assert len(q.describe(quotas, [], False)) == 3
    assert ClusterState.from_dict(state.to_dict()).client_quotas == quotas
    assert q.from_plain(q.to_plain(quotas)) == quotas
    state.apply_alter_client_quotas([[[["client-id", "app"], ["user", "alice"]],
                                      {"request_percentage": None}]])
    assert pair not in state.client_quotas, "an entity without keys is forgotten"

"""ConnectionLimits: max.connections (the inter-broker listener exempt),
max.connections.per.ip and its overrides; counts return on release."""
from __future__ import annotations

import pytest

from broker.network.limits import ConnectionLimits, parse_overrides


def limits(**settings) -> ConnectionLimits:
    config = {"max.connections": 3, "max.connections.per.ip": 2,
              "max.connections.per.ip.overrides": "", **settings}
    return ConnectionLimits(config, protected_listener="INTERNAL")


def test_per_ip_cap_and_release():
    cap = limits()
    assert cap.admit("10.0.0.1", "PLAINTEXT") is None
    assert cap.admit("10.0.0.1", "PLAINTEXT") is None
    assert "max.connections.per.ip (2)" in cap.admit("10.0.0.1", "PLAINTEXT")
    assert cap.admit("10.0.0.2", "PLAINTEXT") is None
    cap.release("10.0.0.1", "PLAINTEXT")
    assert cap.admit("10.0.0.1", "PLAINTEXT") is None
    assert cap.total == 3


def test_max_connections_spares_the_inter_broker_listener():
    cap = limits(**{"max.connections.per.ip": 100})
    for _ in range(3):
        assert cap.admit("10.0.0.1", "PLAINTEXT") is None
    assert "max.connections (3)" in cap.admit("10.0.0.9", "PLAINTEXT")
    assert cap.admit("10.0.0.9", "INTERNAL") is None
    cap.release("10.0.0.9", "INTERNAL")
    assert cap.total == 3 and cap.per_host["10.0.0.1"] == 3


def test_overrides_by_address():
    cap = limits(**{"max.connections.per.ip.overrides": "10.0.0.5:0,10.0.0.6:3"})
    assert cap.admit("10.0.0.5", "PLAINTEXT") is not None
    assert [cap.admit("10.0.0.6", "PLAINTEXT") for _ in range(3)] == [None] * 3


@pytest.mark.parametrize("text, parsed", [
    ("", {}), ("a:1, b:2", {"a": 1, "b": 2}), ("[::1]:4", {"::1": 4}), ("::1:4", {"::1": 4})])
def test_parse_overrides(text, parsed):
    assert parse_overrides(text) == parsed


@pytest.mark.parametrize("text", ["a", "a:x", "a:-1", ":3"])
def test_parse_overrides_refuses(text):
    with pytest.raises(ValueError):
        parse_overrides(text)

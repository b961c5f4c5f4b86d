"""Listener settings: names, protocols, advertised endpoints, the inter-broker listener."""
from __future__ import annotations

import pytest

from broker import config
from broker.security.listeners import ListenerError, plan_listeners

MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"


def test_each_listener_gets_its_protocol_and_is_advertised_as_bound_by_default():
    plan = plan_listeners("PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093", "", MAP, "",
                          "PLAINTEXT")
    assert [(x.name, x.security_protocol, x.port) for x in plan.listeners] == [
        ("PLAINTEXT", "PLAINTEXT", 9092), ("SSL", "SSL", 9093)]
    assert plan.endpoints() == {"PLAINTEXT": ["127.0.0.1", 9092], "SSL": ["127.0.0.1", 9093]}
    assert plan.inter_broker.name == "PLAINTEXT"


def test_custom_names_map_to_protocols_and_advertised_endpoints_replace_bound_ones():
    plan = plan_listeners("INTERNAL://0.0.0.0:19092,EXTERNAL://0.0.0.0:9092",
                          "INTERNAL://b1.internal:19092,EXTERNAL://kafka.example.com:9092",
                          "INTERNAL:SASL_SSL,EXTERNAL:SSL", "internal", "PLAINTEXT")
    assert plan.inter_broker.name == "INTERNAL"
    assert plan.inter_broker.security_protocol == "SASL_SSL"
    assert plan.endpoints()["EXTERNAL"] == ["kafka.example.com", 9092]


def test_a_lone_listener_of_the_inter_broker_protocol_is_the_inter_broker_listener():
    plan = plan_listeners("BROKER://127.0.0.1:1", "", "BROKER:SSL", "", "SSL")
    assert plan.inter_broker.name == "BROKER"


@pytest.mark.parametrize("listeners, advertised, mapping, inter, match", [
    ("FOO://h:1", "", MAP, "", "no security protocol"),
    ("PLAINTEXT://h:1,SSL://h:1", "", MAP, "", "port twice"),
    ("PLAINTEXT://h:1,PLAINTEXT://h:2", "", MAP, "", "twice"),
    ("PLAINTEXT://h:1", "SSL://h:2", MAP, "", "listeners does not"),
    ("SSL://h:1", "", MAP, "", "inter-broker listener PLAINTEXT"),
    ("PLAINTEXT://h:1", "", "PLAINTEXT:TLS", "", "not one of"),
    ("PLAINTEXT://h", "", MAP, "", "no port"),
])
def test_contradictions_are_refused(listeners, advertised, mapping, inter, match):
    with pytest.raises(ListenerError, match=match):
        plan_listeners(listeners, advertised, mapping, inter, "PLAINTEXT")


def test_listener_prefixed_settings_override_the_global_ones_and_unknown_ones_are_refused():
    cfg = config.build({"listeners": "PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:2",
                        "ssl.keystore.location": "/k.pem",
                        "listener.name.ssl.ssl.client.auth": "required"})
    assert cfg.listener_setting("SSL", "ssl.client.auth") == "required"
    assert cfg.listener_setting("PLAINTEXT", "ssl.client.auth") == "none"
    assert cfg.listener_setting("SSL", "ssl.keystore.location") == "/k.pem"
    with pytest.raises(config.ConfigError, match="unknown setting"):
        config.build({"listener.name.ssl.ssl.keystore.typo": "x"})


def test_unsupported_tls_values_are_refused_when_the_config_is_built():
    base = {"listeners": "PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:2"}
    with pytest.raises(config.ConfigError, match="JKS is not supported"):
        config.build({**base, "ssl.keystore.type": "JKS"})
    with pytest.raises(config.ConfigError, match="only TLSv1.2 and TLSv1.3"):
        config.build({**base, "ssl.enabled.protocols": "TLSv1.1,TLSv1.2"})
    with pytest.raises(config.ConfigError, match="ssl.client.auth"):
        config.build({**base, "listener.name.ssl.ssl.client.auth": "maybe"})
    with pytest.raises(config.ConfigError, match="ssl.keystore.password cannot be specified"):
        config.build({**base, "ssl.keystore.password": "x"})

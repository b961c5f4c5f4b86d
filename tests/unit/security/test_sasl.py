"""SASL settings, JAAS parsing and the PLAIN/SCRAM server exchanges over a credential store."""
from __future__ import annotations

import types

import pytest

from broker import config
from broker.security import sasl, scram
from broker.security.listeners import Listener
from broker.security.session import SecuritySession

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin \\"pw\\"" user_admin="admin-pw" user_bob=bob-pw;')
SASL = {"listeners": "PLAINTEXT://127.0.0.1:1,SASL_PLAINTEXT://127.0.0.1:2"}


def test_jaas_options_and_users_parse_in_kafkas_format():
    jaas = sasl.parse_jaas(JAAS)
    assert jaas.login_module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert jaas.options["username"] == "admin" and jaas.options["password"] == 'admin "pw"'
    assert jaas.users() == {"admin": "admin-pw", "bob": "bob-pw"}
    assert sasl.parse_jaas("") is None
    with pytest.raises(sasl.SaslSettingError):
        sasl.parse_jaas('user_a="b";')


def test_a_sasl_listener_needs_served_mechanisms():
    with pytest.raises(config.ConfigError, match="GSSAPI"):
        config.build(SASL)  # Kafka's default mechanism, not served
    with pytest.raises(config.ConfigError, match="OAUTHBEARER"):
        config.build({**SASL, "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER"})
    cfg = config.build({**SASL, "sasl.enabled.mechanisms": "PLAIN",
                        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "scram-sha-512"})
    assert sasl.enabled_mechanisms(cfg, "SASL_PLAINTEXT") == ["SCRAM-SHA-512"]


def test_a_sasl_inter_broker_listener_needs_an_enabled_mechanism_and_credentials():
    base = {**SASL, "inter.broker.listener.name": "SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN"}
    with pytest.raises(config.ConfigError, match="is not enabled"):
        config.build(base)  # sasl.mechanism.inter.broker.protocol defaults to GSSAPI
    with pytest.raises(config.ConfigError, match="username"):
        config.build({**base, "sasl.mechanism.inter.broker.protocol": "PLAIN"})
    cfg = config.build({**base, "sasl.mechanism.inter.broker.protocol": "PLAIN",
                        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS})
    assert sasl.inter_broker_credentials(cfg) == ("PLAIN", "admin", 'admin "pw"')


def mechanisms(store: dict):
    cfg = config.build({**SASL, "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
                        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS})
    image = types.SimpleNamespace(scram_credentials=store)
    return sasl.SaslMechanisms(cfg, sasl.scram_lookup(lambda: image))


def test_plain_checks_jaas_users_then_the_scram_store():
    store = {"carol": {"SCRAM-SHA-256": scram.new_credential("SCRAM-SHA-256", "carol-pw",
                                                             4096).to_plain()}}
    m = mechanisms(store)
    for user, password in (("bob", "bob-pw"), ("carol", "carol-pw")):
        exchange = m.new_exchange("SASL_PLAINTEXT", "PLAIN")
        assert exchange.receive(f"\0{user}\0{password}".encode()) == b""
        assert exchange.done and exchange.username == user
    for message, match in ((b"\0bob\0wrong", "Invalid username or password"),
                           (b"\0carol\0bob-pw", "Invalid username or password"),
                           (b"\0nobody\0x", "Invalid username or password"),
                           (b"eve\0bob\0bob-pw", "authorization id"),
                           (b"bob\0bob-pw", "3 tokens")):
        with pytest.raises(sasl.SaslFailure, match=match):
            m.new_exchange("SASL_PLAINTEXT", "PLAIN").receive(message)


def test_scram_runs_against_the_store_and_an_unknown_user_fails():
    store = {"carol": {"SCRAM-SHA-256": scram.new_credential("SCRAM-SHA-256", "carol-pw",
                                                             4096).to_plain()}}
    m = mechanisms(store)
    exchange = m.new_exchange("SASL_PLAINTEXT", "SCRAM-SHA-256")
    client = scram.ScramClient("SCRAM-SHA-256", "carol", "carol-pw")
    client.verify(exchange.receive(client.final(exchange.receive(client.first()))))
    assert exchange.done and exchange.username == "carol"
    with pytest.raises(sasl.SaslFailure):
        m.new_exchange("SASL_PLAINTEXT", "SCRAM-SHA-256").receive(
            scram.ScramClient("SCRAM-SHA-256", "bob", "x").first())


def test_before_authentication_a_sasl_session_admits_only_api_versions_and_sasl():
    session = SecuritySession(Listener("SASL_SSL", "SASL_SSL", "h", 1))
    assert [session.admits(k) for k in (18, 17, 36, 3, 0, 50, 51)] == \
        [True, True, True, False, False, False, False]
    session.authenticate("User:alice")
    assert session.admits(3) and session.principal == "User:alice"
    assert SecuritySession(Listener("SSL", "SSL", "h", 1)).admits(0)

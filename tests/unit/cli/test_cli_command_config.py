"""``--command-config``: Kafka's client properties become the CLI's ClientSecurity, and
a setting that cannot work is refused naming it (never a half-secure connection)."""
from __future__ import annotations

import pytest

from broker.cli import command_config
from broker.cli.command_config import CommandConfigError, from_settings
from broker.cli.main import build_parser
from broker.security.client import PLAINTEXT

SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="alice" password="alice \\"secret\\"";')


def test_no_settings_is_plaintext():
    assert from_settings({}) is PLAINTEXT


def test_sasl_jaas_config_gives_mechanism_and_credentials():
    security = from_settings({"security.protocol": "SASL_PLAINTEXT",
                              "sasl.mechanism": "SCRAM-SHA-512",
                              "sasl.jaas.config": SCRAM_JAAS})
    assert (security.sasl_mechanism, security.username, security.password) == (
        "SCRAM-SHA-512", "alice", 'alice "secret"')
    assert security.ssl_context is None


def test_librdkafka_names_are_taken_too():
    security = from_settings({"security.protocol": "sasl_plaintext",
                              "sasl.mechanisms": "PLAIN", "sasl.username": "bob",
                              "sasl.password": "pw"})
    assert (security.sasl_mechanism, security.username, security.password) == (
        "PLAIN", "bob", "pw")


def test_ssl_builds_a_verifying_context_from_the_system_cas_without_a_truststore():
    security = from_settings({"security.protocol": "SSL"})
    assert security.ssl_context is not None and security.ssl_context.check_hostname
    assert security.sasl_mechanism is None


@pytest.mark.parametrize("settings, named", [
    ({"security.protocol": "KERBEROS"}, "security.protocol"),
    ({"security.protocol": "SASL_PLAINTEXT"}, "sasl.mechanism=GSSAPI"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config"),
    ({"security.protocol": "SSL", "ssl.truststore.type": "JKS"}, "ssl.truststore.type"),
    ({"security.protocol": "SSL", "ssl.truststore.location": "/nonexistent/ca.pem"},
     "truststore"),
])
def test_an_unusable_setting_is_refused_naming_it(settings, named):
    with pytest.raises(CommandConfigError, match=named):
        from_settings(settings)


def test_every_command_that_talks_to_brokers_takes_the_option(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                    "sasl.username=u\nsasl.password=p\n")
    for command in (["topics", "list"], ["cluster"], ["groups", "list"], ["users", "list"],
                    ["acls", "list"]):
        args = build_parser().parse_args([*command, "--command-config", str(path)])
        assert args.security.username == "u", command


def test_a_missing_file_is_a_command_config_error(tmp_path):
    with pytest.raises(CommandConfigError, match="cannot read"):
        command_config.load(str(tmp_path / "absent.properties"))

"""The Raft secret's settings: ``controller.quorum.password`` or the first line of
``controller.quorum.password.file``, never both; it reaches pysyncobj's conf; and
DescribeConfigs never shows it (nor any other password)."""
from __future__ import annotations

import pytest

from broker import config as config_module
from broker.api.resource_configs import STATIC, STRING, _entry, is_sensitive
from broker.config import ConfigError, quorum_password
from broker.controller.raft import raft_conf


def build(**settings) -> config_module.BrokerConfig:
    return config_module.build({k.replace("_", "."): v for k, v in settings.items()})


def test_no_secret_means_no_encryption(tmp_path):
    assert quorum_password(build()) is None
    assert raft_conf(str(tmp_path), (0.02, 0.01), None).password is None


def test_the_secret_from_the_setting_reaches_pysyncobj(tmp_path):
    pytest.importorskip("cryptography")
    password = quorum_password(build(controller_quorum_password="s3cret"))
    assert password == "s3cret"
    assert raft_conf(str(tmp_path), (0.02, 0.01), password).password == "s3cret"


def test_the_secret_file_gives_its_first_line(tmp_path):
    pytest.importorskip("cryptography")
    path = tmp_path / "quorum.secret"
    path.write_text("from-file\nignored\n")
    assert quorum_password(build(controller_quorum_password_file=str(path))) == "from-file"


@pytest.mark.parametrize("content", [None, "\n"], ids=["missing", "empty-first-line"])
def test_an_unusable_secret_file_is_refused_at_start(tmp_path, content):
    path = tmp_path / "quorum.secret"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError, match="controller.quorum.password.file"):
        build(controller_quorum_password_file=str(path))


def test_both_the_secret_and_its_file_is_refused(tmp_path):
    path = tmp_path / "quorum.secret"
    path.write_text("x\n")
    with pytest.raises(ConfigError, match="not both"):
        build(controller_quorum_password="y", controller_quorum_password_file=str(path))


@pytest.mark.parametrize("name", ["controller.quorum.password", "ssl.key.password",
                                  "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config",
                                  "ssl.keystore.key"])
def test_describe_configs_shows_no_secret(name):
    assert is_sensitive(name)
    entry = _entry(name, "the-secret", STATIC, [], STRING, None, True)
    assert entry.value is None and entry.is_sensitive


def test_describe_configs_shows_ordinary_settings():
    assert not is_sensitive("controller.quorum.password.file")
    assert _entry("num.partitions", "3", STATIC, [], STRING, None, True).value == "3"


# -- every quorum needs the secret, loopback or not ----------------------------------------

def test_a_lone_broker_without_voters_needs_no_secret():
    assert quorum_password(build()) is None
    assert quorum_password(build(controller_quorum_voters="")) is None


@pytest.mark.parametrize("voters", ["1@127.0.0.1:9093,2@127.0.0.2:9094", "1@localhost:9093",
                                    "1@[::1]:9093", "1@127.0.0.1:9093,2@10.0.0.2:9093",
                                    "1@broker1:9093", "1@0.0.0.0:9093", "1@[2001:db8::1]:9093"])
def test_a_quorum_without_secret_is_refused_in_one_line_saying_how_to_make_one(voters):
    with pytest.raises(ConfigError) as refused:
        build(controller_quorum_voters=voters)
    text = str(refused.value)
    assert "\n" not in text
    assert text.startswith("controller.quorum.password (or controller.quorum.password.file) "
                           "is required")
    assert "secrets.token_urlsafe" in text
    assert "--set controller.quorum.password.file=quorum.secret" in text
    assert "controller.quorum.allow.unauthenticated=true" in text


@pytest.mark.parametrize("voters", ["1@127.0.0.1:9093,2@127.0.0.1:9094",
                                    "1@10.0.0.1:9093,2@10.0.0.2:9093"])
def test_a_quorum_runs_with_a_secret_or_the_opt_out(tmp_path, voters):
    pytest.importorskip("cryptography")
    assert quorum_password(build(controller_quorum_voters=voters,
                                 controller_quorum_password="s")) == "s"
    secret = tmp_path / "quorum.secret"
    secret.write_text("from-file\n")
    assert quorum_password(build(controller_quorum_voters=voters,
                                 controller_quorum_password_file=str(secret))) == "from-file"
    opted_out = build(controller_quorum_voters=voters,
                      controller_quorum_allow_unauthenticated="true")
    assert quorum_password(opted_out) is None
    assert opted_out["controller.quorum.allow.unauthenticated"] is True


def test_the_voters_own_host_is_the_raft_bind_address(tmp_path):
    assert raft_conf(str(tmp_path), (0.02, 0.01), None,
                     bind_address="127.0.0.1:9093").bindAddress == "127.0.0.1:9093"
    assert raft_conf(str(tmp_path), (0.02, 0.01), None).bindAddress is None

"""The ``raftwood`` command line over SASL_SSL (``--command-config``), as Kafka's tools.

One broker with the authorizer on: its PLAINTEXT listener (the harness's) has no super
user; SASL_SSL serves PLAIN (the JAAS user ``admin``, a super user) and SCRAM-SHA-512
(``alice``, added through the CLI over SASL_SSL).  The CLI's principal is the user its
command config names: admin may manage users and ACLs, alice only what an ACL grants, and
a wrong password exits 1 naming SASL_AUTHENTICATION_FAILED.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from broker.testing import BrokerProcess, free_port
from tests.security_certs import make_pki, with_listeners

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ADMIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_admin="admin-secret";')


def raftwood(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "broker.cli", *args], capture_output=True,
                          text=True, timeout=60)


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    home = tmp_path_factory.mktemp("cli-sasl-ssl")
    pki = make_pki(home / "pki")
    port = free_port()
    broker = with_listeners(BrokerProcess(home / "data", log_path=home / "broker.log",
                                          extra_settings={
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": ADMIN_JAAS,
        "ssl.keystore.location": str(pki.broker_keystore),
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:admin"}),
        f"SASL_SSL://127.0.0.1:{port}")
    broker.start()
    yield f"127.0.0.1:{port}", home, pki
    assert broker.stop() == 0, broker.log_tail()


def command_config(home, pki, name: str, lines: list[str]) -> str:
    path = home / f"{name}.properties"
    path.write_text("\n".join(["security.protocol=SASL_SSL", "ssl.truststore.type=PEM",
                               f"ssl.truststore.location={pki.ca}", *lines]) + "\n")
    return str(path)


def as_admin(home, pki) -> str:
    return command_config(home, pki, "admin", [
        "sasl.mechanism=PLAIN",
        'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret";'])


def as_alice(home, pki, password: str = "alice-secret") -> str:
    return command_config(home, pki, f"alice-{password}", [
        "sasl.mechanism=SCRAM-SHA-512", "sasl.username=alice", f"sasl.password={password}"])


def run_ok(*args: str) -> str:
    done = raftwood(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow
def test_a_super_user_manages_users_and_acls_over_sasl_ssl(secure):
    bootstrap, home, pki = secure
    admin = ["--bootstrap-server", bootstrap, "--command-config", as_admin(home, pki)]
    run_ok("users", "add", "alice", "--password", "alice-secret", "--mechanism",
           "SCRAM-SHA-512", *admin)
    assert "alice\tSCRAM-SHA-512" in run_ok("users", "list", *admin)
    added = run_ok("acls", "add", "--allow-principal", "User:alice", "--operation", "read",
                   "--topic", "orders", *admin)
    assert "User:alice" in added
    assert "User:alice" in run_ok("acls", "list", "--topic", "orders", *admin)


@pytest.mark.slow
def test_the_cli_acts_as_the_user_its_command_config_names(secure):
    bootstrap, home, pki = secure
    admin = ["--bootstrap-server", bootstrap, "--command-config", as_admin(home, pki)]
    alice = ["--bootstrap-server", bootstrap, "--command-config", as_alice(home, pki)]
    run_ok("users", "add", "alice", "--password", "alice-secret", "--mechanism",
           "SCRAM-SHA-512", *admin)
    refused = raftwood("users", "list", *alice)
    assert refused.returncode == 1
    assert "CLUSTER_AUTHORIZATION_FAILED" in refused.stderr
    run_ok("acls", "add", "--allow-principal", "User:alice", "--operation", "describe",
           "--cluster", *admin)
    assert "alice\tSCRAM-SHA-512" in run_ok("users", "list", *alice)
    assert run_ok("topics", "list", *alice) is not None


def test_a_wrong_password_exits_1_naming_sasl_authentication_failed(secure):
    bootstrap, home, pki = secure
    done = raftwood("users", "list", "--bootstrap-server", bootstrap, "--command-config",
                    as_alice(home, pki, password="not-her-password"))
    assert done.returncode == 1
    assert "SASL_AUTHENTICATION_FAILED" in done.stderr, done.stderr
    assert "alice" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, f"one line, not more: {done.stderr}"


def test_a_plaintext_cli_on_the_sasl_ssl_port_fails_without_a_traceback(secure):
    bootstrap, _, _ = secure
    done = raftwood("users", "list", "--bootstrap-server", bootstrap, "--timeout", "3")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and done.stderr.startswith("raftwood:")


def test_an_unusable_command_config_is_refused_naming_the_setting(secure, tmp_path):
    bootstrap, _, _ = secure
    path = tmp_path / "bad.properties"
    path.write_text("security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\n")
    done = raftwood("users", "list", "--bootstrap-server", bootstrap,
                    "--command-config", str(path))
    assert done.returncode == 2
    assert "sasl.mechanism=GSSAPI" in done.stderr

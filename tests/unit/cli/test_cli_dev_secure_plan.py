"""``raftwood dev --secure``'s layout (pure): SASL_SSL ports after the Kafka and Raft
ones, SCRAM-SHA-512 on that listener only, the Raft secret only where there is a quorum,
and certificates a TLS client verifies for 127.0.0.1."""
from __future__ import annotations

import ssl

import pytest

from broker.cli import dev
from broker.cli.command_config import from_settings, load

pytest.importorskip("cryptography")


@pytest.fixture
def layout3(tmp_path):
    layout = dev.plan_cluster(3, 9092, tmp_path / "data")
    return layout, dev.plan_secure(layout, 9092, tmp_path / "data")


def test_secure_ports_follow_the_raft_ports(layout3):
    layout, secure = layout3
    assert [secure.address(b) for b in layout] == [
        "127.0.0.1:9292", "127.0.0.1:9293", "127.0.0.1:9294"]


def test_each_broker_gets_a_sasl_ssl_listener_and_the_quorum_secret(layout3):
    layout, secure = layout3
    settings = dev.broker_settings(layout, layout[1], {}, secure)
    assert settings["listeners"] == "PLAINTEXT://127.0.0.1:9093,SASL_SSL://127.0.0.1:9293"
    assert settings["listener.name.sasl_ssl.sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert settings["controller.quorum.password.file"] == str(secure.quorum_password_file)
    assert secure.quorum_password_file.stat().st_mode & 0o077 == 0, "only its owner reads it"
    assert not any(secure.quorum_password_file.read_text().strip() in value
                   for value in settings.values()), "the secret is not on the command line"
    from broker import config
    assert config.quorum_password(config.build(settings))


def test_a_lone_broker_has_no_quorum_secret(tmp_path):
    layout = dev.plan_cluster(1, 9092, tmp_path / "data")
    secure = dev.plan_secure(layout, 9092, tmp_path / "data")
    assert "controller.quorum.password.file" not in dev.broker_settings(layout, layout[0], {},
                                                                        secure)


def test_clashing_secure_ports_are_refused(tmp_path):
    layout = dev.plan_cluster(3, 9092, tmp_path / "data", raft_port_base=9292)
    with pytest.raises(dev.DevError, match="SASL_SSL ports"):
        dev.plan_secure(layout, 9092, tmp_path / "data")


def test_certificates_are_made_once_and_verify_for_127_0_0_1(layout3, tmp_path):
    layout, secure = layout3
    first = secure.pki.ca.read_bytes()
    assert dev.make_dev_pki(tmp_path / "data" / "tls").ca.read_bytes() == first
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(secure.pki.broker_keystore)
    client = ssl.create_default_context(cafile=str(secure.pki.ca))
    import socket
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def accept():
        conn, _ = listener.accept()
        try:
            server.wrap_socket(conn, server_side=True).close()
        except ssl.SSLError:
            conn.close()

    thread = threading.Thread(target=accept)
    thread.start()
    with socket.create_connection(("127.0.0.1", port)) as raw:
        with client.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            assert tls.version() in ("TLSv1.2", "TLSv1.3")
    thread.join(5)
    listener.close()


def test_the_written_client_properties_are_a_usable_command_config(layout3, tmp_path):
    layout, secure = layout3
    path = tmp_path / "client.properties"
    path.write_text(dev.client_properties(layout, secure))
    security = load(str(path))
    assert (security.sasl_mechanism, security.username, security.password) == (
        "SCRAM-SHA-512", "dev", secure.password)
    assert security.ssl_context is not None
    assert from_settings(dev.librdkafka_settings(layout, secure)).username == "dev"

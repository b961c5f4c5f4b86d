"""TLS contexts from Kafka's PEM settings, and the principal of a client certificate."""
from __future__ import annotations

import socket
import ssl
import threading

import pytest

from broker.security import tls
from tests.security_certs import KEY_PASSWORD, make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def lookup(**settings):
    values = dict(tls.TLS_SETTINGS)
    values.update({k.replace("_", "."): v for k, v in settings.items()})
    return values.__getitem__


def handshake(server: ssl.SSLContext, client: ssl.SSLContext):
    """(server-side peer certificate, negotiated version) of one in-process handshake;
    the server's exception if it refused."""
    left, right = socket.socketpair()
    outcome = {}

    def serve():
        try:
            with server.wrap_socket(left, server_side=True) as s:
                outcome["peer"] = s.getpeercert()
                outcome["version"] = s.version()
                s.recv(1)
        except (ssl.SSLError, OSError) as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client.wrap_socket(right, server_hostname="127.0.0.1") as c:
            c.sendall(b"x")
            c.recv(1)
    except (ssl.SSLError, OSError):
        pass
    thread.join(5)
    return outcome


def test_a_pem_keystore_file_serves_tls_1_2_or_newer_to_a_client_trusting_the_ca(pki):
    server = tls.server_context(lookup(ssl_keystore_location=str(pki.broker_keystore)), "SSL")
    client = tls.client_context(lookup(ssl_truststore_location=str(pki.ca)), "SSL")
    assert server.minimum_version == ssl.TLSVersion.TLSv1_2
    outcome = handshake(server, client)
    assert outcome["version"] in ("TLSv1.2", "TLSv1.3")
    assert tls.principal_of(outcome["peer"]) == tls.ANONYMOUS


def test_inline_keystore_and_truststore_work_like_files(pki):
    chain = (pki.broker_keystore.read_text().split("-----END PRIVATE KEY-----")[1])
    key = pki.broker_keystore.read_text().split(chain)[0]
    server = tls.server_context(lookup(ssl_keystore_certificate_chain=chain.replace("\n", "\\n"),
                                       ssl_keystore_key=key), "SSL")
    client = tls.client_context(lookup(ssl_truststore_certificates=pki.ca.read_text()), "SSL")
    assert "version" in handshake(server, client)


def test_an_encrypted_key_needs_ssl_key_password(pki):
    with pytest.raises(tls.SettingError, match="cannot load the keystore"):
        tls.server_context(lookup(ssl_keystore_location=str(pki.broker_encrypted_keystore),
                                  ssl_key_password="wrong"), "SSL")
    tls.server_context(lookup(ssl_keystore_location=str(pki.broker_encrypted_keystore),
                              ssl_key_password=KEY_PASSWORD), "SSL")


def test_required_client_auth_names_the_client_by_its_subject_and_refuses_others(pki):
    server = tls.server_context(lookup(ssl_keystore_location=str(pki.broker_keystore),
                                       ssl_truststore_location=str(pki.ca),
                                       ssl_client_auth="required"), "SSL")
    with_cert = tls.client_context(lookup(ssl_truststore_location=str(pki.ca),
                                          ssl_keystore_location=str(pki.client_keystore)), "SSL")
    outcome = handshake(server, with_cert)
    assert tls.principal_of(outcome["peer"]) == "User:CN=client,O=Raftwood Tests"
    without = tls.client_context(lookup(ssl_truststore_location=str(pki.ca)), "SSL")
    assert "error" in handshake(server, without)


def test_a_client_refuses_a_broker_signed_by_a_ca_it_does_not_trust(pki):
    server = tls.server_context(lookup(ssl_keystore_location=str(pki.broker_keystore)), "SSL")
    client = tls.client_context(lookup(ssl_truststore_location=str(pki.other_ca)), "SSL")
    assert "version" not in handshake(server, client)


def test_a_tls_listener_without_keystore_or_client_auth_without_truststore_is_refused(pki):
    with pytest.raises(tls.SettingError, match="needs ssl.keystore.location"):
        tls.server_context(lookup(), "SSL")
    with pytest.raises(tls.SettingError, match="needs ssl.truststore"):
        tls.server_context(lookup(ssl_keystore_location=str(pki.broker_keystore),
                                  ssl_client_auth="required"), "SSL")


def test_principal_escapes_special_characters_in_rfc_2253_order():
    peer = {"subject": ((("countryName", "DE"),), (("organizationName", "A, B"),),
                        (("commonName", "svc"),))}
    assert tls.principal_of(peer) == "User:CN=svc,O=A\\, B,C=DE"

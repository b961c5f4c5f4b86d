"""SCRAM exchanges (RFC 5802/7677) against RFC 7677's SCRAM-SHA-256 test vector."""
from __future__ import annotations

import base64

import pytest

from broker.security import scram

# RFC 7677 section 3: user "user", password "pencil".
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SERVER_FIRST = (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")


def rfc_credential(mechanism="SCRAM-SHA-256", password="pencil"):
    return scram.new_credential(mechanism, password, iterations=4096, salt=SALT)


def test_the_server_reproduces_rfc_7677_byte_for_byte():
    server = scram.ScramServer("SCRAM-SHA-256", {"user": rfc_credential()}.get, nonce=SERVER_NONCE)
    assert server.receive(CLIENT_FIRST) == SERVER_FIRST
    assert not server.done
    assert server.receive(CLIENT_FINAL) == SERVER_FINAL
    assert server.done and server.username == "user"


def test_the_client_reproduces_rfc_7677_byte_for_byte():
    client = scram.ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first() == CLIENT_FIRST
    assert client.final(SERVER_FIRST) == CLIENT_FINAL
    client.verify(SERVER_FINAL)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_client_and_server_agree_and_a_wrong_password_fails_at_the_proof(mechanism):
    store = {"alice": scram.new_credential(mechanism, "alice-secret", iterations=4096)}
    server = scram.ScramServer(mechanism, store.get)
    client = scram.ScramClient(mechanism, "alice", "alice-secret")
    client.verify(server.receive(client.final(server.receive(client.first()))))
    assert server.done
    server = scram.ScramServer(mechanism, store.get)
    client = scram.ScramClient(mechanism, "alice", "wrong")
    server_first = server.receive(client.first())
    with pytest.raises(scram.ScramFailure, match="Invalid user credentials"):
        server.receive(client.final(server_first))
    assert not server.done


def test_an_unknown_user_fails_at_the_first_message():
    server = scram.ScramServer("SCRAM-SHA-256", {}.get)
    with pytest.raises(scram.ScramFailure):
        server.receive(CLIENT_FIRST)


@pytest.mark.parametrize("message", [b"", b"p=tls-unique,,n=user,r=x", b"n,,r=x", b"\xff\xfe",
                                     b"n,,m=ext,n=user,r=x", b"n,,n=user,r=x,tokenauth=true"])
def test_malformed_or_unserved_client_first_messages_fail(message):
    server = scram.ScramServer("SCRAM-SHA-256", {"user": rfc_credential()}.get)
    with pytest.raises(scram.ScramFailure):
        server.receive(message)


def test_a_replayed_final_with_another_nonce_fails():
    server = scram.ScramServer("SCRAM-SHA-256", {"user": rfc_credential()}.get, nonce="other")
    server.receive(CLIENT_FIRST)
    with pytest.raises(scram.ScramFailure, match="nonce"):
        server.receive(CLIENT_FINAL)


def test_the_stored_credential_holds_no_password_and_verifies_plain_by_recomputing():
    credential = rfc_credential()
    plain = credential.to_plain()
    assert "pencil" not in repr(plain) and set(plain) == {"salt", "iterations", "stored_key",
                                                          "server_key"}
    again = scram.ScramCredential.from_plain("SCRAM-SHA-256", plain)
    assert again == credential
    assert again.verify_password("pencil") and not again.verify_password("pencil2")

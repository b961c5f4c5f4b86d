"""The client-final nonce follows Kafka's rule: it must end with the server-first nonce.
librdkafka 2.0 (kcat 1.7's) sends its own nonce again in front of the combined one, and
Kafka accepts it; what it proves is still checked, and the server's part must be there."""
from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from broker.security import scram

MECHANISM = "SCRAM-SHA-512"


def librdkafka_2_0_final(server_first: bytes, client_nonce: str, password: str,
                         first_bare: str, prefix: str) -> bytes:
    """A client-final as librdkafka 2.0 builds it: r = <prefix> + the server's r."""
    attributes = dict(part.split("=", 1) for part in server_first.decode().split(","))
    salted = scram.salted_password(MECHANISM, password, base64.b64decode(attributes["s"]),
                                   int(attributes["i"]))
    without_proof = f"c=biws,r={prefix}{attributes['r']}"
    auth_message = f"{first_bare},{server_first.decode()},{without_proof}".encode()
    client_key = hmac.new(salted, b"Client Key", "sha512").digest()
    signature = hmac.new(hashlib.sha512(client_key).digest(), auth_message, "sha512").digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def exchange(password: str, prefix: str, nonce: str = "client-nonce"):
    credential = scram.new_credential(MECHANISM, "secret", iterations=4096)
    server = scram.ScramServer(MECHANISM, {"alice": credential}.get, nonce="server-part")
    first_bare = f"n=alice,r={nonce}"
    server_first = server.receive(f"n,,{first_bare}".encode())
    return server, server.receive(librdkafka_2_0_final(server_first, nonce, password,
                                                        first_bare, prefix))


def test_librdkafka_2_0s_repeated_client_nonce_is_accepted():
    server, _ = exchange("secret", prefix="client-nonce")
    assert server.done and server.username == "alice"


def test_a_repeated_nonce_with_a_wrong_password_still_fails_at_the_proof():
    with pytest.raises(scram.ScramFailure, match="Invalid user credentials"):
        exchange("wrong", prefix="client-nonce")


def test_a_nonce_not_ending_with_the_servers_fails():
    credential = scram.new_credential(MECHANISM, "secret", iterations=4096)
    server = scram.ScramServer(MECHANISM, {"alice": credential}.get, nonce="server-part")
    server.receive(b"n,,n=alice,r=client-nonce")
    with pytest.raises(scram.ScramFailure, match="nonce"):
        server.receive(b"c=biws,r=client-nonceserver-part-and-more,p=AAAA")

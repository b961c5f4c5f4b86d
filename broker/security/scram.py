"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka speaks them (KIP-84).

Sans-IO, in the h11 manner: ``ScramServer.receive(client_message)`` returns the next
server message (bytes) or raises ``ScramFailure``; ``done`` and ``username`` say how it
ended.  The broker never holds a password: a ``ScramCredential`` keeps the salt, the
iteration count, the stored key ``H(HMAC(SaltedPassword, "Client Key"))`` and the server
key ``HMAC(SaltedPassword, "Server Key")``.  ``ScramClient`` is the other side (the
broker's inter-broker connections, the CLI's tests).

Kafka's rules kept here: iterations between 4096 and 16384; an unknown user fails at the
first message; extensions in the client-first message (``tokenauth``) are not served.
Pure; any thread.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# KIP-554's mechanism numbers (AlterUserScramCredentials / DescribeUserScramCredentials).
MECHANISM_TYPES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
TYPE_OF = {name: number for number, name in MECHANISM_TYPES.items()}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 8192


class ScramFailure(Exception):
    """Authentication failed (wrong proof, unknown user, malformed message)."""


@dataclass(frozen=True)
class ScramCredential:
    mechanism: str
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    def to_plain(self) -> dict:
        """Plain values for the metadata journal (base64 text)."""
        return {"salt": _b64(self.salt), "iterations": self.iterations,
                "stored_key": _b64(self.stored_key), "server_key": _b64(self.server_key)}

    @classmethod
    def from_plain(cls, mechanism: str, plain: dict) -> ScramCredential:
        return cls(mechanism, _unb64(plain["salt"]), int(plain["iterations"]),
                   _unb64(plain["stored_key"]), _unb64(plain["server_key"]))

    def verify_password(self, password: str) -> bool:
        """PLAIN against the SCRAM store: recompute the stored key from the password."""
        salted = salted_password(self.mechanism, password, self.salt, self.iterations)
        return hmac.compare_digest(_stored_key(self.mechanism, salted), self.stored_key)


def _hash_name(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism]
    except KeyError:
        raise ValueError(f"not a SCRAM mechanism: {mechanism!r}") from None


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_hash_name(mechanism), _saslprep(password).encode(), salt,
                               iterations)


def _hmac(mechanism: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, _hash_name(mechanism)).digest()


def _stored_key(mechanism: str, salted: bytes) -> bytes:
    return hashlib.new(_hash_name(mechanism), _hmac(mechanism, salted, b"Client Key")).digest()


def credential_from_salted(mechanism: str, salt: bytes, iterations: int,
                           salted: bytes) -> ScramCredential:
    """What AlterUserScramCredentials stores from the client's salted password (KIP-554)."""
    return ScramCredential(mechanism, salt, iterations, _stored_key(mechanism, salted),
                           _hmac(mechanism, salted, b"Server Key"))


def new_credential(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                   salt: bytes | None = None) -> ScramCredential:
    salt = salt if salt is not None else secrets.token_bytes(32)
    return credential_from_salted(mechanism, salt, iterations,
                                  salted_password(mechanism, password, salt, iterations))


class ScramServer:
    """One server-side exchange: client-first → server-first, client-final → server-final.

    ``lookup(username)`` returns the user's ScramCredential for this mechanism or None.
    After the second ``receive`` returns, ``done`` is True and ``username`` authenticated;
    any failure raises ScramFailure and the exchange is over.
    """

    def __init__(self, mechanism: str, lookup: Callable[[str], ScramCredential | None],
                 nonce: str | None = None):
        _hash_name(mechanism)
        self.mechanism = mechanism
        self.lookup = lookup
        self._server_nonce = nonce or secrets.token_urlsafe(24)
        self._step = 0
        self.done = False
        self.username: str | None = None
        self._credential: ScramCredential | None = None
        self._client_first_bare = self._server_first = self._gs2_header = ""
        self._nonce = ""

    def receive(self, message: bytes) -> bytes:
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramFailure("SCRAM message is not UTF-8") from None
        if self._step == 0:
            return self._client_first(text)
        if self._step == 1:
            return self._client_final(text)
        raise ScramFailure("SCRAM exchange already finished")

    def _client_first(self, text: str) -> bytes:
        self._step = 1
        parts = text.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y") or (parts[1] and
                                                             not parts[1].startswith("a=")):
            raise ScramFailure("malformed SCRAM client-first message (channel binding is "
                               "not served)")
        self._gs2_header = f"{parts[0]},{parts[1]},"
        self._client_first_bare = parts[2]
        attributes = _attributes(parts[2])
        if "m" in attributes:
            raise ScramFailure("SCRAM mandatory extensions are not served")
        username, client_nonce = attributes.get("n"), attributes.get("r")
        if not username or not client_nonce:
            raise ScramFailure("SCRAM client-first message lacks n= or r=")
        self.username = username.replace("=2C", ",").replace("=3D", "=")
        if attributes.get("tokenauth", "false").lower() == "true":
            raise ScramFailure("delegation tokens are not served")
        self._credential = self.lookup(self.username)
        if self._credential is None:
            raise ScramFailure("Authentication failed: Invalid user credentials")
        self._nonce = client_nonce + self._server_nonce
        self._server_first = (f"r={self._nonce},s={_b64(self._credential.salt)},"
                              f"i={self._credential.iterations}")
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        self._step = 2
        without_proof, sep, proof_part = text.rpartition(",p=")
        attributes = _attributes(without_proof)
        # Kafka's rule (ScramSaslServer): the nonce must *end with* the server-first one,
        # not equal it.  librdkafka 2.0 (kcat 1.7's) sends its own nonce again in front of the
        # combined one; the proof still covers what was sent, and the server's fresh
        # part must be there, so a replay from another exchange still fails.
        if not sep or not attributes.get("r", "").endswith(self._nonce):
            raise ScramFailure("SCRAM client-final message has a wrong nonce or no proof")
        if attributes.get("c") != _b64(self._gs2_header.encode()):
            raise ScramFailure("SCRAM channel binding does not match")
        credential = self._credential
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise ScramFailure("SCRAM proof is not base64") from None
        signature = _hmac(self.mechanism, credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramFailure("Authentication failed: Invalid user credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        computed = hashlib.new(MECHANISMS[self.mechanism], client_key).digest()
        if not hmac.compare_digest(computed, credential.stored_key):
            raise ScramFailure("Authentication failed: Invalid user credentials")
        self.done = True
        return ("v=" + _b64(_hmac(self.mechanism, credential.server_key, auth_message))).encode()


class ScramClient:
    """The client side: ``first()``, then ``final(server_first)``, then
    ``verify(server_final)`` (ScramFailure if the server does not know the password)."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None):
        _hash_name(mechanism)
        self.mechanism, self.username, self.password = mechanism, username, password
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._first_bare = ""
        self._auth_message = b""
        self._salted = b""

    def first(self) -> bytes:
        name = self.username.replace("=", "=3D").replace(",", "=2C")
        self._first_bare = f"n={name},r={self._nonce}"
        return ("n,," + self._first_bare).encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        attributes = _attributes(text)
        nonce = attributes.get("r", "")
        if not nonce.startswith(self._nonce) or "s" not in attributes or "i" not in attributes:
            raise ScramFailure(f"bad SCRAM server-first message {text!r}")
        self._salted = salted_password(self.mechanism, self.password,
                                       base64.b64decode(attributes["s"]), int(attributes["i"]))
        without_proof = f"c=biws,r={nonce}"
        self._auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        client_key = _hmac(self.mechanism, self._salted, b"Client Key")
        stored = hashlib.new(MECHANISMS[self.mechanism], client_key).digest()
        signature = _hmac(self.mechanism, stored, self._auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify(self, server_final: bytes) -> None:
        server_key = _hmac(self.mechanism, self._salted, b"Server Key")
        expected = "v=" + _b64(_hmac(self.mechanism, server_key, self._auth_message))
        if not hmac.compare_digest(server_final.decode(), expected):
            raise ScramFailure("the server's SCRAM signature does not match")


def _attributes(text: str) -> dict[str, str]:
    result = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if sep:
            result.setdefault(key, value)
    return result


def _saslprep(password: str) -> str:
    # Kafka's ScramFormatter normalises nothing beyond UTF-8 either.
    return password


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    return base64.b64decode(text)

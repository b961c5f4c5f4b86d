"""A throwaway PKI for TLS tests, made with the ``openssl`` command at test time.

``make_pki(directory)`` writes a CA and certificates signed by it: a broker certificate
for 127.0.0.1/localhost, a client certificate (CN=client, for mutual TLS), PEM
keystores (key + certificate chain in one file, as ``ssl.keystore.location`` wants) and
an encrypted-key keystore (``ssl.key.password``).  EC P-256 keys keep it fast.
"""
from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

KEY_PASSWORD = "keystore-secret"


@dataclass(frozen=True)
class Pki:
    ca: Path                      # the CA certificate (truststore)
    broker_keystore: Path         # key + broker certificate + CA
    broker_encrypted_keystore: Path  # the same with the key encrypted (KEY_PASSWORD)
    client_keystore: Path         # key + client certificate (CN=client,O=Raftwood Tests)
    client_cert: Path
    client_key: Path
    other_ca: Path                # a CA that signed nothing here

    def read(self, which: str) -> str:
        return getattr(self, which).read_text()


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=30)


def _ca(directory: Path, name: str) -> None:
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2",
             "-subj", f"/CN={name}", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)


def _leaf(directory: Path, name: str, subject: str, extensions: str) -> None:
    (directory / f"{name}.ext").write_text(extensions)
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=directory)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext",
             cwd=directory)


def make_pki(directory: Path) -> Pki:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make test certificates")
    directory.mkdir(parents=True, exist_ok=True)
    _ca(directory, "ca")
    _ca(directory, "other-ca")
    _leaf(directory, "broker", "/CN=broker",
          "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n")
    _leaf(directory, "client", "/O=Raftwood Tests/CN=client", "extendedKeyUsage=clientAuth\n")
    _openssl("pkey", "-in", "broker.key", "-aes256", "-passout", f"pass:{KEY_PASSWORD}",
             "-out", "broker-encrypted.key", cwd=directory)
    ca = (directory / "ca.pem").read_text()
    for name, key in (("broker", "broker.key"), ("broker-encrypted", "broker-encrypted.key"),
                      ("client", "client.key")):
        leaf = "broker" if name.startswith("broker") else name
        (directory / f"{name}-keystore.pem").write_text(
            (directory / key).read_text() + (directory / f"{leaf}.pem").read_text() + ca)
    return Pki(directory / "ca.pem", directory / "broker-keystore.pem",
               directory / "broker-encrypted-keystore.pem", directory / "client-keystore.pem",
               directory / "client.pem", directory / "client.key", directory / "other-ca.pem")


def with_listeners(broker, extra_listeners: str):
    """Give a BrokerProcess (not started) more listeners after the PLAINTEXT one it owns
    (which stays first: readiness checks and the status request use it)."""
    command = broker.command

    def command_with_listeners() -> list[str]:
        args = command()
        managed = f"listeners=PLAINTEXT://{broker.bootstrap}"
        args[args.index(managed)] = f"{managed},{extra_listeners}"
        return args

    broker.command = command_with_listeners
    return broker

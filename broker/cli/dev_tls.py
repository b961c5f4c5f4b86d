"""Self-made certificates for ``raftwood dev --secure``, with the ``cryptography`` package.

``make_dev_pki(directory)`` writes, once per data directory (kept across runs, so
clients configured earlier keep working):

    ca.pem                 the CA certificate: the clients' truststore
    broker-keystore.pem    the brokers' private key (PKCS#8, unencrypted), their
                           certificate (127.0.0.1 and localhost) and the CA: what
                           ``ssl.keystore.location`` wants
    ca.key                 the CA's key (only to make more certificates; mode 0600)

EC P-256 keys, valid for 365 days.  For local development only: the keys are not
protected by a password, and anyone who can read the data directory can use them.
"""
from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

VALID_DAYS = 365


@dataclass(frozen=True)
class DevPki:
    ca: Path
    broker_keystore: Path


def make_dev_pki(directory: Path | str) -> DevPki:
    """The CA and the brokers' keystore in ``directory``, made unless both exist."""
    directory = Path(directory)
    pki = DevPki(directory / "ca.pem", directory / "broker-keystore.pem")
    if pki.ca.exists() and pki.broker_keystore.exists():
        return pki
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)

    def name(common_name: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "raftwood dev"),
                          x509.NameAttribute(NameOID.COMMON_NAME, common_name)])

    def certificate(subject, issuer, public_key, signing_key, extensions):
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
                   .public_key(public_key).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=VALID_DAYS)))
        for extension, critical in extensions:
            builder = builder.add_extension(extension, critical=critical)
        return builder.sign(signing_key, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = name("raftwood dev CA")
    ca_cert = certificate(ca_name, ca_name, ca_key.public_key(), ca_key, [
        (x509.BasicConstraints(ca=True, path_length=0), True),
        (x509.KeyUsage(digital_signature=False, content_commitment=False,
                       key_encipherment=False, data_encipherment=False, key_agreement=False,
                       key_cert_sign=True, crl_sign=True, encipher_only=False,
                       decipher_only=False), True)])
    broker_key = ec.generate_private_key(ec.SECP256R1())
    broker_cert = certificate(name("raftwood dev broker"), ca_name, broker_key.public_key(),
                              ca_key, [
        (x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                      x509.DNSName("localhost")]), False),
        (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                ExtendedKeyUsageOID.CLIENT_AUTH]), False)])

    def pem(cert) -> bytes:
        return cert.public_bytes(serialization.Encoding.PEM)

    def private(key) -> bytes:
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())

    write_private(directory / "ca.key", private(ca_key))
    write_private(pki.broker_keystore, private(broker_key) + pem(broker_cert) + pem(ca_cert))
    pki.ca.write_bytes(pem(ca_cert))
    return pki


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to a file only its owner may read (0600 from its creation)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)

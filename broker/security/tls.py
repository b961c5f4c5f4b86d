"""TLS for listeners and for the broker's own connections, from Kafka's PEM settings.

Server side (a listener of protocol SSL or SASL_SSL):
``ssl.keystore.type=PEM`` with ``ssl.keystore.location`` (one PEM file holding the private
key and the certificate chain; ``ssl.key.password`` when the key is encrypted), or the
same inline in ``ssl.keystore.certificate.chain`` and ``ssl.keystore.key``.  Client
certificates are checked against ``ssl.truststore.type=PEM`` with
``ssl.truststore.location`` or inline ``ssl.truststore.certificates``, as
``ssl.client.auth`` asks (``none``, ``requested``, ``required``).  TLS 1.2 and 1.3 only
(``ssl.enabled.protocols`` may narrow that).  Every setting may be given per listener
with Kafka's prefix ``listener.name.<name>.``.

Client side (replica fetchers on an SSL inter-broker listener): the same listener's
truststore verifies the leader, its keystore (if any) is presented, and
``ssl.endpoint.identification.algorithm=https`` (Kafka's default) checks the host name.

Only PEM is served: JKS and PKCS12 keystores are refused at start (SettingError).
Pure apart from reading the named files; any thread.
"""
from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Callable

Lookup = Callable[[str], str]

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
               "required": ssl.CERT_REQUIRED}
PROTOCOL_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
# Every per-listener TLS setting (Kafka's names) and its default.
TLS_SETTINGS = {
    "ssl.keystore.type": "PEM",
    "ssl.keystore.location": "",
    "ssl.keystore.password": "",
    "ssl.key.password": "",
    "ssl.keystore.certificate.chain": "",
    "ssl.keystore.key": "",
    "ssl.truststore.type": "PEM",
    "ssl.truststore.location": "",
    "ssl.truststore.password": "",
    "ssl.truststore.certificates": "",
    "ssl.client.auth": "none",
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    "ssl.endpoint.identification.algorithm": "https",
    "ssl.cipher.suites": "",
}
ANONYMOUS = "User:ANONYMOUS"


class SettingError(ValueError):
    """A TLS setting names something unsupported or unusable (a clear start-up refusal)."""


def check_settings(get: Lookup, listener_name: str) -> None:
    """Refuse unsupported values without reading files (config time)."""
    where = f"listener {listener_name}"
    for key in ("ssl.keystore.type", "ssl.truststore.type"):
        if get(key).upper() != "PEM":
            raise SettingError(f"{where}: {key}={get(key)} is not supported; Raftwood reads "
                               f"PEM only ({key}=PEM)")
    for key in ("ssl.keystore.password", "ssl.truststore.password"):
        if get(key):  # Kafka's rule for PEM stores: only the key may have a password
            raise SettingError(f"{where}: {key} cannot be specified with PEM stores; an "
                               f"encrypted key takes ssl.key.password")
    if get("ssl.client.auth").lower() not in CLIENT_AUTH:
        raise SettingError(f"{where}: ssl.client.auth={get('ssl.client.auth')} is not one of "
                           f"none, requested, required")
    _versions(get, where)
    if get("ssl.keystore.location") and (get("ssl.keystore.certificate.chain")
                                         or get("ssl.keystore.key")):
        raise SettingError(f"{where}: give ssl.keystore.location or the inline "
                           f"ssl.keystore.certificate.chain/ssl.keystore.key, not both")
    if bool(get("ssl.keystore.certificate.chain")) != bool(get("ssl.keystore.key")):
        raise SettingError(f"{where}: ssl.keystore.certificate.chain and ssl.keystore.key "
                           f"go together")
    if get("ssl.truststore.location") and get("ssl.truststore.certificates"):
        raise SettingError(f"{where}: give ssl.truststore.location or "
                           f"ssl.truststore.certificates, not both")
    algorithm = get("ssl.endpoint.identification.algorithm").lower()
    if algorithm not in ("", "https"):
        raise SettingError(f"{where}: ssl.endpoint.identification.algorithm must be https or "
                           f"empty")


def server_context(get: Lookup, listener_name: str) -> ssl.SSLContext:
    """The SSLContext of a TLS listener (SettingError when unusable)."""
    check_settings(get, listener_name)
    where = f"listener {listener_name}"
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _restrict(context, get, where)
    if not (get("ssl.keystore.location") or get("ssl.keystore.certificate.chain")):
        raise SettingError(f"{where}: a TLS listener needs ssl.keystore.location or "
                           f"ssl.keystore.certificate.chain + ssl.keystore.key")
    _load_keystore(context, get, where)
    client_auth = CLIENT_AUTH[get("ssl.client.auth").lower()]
    if client_auth != ssl.CERT_NONE:
        if not _load_truststore(context, get, where):
            raise SettingError(f"{where}: ssl.client.auth={get('ssl.client.auth')} needs "
                               f"ssl.truststore.location or ssl.truststore.certificates")
    context.verify_mode = client_auth
    return context


def reload_server_context(context: ssl.SSLContext, get: Lookup, listener_name: str) -> None:
    """Load a TLS listener's keystore (and truststore, when set) again into its live
    ``context``: connections made from then on use them, open ones keep theirs.  The
    settings are first checked on a new context (SettingError, ``context`` unchanged)."""
    server_context(get, listener_name)
    where = f"listener {listener_name}"
    _load_keystore(context, get, where)
    _load_truststore(context, get, where)


def client_context(get: Lookup, listener_name: str) -> ssl.SSLContext:
    """The SSLContext the broker connects with to another broker's TLS listener."""
    check_settings(get, listener_name)
    where = f"listener {listener_name}"
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _restrict(context, get, where)
    if not _load_truststore(context, get, where):
        context.load_default_certs()
    if get("ssl.keystore.location") or get("ssl.keystore.certificate.chain"):
        _load_keystore(context, get, where)
    context.check_hostname = get("ssl.endpoint.identification.algorithm").lower() == "https"
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def server_contexts(config) -> dict[str, ssl.SSLContext]:
    """Listener name → SSLContext for every TLS listener of a BrokerConfig."""
    contexts = {}
    for listener in config.listener_plan.listeners:
        if listener.uses_tls:
            contexts[listener.name] = server_context(
                lambda key, name=listener.name: config.listener_setting(name, key),
                listener.name)
    return contexts


def principal_of(peer_certificate: dict | None) -> str:
    """Kafka's default SSL principal: ``User:`` and the subject's distinguished name in
    RFC 2253 order (most specific first: ``CN=client,O=Org``); ANONYMOUS without one."""
    if not peer_certificate or not peer_certificate.get("subject"):
        return ANONYMOUS
    parts = []
    for rdn in reversed(peer_certificate["subject"]):
        parts.append("+".join(f"{_SHORT.get(k, k)}={_escape(v)}" for k, v in rdn))
    return "User:" + ",".join(parts)


_SHORT = {"commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU",
          "countryName": "C", "stateOrProvinceName": "ST", "localityName": "L",
          "streetAddress": "STREET", "domainComponent": "DC", "userId": "UID"}


def _escape(value: str) -> str:
    escaped = "".join("\\" + c if c in ',+"\\<>;=' else c for c in value)
    if escaped.startswith((" ", "#")):
        escaped = "\\" + escaped
    return escaped[:-1] + "\\ " if escaped.endswith(" ") else escaped


def _versions(get: Lookup, where: str) -> list[ssl.TLSVersion]:
    names = [v.strip() for v in get("ssl.enabled.protocols").split(",") if v.strip()]
    refused = [n for n in names if n not in PROTOCOL_VERSIONS]
    if refused or not names:
        raise SettingError(f"{where}: ssl.enabled.protocols {get('ssl.enabled.protocols')!r}: "
                           f"only TLSv1.2 and TLSv1.3 are served")
    return sorted(PROTOCOL_VERSIONS[n] for n in names)


def _restrict(context: ssl.SSLContext, get: Lookup, where: str) -> None:
    versions = _versions(get, where)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    if get("ssl.cipher.suites"):
        try:
            context.set_ciphers(":".join(c.strip() for c in get("ssl.cipher.suites").split(",")))
        except ssl.SSLError as exc:
            raise SettingError(f"{where}: ssl.cipher.suites: {exc}") from exc


def _load_keystore(context: ssl.SSLContext, get: Lookup, where: str) -> None:
    password = get("ssl.key.password") or None
    try:
        if get("ssl.keystore.location"):
            context.load_cert_chain(get("ssl.keystore.location"), password=password)
            return
        # The ssl module loads keys from files only: a private, short-lived one.
        with tempfile.TemporaryDirectory(prefix="raftwood-tls-") as directory:
            path = os.path.join(directory, "keystore.pem")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(_pem(get("ssl.keystore.key")) + "\n"
                        + _pem(get("ssl.keystore.certificate.chain")) + "\n")
            context.load_cert_chain(path, password=password)
    except (OSError, ssl.SSLError) as exc:
        raise SettingError(f"{where}: cannot load the keystore "
                           f"({get('ssl.keystore.location') or 'inline'}): {exc}") from exc


def _load_truststore(context: ssl.SSLContext, get: Lookup, where: str) -> bool:
    try:
        if get("ssl.truststore.location"):
            context.load_verify_locations(cafile=get("ssl.truststore.location"))
            return True
        if get("ssl.truststore.certificates"):
            context.load_verify_locations(cadata=_pem(get("ssl.truststore.certificates")))
            return True
    except (OSError, ssl.SSLError) as exc:
        raise SettingError(f"{where}: cannot load the truststore: {exc}") from exc
    return False


def _pem(text: str) -> str:
    """Inline PEM as it survives a properties file: literal ``\\n`` become newlines."""
    return text.replace("\\n", "\n").strip()

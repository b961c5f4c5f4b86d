"""``--command-config FILE``: how the command line reaches a TLS or SASL listener.

The file is what Kafka's tools take under the same option, a Java properties file of
client settings by Kafka's names:

* ``security.protocol``: PLAINTEXT (the default), SSL, SASL_PLAINTEXT or SASL_SSL;
* ``sasl.mechanism`` (librdkafka's ``sasl.mechanisms`` too): PLAIN, SCRAM-SHA-256 or
  SCRAM-SHA-512, with the credentials of ``sasl.jaas.config``
  (``... required username="alice" password="alice-secret";``) or of librdkafka's
  ``sasl.username`` / ``sasl.password``;
* TLS, PEM only, as the broker reads it (``broker/security/tls.py``):
  ``ssl.truststore.type=PEM`` with ``ssl.truststore.location`` or
  ``ssl.truststore.certificates`` (else the system's CAs), ``ssl.keystore.type=PEM`` with
  ``ssl.keystore.location`` (key + certificate chain, ``ssl.key.password`` if encrypted)
  or the inline ``ssl.keystore.certificate.chain`` / ``ssl.keystore.key`` for mutual TLS,
  ``ssl.endpoint.identification.algorithm`` (``https``, the default, checks the host name;
  empty does not), ``ssl.enabled.protocols``, ``ssl.cipher.suites``.

Anything else in the file is ignored, as Kafka's tools ignore settings meant for other
clients.  ``load(path)`` builds the ClientSecurity every connection of the command uses
(one SSLContext, shared); a setting that cannot work is a CommandConfigError naming it.
"""
from __future__ import annotations

from .. import config as config_module
from ..security import sasl, scram, tls
from ..security.client import PLAINTEXT, ClientSecurity

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", *scram.MECHANISMS)


class CommandConfigError(ValueError):
    """The command config cannot be read or names something unusable (message for the user)."""


def load(path: str) -> ClientSecurity:
    try:
        settings = config_module.read_file(path)
    except (OSError, config_module.ConfigError) as exc:
        raise CommandConfigError(f"cannot read the command config {path}: {exc}") from exc
    return from_settings(settings, path)


def from_settings(settings: dict[str, str], where: str = "command config") -> ClientSecurity:
    """The ClientSecurity the settings describe (CommandConfigError when unusable)."""
    protocol = settings.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise CommandConfigError(f"{where}: security.protocol={protocol} is not one of "
                                 f"{', '.join(PROTOCOLS)}")

    def get(key: str) -> str:
        return settings.get(key, tls.TLS_SETTINGS.get(key, "")).strip()

    context = None
    if protocol in ("SSL", "SASL_SSL"):
        try:
            context = tls.client_context(get, where)
        except tls.SettingError as exc:
            raise CommandConfigError(str(exc)) from exc
    if not protocol.startswith("SASL_"):
        return ClientSecurity(protocol, context) if context is not None else PLAINTEXT
    mechanism, username, password = _credentials(settings, where)
    return ClientSecurity(protocol, context, mechanism, username, password)


def _credentials(settings: dict[str, str], where: str) -> tuple[str, str, str]:
    mechanism = (settings.get("sasl.mechanism") or settings.get("sasl.mechanisms")
                 or "GSSAPI").strip().upper()
    if mechanism not in MECHANISMS:
        raise CommandConfigError(f"{where}: sasl.mechanism={mechanism}: the command line "
                                 f"speaks {', '.join(MECHANISMS)}")
    try:
        jaas = sasl.parse_jaas(settings.get("sasl.jaas.config", ""))
    except sasl.SaslSettingError as exc:
        raise CommandConfigError(f"{where}: {exc}") from exc
    options = jaas.options if jaas is not None else {}
    username = options.get("username", settings.get("sasl.username", ""))
    password = options.get("password", settings.get("sasl.password"))
    if not username or password is None:
        raise CommandConfigError(f"{where}: SASL needs a user: sasl.jaas.config with "
                                 f"username=\"...\" password=\"...\", or sasl.username and "
                                 f"sasl.password")
    return mechanism, username, password

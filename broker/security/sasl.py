"""SASL on the broker: PLAIN and SCRAM-SHA-256/512 (KIP-152 framing, KIP-84 SCRAM).

``SaslMechanisms`` is built once per broker from the config and a credential lookup
(the SCRAM credentials of the current metadata image).  ``new_exchange(listener,
mechanism)`` gives a sans-IO server exchange: ``receive(client_bytes) -> server_bytes``,
``done`` and ``username`` once it succeeded, ``SaslFailure`` when it failed.

PLAIN checks ``username``/``password`` against, first, the ``user_<name>="<password>"``
entries of the listener's ``plain.sasl.jaas.config`` (Kafka's PlainLoginModule format)
and then the SCRAM store, by recomputing the stored key from the password.
Pure apart from the lookup; event-loop only (the lookup reads the broker's image).
"""
from __future__ import annotations

import hmac
import re
from collections.abc import Callable
from dataclasses import dataclass

from . import scram

SERVED_MECHANISMS = ("PLAIN", *scram.MECHANISMS)
JAAS_SUFFIX = ".sasl.jaas.config"
# Per-listener SASL settings (``listener.name.<l>.`` prefix allowed), Kafka's names.
SASL_LISTENER_SETTINGS = {
    "sasl.enabled.mechanisms": "GSSAPI",
    **{f"{m.lower()}{JAAS_SUFFIX}": "" for m in SERVED_MECHANISMS},
}
_JAAS_OPTION = re.compile(r'([A-Za-z0-9_.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')

CredentialLookup = Callable[[str, str], "scram.ScramCredential | None"]


class SaslFailure(Exception):
    """Authentication failed; the message goes to the client (no secrets in it)."""


class SaslSettingError(ValueError):
    """The SASL settings cannot work (a clear start-up refusal)."""


@dataclass(frozen=True)
class JaasConfig:
    login_module: str
    options: dict

    def users(self) -> dict[str, str]:
        """PlainLoginModule's ``user_<name>="<password>"`` entries."""
        return {k[len("user_"):]: v for k, v in self.options.items() if k.startswith("user_")}


def parse_jaas(text: str) -> JaasConfig | None:
    """``<LoginModule> required key="value" ...;`` → JaasConfig; None for empty text."""
    text = (text or "").strip()
    if not text:
        return None
    head = text.split(None, 2)
    if len(head) < 2 or head[1] not in ("required", "requisite", "sufficient", "optional"):
        raise SaslSettingError(f"sasl.jaas.config {text[:40]!r}...: expected "
                               f"'<LoginModule> required key=\"value\" ...;'")
    options = {m.group(1): (m.group(2) if m.group(2) is not None else m.group(3)).replace(
        '\\"', '"').replace("\\\\", "\\") for m in _JAAS_OPTION.finditer(text)}
    return JaasConfig(head[0], options)


def enabled_mechanisms(config, listener_name: str) -> list[str]:
    text = config.listener_setting(listener_name, "sasl.enabled.mechanisms") or ""
    return [m.strip().upper() for m in text.split(",") if m.strip()]


def jaas_for(config, listener_name: str, mechanism: str) -> JaasConfig | None:
    return parse_jaas(config.listener_setting(listener_name,
                                              f"{mechanism.lower()}{JAAS_SUFFIX}"))


def check_settings(config) -> None:
    """Refuse SASL settings that cannot work, naming the setting (config time)."""
    plan = config.listener_plan
    for listener in plan.listeners:
        if not listener.uses_sasl:
            continue
        enabled = enabled_mechanisms(config, listener.name)
        unserved = [m for m in enabled if m not in SERVED_MECHANISMS]
        if unserved or not enabled:
            raise SaslSettingError(
                f"listener {listener.name}: sasl.enabled.mechanisms={','.join(enabled)}: "
                f"Raftwood serves {', '.join(SERVED_MECHANISMS)} (set sasl.enabled.mechanisms "
                f"or listener.name.{listener.name.lower()}.sasl.enabled.mechanisms)")
        for mechanism in enabled:
            jaas_for(config, listener.name, mechanism)  # parses, or raises
    inter = plan.inter_broker
    if inter.uses_sasl:
        mechanism = config["sasl.mechanism.inter.broker.protocol"].upper()
        if mechanism not in enabled_mechanisms(config, inter.name):
            raise SaslSettingError(
                f"sasl.mechanism.inter.broker.protocol={mechanism} is not enabled on the "
                f"inter-broker listener {inter.name}")
        jaas = jaas_for(config, inter.name, mechanism)
        if jaas is None or not jaas.options.get("username") or "password" not in jaas.options:
            raise SaslSettingError(
                f"the inter-broker listener {inter.name} uses SASL {mechanism}: set "
                f"listener.name.{inter.name.lower()}.{mechanism.lower()}{JAAS_SUFFIX} with "
                f"username=\"...\" password=\"...\" (the broker's own credentials)")


def inter_broker_credentials(config) -> tuple[str, str, str] | None:
    """(mechanism, username, password) the broker authenticates with on the inter-broker
    listener, or None when that listener has no SASL."""
    inter = config.listener_plan.inter_broker
    if not inter.uses_sasl:
        return None
    mechanism = config["sasl.mechanism.inter.broker.protocol"].upper()
    jaas = jaas_for(config, inter.name, mechanism)
    return mechanism, jaas.options["username"], jaas.options["password"]


class PlainServer:
    """RFC 4616: one message ``[authzid] NUL authcid NUL passwd``, empty answer."""

    def __init__(self, verify: Callable[[str, str], bool]):
        self.verify = verify
        self.done = False
        self.username: str | None = None

    def receive(self, message: bytes) -> bytes:
        if self.done or self.username is not None:
            raise SaslFailure("PLAIN takes a single message")
        try:
            authzid, username, password = message.decode("utf-8").split("\x00")
        except ValueError:
            raise SaslFailure("Invalid SASL/PLAIN response: expected 3 tokens") from None
        self.username = username
        if not username or not password:
            raise SaslFailure("Authentication failed: username or password is empty")
        if authzid and authzid != username:
            raise SaslFailure("Authentication failed: Client requested an authorization id "
                              "that is different from username")
        if not self.verify(username, password):
            raise SaslFailure("Authentication failed: Invalid username or password")
        self.done = True
        return b""


class ScramExchange:
    """SCRAM's server exchange with ScramFailure turned into SaslFailure."""

    def __init__(self, server: scram.ScramServer):
        self.server = server

    @property
    def done(self) -> bool:
        return self.server.done

    @property
    def username(self) -> str | None:
        return self.server.username

    def receive(self, message: bytes) -> bytes:
        try:
            return self.server.receive(message)
        except scram.ScramFailure as exc:
            raise SaslFailure(str(exc)) from None


class SaslMechanisms:
    """The broker's SASL servers.  ``credentials(user, mechanism)`` reads the SCRAM store."""

    def __init__(self, config, credentials: CredentialLookup):
        self.config = config
        self.credentials = credentials

    def enabled(self, listener_name: str) -> list[str]:
        return enabled_mechanisms(self.config, listener_name)

    def new_exchange(self, listener_name: str, mechanism: str):
        if mechanism == "PLAIN":
            jaas = jaas_for(self.config, listener_name, "PLAIN")
            users = jaas.users() if jaas is not None else {}
            return PlainServer(lambda user, password: self._verify_plain(users, user, password))
        return ScramExchange(scram.ScramServer(
            mechanism, lambda user: self.credentials(user, mechanism)))

    def _verify_plain(self, users: dict[str, str], username: str, password: str) -> bool:
        if username in users:
            return hmac.compare_digest(users[username].encode(), password.encode())
        for mechanism in scram.MECHANISMS:
            credential = self.credentials(username, mechanism)
            if credential is not None:
                return credential.verify_password(password)
        return False


def scram_lookup(image_of: Callable[[], object]) -> CredentialLookup:
    """A credential lookup over the broker's current metadata image."""
    def lookup(user: str, mechanism: str):
        plain = image_of().scram_credentials.get(user, {}).get(mechanism)
        return scram.ScramCredential.from_plain(mechanism, plain) if plain else None
    return lookup

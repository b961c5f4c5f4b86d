"""The authorizer: may this principal, from this host, do this operation on this resource?

Settings, by Kafka's names:

* ``authorizer.class.name``: empty (the default) means no authorizer: every
  authenticated request is allowed, and the ACL APIs answer SECURITY_DISABLED.  Kafka's
  ``org.apache.kafka.metadata.authorizer.StandardAuthorizer`` (KRaft) and
  ``kafka.security.authorizer.AclAuthorizer`` (ZooKeeper) turn this one on, so existing
  configs work; any other class is refused at start.
* ``super.users``: ``User:a;User:b`` principals allowed everything.  The broker's own
  principal on the inter-broker listener belongs here (replica fetches need
  ClusterAction on the cluster), unless ACLs grant it that.
* ``allow.everyone.if.no.acl.found`` (default false): a resource with no ACL at all
  (no binding whose pattern covers it, whoever it names) is open to everyone.

The rule (Kafka's StandardAuthorizer): a super user is allowed; otherwise, among the
bindings covering the resource that name the principal (or ``User:*``) and the host (or
``*``), a DENY of the operation (or of ALL) refuses; else an ALLOW of the operation, of
ALL, or of an operation implying it (``acls.IMPLIED_BY``) allows; else refused — unless
no binding covers the resource and ``allow.everyone.if.no.acl.found`` is true.

``authorize`` and ``authorize_any`` are pure functions of their arguments; the
``Authorizer`` reads the bindings from the current metadata image.  Event-loop only.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from .acls import (
    CLUSTER_NAME,
    IMPLIED_BY,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from .tls import ANONYMOUS

log = logging.getLogger(__name__)

ENABLING_CLASSES = frozenset({"org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                              "kafka.security.authorizer.AclAuthorizer"})


class AuthorizerSettingError(ValueError):
    """An authorizer setting Raftwood cannot honour (a clear start-up refusal)."""


def check_settings(get: Callable[[str], str]) -> None:
    """Refuse an unknown authorizer class or a malformed super user (config time)."""
    name = get("authorizer.class.name").strip()
    if name and name not in ENABLING_CLASSES:
        raise AuthorizerSettingError(
            f"authorizer.class.name={name}: Raftwood's authorizer is enabled by "
            f"{' or '.join(sorted(ENABLING_CLASSES))}; leave it empty for none")
    for principal in parse_super_users(get("super.users")):
        kind, sep, who = principal.partition(":")
        if not sep or not kind or not who:
            raise AuthorizerSettingError(f"super.users: {principal!r} is not of the form "
                                         f"User:name")


def parse_super_users(text: str) -> list[str]:
    return [p.strip() for p in text.split(";") if p.strip()]


def _covering(bindings: Iterable[AclBinding], resource_type: ResourceType, name: str):
    return [b for b in bindings if b.applies_to(resource_type, name)]


def _names(binding: AclBinding, principal: str, host: str) -> bool:
    return binding.principal in (principal, WILDCARD_PRINCIPAL) and binding.host in (host,
                                                                                     WILDCARD)


def _allows(binding: AclBinding, operation: AclOperation) -> bool:
    return binding.permission == AclPermissionType.ALLOW and (
        binding.operation in (AclOperation.ALL, operation)
        or binding.operation in IMPLIED_BY.get(operation, ()))


def _denies(binding: AclBinding, operation: AclOperation) -> bool:
    return binding.permission == AclPermissionType.DENY and \
        binding.operation in (AclOperation.ALL, operation)


def authorize(bindings: Iterable[AclBinding], principal: str, host: str,
              operation: AclOperation, resource_type: ResourceType, name: str,
              allow_if_no_acl: bool = False) -> bool:
    """The rule of the module doc, without super users (pure)."""
    covering = _covering(bindings, resource_type, name)
    if not covering:
        return allow_if_no_acl
    applicable = [b for b in covering if _names(b, principal, host)]
    if any(_denies(b, operation) for b in applicable):
        return False
    return any(_allows(b, operation) for b in applicable)


def authorize_any(bindings: Iterable[AclBinding], principal: str, host: str,
                  operation: AclOperation, resource_type: ResourceType,
                  allow_if_no_acl: bool = False) -> bool:
    """Kafka's authorizeByResourceType: is ``operation`` allowed on at least one resource
    of the type?  True when an ALLOW binding for the principal and host exists that no
    DENY of the same or a wider pattern cancels (a DENY on LITERAL ``*`` cancels all);
    with no binding of the type at all, ``allow_if_no_acl`` decides (pure)."""
    of_type = [b for b in bindings if b.resource_type == resource_type]
    if not of_type:
        return allow_if_no_acl
    mine = [b for b in of_type if _names(b, principal, host)]
    denies = [b for b in mine if _denies(b, operation)]
    if any(d.pattern_type == PatternType.LITERAL and d.resource_name == WILDCARD
           for d in denies):
        return False
    for allow in (b for b in mine if _allows(b, operation)):
        if allow.pattern_type == PatternType.LITERAL and allow.resource_name == WILDCARD:
            return True  # cancelled only by a wildcard deny (above)
        if not any(_cancels(deny, allow) for deny in denies):
            return True
    return False


def _cancels(deny: AclBinding, allow: AclBinding) -> bool:
    """Does ``deny`` cover every resource ``allow`` covers?"""
    if deny.pattern_type == PatternType.LITERAL:
        return allow.pattern_type == PatternType.LITERAL and \
            deny.resource_name == allow.resource_name
    return allow.resource_name.startswith(deny.resource_name)


class Authorizer:
    """This broker's authorizer (see the module doc).  ``bindings()`` returns the ACLs
    of the current metadata image.  ``enabled`` False: everything is allowed."""

    def __init__(self, config, bindings: Callable[[], Iterable[AclBinding]]):
        self.enabled = bool(config["authorizer.class.name"].strip())
        self.super_users = frozenset(parse_super_users(config["super.users"]))
        self.allow_if_no_acl = bool(config["allow.everyone.if.no.acl.found"])
        self._bindings = bindings

    @staticmethod
    def who(request) -> tuple[str, str]:
        """The request's principal and the client's IP address (no leading ``/``)."""
        session = getattr(request, "session", None)
        principal = session.principal if session is not None else ANONYMOUS
        return principal, (getattr(request, "client_host", "") or "").lstrip("/")

    def allows(self, request, operation: AclOperation, resource_type: ResourceType,
               name: str, log_denial: bool = True) -> bool:
        """May the request's principal do ``operation`` on the resource?  A refusal is
        logged at INFO (as Kafka's authorizer logger does) unless ``log_denial`` is
        False (Metadata and listings filter quietly)."""
        if not self.enabled:
            return True
        principal, host = self.who(request)
        if principal in self.super_users:
            return True
        allowed = authorize(self._bindings(), principal, host, operation, resource_type,
                            name, self.allow_if_no_acl)
        if not allowed and log_denial:
            log.info("[Authorizer] %s from %s denied %s on %s:%s (%s)", principal, host,
                     operation.name, resource_type.name, name,
                     getattr(getattr(request, "spec", None), "name", "?"))
        return allowed

    def allows_cluster(self, request, operation: AclOperation, log_denial: bool = True) -> bool:
        return self.allows(request, operation, ResourceType.CLUSTER, CLUSTER_NAME, log_denial)

    def allows_any(self, request, operation: AclOperation,
                   resource_type: ResourceType) -> bool:
        """``operation`` on at least one resource of the type (``authorize_any``)."""
        if not self.enabled:
            return True
        principal, host = self.who(request)
        return principal in self.super_users or authorize_any(
            self._bindings(), principal, host, operation, resource_type, self.allow_if_no_acl)

    def refused(self, request, operation: AclOperation, names: Iterable[str],
                resource_type: ResourceType = ResourceType.TOPIC) -> set[str]:
        """The names among ``names`` (topics unless ``resource_type`` says otherwise) the
        request may not ``operation``, each asked once."""
        if not self.enabled:
            return set()
        return {n for n in set(names) if not self.allows(request, operation, resource_type, n)}


def image_bindings(image_of: Callable[[], object]) -> Callable[[], tuple[AclBinding, ...]]:
    """``bindings()`` for an Authorizer: the ACLs of the current image (``image_of()``),
    parsed once per image (and version) rather than at every request."""
    cache: list = [None, -1, ()]

    def bindings() -> tuple[AclBinding, ...]:
        image = image_of()
        if cache[0] is not image or cache[1] != image.version:
            cache[:] = [image, image.version,
                        tuple(AclBinding.from_wire(b) for b in image.acls)]
        return cache[2]

    return bindings


class _Off(Authorizer):
    """No authorizer: everything allowed (what stubs and tools without a config use)."""

    def __init__(self):
        self.enabled = False
        self.super_users = frozenset()
        self.allow_if_no_acl = True
        self._bindings = tuple


ALLOW_ALL = _Off()

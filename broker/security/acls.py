"""Kafka's ACL model: bindings, filters, and the rules that match them (KIP-140, KIP-290).

An ACL binding says: ``principal`` from ``host`` is allowed (or denied) ``operation`` on
the resources of ``resource_type`` that ``resource_name`` names under ``pattern_type``:

* LITERAL: exactly that name, or every name when the name is ``*``;
* PREFIXED: every name starting with it.

Codes are Kafka's wire codes (``ResourceType``, ``PatternType``, ``AclOperation``,
``AclPermissionType``).  Filters (DescribeAcls, DeleteAcls) may use ANY for each enum
and None for each string; a filter's pattern type MATCH selects the bindings that
would apply to the named resource (literal equal or ``*``, or a prefix of it).

Bindings are stored in the cluster metadata as plain lists (``to_wire``/``from_wire``),
never as these classes.  Pure values: any thread.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from enum import IntEnum


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# The resource types ACLs may be created for here (Kafka also has USER and
# DELEGATION_TOKEN, for APIs Raftwood does not serve).
SERVED_RESOURCE_TYPES = frozenset({ResourceType.TOPIC, ResourceType.GROUP,
                                   ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID})
CLUSTER_NAME = "kafka-cluster"   # the one name of the CLUSTER resource
WILDCARD = "*"                   # a LITERAL name matching every name; a host matching any
WILDCARD_PRINCIPAL = "User:*"

# Kafka's implied operations: an ALLOW of any operation on the right implies the one on
# the left (DENY ACLs imply nothing: a DENY of READ does not deny DESCRIBE).
IMPLIED_BY = {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ,
                                      AclOperation.WRITE, AclOperation.DELETE,
                                      AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS,
                                              AclOperation.ALTER_CONFIGS}),
}


class AclError(ValueError):
    """A binding or filter Kafka would refuse (the message says why); INVALID_REQUEST."""


@dataclass(frozen=True, order=True)
class AclBinding:
    """One ACL.  Invariant (``validate``): concrete enums (no ANY/MATCH/UNKNOWN), a
    ``type:name`` principal, a host that is ``*`` or an IP address."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def to_wire(self) -> list:
        """The plain list stored in the metadata (Raft journal, metadata file)."""
        return [int(self.resource_type), self.resource_name, int(self.pattern_type),
                self.principal, self.host, int(self.operation), int(self.permission)]

    @classmethod
    def from_wire(cls, item) -> AclBinding:
        rtype, name, pattern, principal, host, operation, permission = item
        return cls(ResourceType(rtype), str(name), PatternType(pattern), str(principal),
                   str(host), AclOperation(operation), AclPermissionType(permission))

    def validate(self) -> AclBinding:
        """Itself, or AclError naming the first problem (Kafka's CreateAcls checks)."""
        if self.resource_type not in SERVED_RESOURCE_TYPES:
            raise AclError(f"resource type {_name(self.resource_type)} cannot have ACLs here "
                           f"(TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID)")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise AclError(f"pattern type {_name(self.pattern_type)} is not LITERAL or PREFIXED")
        if not self.resource_name:
            raise AclError("the resource name must not be empty")
        if self.resource_type == ResourceType.CLUSTER and (
                self.pattern_type != PatternType.LITERAL or self.resource_name != CLUSTER_NAME):
            raise AclError(f"the only CLUSTER resource is the LITERAL {CLUSTER_NAME!r}")
        if self.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
            raise AclError(f"operation {_name(self.operation)} is not an operation")
        if self.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            raise AclError(f"permission {_name(self.permission)} is not ALLOW or DENY")
        kind, sep, who = self.principal.partition(":")
        if not sep or not kind or not who:
            raise AclError(f"principal {self.principal!r} is not of the form User:name")
        if kind != "User":
            raise AclError(f"principal type {kind!r} is not served (User only)")
        if self.host != WILDCARD:
            try:
                ipaddress.ip_address(self.host)
            except ValueError:
                raise AclError(f"host {self.host!r} is not '*' or an IP address") from None
        return self

    def applies_to(self, resource_type: ResourceType, name: str) -> bool:
        """Does this binding's pattern cover the resource ``resource_type``/``name``?"""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.LITERAL:
            return self.resource_name == name or self.resource_name == WILDCARD
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.resource_name)
        return False

    def describe(self) -> str:
        """One line, as kafka-acls.sh prints it."""
        return (f"(principal={self.principal}, host={self.host}, "
                f"operation={self.operation.name}, permissionType={self.permission.name}) on "
                f"{self.resource_type.name}:{self.pattern_type.name}:{self.resource_name}")


@dataclass(frozen=True)
class AclFilter:
    """DescribeAcls / DeleteAcls filter.  ANY (enums) and None (strings) match anything."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    @classmethod
    def of(cls, resource_type: int, resource_name: str | None, pattern_type: int,
           principal: str | None, host: str | None, operation: int,
           permission: int) -> AclFilter:
        """From wire codes; AclError for a code Kafka does not define or an UNKNOWN one."""
        try:
            made = cls(ResourceType(resource_type), resource_name, PatternType(pattern_type),
                       principal, host, AclOperation(operation), AclPermissionType(permission))
        except ValueError as exc:
            raise AclError(f"unknown code in the filter: {exc}") from None
        for value in (made.resource_type, made.pattern_type, made.operation, made.permission):
            if value == 0:
                raise AclError(f"the filter has an UNKNOWN {type(value).__name__}")
        return made

    def matches(self, binding: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, binding.resource_type):
            return False
        if not self._matches_pattern(binding):
            return False
        return (self.principal in (None, binding.principal)
                and self.host in (None, binding.host)
                and self.operation in (AclOperation.ANY, binding.operation)
                and self.permission in (AclPermissionType.ANY, binding.permission))

    def _matches_pattern(self, binding: AclBinding) -> bool:
        """Kafka's ResourcePatternFilter.matches."""
        wanted = self.pattern_type
        if wanted not in (PatternType.ANY, PatternType.MATCH, binding.pattern_type):
            return False
        if self.resource_name is None:
            return True
        if wanted in (PatternType.ANY, binding.pattern_type):
            return self.resource_name == binding.resource_name
        # MATCH: the bindings that apply to the resource named by the filter.
        return binding.applies_to(binding.resource_type, self.resource_name)


def _name(value) -> str:
    return getattr(value, "name", str(value))


def parse_enum(enum_type, text: str):
    """``read`` / ``READ`` / ``idempotent-write`` / ``IdempotentWrite`` → the enum member
    (ValueError otherwise): the spellings of kafka-acls.sh and of Kafka's enum names."""
    key = text.strip().replace("-", "_").upper()
    if key not in enum_type.__members__:
        camel = "".join(("_" + c if c.isupper() and i else c)
                        for i, c in enumerate(text.strip())).upper()
        key = camel if camel in enum_type.__members__ else key
    try:
        return enum_type[key]
    except KeyError:
        names = ", ".join(m.lower() for m in enum_type.__members__ if m not in ("UNKNOWN",))
        raise ValueError(f"{text!r} is not one of: {names}") from None

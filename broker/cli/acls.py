"""``raftwood acls add|list|remove``: ACLs through CreateAcls, DescribeAcls and DeleteAcls.

The options are kafka-acls.sh's: ``--allow-principal`` / ``--deny-principal`` (repeatable,
``User:name`` or ``User:*``), ``--allow-host`` / ``--deny-host`` (default ``*``),
``--operation`` (repeatable: read, write, create, delete, alter, describe, cluster-action,
describe-configs, alter-configs, idempotent-write, all), one kind of resource
(``--topic``, ``--group``, ``--transactional-id``, repeatable; or ``--cluster``) and
``--resource-pattern-type`` (literal or prefixed to add; any, match, literal or prefixed
to list and remove).  ``add`` creates every principal × operation × resource binding;
``list`` and ``remove`` take the options as a filter (left out: any), except that
``remove`` needs a resource, as kafka-acls.sh does (no accidental "remove everything").

The connection goes to ``--bootstrap-server``; its principal is the user
``--command-config`` names (SASL), the client certificate's subject (mutual TLS), or
``User:ANONYMOUS`` on PLAINTEXT.  That principal must be allowed to manage ACLs
(``super.users`` or an Alter/Describe ACL on the cluster), as for ``raftwood users``.
Exit codes as ``raftwood topics``: 1 with the Kafka error's name (e.g.
CLUSTER_AUTHORIZATION_FAILED, SECURITY_DISABLED when the broker has no authorizer).
"""
from __future__ import annotations

import itertools
import sys

from kafka.protocol.admin import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest

from protocol.errors import ErrorCode

from ..security.acls import (
    CLUSTER_NAME,
    WILDCARD,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    parse_enum,
)
from .admin import KafkaFailure, _client_options
from .client import EXIT_OK, EXIT_UNAVAILABLE, Connection, guarded

ACL_VERSION = 3   # served 1-3
CREATE, DESCRIBE, DELETE = (CreateAclsRequest[ACL_VERSION], DescribeAclsRequest[ACL_VERSION],
                            DeleteAclsRequest[ACL_VERSION])
RESOURCE_OPTIONS = (("topic", ResourceType.TOPIC), ("group", ResourceType.GROUP),
                    ("transactional_id", ResourceType.TRANSACTIONAL_ID))


def add_commands(commands) -> None:
    common = _client_options()
    acls = commands.add_parser("acls", help="ACLs: add, list, remove")
    actions = acls.add_subparsers(dest="action", required=True)
    add = actions.add_parser("add", parents=[common], help="create ACLs")
    _binding_options(add, for_filter=False)
    add.set_defaults(func=cmd_acls_add)
    listing = actions.add_parser("list", parents=[common], help="ACLs matching the options")
    _binding_options(listing, for_filter=True)
    listing.set_defaults(func=cmd_acls_list)
    remove = actions.add_parser("remove", parents=[common], help="delete matching ACLs")
    _binding_options(remove, for_filter=True)
    remove.set_defaults(func=cmd_acls_remove)


def _binding_options(parser, for_filter: bool) -> None:
    parser.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL")
    parser.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL")
    parser.add_argument("--principal", action="append", default=[],
                        help="list/remove: either permission" if for_filter else
                        "same as --allow-principal")
    parser.add_argument("--allow-host", default=None if for_filter else WILDCARD)
    parser.add_argument("--deny-host", default=None if for_filter else WILDCARD)
    parser.add_argument("--operation", action="append", default=[],
                        type=lambda t: parse_enum(AclOperation, t))
    for option, _ in RESOURCE_OPTIONS:
        parser.add_argument("--" + option.replace("_", "-"), action="append", default=[],
                            dest=option)
    parser.add_argument("--cluster", action="store_true", help=f"the {CLUSTER_NAME} resource")
    parser.add_argument("--resource-pattern-type", default="any" if for_filter else "literal",
                        type=lambda t: parse_enum(PatternType, t))


def _usage(message: str) -> None:
    """Bad usage: one line on stderr, exit code 2 (as argparse's own errors)."""
    print(f"raftwood acls: {message}", file=sys.stderr)
    raise SystemExit(EXIT_UNAVAILABLE)


def _resources(args, required: bool) -> list[tuple[ResourceType, str | None]]:
    resources = [(rtype, name) for option, rtype in RESOURCE_OPTIONS
                 for name in getattr(args, option)]
    if args.cluster:
        resources.append((ResourceType.CLUSTER, CLUSTER_NAME))
    if not resources:
        if required:
            _usage("name a resource: --topic, --group, --transactional-id or --cluster")
        resources.append((ResourceType.ANY, None))
    return resources


def _principals(args, for_filter: bool) -> list[tuple[str | None, AclPermissionType, str | None]]:
    """(principal, permission, host) triples the options name."""
    found = [(p, AclPermissionType.ALLOW, args.allow_host) for p in args.allow_principal]
    found += [(p, AclPermissionType.DENY, args.deny_host) for p in args.deny_principal]
    either = AclPermissionType.ANY if for_filter else AclPermissionType.ALLOW
    found += [(p, either, args.allow_host if not for_filter else None) for p in args.principal]
    if not found:
        if not for_filter:
            _usage("give --allow-principal or --deny-principal")
        found.append((None, AclPermissionType.ANY, None))
    return found


@guarded
def cmd_acls_add(args) -> int:
    pattern = args.resource_pattern_type
    operations = args.operation or [AclOperation.ALL]
    bindings = [AclBinding(rtype, name, PatternType.LITERAL if rtype == ResourceType.CLUSTER
                           else pattern, principal, host, operation, permission)
                for (rtype, name), (principal, permission, host), operation in itertools.product(
                    _resources(args, True), _principals(args, False), operations)]
    with Connection(args.bootstrap_server, args.timeout, args.security) as conn:
        response = conn.request(CREATE(creations=[CREATE.AclCreation(
            resource_type=int(b.resource_type), resource_name=b.resource_name,
            resource_pattern_type=int(b.pattern_type), principal=b.principal, host=b.host,
            operation=int(b.operation), permission_type=int(b.permission)) for b in bindings]))
    for binding, result in zip(bindings, response.results):
        if result.error_code != ErrorCode.NONE:
            raise KafkaFailure(result.error_code, result.error_message,
                               f"cannot add {binding.describe()}")
    for binding in bindings:
        print(f"added {binding.describe()}")
    return EXIT_OK


def _filters(args, require_resource: bool = False):
    return [dict(resource_type_filter=int(rtype), resource_name_filter=name,
                 pattern_type_filter=int(args.resource_pattern_type if rtype != ResourceType.CLUSTER
                                         or args.resource_pattern_type == PatternType.ANY
                                         else PatternType.LITERAL),
                 principal_filter=principal, host_filter=host, operation=int(operation),
                 permission_type=int(permission))
            for (rtype, name), (principal, permission, host), operation in itertools.product(
                _resources(args, require_resource), _principals(args, True),
                args.operation or [AclOperation.ANY])]


@guarded
def cmd_acls_list(args) -> int:
    seen: list[AclBinding] = []
    filters = _filters(args)
    with Connection(args.bootstrap_server, args.timeout, args.security) as conn:
        for wanted in filters:
            response = conn.request(DESCRIBE(**wanted))
            if response.error_code != ErrorCode.NONE:
                raise KafkaFailure(response.error_code, response.error_message,
                                   "cannot list ACLs")
            for resource in response.resources:
                for a in resource.acls:
                    binding = AclBinding.from_wire([
                        resource.resource_type, resource.resource_name, resource.pattern_type,
                        a.principal, a.host, a.operation, a.permission_type])
                    if binding not in seen:
                        seen.append(binding)
    for binding in seen:
        print(binding.describe())
    return EXIT_OK


@guarded
def cmd_acls_remove(args) -> int:
    filters = [DELETE.DeleteAclsFilter(**f) for f in _filters(args, True)]
    with Connection(args.bootstrap_server, args.timeout, args.security) as conn:
        response = conn.request(DELETE(filters=filters))
    removed = 0
    for result in response.filter_results:
        if result.error_code != ErrorCode.NONE:
            raise KafkaFailure(result.error_code, result.error_message, "cannot remove ACLs")
        for m in result.matching_acls:
            binding = AclBinding.from_wire([m.resource_type, m.resource_name, m.pattern_type,
                                            m.principal, m.host, m.operation, m.permission_type])
            print(f"removed {binding.describe()}")
            removed += 1
    if not removed:
        print("no ACL matched")
    return EXIT_OK

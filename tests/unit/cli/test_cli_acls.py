"""``raftwood acls``: what the options turn into, before anything is sent."""
from __future__ import annotations

import pytest

from broker.cli.acls import _filters
from broker.cli.main import build_parser
from broker.security.acls import AclOperation, AclPermissionType, PatternType, ResourceType


def parse(*argv):
    return build_parser().parse_args(["acls", *argv])


def test_list_filters_default_to_any_of_everything():
    [wanted] = _filters(parse("list"))
    assert wanted == dict(resource_type_filter=ResourceType.ANY, resource_name_filter=None,
                          pattern_type_filter=PatternType.ANY, principal_filter=None,
                          host_filter=None, operation=AclOperation.ANY,
                          permission_type=AclPermissionType.ANY)


def test_remove_filters_name_the_resource_principal_permission_and_operations():
    wanted = _filters(parse("remove", "--deny-principal", "User:bob", "--topic", "pay-",
                            "--resource-pattern-type", "prefixed", "--operation", "write",
                            "--operation", "read"), require_resource=True)
    assert [(f["resource_name_filter"], f["pattern_type_filter"], f["principal_filter"],
             f["permission_type"], f["operation"]) for f in wanted] == [
        ("pay-", PatternType.PREFIXED, "User:bob", AclPermissionType.DENY, AclOperation.WRITE),
        ("pay-", PatternType.PREFIXED, "User:bob", AclPermissionType.DENY, AclOperation.READ)]


def test_remove_without_a_resource_is_bad_usage_not_remove_everything(capsys):
    with pytest.raises(SystemExit) as stopped:
        _filters(parse("remove", "--principal", "User:bob"), require_resource=True)
    assert stopped.value.code == 2 and "name a resource" in capsys.readouterr().err

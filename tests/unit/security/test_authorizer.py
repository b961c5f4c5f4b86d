"""The authorizer's matching rules (Kafka's StandardAuthorizer), pure: bindings in, verdict out."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from broker.security.acls import AclBinding, AclError, AclFilter, parse_enum
from broker.security.acls import AclOperation as Op
from broker.security.acls import AclPermissionType as Perm
from broker.security.acls import PatternType as Pat
from broker.security.acls import ResourceType as Res
from broker.security.authorizer import (
    ALLOW_ALL,
    Authorizer,
    AuthorizerSettingError,
    authorize,
    authorize_any,
    check_settings,
)

ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.7"


def acl(name, op, perm=Perm.ALLOW, principal=ALICE, pattern=Pat.LITERAL, host="*",
        rtype=Res.TOPIC) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def may(bindings, op, name="orders", principal=ALICE, rtype=Res.TOPIC, host=HOST,
        allow_if_no_acl=False) -> bool:
    return authorize(bindings, principal, host, op, rtype, name, allow_if_no_acl)


# -- patterns ------------------------------------------------------------------------------------

def test_a_literal_binding_covers_its_name_only():
    bindings = [acl("orders", Op.READ)]
    assert may(bindings, Op.READ, "orders")
    assert not may(bindings, Op.READ, "orders-eu")
    assert not may(bindings, Op.READ, "orders", rtype=Res.GROUP), "resource types never mix"


def test_the_literal_wildcard_name_covers_every_resource_of_its_type():
    assert may([acl("*", Op.READ)], Op.READ, "anything")


def test_a_prefixed_binding_covers_every_name_that_starts_with_it():
    bindings = [acl("pay-", Op.WRITE, pattern=Pat.PREFIXED)]
    assert may(bindings, Op.WRITE, "pay-eu") and may(bindings, Op.WRITE, "pay-")
    assert not may(bindings, Op.WRITE, "payroll")


def test_principal_and_host_must_match_or_be_wildcards():
    assert not may([acl("orders", Op.READ, principal=BOB)], Op.READ)
    assert may([acl("orders", Op.READ, principal="User:*")], Op.READ)
    assert may([acl("orders", Op.READ, host=HOST)], Op.READ)
    assert not may([acl("orders", Op.READ, host="10.0.0.8")], Op.READ)


# -- allow, deny and implications ----------------------------------------------------------------

def test_deny_beats_allow_whatever_their_patterns():
    bindings = [acl("*", Op.ALL), acl("pay-", Op.WRITE, Perm.DENY, pattern=Pat.PREFIXED)]
    assert not may(bindings, Op.WRITE, "pay-eu")
    assert may(bindings, Op.READ, "pay-eu"), "a deny of WRITE leaves READ allowed"
    assert may(bindings, Op.WRITE, "orders")


def test_a_deny_of_all_refuses_every_operation_and_a_wildcard_principal_deny_refuses_everyone():
    assert not may([acl("orders", Op.READ), acl("orders", Op.ALL, Perm.DENY)], Op.READ)
    assert not may([acl("orders", Op.READ),
                    acl("orders", Op.READ, Perm.DENY, principal="User:*")], Op.READ)


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.ALL])
def test_describe_is_implied_by_read_write_delete_alter(granted):
    assert may([acl("orders", granted)], Op.DESCRIBE)


def test_describe_configs_is_implied_by_alter_configs_and_nothing_else_is_implied():
    assert may([acl("orders", Op.ALTER_CONFIGS)], Op.DESCRIBE_CONFIGS)
    assert not may([acl("orders", Op.DESCRIBE)], Op.READ)
    assert not may([acl("orders", Op.READ)], Op.WRITE)
    assert not may([acl("orders", Op.DESCRIBE_CONFIGS)], Op.ALTER_CONFIGS)


def test_a_deny_implies_nothing():
    """Kafka: denying READ does not deny DESCRIBE (implications are for ALLOW only)."""
    assert may([acl("orders", Op.WRITE), acl("orders", Op.READ, Perm.DENY)], Op.DESCRIBE)


# -- no ACL found ------------------------------------------------------------------------------

def test_without_any_covering_binding_allow_everyone_if_no_acl_found_decides():
    assert not may([], Op.READ)
    assert may([], Op.READ, allow_if_no_acl=True)
    assert may([acl("other", Op.READ)], Op.READ, allow_if_no_acl=True)


def test_a_binding_for_someone_else_makes_the_resource_closed_to_the_rest():
    assert not may([acl("orders", Op.READ, principal=BOB)], Op.READ, allow_if_no_acl=True)


# -- on any resource of a type (InitProducerId: Write on any topic) --------------------------------

def test_authorize_any_needs_one_allow_not_cancelled_by_a_deny():
    def any_write(bindings, allow_if_no_acl=False):
        return authorize_any(bindings, ALICE, HOST, Op.WRITE, Res.TOPIC, allow_if_no_acl)

    assert any_write([acl("pay-", Op.WRITE, pattern=Pat.PREFIXED)])
    assert not any_write([acl("orders", Op.READ)])
    assert not any_write([acl("orders", Op.WRITE), acl("*", Op.WRITE, Perm.DENY)])
    assert not any_write([acl("orders", Op.WRITE), acl("orders", Op.WRITE, Perm.DENY)])
    assert not any_write([acl("pay-eu", Op.WRITE),
                          acl("pay-", Op.WRITE, Perm.DENY, pattern=Pat.PREFIXED)])
    assert any_write([acl("orders", Op.WRITE), acl("pay-", Op.WRITE, Perm.DENY,
                                                   pattern=Pat.PREFIXED)])
    assert not any_write([]) and any_write([], allow_if_no_acl=True)


# -- the Authorizer: settings, super users, the request's principal ------------------------------

def config(**values) -> dict:
    base = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin; User:broker", "allow.everyone.if.no.acl.found": False}
    base.update(values)
    return base


def request(principal: str, host: str = "/" + HOST):
    return SimpleNamespace(session=SimpleNamespace(principal=principal), client_host=host)


def test_super_users_may_do_everything_and_others_follow_the_bindings():
    authorizer = Authorizer(config(), lambda: [acl("orders", Op.READ)])
    assert authorizer.allows(request("User:admin"), Op.DELETE, Res.TOPIC, "orders")
    assert authorizer.allows(request("User:broker"), Op.CLUSTER_ACTION, Res.CLUSTER,
                             "kafka-cluster")
    assert authorizer.allows(request(ALICE), Op.READ, Res.TOPIC, "orders")
    assert authorizer.refused(request(ALICE), Op.WRITE, ["orders", "orders"]) == {"orders"}
    assert not authorizer.allows_cluster(request(ALICE), Op.ALTER)


def test_the_host_is_the_client_address_without_its_slash():
    authorizer = Authorizer(config(), lambda: [acl("orders", Op.READ, host=HOST)])
    assert authorizer.allows(request(ALICE, "/" + HOST), Op.READ, Res.TOPIC, "orders")
    assert not authorizer.allows(request(ALICE, "/10.9.9.9"), Op.READ, Res.TOPIC, "orders")


def test_no_authorizer_allows_everything():
    off = Authorizer(config(**{"authorizer.class.name": ""}), list)
    assert not off.enabled and off.allows(request(ALICE), Op.ALTER, Res.CLUSTER, "kafka-cluster")
    assert ALLOW_ALL.refused(request(ALICE), Op.WRITE, ["t"]) == set()


@pytest.mark.parametrize("name", ["", "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                                  "kafka.security.authorizer.AclAuthorizer"])
def test_kafkas_authorizer_class_names_are_accepted(name):
    check_settings(config(**{"authorizer.class.name": name}).__getitem__)


@pytest.mark.parametrize("key,value", [("authorizer.class.name", "com.example.MyAuthorizer"),
                                       ("super.users", "admin")])
def test_other_authorizers_and_malformed_super_users_are_refused(key, value):
    with pytest.raises(AuthorizerSettingError, match=key):
        check_settings(config(**{key: value}).__getitem__)


# -- bindings and filters (CreateAcls / DescribeAcls / DeleteAcls) -------------------------------

@pytest.mark.parametrize("binding,problem", [
    (acl("orders", Op.ANY), "not an operation"),
    (acl("orders", Op.READ, Perm.ANY), "ALLOW or DENY"),
    (acl("orders", Op.READ, pattern=Pat.MATCH), "LITERAL or PREFIXED"),
    (acl("orders", Op.READ, principal="alice"), "User:name"),
    (acl("orders", Op.READ, principal="Group:ops"), "User only"),
    (acl("orders", Op.READ, host="example.com"), "IP address"),
    (acl("my-cluster", Op.ALTER, rtype=Res.CLUSTER), "kafka-cluster"),
    (acl("alice", Op.ALTER, rtype=Res.USER), "cannot have ACLs"),
    (acl("", Op.READ), "empty"),
])
def test_bindings_kafka_would_refuse_are_refused(binding, problem):
    with pytest.raises(AclError, match=problem):
        binding.validate()


def test_valid_bindings_round_trip_through_the_stored_form():
    binding = acl("pay-", Op.IDEMPOTENT_WRITE, Perm.DENY, pattern=Pat.PREFIXED, host="::1")
    assert binding.validate() is binding
    assert AclBinding.from_wire(binding.to_wire()) == binding


def test_filters_any_literal_and_match():
    literal, star = acl("orders", Op.READ), acl("*", Op.WRITE, principal=BOB)
    prefixed = acl("ord", Op.READ, Perm.DENY, pattern=Pat.PREFIXED)
    everything = [literal, star, prefixed]

    def found(**fields):
        return [b for b in everything if AclFilter(**fields).matches(b)]

    assert found() == everything
    assert found(resource_name="orders") == [literal], "ANY compares names exactly"
    assert found(resource_name="ord", pattern_type=Pat.PREFIXED) == [prefixed]
    assert found(resource_name="orders", pattern_type=Pat.MATCH) == everything
    assert found(resource_name="other", pattern_type=Pat.MATCH) == [star]
    assert found(principal=BOB) == [star]
    assert found(permission=Perm.DENY) == [prefixed]
    assert found(operation=Op.READ, resource_type=Res.GROUP) == []


def test_a_filter_with_an_unknown_code_is_refused():
    with pytest.raises(AclError):
        AclFilter.of(0, None, 1, None, None, 1, 1)
    with pytest.raises(AclError):
        AclFilter.of(2, None, 9, None, None, 1, 1)


@pytest.mark.parametrize("text,expected", [("read", Op.READ), ("IdempotentWrite",
                                                               Op.IDEMPOTENT_WRITE),
                                           ("cluster-action", Op.CLUSTER_ACTION),
                                           ("DESCRIBE_CONFIGS", Op.DESCRIBE_CONFIGS)])
def test_operation_names_parse_in_kafkas_spellings(text, expected):
    assert parse_enum(Op, text) is expected

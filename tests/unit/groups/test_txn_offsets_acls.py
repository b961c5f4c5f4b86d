"""TxnOffsetCommit's authorization gate and handler with a stand-in authorizer and
coordinator: Write on the transactional id, then Read on the group, then Read per topic
(Kafka's order); the version's fields reach the coordinator; v0-v1 never see
COORDINATOR_LOAD_IN_PROGRESS.
"""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from kafka.protocol.producer import TxnOffsetCommitRequest

from broker.api import group_acls
from broker.security.acls import AclOperation, ResourceType
from protocol.errors import ErrorCode

Topic = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic


class Authorizer:
    enabled = True

    def __init__(self, allowed: set[tuple[AclOperation, ResourceType, str]]):
        self.allowed = allowed

    def allows(self, request, operation, resource_type, name, log_denial=True):
        return (operation, resource_type, name) in self.allowed

    def refused(self, request, operation, names, resource_type=ResourceType.TOPIC):
        return {n for n in names if not self.allows(request, operation, resource_type, n)}


class Groups:
    def __init__(self, answer=ErrorCode.NONE):
        self.calls, self.answer = [], answer

    async def commit_txn_offsets(self, *args):
        self.calls.append(args)
        return dict.fromkeys(args[-1], self.answer)


def request(version: int = 3):
    body = TxnOffsetCommitRequest[version](
        transactional_id="app", group_id="g", producer_id=7, producer_epoch=2,
        generation_id=4, member_id="m", group_instance_id="i", topics=[
            Topic(name=name, partitions=[Topic.TxnOffsetCommitRequestPartition(
                partition_index=0, committed_offset=42, committed_leader_epoch=1,
                committed_metadata="x")]) for name in ("a", "b")])
    return SimpleNamespace(body=body, api_version=version)


def answer(allowed, version: int = 3, groups=None) -> tuple[dict, Groups]:
    groups = groups or Groups()
    ctx = SimpleNamespace(authorizer=Authorizer(allowed), groups=groups)
    response = asyncio.run(group_acls.handle_txn_offset_commit(ctx, request(version)))
    return {(t.name, p.partition_index): p.error_code
            for t in response.topics for p in t.partitions}, groups


TXN = (AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, "app")
GROUP = (AclOperation.READ, ResourceType.GROUP, "g")
TOPIC_A = (AclOperation.READ, ResourceType.TOPIC, "a")


def test_without_write_on_the_transactional_id_every_partition_is_refused():
    errors, groups = answer({GROUP, TOPIC_A})
    assert set(errors.values()) == {ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    assert len(errors) == 2 and groups.calls == []


def test_without_read_on_the_group_every_partition_is_refused():
    errors, groups = answer({TXN, TOPIC_A})
    assert set(errors.values()) == {ErrorCode.GROUP_AUTHORIZATION_FAILED} and not groups.calls


def test_topics_without_read_are_refused_and_the_others_committed_with_the_members_fields():
    errors, groups = answer({TXN, GROUP, TOPIC_A})
    assert errors == {("a", 0): ErrorCode.NONE, ("b", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    assert groups.calls == [("g", 7, 2, "m", 4, "i", {("a", 0): (42, 1, "x")})]


def test_before_v3_no_member_and_before_v2_no_leader_epoch_and_no_load_in_progress():
    loading = Groups(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    errors, _ = answer({TXN, GROUP, TOPIC_A}, version=1, groups=loading)
    assert errors[("a", 0)] == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert loading.calls == [("g", 7, 2, "", -1, None, {("a", 0): (42, -1, "x")})]
    errors, _ = answer({TXN, GROUP, TOPIC_A}, version=2,
                       groups=Groups(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
    assert errors[("a", 0)] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS

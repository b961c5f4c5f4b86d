"""KIP-848 consumer groups on the coordinator in-process: joining, the revocation
handshake, leaving, fencing, session expiry, reloading from ``__consumer_offsets``,
commits at the member epoch, and the classic/consumer conversion rule.  The broker is
test_groups_coordinator's stand-in (a real log per offsets partition)."""
from __future__ import annotations

import asyncio
import uuid

import pytest

from broker.controller.state import PartitionInfo, TopicInfo
from broker.groups import GroupCoordinator
from broker.groups.consumer_coordinator import assignor_names
from broker.groups.consumer_group import MemberState
from protocol.errors import ErrorCode
from tests.unit.groups.test_groups_coordinator import PROTOCOLS, FakeBroker, run, started, until

NONE = ErrorCode.NONE
TOPIC_ID = str(uuid.UUID(int=0xABC))
SETTINGS = {"group_consumer_session_timeout_ms": 300,
            "group_consumer_min_session_timeout_ms": 10,
            "group_consumer_heartbeat_interval_ms": 50}


async def consumer_started(tmp_path, **settings):
    broker, c = await started(tmp_path, **{**SETTINGS, **settings})
    broker.image.topics["t"] = TopicInfo("t", TOPIC_ID, {}, {
        i: PartitionInfo([1], 1, 0, 0, [1]) for i in range(6)})
    return broker, c


def heartbeat(c, member_id, epoch, topics=None, owned=None, group="g", **kwargs):
    return c.consumer_group_heartbeat(
        group, member_id, epoch, kwargs.pop("instance_id", None), None,
        kwargs.pop("rebalance_timeout_ms", 1000 if epoch == 0 else -1),
        topics if topics is not None else (["t"] if epoch == 0 else None),
        kwargs.pop("regex", None), kwargs.pop("assignor", None), owned)


def parts(answer) -> set[int]:
    return set((answer.assignment or {}).get(TOPIC_ID, set()))


def test_members_split_partitions_through_the_revocation_handshake(tmp_path):
    async def scenario():
        _, c = await consumer_started(tmp_path)
        a = await heartbeat(c, "a", 0)
        assert (a.error, a.member_epoch, parts(a), a.heartbeat_interval_ms) == \
            (NONE, 1, set(range(6)), 50)
        b = await heartbeat(c, "b", 0)
        # b is at epoch 2 but everything is still a's: nothing yet.
        assert (b.error, b.member_epoch, parts(b)) == (NONE, 2, set())
        a2 = await heartbeat(c, "a", 1, owned={TOPIC_ID: set(range(6))})
        assert a2.member_epoch == 1 and len(parts(a2)) == 3  # revoke the other three
        kept = parts(a2)
        a3 = await heartbeat(c, "a", 1, owned={TOPIC_ID: kept})
        assert (a3.member_epoch, a3.assignment) == (2, None)
        b2 = await heartbeat(c, "b", 2, owned={})
        assert parts(b2) == set(range(6)) - kept
        group = c.manager.get_group("g")
        assert group.state_name() == "Stable"
        assert c.list_groups(types=["consumer"]) == \
            (NONE, [("g", "consumer", "Stable", "consumer")])
        described = c.describe_consumer_group("g")
        assert (described.state, described.group_epoch, described.assignor) == \
            ("Stable", 2, "uniform")
        assert c.describe_group("g").state == "Dead"  # not a classic group
    run(scenario())


def test_epochs_are_checked_and_leaving_releases_partitions(tmp_path):
    async def scenario():
        _, c = await consumer_started(tmp_path)
        await heartbeat(c, "a", 0)
        assert (await heartbeat(c, "a", 7)).error == ErrorCode.FENCED_MEMBER_EPOCH
        assert (await heartbeat(c, "zz", 1)).error == ErrorCode.UNKNOWN_MEMBER_ID
        assert (await heartbeat(c, "a", 0, group="other-new", owned=None)).error == NONE
        assert (await heartbeat(c, "x", 3, group="nope")).error == \
            ErrorCode.GROUP_ID_NOT_FOUND
        b = await heartbeat(c, "b", 0)
        left = await heartbeat(c, "a", -1)
        assert (left.error, left.member_epoch) == (NONE, -1)
        b2 = await heartbeat(c, "b", b.member_epoch, owned={})
        assert parts(b2) == set(range(6))
    run(scenario())


def test_refusals_name_what_is_not_served(tmp_path):  # and requests Kafka refuses
    async def scenario():
        _, c = await consumer_started(tmp_path)
        regex = await heartbeat(c, "a", 0, regex="(t)\\1")
        assert regex.error == ErrorCode.INVALID_REGULAR_EXPRESSION and "(t)\\1" in regex.message
        assert (await heartbeat(c, "a", 0, assignor="sticky")).error == \
            ErrorCode.UNSUPPORTED_ASSIGNOR
        assert (await heartbeat(c, "", 0)).error == ErrorCode.INVALID_REQUEST
        await heartbeat(c, "a", 0)
        assert (await heartbeat(c, "a", -2)).error == ErrorCode.INVALID_REQUEST  # not static
    run(scenario())


def test_group_max_size(tmp_path):
    async def scenario():
        _, c = await consumer_started(tmp_path, group_consumer_max_size=1)
        await heartbeat(c, "a", 0)
        assert (await heartbeat(c, "b", 0)).error == ErrorCode.GROUP_MAX_SIZE_REACHED
    run(scenario())


def test_a_silent_member_is_fenced_after_its_session(tmp_path):
    async def scenario():
        _, c = await consumer_started(tmp_path)
        await heartbeat(c, "a", 0)
        await heartbeat(c, "b", 0)
        group = c.manager.get_group("g")
        await until(lambda: list(group.consumer.members) == ["b"] or
                    not group.consumer.members, timeout_s=3)
    run(scenario())


def test_a_reload_restores_members_epochs_and_assignments(tmp_path):
    async def scenario():
        broker, c = await consumer_started(tmp_path, group_consumer_session_timeout_ms=5000,
                                           group_consumer_min_session_timeout_ms=10)
        a = await heartbeat(c, "a", 0)
        b = await heartbeat(c, "b", 0)
        a2 = await heartbeat(c, "a", 1, owned={TOPIC_ID: set(range(6))})
        await heartbeat(c, "a", 1, owned={TOPIC_ID: parts(a2)})
        before = c.manager.get_group("g").consumer
        snapshot = {m.member_id: (m.member_epoch, m.state, m.assigned)
                    for m in before.members.values()}
        assert (await c.commit_offsets("g", "a", 2, {("t", 0): (5, -1, "")}))[("t", 0)] == NONE
        assert (await c.commit_offsets("g", "a", 1, {("t", 0): (6, -1, "")}))[("t", 0)] == \
            ErrorCode.STALE_MEMBER_EPOCH
        assert (await c.commit_offsets("g", "zz", 2, {("t", 0): (6, -1, "")}))[("t", 0)] == \
            ErrorCode.UNKNOWN_MEMBER_ID
        broker.replica_manager.follow(0)
        broker.replica_manager.lead(0, epoch=2)
        await until(lambda: c.manager.get_group("g") is not None)
        after = c.manager.get_group("g")
        assert (after.consumer.group_epoch, after.consumer.assignment_epoch) == (2, 2)
        assert {m.member_id: (m.member_epoch, m.state, m.assigned)
                for m in after.consumer.members.values()} == snapshot
        assert after.consumer.target == before.target
        assert after.offsets[("t", 0)].offset == 5
        # The reloaded group goes on: b gets the released partitions at its epoch.
        b2 = await heartbeat(c, "b", b.member_epoch, owned={})
        assert (b2.error, parts(b2)) == (NONE, set(range(6)) - parts(a2))
        assert a.member_epoch == 1
    run(scenario())


def test_classic_and_consumer_groups_convert_only_when_empty(tmp_path):
    async def scenario():
        _, c = await consumer_started(tmp_path)
        await heartbeat(c, "a", 0)
        joined = await c.join_group("g", "", None, False, "cl", "/h", 1000, 1000, "consumer",
                                    PROTOCOLS)
        assert joined.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        await heartbeat(c, "a", -1)
        joined = await c.join_group("g", "", None, False, "cl", "/h", 1000, 1000, "consumer",
                                    PROTOCOLS)
        assert joined.error == NONE and c.manager.get_group("g").group_type == "classic"
        refused = await heartbeat(c, "b", 0)
        assert (refused.error, refused.message) == \
            (ErrorCode.GROUP_ID_NOT_FOUND, "Group g is not a consumer group.")
        c.leave_group("g", [(joined.member_id, None)])
        await until(lambda: c.manager.get_group("g").is_empty())
        assert (await heartbeat(c, "b", 0)).error == NONE
        assert c.manager.get_group("g").group_type == "consumer"
    run(scenario())


def test_a_member_with_unreleased_partitions_gets_them_after_the_owner_is_fenced(tmp_path):
    async def scenario():
        _, c = await consumer_started(tmp_path)
        await heartbeat(c, "a", 0)
        b = await heartbeat(c, "b", 0)
        group = c.manager.get_group("g")
        assert group.consumer.members["b"].state is MemberState.UNRELEASED_PARTITIONS
        await asyncio.sleep(0.15)
        assert parts(await heartbeat(c, "b", b.member_epoch, owned={})) == set()
        await until(lambda: "a" not in group.consumer.members, timeout_s=3)
        b2 = await heartbeat(c, "b", group.consumer.members["b"].member_epoch, owned={})
        assert parts(b2) == set(range(6))
    run(scenario())


def test_an_empty_consumer_group_is_deleted_with_tombstones_a_reload_respects(tmp_path):
    async def scenario():
        broker, c = await consumer_started(tmp_path)
        await heartbeat(c, "a", 0)
        assert (await c.delete_groups(["g"]))["g"] == ErrorCode.NON_EMPTY_GROUP
        await heartbeat(c, "a", -1)
        assert (await c.delete_groups(["g"]))["g"] == NONE
        broker.replica_manager.follow(0)
        broker.replica_manager.lead(0, epoch=2)
        await until(lambda: c.manager.status_for("g") == NONE)
        assert c.manager.get_group("g") is None
    run(scenario())


def test_settings_are_checked_at_start():
    assert assignor_names("uniform, org.apache.kafka.coordinator.group.assignor.RangeAssignor") \
        == ["uniform", "range"]
    for bad in ("sticky", ""):
        with pytest.raises(ValueError):
            assignor_names(bad)
    with pytest.raises(ValueError, match="outside"):
        GroupCoordinator(FakeBroker("/nonexistent", group_consumer_session_timeout_ms=1000))


def test_a_static_member_restarts_under_a_new_id_and_keeps_its_partitions(tmp_path):
    async def scenario():
        broker, c = await consumer_started(tmp_path, group_consumer_session_timeout_ms=5000)
        a = await heartbeat(c, "a1", 0, instance_id="i-a")
        b = await heartbeat(c, "b", 0)
        a = await heartbeat(c, "a1", a.member_epoch, owned={TOPIC_ID: set(range(6))},
                            instance_id="i-a")
        a = await heartbeat(c, "a1", a.member_epoch, owned={TOPIC_ID: parts(a)},
                            instance_id="i-a")
        kept = set(c.manager.get_group("g").consumer.members["a1"].assigned[TOPIC_ID])
        await heartbeat(c, "b", b.member_epoch, owned={})
        epoch = c.manager.get_group("g").consumer.group_epoch
        # Another process with the same instance id while a1 is still in: refused.
        busy = await heartbeat(c, "x", 0, instance_id="i-a")
        assert busy.error == ErrorCode.UNRELEASED_INSTANCE_ID
        left = await heartbeat(c, "a1", -2, instance_id="i-a")
        assert (left.error, left.member_epoch) == (NONE, -2)
        back = await heartbeat(c, "a2", 0, instance_id="i-a", owned={})
        assert (back.error, back.member_id, parts(back)) == (NONE, "a2", kept)
        consumer = c.manager.get_group("g").consumer
        assert consumer.group_epoch == epoch and "a1" not in consumer.members
        assert back.member_epoch == consumer.assignment_epoch
        fenced = await heartbeat(c, "a1", 3, instance_id="i-a")
        assert fenced.error == ErrorCode.FENCED_INSTANCE_ID
        broker.replica_manager.follow(0)
        broker.replica_manager.lead(0, epoch=2)
        await until(lambda: c.manager.get_group("g") is not None)
        reloaded = c.manager.get_group("g").consumer
        assert (reloaded.members["a2"].instance_id, reloaded.members["a2"].assigned) == \
            ("i-a", {TOPIC_ID: kept})
        assert "a1" not in reloaded.members and reloaded.target["a2"] == {TOPIC_ID: kept}
    run(scenario())


def test_a_regex_member_gets_matching_topics_also_created_later_and_keeps_it_on_reload(
        tmp_path):
    async def scenario():
        broker, c = await consumer_started(tmp_path, group_consumer_session_timeout_ms=5000)
        a = await heartbeat(c, "a", 0, topics=[], regex="t|u.*")
        assert (a.error, a.member_epoch, parts(a)) == (NONE, 1, set(range(6)))
        assert (await heartbeat(c, "a", 1, owned={TOPIC_ID: set(range(6))})).assignment is None
        u_id = str(uuid.UUID(int=0xDEF))
        broker.image.topics["u1"] = TopicInfo("u1", u_id, {}, {
            i: PartitionInfo([1], 1, 0, 0, [1]) for i in range(2)})
        broker.image.topics["xu"] = TopicInfo("xu", str(uuid.UUID(int=0x123)), {}, {
            0: PartitionInfo([1], 1, 0, 0, [1])})  # matches only in part: not subscribed
        a2 = await heartbeat(c, "a", 1, owned={TOPIC_ID: set(range(6))})
        assert (a2.member_epoch, a2.assignment) == (2, {TOPIC_ID: set(range(6)), u_id: {0, 1}})
        assert c.describe_consumer_group("g").members[0].member.subscribed_topic_regex == "t|u.*"
        broker.replica_manager.follow(0)
        broker.replica_manager.lead(0, epoch=2)
        await until(lambda: c.manager.get_group("g") is not None)
        assert c.manager.get_group("g").consumer.members["a"].subscribed_topic_regex == "t|u.*"
        del broker.image.topics["u1"]
        a3 = await heartbeat(c, "a", 2, owned={TOPIC_ID: set(range(6)), u_id: {0, 1}})
        assert a3.assignment == {TOPIC_ID: set(range(6))}  # u1's partitions revoked
        assert c.manager.get_group("g").consumer.group_epoch == 3
        a4 = await heartbeat(c, "a", 2, owned={TOPIC_ID: set(range(6))})
        assert (a4.error, a4.member_epoch) == (NONE, 3)
    run(scenario())

"""Static membership (KIP-345) on the coordinator in-process, against Kafka's rules.

Invariants: a static member that restarts within its session keeps its place — same
generation, same assignment, nobody else rebalances — under a new member id; every
request naming its instance id with an older member id gets FENCED_INSTANCE_ID; a static
member leaves only by LeaveGroup or its session timeout; the instance id → member id map
survives a coordinator change.  Same stand-in broker as test_groups_coordinator.py.
"""
from __future__ import annotations

import asyncio

from broker.groups import GroupCoordinator
from broker.groups.consumer_protocol import encode_subscription
from broker.groups.state import GroupState
from protocol.errors import ErrorCode
from tests.unit.groups.test_groups_coordinator import (
    PROTOCOLS,
    REBALANCE_MS,
    SESSION_MS,
    FakeBroker,
    run,
    started,
    state,
    until,
)

NONE = ErrorCode.NONE
FENCED = ErrorCode.FENCED_INSTANCE_ID
UNKNOWN = ErrorCode.UNKNOWN_MEMBER_ID


async def join_static(c: GroupCoordinator, instance: str, member_id: str = "",
                      protocols=PROTOCOLS, session_ms: int = SESSION_MS,
                      rebalance_ms: int = REBALANCE_MS, skip: bool = False):
    return await c.join_group("g", member_id, instance, True, "client", "/127.0.0.1",
                              rebalance_ms, session_ms, "consumer", protocols,
                              supports_skip_assignment=skip)


async def form_static_group(c: GroupCoordinator, instances: list[str], **kw) -> dict:
    """The instances join at once and sync; instance → (member id, generation, leader?)."""
    results = await asyncio.gather(*(join_static(c, i, **kw) for i in instances))
    assert {r.error for r in results} == {NONE}
    assignment = {r.member_id: r.member_id.encode() for r in results}
    syncs = await asyncio.gather(*(
        c.sync_group("g", r.generation_id, r.member_id, None, None,
                     assignment if r.members else {}, group_instance_id=i)
        for i, r in zip(instances, results)))
    assert [s.error for s in syncs] == [NONE] * len(instances)
    return {i: (r.member_id, r.generation_id, bool(r.members))
            for i, r in zip(instances, results)}


def follower_of(members: dict) -> str:
    return next(i for i, (_, _, leader) in members.items() if not leader)


def leader_of(members: dict) -> str:
    return next(i for i, (_, _, leader) in members.items() if leader)


def test_a_static_member_joins_at_once_with_an_id_derived_from_its_instance(tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        result = await join_static(c, "i1")  # no MEMBER_ID_REQUIRED round trip
        assert result.error == NONE and result.member_id.startswith("i1-")
        assert result.members == [(result.member_id, "i1", PROTOCOLS[0][1])]
        assert c.manager.get_group("g").static_members == {"i1": result.member_id}
    run(scenario())


def test_a_restarted_static_follower_keeps_generation_and_assignment_without_a_rebalance(
        tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        members = await form_static_group(c, ["i1", "i2"])
        f = follower_of(members)
        leader_id, gen, _ = members[leader_of(members)]
        old_id = members[f][0]

        again = await join_static(c, f)  # the restarted process: empty member id
        assert again.error == NONE and again.member_id != old_id
        assert (again.generation_id, again.members) == (gen, [])
        assert state(c) is GroupState.STABLE
        sync = await c.sync_group("g", gen, again.member_id, None, None, {},
                                  group_instance_id=f)
        assert (sync.error, sync.assignment) == (NONE, old_id.encode())  # its old partitions
        # The other member sees no rebalance.
        assert c.heartbeat("g", leader_id, gen, group_instance_id=leader_of(members)) == NONE
        assert c.heartbeat("g", again.member_id, gen, group_instance_id=f) == NONE
    run(scenario())


def test_the_old_incarnation_is_fenced_on_every_request_that_names_the_instance(tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        members = await form_static_group(c, ["i1", "i2"])
        f = follower_of(members)
        old_id, gen, _ = members[f]
        new = await join_static(c, f)
        assert new.error == NONE

        assert c.heartbeat("g", old_id, gen, group_instance_id=f) == FENCED
        assert (await c.sync_group("g", gen, old_id, None, None, {},
                                   group_instance_id=f)).error == FENCED
        assert await c.commit_offsets("g", old_id, gen, {("t", 0): (1, -1, "")},
                                      group_instance_id=f) == {("t", 0): FENCED}
        assert (await join_static(c, f, member_id=old_id)).error == FENCED
        assert c.leave_group("g", [(old_id, f)]) == (NONE, [(old_id, f, FENCED)])
        # Without the instance id the old member id is merely unknown.
        assert c.heartbeat("g", old_id, gen) == UNKNOWN
        # An instance id the group does not know is unknown too.
        assert c.heartbeat("g", new.member_id, gen, group_instance_id="stranger") == UNKNOWN
        assert await c.commit_offsets("g", new.member_id, gen, {("t", 0): (2, -1, "")},
                                      group_instance_id=f) == {("t", 0): NONE}
        assert state(c) is GroupState.STABLE
    run(scenario())


def test_a_join_still_waiting_from_the_old_incarnation_is_answered_fenced(tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        members = await form_static_group(c, ["i1", "i2"], session_ms=5000)
        f, lead = follower_of(members), leader_of(members)
        old_id = members[f][0]
        # The follower rejoins (new metadata) and waits in the join phase ...
        waiting = asyncio.ensure_future(join_static(c, f, member_id=old_id,
                                                    protocols=[("range", b"x")],
                                                    session_ms=5000))
        await until(lambda: state(c) is GroupState.PREPARING_REBALANCE)
        # ... when a new process with the same instance id starts.
        new = asyncio.ensure_future(join_static(c, f, session_ms=5000))
        assert (await waiting).error == FENCED
        leader_rejoin = await join_static(c, lead, member_id=members[lead][0], session_ms=5000)
        result = await new
        assert result.error == NONE and result.generation_id == members[f][1] + 1
        assert {m for m, _, _ in leader_rejoin.members} == {members[lead][0], result.member_id}
    run(scenario())


def test_a_restarted_static_leader_before_v9_is_told_the_old_leader_id_and_syncs_as_follower(
        tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        members = await form_static_group(c, ["i1", "i2"])
        lead = leader_of(members)
        old_id, gen, _ = members[lead]
        again = await join_static(c, lead)
        assert (again.error, again.generation_id, again.leader_id, again.members,
                again.skip_assignment) == (NONE, gen, old_id, [], False)
        assert c.manager.get_group("g").leader_id == again.member_id  # it still leads
        sync = await c.sync_group("g", gen, again.member_id, None, None, {},
                                  group_instance_id=lead)
        assert (sync.error, sync.assignment) == (NONE, old_id.encode())
        assert state(c) is GroupState.STABLE
    run(scenario())


def test_a_restarted_static_leader_on_v9_gets_the_members_and_skips_the_assignment(tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        members = await form_static_group(c, ["i1", "i2"])
        lead = leader_of(members)
        gen = members[lead][1]
        again = await join_static(c, lead, skip=True)
        assert (again.error, again.generation_id, again.leader_id, again.skip_assignment) == \
            (NONE, gen, again.member_id, True)
        assert {(m, i) for m, i, _ in again.members} == \
            {(again.member_id, lead), (members[follower_of(members)][0], follower_of(members))}
        assert state(c) is GroupState.STABLE
    run(scenario())


def test_a_static_rejoin_that_changes_the_chosen_protocol_rebalances(tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        members = await form_static_group(c, ["i1"])
        gen = members["i1"][1]
        again = await join_static(c, "i1", protocols=[("roundrobin", b""), PROTOCOLS[0]])
        assert (again.error, again.generation_id) == (NONE, gen + 1)
        assert c.manager.get_group("g").protocol_name == "roundrobin"
    run(scenario())


def test_a_static_rejoin_during_completing_rebalance_starts_another_rebalance(tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        first = await asyncio.gather(join_static(c, "i1"), join_static(c, "i2"))
        gen = first[0].generation_id
        assert state(c) is GroupState.COMPLETING_REBALANCE
        follower = next(i for i, r in zip(["i1", "i2"], first) if not r.members)
        leader = next(r for r in first if r.members)
        restarted = asyncio.ensure_future(join_static(c, follower))
        await until(lambda: state(c) is GroupState.PREPARING_REBALANCE)
        rejoin = await join_static(c, "i1" if follower == "i2" else "i2",
                                   member_id=leader.member_id)
        result = await restarted
        assert rejoin.generation_id == result.generation_id == gen + 1
    run(scenario())


def test_an_absent_static_member_stays_through_a_rebalance_until_its_session_expires(tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        members = await form_static_group(c, ["i1", "i2"], session_ms=1500, rebalance_ms=200)
        lead, f = leader_of(members), follower_of(members)
        lead_id, gen, _ = members[lead]
        absent_id = members[f][0]
        # A dynamic member joins; the static follower is down and never rejoins.
        newcomer = asyncio.ensure_future(c.join_group(
            "g", "", None, False, "dyn", "/127.0.0.1", 200, 1500, "consumer", PROTOCOLS))
        await until(lambda: state(c) is GroupState.PREPARING_REBALANCE)
        rejoin = await join_static(c, lead, member_id=lead_id, session_ms=1500,
                                   rebalance_ms=200)
        await newcomer
        # The absent static member is still a member of the next generation.
        assert rejoin.generation_id == gen + 1
        assert absent_id in {m for m, _, _ in rejoin.members}
        group = c.manager.get_group("g")
        assert group.static_members[f] == absent_id
        # It never syncs nor heartbeats: it is removed (sync or session expiry) and the
        # group rebalances without it.
        await until(lambda: not group.has(absent_id), timeout_s=5)
        assert f not in group.static_members
    run(scenario())


def test_when_the_static_leader_does_not_rejoin_a_member_that_did_leads(tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        members = await form_static_group(c, ["i1", "i2"], session_ms=5000, rebalance_ms=200)
        lead, f = leader_of(members), follower_of(members)
        rejoin = await join_static(c, f, member_id=members[f][0],
                                   protocols=[("range", b"changed")], session_ms=5000,
                                   rebalance_ms=200)
        assert rejoin.error == NONE and rejoin.leader_id == members[f][0]
        assert {m for m, _, _ in rejoin.members} == {members[f][0], members[lead][0]}
    run(scenario())


def test_a_static_member_that_stays_away_is_removed_at_its_session_timeout(tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        members = await form_static_group(c, ["i1", "i2"])
        lead, f = leader_of(members), follower_of(members)
        lead_id, gen, _ = members[lead]
        group = c.manager.get_group("g")
        # Closed without LeaveGroup: still a member until its session runs out.
        await asyncio.sleep(SESSION_MS / 2000)
        assert group.has(members[f][0])
        deadline = asyncio.get_running_loop().time() + 3
        while group.has(members[f][0]) and asyncio.get_running_loop().time() < deadline:
            c.heartbeat("g", lead_id, gen, group_instance_id=lead)
            await asyncio.sleep(0.05)
        assert not group.has(members[f][0]) and f not in group.static_members
        assert c.heartbeat("g", lead_id, gen, group_instance_id=lead) == \
            ErrorCode.REBALANCE_IN_PROGRESS
        rejoin = await join_static(c, lead, member_id=lead_id)
        assert (rejoin.generation_id, len(rejoin.members)) == (gen + 1, 1)
        await c.sync_group("g", gen + 1, lead_id, None, None, {}, group_instance_id=lead)
        # Coming back now is joining anew: it rebalances.
        back = asyncio.ensure_future(join_static(c, f))
        await until(lambda: state(c) is GroupState.PREPARING_REBALANCE)
        rejoin = await join_static(c, lead, member_id=lead_id)
        assert rejoin.generation_id == (await back).generation_id == gen + 2
    run(scenario())


def test_leave_group_by_instance_id_reports_each_member_as_the_request_named_it(tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        members = await form_static_group(c, ["i1", "i2", "i3"], session_ms=5000)
        group = c.manager.get_group("g")
        i1_id, i2_id = members["i1"][0], members["i2"][0]
        error, results = c.leave_group("g", [("", "i1"), ("", "nobody"), ("stale", "i2"),
                                             (i2_id, "i2")])
        assert error == NONE
        assert results == [("", "i1", NONE), ("", "nobody", UNKNOWN), ("stale", "i2", FENCED),
                           (i2_id, "i2", NONE)]
        assert not group.has(i1_id) and not group.has(i2_id)
        assert set(group.static_members) == {"i3"}
        assert state(c) is GroupState.PREPARING_REBALANCE
        assert c.leave_group("nope", [("", "i3")]) == (NONE, [("", "i3", UNKNOWN)])
    run(scenario())


def test_a_failed_write_of_the_new_member_id_keeps_the_old_one(tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        members = await form_static_group(c, ["i1", "i2"])
        f = follower_of(members)
        old_id, gen, _ = members[f]

        async def failing_store(group, assignment):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        c.manager.store_group = failing_store
        again = await join_static(c, f)
        assert (again.error, again.member_id) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, "")
        group = c.manager.get_group("g")
        assert group.static_members[f] == old_id and group.has(old_id)
        assert c.heartbeat("g", old_id, gen, group_instance_id=f) == NONE
        assert state(c) is GroupState.STABLE
    run(scenario())


def test_the_instance_map_survives_a_coordinator_change(tmp_path):
    async def scenario():
        broker, c = await started(tmp_path)
        members = await form_static_group(c, ["i1", "i2"], session_ms=2000)
        f = follower_of(members)
        restarted = await join_static(c, f, session_ms=2000)  # stored with its new id
        gen = restarted.generation_id
        broker.replica_manager.follow(0)
        await c.shutdown()
        broker.replica_manager.close()

        broker2 = FakeBroker(tmp_path)
        c2 = GroupCoordinator(broker2)
        broker2.replica_manager.lead(0, epoch=2)
        await until(lambda: c2.manager.status_for("g") == NONE)
        group = c2.manager.get_group("g")
        assert group.static_members == {leader_of(members): members[leader_of(members)][0],
                                        f: restarted.member_id}
        assert c2.heartbeat("g", members[f][0], gen, group_instance_id=f) == FENCED
        # Another restart on the new coordinator: still no rebalance, same assignment.
        again = await c2.join_group("g", "", f, True, "client", "/127.0.0.1", REBALANCE_MS,
                                    2000, "consumer", PROTOCOLS)
        assert (again.error, again.generation_id) == (NONE, gen)
        sync = await c2.sync_group("g", gen, again.member_id, None, None, {},
                                   group_instance_id=f)
        assert (sync.error, sync.assignment) == (NONE, members[f][0].encode())
        assert group.state is GroupState.STABLE
        await c2.shutdown()
        broker2.replica_manager.close()
    run(scenario())


def test_subscription_bytes_alone_do_not_rebalance_a_static_rejoin(tmp_path):
    """Kafka rebalances a Stable group on a static rejoin only when the chosen protocol
    would change; the new metadata is stored and the leader sees it at the next
    rebalance."""
    async def scenario():
        _, c = await started(tmp_path)
        members = await form_static_group(c, ["i1", "i2"])
        f = follower_of(members)
        changed = [("range", encode_subscription(["t", "u"]))]
        again = await join_static(c, f, protocols=changed)
        assert (again.error, again.generation_id) == (NONE, members[f][1])
        member = c.manager.get_group("g").members[again.member_id]
        assert member.metadata_for("range") == changed[0][1]
    run(scenario())

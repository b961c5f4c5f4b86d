"""The group coordinator in-process: rebalances, timeouts, commits, loading and unloading.

The broker around it is a stand-in: a real PartitionLog per ``__consumer_offsets``
partition (so what is written is what a new leader loads), appends acknowledged at once,
and leadership moved by hand.  Timers are real event-loop timers with short timeouts.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from broker import config as config_module
from broker.controller.state import BrokerInfo, ClusterState, PartitionInfo, TopicInfo
from broker.groups import GroupCoordinator
from broker.groups.admin import NON_EMPTY_GROUP
from broker.groups.consumer_protocol import encode_subscription
from broker.groups.placement import OFFSETS_TOPIC
from broker.groups.state import GroupState
from broker.replication.acks import ProducePartitionStatus
from broker.replication.origin import AppendOrigin
from protocol.errors import ErrorCode
from storage.config import LogConfig
from storage.log import PartitionLog

NONE = ErrorCode.NONE
SESSION_MS = 300
REBALANCE_MS = 400
PROTOCOLS = [("range", encode_subscription(["t"]))]


@dataclass
class FakePartition:
    topic: str
    index: int
    log: PartitionLog
    leader_id: int = -1
    leader_epoch: int = -1
    node_id: int = 1

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.node_id


class FakeReplicaManager:
    """One offsets partition per index, on disk; appends are acknowledged at once."""

    def __init__(self, directory):
        self.directory = directory
        self.partitions: dict[int, FakePartition] = {}
        self.listeners = []

    def add_leadership_listener(self, listener):
        self.listeners.append(listener)

    def _notify(self, partition):
        for listener in self.listeners:
            listener(partition)

    def lead(self, index: int, epoch: int = 0):
        partition = self.partitions.get(index)
        if partition is None:
            log = PartitionLog.open(self.directory / f"{OFFSETS_TOPIC}-{index}", LogConfig())
            partition = self.partitions[index] = FakePartition(OFFSETS_TOPIC, index, log)
        partition.leader_id, partition.leader_epoch = 1, epoch
        self._notify(partition)

    def follow(self, index: int):
        partition = self.partitions[index]
        partition.leader_id, partition.leader_epoch = 2, partition.leader_epoch + 1
        self._notify(partition)

    def get_partition(self, topic, index):
        return self.partitions.get(index) if topic == OFFSETS_TOPIC else None

    def append_one(self, topic, index, records, acks, max_bytes, *, origin):
        assert origin is AppendOrigin.COORDINATOR
        partition = self.partitions.get(index)
        if partition is None or not partition.is_leader:
            return ProducePartitionStatus(None, -1, -1, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        info = partition.log.append_as_leader(bytearray(records), partition.leader_epoch)
        partition.log.update_high_watermark(partition.log.log_end_offset)
        return ProducePartitionStatus(partition, info.last_offset + 1, info.first_offset)

    async def wait_for_acks(self, statuses, timeout_ms):
        await asyncio.sleep(0)
        return statuses

    def close(self):
        for partition in self.partitions.values():
            partition.log.close()


class FakeBroker:
    def __init__(self, directory, **settings):
        values = {"node.id": "1", "offsets.topic.num.partitions": "1",
                  "group.min.session.timeout.ms": "10",
                  "group.initial.rebalance.delay.ms": "50"}
        values.update({k.replace("_", "."): str(v) for k, v in settings.items()})
        self.config = config_module.build(values)
        self.image = ClusterState()
        self.image.brokers[1] = BrokerInfo(1, "127.0.0.1", 9092, 1, "x")
        self.image.topics[OFFSETS_TOPIC] = TopicInfo(OFFSETS_TOPIC, "id0", {}, {
            0: PartitionInfo([1], 1, 0, 0, [1])})
        self.image.topics["t"] = TopicInfo("t", "id1", {}, {
            i: PartitionInfo([1], 1, 0, 0, [1]) for i in range(4)})
        self.replica_manager = FakeReplicaManager(directory)
        self.connections = set()


async def started(tmp_path, **settings) -> tuple[FakeBroker, GroupCoordinator]:
    broker = FakeBroker(tmp_path, **settings)
    coordinator = GroupCoordinator(broker)
    broker.replica_manager.lead(0)
    await until(lambda: coordinator.manager.status_for("g") == NONE)
    return broker, coordinator


async def until(condition, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition never held"
        await asyncio.sleep(0.005)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 20))


async def join(c: GroupCoordinator, member_id: str = "", group: str = "g",
               protocols=PROTOCOLS, session_ms: int = SESSION_MS,
               rebalance_ms: int = REBALANCE_MS, require_known: bool = True):
    return await c.join_group(group, member_id, None, require_known, "client", "/127.0.0.1",
                              rebalance_ms, session_ms, "consumer", protocols)


async def join_new(c: GroupCoordinator, **kw):
    """A new member's two JoinGroups (KIP-394): MEMBER_ID_REQUIRED, then the real one."""
    first = await join(c, **kw)
    assert first.error == ErrorCode.MEMBER_ID_REQUIRED and first.member_id
    return await join(c, member_id=first.member_id, **kw)


async def form_group(c: GroupCoordinator, size: int) -> list:
    """``size`` members joined at once and synced; [(member id, generation)] leader first."""
    results = await asyncio.gather(*(join_new(c) for _ in range(size)))
    assert {r.error for r in results} == {NONE}
    leader = next(r for r in results if r.leader_id == r.member_id)
    assignment = {r.member_id: r.member_id.encode() for r in results}
    syncs = await asyncio.gather(*(
        c.sync_group("g", r.generation_id, r.member_id, None, None,
                     assignment if r is leader else {}) for r in results))
    assert [s.assignment for s in syncs] == [r.member_id.encode() for r in results]
    ordered = [leader] + [r for r in results if r is not leader]
    return [(r.member_id, r.generation_id) for r in ordered]


def state(c: GroupCoordinator, group: str = "g") -> GroupState:
    return c.manager.get_group(group).state


# -- joining ------------------------------------------------------------------------------------

def test_v4_join_without_member_id_gets_member_id_required_and_then_leads_generation_1(tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        first = await join(c)
        assert first.error == ErrorCode.MEMBER_ID_REQUIRED
        assert first.member_id.startswith("client-")
        result = await join(c, member_id=first.member_id)
        assert (result.error, result.generation_id, result.leader_id, result.protocol_name) \
            == (NONE, 1, first.member_id, "range")
        assert result.members == [(first.member_id, None, PROTOCOLS[0][1])]
        assert state(c) is GroupState.COMPLETING_REBALANCE
        sync = await c.sync_group("g", 1, first.member_id, "consumer", "range",
                                  {first.member_id: b"mine"})
        assert (sync.error, sync.assignment) == (NONE, b"mine")
        assert state(c) is GroupState.STABLE
    run(scenario())


def test_old_versions_join_in_one_round_trip(tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        result = await join(c, require_known=False)
        assert (result.error, result.generation_id) == (NONE, 1)
    run(scenario())


def test_members_arriving_within_the_initial_delay_share_the_first_generation(tmp_path):
    async def scenario():
        _, c = await started(tmp_path, group_initial_rebalance_delay_ms=100)

        async def late_join(delay_s):
            await asyncio.sleep(delay_s)
            return await join_new(c)
        results = await asyncio.gather(late_join(0), late_join(0.06), late_join(0.12))
        assert {r.generation_id for r in results} == {1}
        leaders = [r for r in results if r.members]
        assert len(leaders) == 1 and len(leaders[0].members) == 3
    run(scenario())


def test_session_timeout_outside_the_configured_bounds_is_refused(tmp_path):
    async def scenario():
        _, c = await started(tmp_path, group_min_session_timeout_ms=1000,
                             group_max_session_timeout_ms=5000)
        assert (await join(c, session_ms=999)).error == ErrorCode.INVALID_SESSION_TIMEOUT
        assert (await join(c, session_ms=5001)).error == ErrorCode.INVALID_SESSION_TIMEOUT
    run(scenario())


def test_a_member_with_another_protocol_type_or_no_common_protocol_is_refused(tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        await form_group(c, 1)
        other = await c.join_group("g", "", None, False, "x", "", 1000, SESSION_MS, "connect",
                                   PROTOCOLS)
        assert other.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        sticky = await join(c, protocols=[("sticky", b"")], require_known=False)
        assert sticky.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    run(scenario())


def test_a_known_member_id_the_group_does_not_have_is_unknown(tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        assert (await join(c, member_id="ghost")).error == ErrorCode.UNKNOWN_MEMBER_ID
        await form_group(c, 1)
        assert (await join(c, member_id="ghost")).error == ErrorCode.UNKNOWN_MEMBER_ID
    run(scenario())


def test_a_new_member_rebalances_a_stable_group_and_everyone_gets_the_next_generation(tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        [(a, gen)] = await form_group(c, 1)
        newcomer = asyncio.ensure_future(join_new(c))
        await until(lambda: state(c) is GroupState.PREPARING_REBALANCE)
        assert c.heartbeat("g", a, gen) == ErrorCode.REBALANCE_IN_PROGRESS
        assert not newcomer.done()  # waits for the old member to rejoin
        rejoin = await join(c, member_id=a)
        new = await newcomer
        assert rejoin.generation_id == new.generation_id == gen + 1
        assert rejoin.leader_id == new.leader_id == a
        assert len(rejoin.members) == 2 and new.members == []
        # The follower's SyncGroup waits for the leader's.
        follower_sync = asyncio.ensure_future(
            c.sync_group("g", new.generation_id, new.member_id, None, None, {}))
        await asyncio.sleep(0.02)
        assert not follower_sync.done()
        leader_sync = await c.sync_group("g", rejoin.generation_id, a, None, None,
                                         {a: b"A", new.member_id: b"B"})
        assert (leader_sync.assignment, (await follower_sync).assignment) == (b"A", b"B")
        assert state(c) is GroupState.STABLE
        assert c.heartbeat("g", new.member_id, new.generation_id) == NONE
    run(scenario())


def test_a_follower_rejoining_a_stable_group_with_the_same_metadata_gets_the_same_generation(
        tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        (leader, gen), (follower, _) = await form_group(c, 2)
        again = await join(c, member_id=follower)
        assert (again.error, again.generation_id, again.members) == (NONE, gen, [])
        assert state(c) is GroupState.STABLE
    run(scenario())


# -- heartbeats, leaving, expiry -----------------------------------------------------------------

def test_heartbeat_errors_follow_kafka(tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        assert c.heartbeat("g", "m", 1) == ErrorCode.UNKNOWN_MEMBER_ID  # no such group
        [(a, gen)] = await form_group(c, 1)
        assert c.heartbeat("g", a, gen) == NONE
        assert c.heartbeat("g", "stranger", gen) == ErrorCode.UNKNOWN_MEMBER_ID
        assert c.heartbeat("g", a, gen + 1) == ErrorCode.ILLEGAL_GENERATION
        assert c.heartbeat("", a, gen) == ErrorCode.INVALID_GROUP_ID
    run(scenario())


def test_a_member_that_stops_heartbeating_is_removed_and_the_group_rebalances(tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        (a, gen), (b, _) = await form_group(c, 2)
        # Only b keeps heartbeating; a's session expires.
        deadline = asyncio.get_running_loop().time() + 3
        while state(c) is GroupState.STABLE and asyncio.get_running_loop().time() < deadline:
            c.heartbeat("g", b, gen)
            await asyncio.sleep(0.05)
        assert not c.manager.get_group("g").has(a)
        assert c.heartbeat("g", b, gen) == ErrorCode.REBALANCE_IN_PROGRESS
        rejoin = await join(c, member_id=b)
        assert (rejoin.generation_id, rejoin.leader_id) == (gen + 1, b)
    run(scenario())


def test_a_member_that_does_not_rejoin_within_the_rebalance_timeout_is_dropped(tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        (a, gen), (b, _) = await form_group(c, 2)
        # b rejoins (its metadata changed); a keeps heartbeating but never rejoins.
        rejoin = asyncio.ensure_future(join(c, member_id=b, protocols=[("range", b"new")],
                                            session_ms=5000))
        while not rejoin.done():
            c.heartbeat("g", a, gen)
            await asyncio.sleep(0.05)
        result = rejoin.result()
        assert (result.generation_id, result.leader_id) == (gen + 1, b)
        assert not c.manager.get_group("g").has(a)
    run(scenario())


def test_leave_group_rebalances_and_the_last_member_leaving_empties_the_group(tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        (a, gen), (b, _) = await form_group(c, 2)
        assert c.leave_group("g", [(a, None)]) == (NONE, [(a, None, NONE)])
        assert state(c) is GroupState.PREPARING_REBALANCE
        rejoin = await join(c, member_id=b)
        assert rejoin.generation_id == gen + 1
        assert c.leave_group("g", [(b, None), ("ghost", None)]) == \
            (NONE, [(b, None, NONE), ("ghost", None, ErrorCode.UNKNOWN_MEMBER_ID)])
        assert state(c) is GroupState.EMPTY
        assert c.manager.get_group("g").generation_id == gen + 2
    run(scenario())


def test_a_leader_that_never_syncs_is_removed_after_the_rebalance_timeout(tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        results = await asyncio.gather(join_new(c), join_new(c))
        follower = next(r for r in results if not r.members)
        sync = await c.sync_group("g", follower.generation_id, follower.member_id, None, None, {})
        assert sync.error == ErrorCode.REBALANCE_IN_PROGRESS  # the leader was dropped
        group = c.manager.get_group("g")
        assert group.members.keys() == {follower.member_id}
    run(scenario())


def test_a_pending_member_id_that_never_comes_back_expires(tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        first = await join(c, session_ms=50)
        assert c.manager.get_group("g").is_pending(first.member_id)
        await asyncio.sleep(0.15)
        assert not c.manager.get_group("g").is_pending(first.member_id)
        assert (await join(c, member_id=first.member_id)).error == ErrorCode.UNKNOWN_MEMBER_ID
    run(scenario())


def test_sync_errors_follow_kafka(tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        assert (await c.sync_group("g", 1, "m", None, None, {})).error == \
            ErrorCode.UNKNOWN_MEMBER_ID
        [(a, gen)] = await form_group(c, 1)
        assert (await c.sync_group("g", gen + 1, a, None, None, {})).error == \
            ErrorCode.ILLEGAL_GENERATION
        assert (await c.sync_group("g", gen, a, "consumer", "roundrobin", {})).error == \
            ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        again = await c.sync_group("g", gen, a, None, None, {})  # a lost answer, resent
        assert (again.error, again.assignment) == (NONE, a.encode())
    run(scenario())


# -- offsets ---------------------------------------------------------------------------------------

def test_a_simple_consumer_commits_with_generation_minus_one_and_fetches_back(tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        results = await c.commit_offsets("g", "", -1, {("t", 0): (42, 3, "meta"),
                                                       ("t", 1): (7, -1, None)})
        assert results == {("t", 0): NONE, ("t", 1): NONE}
        error, offsets = c.fetch_offsets("g", [("t", 0), ("t", 1), ("t", 2)])
        assert error == NONE
        assert (offsets[("t", 0)].offset, offsets[("t", 0)].leader_epoch,
                offsets[("t", 0)].metadata) == (42, 3, "meta")
        assert offsets[("t", 1)].offset == 7 and offsets[("t", 2)] is None
        error, everything = c.fetch_offsets("g", None)
        assert sorted(everything) == [("t", 0), ("t", 1)]
    run(scenario())


def test_commit_checks_the_member_and_generation(tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        assert await c.commit_offsets("g", "m", 3, {("t", 0): (1, -1, "")}) == \
            {("t", 0): ErrorCode.ILLEGAL_GENERATION}  # no such group, a generation given
        [(a, gen)] = await form_group(c, 1)
        assert await c.commit_offsets("g", a, gen, {("t", 0): (5, -1, "")}) == {("t", 0): NONE}
        assert await c.commit_offsets("g", a, gen + 1, {("t", 0): (6, -1, "")}) == \
            {("t", 0): ErrorCode.ILLEGAL_GENERATION}
        assert await c.commit_offsets("g", "other", gen, {("t", 0): (6, -1, "")}) == \
            {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
        assert await c.commit_offsets("g", "", -1, {("t", 0): (6, -1, "")}) == \
            {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}  # simple commits only into Empty groups
        assert c.fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == 5
    run(scenario())


def test_commit_during_completing_rebalance_is_rebalance_in_progress(tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        result = await join_new(c)
        assert state(c) is GroupState.COMPLETING_REBALANCE
        assert await c.commit_offsets("g", result.member_id, result.generation_id,
                                      {("t", 0): (1, -1, "")}) == \
            {("t", 0): ErrorCode.REBALANCE_IN_PROGRESS}
    run(scenario())


def test_unknown_partitions_and_oversized_metadata_are_refused_one_by_one(tmp_path):
    async def scenario():
        _, c = await started(tmp_path, offset_metadata_max_bytes=4)
        results = await c.commit_offsets("g", "", -1, {
            ("t", 0): (1, -1, "ok"), ("t", 9): (1, -1, ""), ("nope", 0): (1, -1, ""),
            ("t", 1): (1, -1, "too long")})
        assert results == {("t", 0): NONE, ("t", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                           ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                           ("t", 1): ErrorCode.OFFSET_METADATA_TOO_LARGE}
    run(scenario())


# -- coordinator ownership -------------------------------------------------------------------------

def test_groups_of_a_partition_not_led_here_get_not_coordinator(tmp_path):
    async def scenario():
        broker = FakeBroker(tmp_path)
        c = GroupCoordinator(broker)
        assert (await join(c)).error == ErrorCode.NOT_COORDINATOR
        assert c.heartbeat("g", "m", 1) == ErrorCode.NOT_COORDINATOR
        assert c.fetch_offsets("g", None)[0] == ErrorCode.NOT_COORDINATOR
        assert c.describe_group("g").error == ErrorCode.NOT_COORDINATOR
    run(scenario())


def test_a_new_leader_loads_groups_and_offsets_and_members_carry_on(tmp_path):
    async def scenario():
        broker, c = await started(tmp_path)
        (a, gen), (b, _) = await form_group(c, 2)
        assert await c.commit_offsets("g", a, gen, {("t", 0): (11, 2, "x")}) == {("t", 0): NONE}
        assert await c.commit_offsets("g", a, gen, {("t", 0): (12, 2, "y")}) == {("t", 0): NONE}
        assert await c.commit_offsets("simple", "", -1, {("t", 3): (5, -1, "")}) == \
            {("t", 3): NONE}
        pending_join = asyncio.ensure_future(join_new(c))
        await until(lambda: state(c) is GroupState.PREPARING_REBALANCE)
        broker.replica_manager.follow(0)  # leadership moves away: waiters hear it now
        assert (await pending_join).error == ErrorCode.NOT_COORDINATOR
        assert c.heartbeat("g", a, gen) == ErrorCode.NOT_COORDINATOR
        await c.shutdown()
        broker.replica_manager.close()

        # A new coordinator (another broker, same log) becomes leader and loads.
        broker2 = FakeBroker(tmp_path)
        c2 = GroupCoordinator(broker2)
        broker2.replica_manager.lead(0, epoch=2)
        await until(lambda: c2.manager.status_for("g") == NONE)
        group = c2.manager.get_group("g")
        assert (group.state, group.generation_id, group.leader_id) == \
            (GroupState.STABLE, gen, a)
        assert set(group.members) == {a, b}
        assert group.members[b].assignment == b.encode()
        offset = c2.fetch_offsets("g", [("t", 0)])[1][("t", 0)]
        assert (offset.offset, offset.leader_epoch, offset.metadata) == (12, 2, "y")
        assert c2.fetch_offsets("simple", None)[1][("t", 3)].offset == 5
        assert c2.manager.get_group("simple").state is GroupState.EMPTY
        # The members' heartbeats with the old generation are accepted ...
        assert c2.heartbeat("g", a, gen) == NONE
        # ... and a member that never comes back expires, which rebalances the group.
        deadline = asyncio.get_running_loop().time() + 3
        while group.has(b) and asyncio.get_running_loop().time() < deadline:
            c2.heartbeat("g", a, gen)
            await asyncio.sleep(0.05)
        assert not group.has(b) and group.state is GroupState.PREPARING_REBALANCE
        await c2.shutdown()
        broker2.replica_manager.close()
    run(scenario())


def test_while_loading_requests_get_load_in_progress_and_heartbeats_pass(tmp_path):
    async def scenario():
        broker = FakeBroker(tmp_path)
        c = GroupCoordinator(broker)
        broker.replica_manager.lead(0)  # the load task has not run yet
        assert (await join(c)).error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        assert c.heartbeat("g", "m", 1) == NONE  # Kafka answers heartbeats blindly here
        assert c.list_groups()[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        await until(lambda: c.manager.status_for("g") == NONE)
        assert c.list_groups() == (NONE, [])
    run(scenario())


# -- admin and expiry ------------------------------------------------------------------------------

def test_list_describe_and_delete(tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        [(a, gen)] = await form_group(c, 1)
        await c.commit_offsets("simple", "", -1, {("t", 0): (1, -1, "")})
        assert c.list_groups() == (NONE, [("g", "consumer", "Stable", "classic"),
                                          ("simple", "", "Empty", "classic")])
        assert c.list_groups(states=["empty"]) == (NONE, [("simple", "", "Empty", "classic")])
        assert c.list_groups(types=["consumer"]) == (NONE, [])
        summary = c.describe_group("g")
        assert (summary.state, summary.protocol_type, summary.protocol_data) == \
            ("Stable", "consumer", "range")
        assert [(m.member_id, m.assignment) for m in summary.members] == [(a, a.encode())]
        assert c.describe_group("nope").state == "Dead"
        assert await c.delete_groups(["g", "simple", "nope"]) == {
            "g": NON_EMPTY_GROUP, "simple": NONE, "nope": ErrorCode.GROUP_ID_NOT_FOUND}
        assert c.manager.get_group("simple") is None
        assert c.fetch_offsets("simple", None) == (NONE, {})
    run(scenario())


def test_expired_offsets_and_then_their_empty_group_are_removed_for_good(tmp_path):
    async def scenario():
        broker, c = await started(tmp_path)
        clock = [1_000_000]
        c.manager.clock_ms = c.clock_ms = lambda: clock[0]
        await c.commit_offsets("simple", "", -1, {("t", 0): (1, -1, ""), ("t", 1): (2, -1, "")})
        clock[0] += c.manager.retention_ms - 1
        assert await c.manager.expire_once() == 0
        clock[0] += 1
        assert await c.manager.expire_once() == 2
        assert c.manager.get_group("simple") is None
        await c.shutdown()
        broker.replica_manager.close()
        broker2 = FakeBroker(tmp_path)  # tombstones: a reload finds nothing
        c2 = GroupCoordinator(broker2)
        broker2.replica_manager.lead(0, epoch=1)
        await until(lambda: c2.manager.status_for("g") == NONE)
        assert c2.manager.get_group("simple") is None
        broker2.replica_manager.close()
    run(scenario())


@pytest.mark.parametrize("groups,partitions", [(["a", "b", "c", "d"], 3)])
def test_requests_route_by_the_topic_partition_count(tmp_path, groups, partitions):
    async def scenario():
        broker = FakeBroker(tmp_path)
        broker.image.topics[OFFSETS_TOPIC].partitions = {
            i: PartitionInfo([1], 1, 0, 0, [1]) for i in range(partitions)}
        c = GroupCoordinator(broker)
        from broker.groups.placement import partition_for
        broker.replica_manager.lead(partition_for("a", partitions))
        await asyncio.sleep(0.05)
        for g in groups:
            expected = NONE if partition_for(g, partitions) == partition_for("a", partitions) \
                else ErrorCode.NOT_COORDINATOR
            assert c.manager.status_for(g) == expected
        broker.replica_manager.close()
    run(scenario())

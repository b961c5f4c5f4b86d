"""TxnOffsetCommit on the coordinator in-process (the stand-in broker of
test_groups_coordinator): pending until the marker, require_stable, KIP-447 member
checks, markers completing or aborting, reloads, expiry and deletion.
"""
from __future__ import annotations

import asyncio

from broker.groups import GroupCoordinator
from broker.groups.state import GroupState
from broker.replication.acks import ProducePartitionStatus
from protocol.errors import ErrorCode
from tests.unit.groups.test_groups_coordinator import FakeBroker, form_group, run, started, until
from tests.unit.groups.test_txn_offsets import control_batch

NONE = ErrorCode.NONE
UNSTABLE = ErrorCode.UNSTABLE_OFFSET_COMMIT
TP = ("t", 0)
PID, EPOCH = 1000, 3


async def txn_commit(c, offsets, group="g", member_id="", generation=-1, instance=None,
                     producer_id=PID):
    return await c.commit_txn_offsets(group, producer_id, EPOCH, member_id, generation,
                                      instance, {tp: (o, -1, "m") for tp, o in offsets.items()})


def fetched(c, tp=TP, group="g", stable=False):
    value = c.fetch_offsets(group, [tp], require_stable=stable)[1][tp]
    return value if value is None or isinstance(value, ErrorCode) else value.offset


def append_marker(broker, producer_id: int, commit: bool) -> None:
    """What the WriteTxnMarkers handler writes before it calls complete_txn_offsets."""
    log = broker.replica_manager.partitions[0].log
    log.append_as_leader(bytearray(control_batch(producer_id, EPOCH, commit)), 0)
    log.update_high_watermark(log.log_end_offset)


async def reloaded(broker, c, tmp_path):
    await c.shutdown()
    broker.replica_manager.close()
    broker2 = FakeBroker(tmp_path)
    c2 = GroupCoordinator(broker2)
    broker2.replica_manager.lead(0, epoch=1)
    await until(lambda: c2.manager.status_for("g") == NONE)
    return broker2, c2


def test_offsets_are_pending_until_the_commit_marker_then_visible(tmp_path):
    async def scenario():
        broker, c = await started(tmp_path)
        assert await c.commit_offsets("g", "", -1, {TP: (5, -1, "")}) == {TP: NONE}
        assert await txn_commit(c, {TP: 9, ("t", 1): 4}) == {TP: NONE, ("t", 1): NONE}
        assert fetched(c) == 5 and fetched(c, ("t", 1)) is None
        assert fetched(c, stable=True) == UNSTABLE
        assert fetched(c, ("t", 2), stable=True) is None
        assert c.fetch_offsets("g", None, require_stable=True)[1] == {TP: UNSTABLE}
        append_marker(broker, PID, commit=True)
        c.complete_txn_offsets(PID, {0}, commit=True)
        assert (fetched(c, stable=True), fetched(c, ("t", 1))) == (9, 4)
        c.complete_txn_offsets(PID, {0}, commit=False)  # a repeated marker changes nothing
        assert fetched(c) == 9
    run(scenario())


def test_an_abort_marker_keeps_the_offsets_committed_before(tmp_path):
    async def scenario():
        broker, c = await started(tmp_path)
        await c.commit_offsets("g", "", -1, {TP: (5, -1, "")})
        await txn_commit(c, {TP: 9})
        c.complete_txn_offsets(PID + 1, {0}, commit=True)  # another producer's marker
        assert fetched(c, stable=True) == UNSTABLE
        append_marker(broker, PID, commit=False)
        c.complete_txn_offsets(PID, {0}, commit=False)
        assert fetched(c, stable=True) == 5
    run(scenario())


def test_a_group_that_does_not_exist_is_created_empty_and_an_empty_id_is_invalid(tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        assert await txn_commit(c, {TP: 1}, group="new") == {TP: NONE}
        group = c.manager.get_group("new")
        assert group.state is GroupState.EMPTY and group.offsets == {}
        assert await txn_commit(c, {TP: 1}, group="") == {TP: ErrorCode.INVALID_GROUP_ID}
        assert await txn_commit(c, {("nope", 0): 1, TP: 2}) == {
            ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, TP: NONE}
    run(scenario())


def test_kip_447_member_fields_are_checked_when_given(tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        [(a, gen)] = await form_group(c, 1)
        assert await txn_commit(c, {TP: 1}, member_id=a, generation=gen) == {TP: NONE}
        assert await txn_commit(c, {TP: 1}, member_id=a, generation=gen + 1) == \
            {TP: ErrorCode.ILLEGAL_GENERATION}
        assert await txn_commit(c, {TP: 1}, member_id="ghost", generation=gen) == \
            {TP: ErrorCode.UNKNOWN_MEMBER_ID}
        # Older producers name no member: accepted whatever the group's state.
        assert await txn_commit(c, {TP: 1}) == {TP: NONE}
    run(scenario())


def test_an_older_incarnation_of_a_static_member_is_fenced(tmp_path):
    async def scenario():
        _, c = await started(tmp_path)
        first = await c.join_group("g", "", "instance-1", True, "client", "/h", 400, 300,
                                   "consumer", [("range", b"")])
        await c.sync_group("g", first.generation_id, first.member_id, None, None,
                           {first.member_id: b""}, group_instance_id="instance-1")
        second = await c.join_group("g", "", "instance-1", True, "client", "/h", 400, 300,
                                    "consumer", [("range", b"")])
        assert second.member_id != first.member_id
        assert await txn_commit(c, {TP: 1}, member_id=first.member_id,
                                generation=first.generation_id, instance="instance-1") == \
            {TP: ErrorCode.FENCED_INSTANCE_ID}
    run(scenario())


def test_a_refused_write_answers_its_error_and_leaves_nothing_pending(tmp_path):
    async def scenario():
        broker, c = await started(tmp_path)
        broker.replica_manager.append_one = lambda *a, **kw: ProducePartitionStatus(
            None, -1, -1, ErrorCode.INVALID_PRODUCER_EPOCH)
        assert await txn_commit(c, {TP: 1}) == {TP: ErrorCode.INVALID_PRODUCER_EPOCH}
        assert c.manager.get_group("g").pending_txn_offsets == {}
    run(scenario())


def test_pending_offsets_survive_a_reload_and_a_marker_after_it_settles_them(tmp_path):
    async def scenario():
        broker, c = await started(tmp_path)
        await c.commit_offsets("g", "", -1, {TP: (5, -1, "")})
        await txn_commit(c, {TP: 9})
        await txn_commit(c, {TP: 7}, producer_id=PID + 1)
        append_marker(broker, PID + 1, commit=False)  # settled in the log already
        broker, c = await reloaded(broker, c, tmp_path)
        assert fetched(c, stable=True) == UNSTABLE and fetched(c) == 5
        assert list(c.manager.get_group("g").pending_txn_offsets) == [PID]
        append_marker(broker, PID, commit=True)
        c.complete_txn_offsets(PID, {0}, commit=True)
        assert fetched(c, stable=True) == 9
        broker, c = await reloaded(broker, c, tmp_path)  # the log says the same
        assert fetched(c, stable=True) == 9
        await c.shutdown()
        broker.replica_manager.close()
    run(scenario())


def test_a_marker_appended_while_the_partition_loads_is_read_by_the_loader(tmp_path):
    async def scenario():
        broker, c = await started(tmp_path)
        await txn_commit(c, {TP: 9})
        await c.shutdown()
        broker.replica_manager.close()
        broker2 = FakeBroker(tmp_path)
        c2 = GroupCoordinator(broker2)
        broker2.replica_manager.lead(0, epoch=1)  # loading starts on the next loop turn
        append_marker(broker2, PID, commit=True)
        c2.complete_txn_offsets(PID, {0}, commit=True)  # still loading: skipped
        await until(lambda: c2.manager.status_for("g") == NONE)
        assert fetched(c2, stable=True) == 9
        await c2.shutdown()
        broker2.replica_manager.close()
    run(scenario())


def test_expiry_keeps_a_group_with_pending_offsets_and_deletion_tombstones_them(tmp_path):
    async def scenario():
        broker, c = await started(tmp_path, offsets_retention_minutes=0)
        await txn_commit(c, {TP: 9})
        assert await c.manager.expire_once() == 0
        assert c.manager.get_group("g") is not None
        assert await c.delete_groups(["g"]) == {"g": NONE}
        broker, c = await reloaded(broker, c, tmp_path)
        assert c.manager.get_group("g") is None  # the tombstone dropped the pending offset
        append_marker(broker, PID, commit=True)
        c.complete_txn_offsets(PID, {0}, commit=True)
        assert c.manager.get_group("g") is None
        broker, c = await reloaded(broker, c, tmp_path)
        assert c.manager.get_group("g") is None  # nor does the marker revive it on a reload
        await c.shutdown()
        broker.replica_manager.close()
    run(scenario())


def test_expired_offsets_drop_the_pending_offsets_of_their_partitions(tmp_path):
    async def scenario():
        broker, c = await started(tmp_path, offsets_retention_minutes=0)
        await c.commit_offsets("g", "", -1, {TP: (5, -1, "")})
        await txn_commit(c, {TP: 9})
        await asyncio.sleep(0.01)
        assert await c.manager.expire_once() == 1
        assert c.manager.get_group("g") is None  # nothing left pending: the group goes too
        append_marker(broker, PID, commit=True)
        c.complete_txn_offsets(PID, {0}, commit=True)
        assert fetched(c) is None
        broker, c = await reloaded(broker, c, tmp_path)
        assert fetched(c) is None
        await c.shutdown()
        broker.replica_manager.close()
    run(scenario())

"""The ISR state of broker/replication/partition.py (Kafka's PartitionState), on a real log.

CommittedIsr → (maybe_expand_isr | maybe_shrink_isr) → PendingExpandIsr | PendingShrinkIsr
→ (on_isr_change_committed | on_isr_change_failed | update_isr_from_metadata) → CommittedIsr.

Rules: only the leader proposes, one change at a time; an expansion only for a follower
at or past the HW and the start of the leader's epoch; a refused change returns to the
last committed ISR; the metadata image is the authority and replaces a pending change,
whose late answer is then ignored; the HW waits for the maximal ISR (committed plus a
pending addition; during a pending shrink, the current, larger ISR).  Last, the replica
manager drives those transitions and never writes the ISR itself.
"""
from __future__ import annotations

import asyncio

from broker import config as config_module
from broker.controller.metadata_client import MetadataClient
from broker.controller.state import ApplyError, ClusterState
from broker.replication.delayed import FetchPartitionStatus
from broker.replication.isr import CommittedIsr, PendingExpandIsr, PendingShrinkIsr
from broker.replication.replica_manager import ReplicaManager
from tests.unit.replication.test_partition_hw import append, fetch, leader, new_partition

LAG_MS = 10_000


def caught_up_candidate(tmp_path):
    """Leader 1 with ISR [1, 2] of replicas [1, 2, 3]; HW 10; follower 3 at 10."""
    p = leader(tmp_path, isr=(1, 2))
    append(p, 10)
    fetch(p, 2, 10)
    fetch(p, 3, 10)
    assert p.high_watermark == 10
    return p


# -- proposing -------------------------------------------------------------------------------

def test_expansion_is_proposed_only_at_or_past_the_hw(tmp_path):
    p = leader(tmp_path, isr=(1, 2))
    append(p, 10)
    fetch(p, 2, 10)
    fetch(p, 3, 9)
    assert p.maybe_expand_isr(3) is None and isinstance(p.isr_state, CommittedIsr)
    fetch(p, 3, 10)
    change = p.maybe_expand_isr(3)
    assert isinstance(change, PendingExpandIsr) and p.isr_state is change
    assert change.proposed_isr == (1, 2, 3) and change.new_in_sync_replica == 3
    assert (change.leader_epoch, change.partition_epoch) == (0, 0)
    assert p.isr == [1, 2], "the committed ISR is unchanged until the controller commits"
    assert p.maximal_isr == {1, 2, 3}


def test_expansion_waits_for_the_start_of_the_leaders_epoch(tmp_path):
    p = leader(tmp_path, isr=(1, 2))
    append(p, 10)
    fetch(p, 2, 6)
    p.make_leader(1, 1, [1, 2, 3], [1, 2])          # epoch 1 starts at 10; HW is 6
    fetch(p, 3, 8)
    assert p.maybe_expand_isr(3) is None, "past the HW, but not into epoch 1"
    fetch(p, 3, 10)
    assert p.maybe_expand_isr(3).proposed_isr == (1, 2, 3)
    assert p.isr_state.leader_epoch == 1 and p.isr_state.partition_epoch == 1


def test_no_proposal_for_members_strangers_or_from_a_follower(tmp_path):
    p = caught_up_candidate(tmp_path)
    assert p.maybe_expand_isr(2) is None, "already in the ISR"
    assert p.maybe_expand_isr(7) is None, "not a replica"
    follower = new_partition(tmp_path, name="follower")
    follower.make_follower(2, 0, 0, [1, 2], [2])
    assert follower.maybe_expand_isr(1) is None
    assert follower.maybe_shrink_isr(10 ** 15, LAG_MS) is None


def test_shrink_proposes_the_isr_without_the_lagging_followers(tmp_path):
    p = leader(tmp_path)
    append(p, 10)
    now = p.followers[2].last_caught_up_ms
    fetch(p, 2, 10, now_ms=now + 5_000)
    assert p.maybe_shrink_isr(now + 5_000, LAG_MS) is None, "nobody lags yet"
    change = p.maybe_shrink_isr(now + LAG_MS + 1, LAG_MS)
    assert isinstance(change, PendingShrinkIsr) and p.isr_state is change
    assert change.out_of_sync_replicas == {3} and change.proposed_isr == (1, 2)
    assert p.isr == [1, 2, 3]


def test_one_change_in_flight_at_a_time(tmp_path):
    p = caught_up_candidate(tmp_path)
    change = p.maybe_expand_isr(3)
    assert p.maybe_expand_isr(3) is None
    assert p.maybe_shrink_isr(10 ** 15, LAG_MS) is None, "2 lags by now, but a change is out"
    p.on_isr_change_failed(change)
    assert isinstance(p.maybe_shrink_isr(10 ** 15, LAG_MS), PendingShrinkIsr)
    assert p.maybe_expand_isr(3) is None


# -- answers -----------------------------------------------------------------------------------

def test_a_refused_change_returns_to_the_committed_isr(tmp_path):
    p = caught_up_candidate(tmp_path)
    committed = p.isr_state
    change = p.maybe_expand_isr(3)
    p.on_isr_change_failed(change)
    assert p.isr_state is committed and p.maximal_isr == {1, 2}
    assert p.maybe_expand_isr(3) is not None, "it may be proposed again"


def test_a_committed_image_replaces_the_pending_change_and_its_answer_is_ignored(tmp_path):
    p = caught_up_candidate(tmp_path)
    change = p.maybe_expand_isr(3)
    p.update_isr_from_metadata([1], partition_epoch=1)   # the controller fenced broker 2
    assert p.isr_state == CommittedIsr((1,)) and p.partition_epoch == 1
    assert not p.on_isr_change_committed(change, 1)
    p.on_isr_change_failed(change)
    assert (p.isr, p.partition_epoch) == ([1], 1)


def test_our_own_change_in_the_image_then_its_answer(tmp_path):
    p = caught_up_candidate(tmp_path)
    change = p.maybe_expand_isr(3)
    p.update_isr_from_metadata([1, 2, 3], partition_epoch=1)
    assert not p.on_isr_change_committed(change, 1), "the image said it first"
    assert p.isr_state == CommittedIsr((1, 2, 3))


def test_a_committed_answer_before_the_image_commits_in_replica_order(tmp_path):
    p = new_partition(tmp_path)
    p.make_leader(0, 4, [3, 1, 2], [3, 1])
    append(p, 2)
    fetch(p, 3, 2)
    fetch(p, 2, 2)
    change = p.maybe_expand_isr(2)
    assert p.on_isr_change_committed(change, 5)
    assert (p.isr, p.partition_epoch) == ([3, 1, 2], 5)
    assert isinstance(p.isr_state, CommittedIsr)


def test_a_new_leadership_forgets_the_pending_change(tmp_path):
    p = caught_up_candidate(tmp_path)
    change = p.maybe_expand_isr(3)
    p.make_leader(1, 1, [1, 2, 3], [1, 2])
    assert p.isr_state == CommittedIsr((1, 2))
    assert not p.on_isr_change_committed(change, 1)
    assert p.isr_state == CommittedIsr((1, 2))
    p.maybe_shrink_isr(10 ** 15, LAG_MS)
    p.make_follower(2, 2, 2, [1, 2, 3], [2, 3])
    assert p.isr_state == CommittedIsr((2, 3))


# -- the high watermark waits for the maximal ISR ------------------------------------------------

def test_the_hw_in_the_committed_state_waits_for_the_isr_only(tmp_path):
    p = leader(tmp_path, isr=(1, 2))
    append(p, 10)
    fetch(p, 3, 2)
    fetch(p, 2, 8)
    assert p.high_watermark == 8


def test_the_hw_during_a_pending_expansion_waits_for_the_joining_replica(tmp_path):
    p = leader(tmp_path, isr=(1, 2))
    append(p, 4)
    fetch(p, 2, 4)
    fetch(p, 3, 4)
    change = p.maybe_expand_isr(3)
    append(p, 6)
    fetch(p, 3, 6)
    fetch(p, 2, 10)
    assert p.high_watermark == 6, "3 is about to be in the ISR: the HW may not pass it"
    p.on_isr_change_failed(change)
    assert p.maybe_increment_high_watermark() and p.high_watermark == 10


def test_the_hw_during_a_pending_shrink_still_waits_for_the_lagging_replica(tmp_path):
    p = leader(tmp_path)
    append(p, 10)
    now = p.followers[2].last_caught_up_ms
    fetch(p, 2, 10, now_ms=now + LAG_MS)
    fetch(p, 3, 3, now_ms=now + LAG_MS)
    change = p.maybe_shrink_isr(now + LAG_MS + 1, LAG_MS)
    assert change.proposed_isr == (1, 2)
    assert not p.maybe_increment_high_watermark() and p.high_watermark == 3
    assert p.on_isr_change_committed(change, 1)
    assert p.maybe_increment_high_watermark() and p.high_watermark == 10


# -- through the replica manager ------------------------------------------------------------------

class FakeStore:
    """Stands for the metadata store: records each AlterPartition; ``refuse`` raises
    ApplyError, else the change is applied to ``state`` and the image published first
    (as both real stores do), then the new partition epoch returned."""

    def __init__(self, rm: ReplicaManager, state: ClusterState):
        self.rm, self.state = rm, state
        self.refuse = False
        self.submitted = []

    async def submit(self, *command, **_):
        partition = self.rm.partitions[("t", 0)]
        change = partition.isr_state
        self.submitted.append(change)
        if self.refuse:
            raise ApplyError("INVALID_UPDATE_VERSION", "refused by the test")
        epoch = self.state.apply_alter_partition("t", 0, 1, change.leader_epoch,
                                                 change.partition_epoch,
                                                 sorted(change.proposed_isr))
        self.rm.apply_image(self.state)
        return epoch


def three_replica_leader(tmp_path) -> tuple[ReplicaManager, FakeStore, ClusterState]:
    state = ClusterState()
    for node in (1, 2, 3):
        state.apply_register_broker(node, "127.0.0.1", 19090 + node, f"i-{node}")
    state.apply_create_topic("t", "topic-id", [[1, 2, 3]], {})
    rm = ReplicaManager(config_module.build({"node.id": 1, "log.dirs": str(tmp_path)}))
    store = FakeStore(rm, state)
    rm.metadata = MetadataClient(store)   # ISR proposals go through the metadata client
    rm.apply_image(state)
    return rm, store, state


def follower_fetch(rm: ReplicaManager, replica_id: int, offset: int) -> None:
    partition = rm.partitions[("t", 0)]
    rm.record_follower_fetches(
        [FetchPartitionStatus(("t", 0), partition, offset, 1 << 20, -1)], replica_id)


def test_the_replica_manager_shrinks_and_expands_through_the_partition(tmp_path):
    async def main():
        rm, store, state = three_replica_leader(tmp_path)
        partition = rm.partitions[("t", 0)]
        assert partition.isr == [1, 2, 3]
        for replica in (2, 3):
            partition.followers[replica].last_caught_up_ms = 0   # long silent
        rm._shrink_isr_once()
        assert isinstance(partition.isr_state, PendingShrinkIsr)
        await asyncio.gather(*rm.tasks.tasks)
        assert (partition.isr, partition.partition_epoch) == ([1], 1)
        assert state.topics["t"].partitions[0].isr == [1]

        follower_fetch(rm, 2, 0)                 # at the HW (0): may join
        assert partition.maximal_isr == {1, 2} and partition.isr == [1]
        await asyncio.gather(*rm.tasks.tasks)
        assert (partition.isr, partition.partition_epoch) == ([1, 2], 2)
        assert isinstance(partition.isr_state, CommittedIsr) and len(store.submitted) == 2
        await rm.shutdown()

    asyncio.run(main())


def test_a_refused_proposal_leaves_the_partition_free_to_propose_again(tmp_path):
    async def main():
        rm, store, _ = three_replica_leader(tmp_path)
        partition = rm.partitions[("t", 0)]
        partition.followers[3].last_caught_up_ms = 0
        store.refuse = True
        rm._shrink_isr_once()
        rm._shrink_isr_once()                    # one in flight: nothing more sent
        await asyncio.gather(*rm.tasks.tasks)
        assert len(store.submitted) == 1
        assert partition.isr_state == CommittedIsr((1, 2, 3))
        store.refuse = False
        rm._shrink_isr_once()
        await asyncio.gather(*rm.tasks.tasks)
        assert partition.isr == [1, 2] and len(store.submitted) == 2
        await rm.shutdown()

    asyncio.run(main())


def test_without_a_metadata_client_nothing_is_proposed(tmp_path):
    async def main():
        rm, _, _ = three_replica_leader(tmp_path)
        rm.metadata = None
        partition = rm.partitions[("t", 0)]
        partition.followers[3].last_caught_up_ms = 0
        rm._shrink_isr_once()
        assert partition.isr_state == CommittedIsr((1, 2, 3)) and not rm.tasks.tasks
        await rm.shutdown()

    asyncio.run(main())


def test_images_bring_the_isr_to_followers_and_leaders(tmp_path):
    """The image is the authority on both sides; only the leader re-checks its HW."""
    async def main():
        state = ClusterState()
        for node in (1, 2, 3):
            state.apply_register_broker(node, "127.0.0.1", 19090 + node, f"i-{node}")
        state.apply_create_topic("t", "topic-id", [[2, 1, 3], [1, 2, 3]], {})
        rm = ReplicaManager(config_module.build({"node.id": 1, "log.dirs": str(tmp_path)}))
        rm.apply_image(state)
        follower, leader = rm.partitions[("t", 0)], rm.partitions[("t", 1)]
        assert not follower.is_leader and leader.is_leader
        state.apply_alter_partition("t", 0, 2, 0, 0, [2, 1])
        state.apply_alter_partition("t", 1, 1, 0, 0, [1, 3])
        rm.apply_image(state)
        assert (follower.isr, follower.partition_epoch) == ([2, 1], 1)
        assert (leader.isr, leader.partition_epoch) == ([1, 3], 1)
        assert follower.leader_id == 2 and ("t", 0) in rm.fetchers.fetchers[2].partitions
        await rm.shutdown()

    asyncio.run(main())

"""Regression tests for the data-plane defects a network partition exposed.

* acks=all must not be acknowledged on one copy when the ISR shrinks below
  min.insync.replicas while the write waits: the shrink moves the HW to the leader's
  LEO, and Kafka then answers NOT_ENOUGH_REPLICAS_AFTER_APPEND.
* A follower whose latest epoch the leader does not have must cut that epoch's
  records, even below its own high watermark (it was computed in that epoch).
* A broker never takes an older metadata image over a newer one, whatever the order
  the images arrive in.
"""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from broker.controller.state import ClusterState
from broker.controller.store import LocalStore
from broker.replication.acks import DelayedProduce, ProducePartitionStatus
from broker.replication.fetcher import FollowedPartition, ReplicaFetcher
from protocol.errors import ErrorCode
from tests.unit.replication.test_partition_hw import append, fetch, leader, new_partition
from tests.unit.replication.test_partition_truncation import leader_batch


def waiting_produce(partition, required_offset):
    answers = []
    status = ProducePartitionStatus(partition, required_offset, 0)
    operation = DelayedProduce(30_000, {partition.key: status}, answers.append)
    return operation, status, answers


# -- acks=all and the ISR -------------------------------------------------------------

def test_acks_all_is_not_acknowledged_when_a_shrink_to_the_leader_moves_the_hw(tmp_path):
    p = leader(tmp_path, min_insync_replicas=2)
    first, last = append(p, 5, acks=-1)
    operation, status, answers = waiting_produce(p, last + 1)
    assert not operation.try_complete(), "no follower has the records yet"
    p.update_isr_from_metadata([1], partition_epoch=1)           # the controller shrank the ISR
    assert p.maybe_increment_high_watermark()      # ...so the HW is the leader's LEO
    assert p.high_watermark == last + 1
    assert operation.try_complete()
    assert status.error == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert answers, "the produce was answered"


def test_acks_all_is_acknowledged_when_min_isr_replicas_have_the_records(tmp_path):
    p = leader(tmp_path, min_insync_replicas=2)
    _, last = append(p, 5, acks=-1)
    operation, status, _ = waiting_produce(p, last + 1)
    fetch(p, 2, last + 1)
    p.update_isr_from_metadata([1, 2], partition_epoch=1)        # follower 3 left the ISR
    assert p.maybe_increment_high_watermark()
    assert operation.try_complete()
    assert status.error == ErrorCode.NONE


def test_a_small_isr_alone_does_not_answer_while_the_hw_is_short(tmp_path):
    p = leader(tmp_path, isr=(1, 2), min_insync_replicas=3)
    _, last = append(p, 5, acks=1)
    operation, status, _ = waiting_produce(p, last + 1)
    assert not operation.try_complete(), "Kafka waits for the HW (or the timeout)"
    fetch(p, 2, last + 1)
    assert operation.try_complete()
    assert status.error == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


# -- follower truncation when the leader lacks our epoch ------------------------------

def fetcher_for(leader_id: int = 2):
    manager = SimpleNamespace(node_id=1, backoff_s=0.1)
    return ReplicaFetcher(manager, leader_id)


def test_an_epoch_the_leader_never_had_is_cut_even_below_our_high_watermark(tmp_path):
    p = new_partition(tmp_path)
    p.make_follower(2, 3, 1, [1, 2, 3], [1, 2, 3])
    p.append_as_follower(leader_batch([b"a"] * 4, 0, 3), leader_high_watermark=0)
    p.make_follower(2, 4, 2, [1, 2, 3], [1, 2, 3])  # a bogus epoch 4, HW "committed" in it
    p.append_as_follower(leader_batch([b"b"] * 3, 4, 4), leader_high_watermark=7)
    assert (p.log_end_offset, p.high_watermark) == (7, 7)
    followed = FollowedPartition(p, leader_epoch=5)
    fetcher = fetcher_for()
    fetcher._apply_epoch_answer(followed, SimpleNamespace(error_code=0, leader_epoch=-1,
                                                          end_offset=-1))
    assert p.log_end_offset == 4, "the records of epoch 4 are not the leader's"
    assert p.high_watermark <= 4
    assert followed.needs_truncation, "ask again with epoch 3"
    fetcher._apply_epoch_answer(followed, SimpleNamespace(error_code=0, leader_epoch=3,
                                                          end_offset=4))
    assert (p.log_end_offset, followed.needs_truncation) == (4, False)


def test_with_no_epoch_left_there_is_nothing_to_reconcile(tmp_path):
    p = new_partition(tmp_path)
    p.make_follower(2, 3, 1, [1, 2], [1, 2])
    p.append_as_follower(leader_batch([b"a"] * 2, 0, 3), leader_high_watermark=2)
    followed = FollowedPartition(p, leader_epoch=5)
    fetcher_for()._apply_epoch_answer(followed, SimpleNamespace(error_code=0, leader_epoch=-1,
                                                                end_offset=-1))
    assert p.log_end_offset == 0 and not followed.needs_truncation


# -- metadata images are ordered by Raft log position ----------------------------------

def image(term: int, index: int, version: int) -> ClusterState:
    state = ClusterState()
    state.applied_term, state.applied_index, state.version = term, index, version
    return state


def test_a_newer_term_wins_over_a_higher_version_from_an_older_term(tmp_path):
    store = LocalStore(str(tmp_path), 1)
    seen = []
    store.add_listener(seen.append)
    stale = image(3, 100, version=60)       # applied by a cut-off leader, never committed
    committed = image(4, 95, version=55)    # what the quorum committed meanwhile
    store._publish(stale)
    store._publish(committed)
    assert store.image is committed and seen == [stale, committed]
    store._publish(image(4, 90, version=54))  # a late, older image
    assert store.image is committed and len(seen) == 2


# -- a controller without a quorum fences nobody ----------------------------------------

def test_a_controller_whose_own_heartbeats_stopped_committing_fences_nobody(tmp_path):
    from broker import config as broker_config
    from broker.controller.controller import Controller

    store = LocalStore(str(tmp_path), 1)
    cfg = broker_config.build({"node.id": "1", "broker.session.timeout.ms": "3000"})
    controller = Controller(store, cfg)
    state = ClusterState()
    for broker_id in (1, 2, 3):
        state.apply_register_broker(broker_id, "h", 9000 + broker_id, f"i{broker_id}")
    controller.last_seen = {1: 100.0, 2: 100.0, 3: 100.0}
    assert controller.expired_brokers(state, now=110.0) == [], \
        "cut off from the quorum, it hears nobody, itself included"
    controller.last_seen[1] = 109.0
    assert controller.expired_brokers(state, now=110.0) == [2, 3]


def test_a_fenced_follower_is_not_proposed_for_the_isr(tmp_path):
    """Its every fetch would otherwise send an AlterPartition the controller refuses."""
    from broker import config as broker_config
    from broker.controller.state import ClusterState
    from broker.replication.delayed import FetchPartitionStatus
    from broker.replication.replica_manager import ReplicaManager

    proposals = []

    class Store:
        async def submit(self, command, **kwargs):
            proposals.append(command)
            return 1

    manager = ReplicaManager(broker_config.build({"node.id": "1", "log.dirs": str(tmp_path)}),
                             Store())
    image = ClusterState()
    for broker_id in (1, 2, 3):
        image.apply_register_broker(broker_id, "h", 9000 + broker_id, f"i{broker_id}")
    image.apply_fence_brokers([3], {})
    manager.image = image
    p = leader(tmp_path, isr=(1, 2))
    append(p, 5)
    fetch(p, 2, 5)
    status = FetchPartitionStatus(p.key, p, 5, 1 << 20, -1)

    async def fetches():
        manager.record_follower_fetches([status], replica_id=3)
        assert p.pending_isr_additions == frozenset(), "a fenced broker was proposed"
        image.brokers[3].fenced = False
        manager.record_follower_fetches([status], replica_id=3)
        assert p.pending_isr_additions == {3}
        for _ in range(3):  # let the proposal's task reach the store
            await asyncio.sleep(0)
        await manager.tasks.shutdown()

    asyncio.run(fetches())
    assert len(proposals) == 1

"""Coordinator failover on a 3-broker cluster: kill -9 the broker that coordinates a live
group; the leader of the group's ``__consumer_offsets`` partition moves, the new leader
loads the group and its offsets, the consumers find it and carry on, and a rebalance
completes there.  Invariant: an acknowledged commit survives the coordinator's crash."""
from __future__ import annotations

import asyncio
import time

import pytest
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.admin import DescribeGroupsRequest
from kafka.protocol.metadata import FindCoordinatorRequest

import broker.testing as raftwood_testing
from broker.testing import KafkaConnection

TOPIC = "failover-events"
GROUP = "failover-group"
PARTITIONS = 4
WAIT_S = 60.0


@pytest.fixture
def cluster_factory(request):
    """The plugin's ``raftwood_cluster_factory``; skipped on a checkout whose
    broker.testing does not offer it yet."""
    if not hasattr(raftwood_testing, "ClusterProcess"):
        pytest.skip("broker.testing has no ClusterProcess / raftwood_cluster_factory")
    return request.getfixturevalue("raftwood_cluster_factory")


def find_coordinator(cluster, exclude: int | None = None) -> int:
    """The coordinator's node id, asked of a running broker; retried while not available."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        for node_id in cluster.running():
            if node_id == exclude:
                continue
            try:
                with cluster.connect(node_id) as conn:
                    answer = conn.request(FindCoordinatorRequest[3](key=GROUP, key_type=0))
            except OSError:
                continue
            if answer.error_code == 0 and answer.node_id != exclude:
                return answer.node_id
        time.sleep(0.2)
    raise AssertionError("no coordinator found")


def describe(cluster, node_id: int):
    with cluster.connect(node_id) as conn:
        return conn.request(DescribeGroupsRequest[5](groups=[GROUP])).groups[0]


async def produce(bootstrap: str, per_partition: int, start: int) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all",
                                request_timeout_ms=20000, retry_backoff_ms=200)
    await producer.start()
    try:
        for p in range(PARTITIONS):
            for i in range(start, start + per_partition):
                await producer.send_and_wait(TOPIC, f"{p}-{i}".encode(), partition=p)
    finally:
        await producer.stop()


def consumer(bootstrap: str):
    from aiokafka import AIOKafkaConsumer

    return AIOKafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=GROUP,
                            enable_auto_commit=False, auto_offset_reset="earliest",
                            session_timeout_ms=10000, heartbeat_interval_ms=500,
                            retry_backoff_ms=200, request_timeout_ms=20000,
                            metadata_max_age_ms=2000)


async def consume(consumers, want: int) -> set:
    """(partition, offset) of consumed records until ``want`` distinct ones; bounded."""
    seen: set = set()
    deadline = time.monotonic() + WAIT_S
    while len(seen) < want and time.monotonic() < deadline:
        batches = await asyncio.gather(*(c.getmany(timeout_ms=300) for c in consumers))
        for batch in batches:
            for tp, records in batch.items():
                seen |= {(tp.partition, r.offset) for r in records}
    assert len(seen) >= want, f"consumed {len(seen)} of {want}: {sorted(seen)}"
    return seen


async def commit_eventually(member) -> None:
    """Commit, retrying while the group finds its new coordinator (bounded)."""
    from aiokafka.errors import KafkaError

    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            await member.commit()
            return
        except KafkaError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


async def wait_assignments(consumers, total: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        assigned = [set(c.assignment()) for c in consumers]
        if all(assigned) and sum(map(len, assigned)) == total \
                and len(set().union(*assigned)) == total:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"assignments never settled: {[c.assignment() for c in consumers]}")


def test_killing_the_coordinator_keeps_commits_and_the_group_continues_on_the_new_one(
        cluster_factory):
    cluster = cluster_factory(3, group_initial_rebalance_delay_ms=200)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=20000)
    try:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])
    finally:
        admin.close()

    async def scenario():
        await produce(cluster.bootstrap, 10, 0)
        members = [consumer(cluster.bootstrap) for _ in range(2)]
        for member in members:
            await member.start()
        try:
            await wait_assignments(members, PARTITIONS)
            first = await consume(members, 10 * PARTITIONS)
            assert first == {(p, o) for p in range(PARTITIONS) for o in range(10)}
            for member in members:
                await member.commit()

            coordinator = await asyncio.to_thread(find_coordinator, cluster)
            await asyncio.to_thread(cluster.kill, coordinator)

            # The consumers lose the coordinator mid-flight; new records still reach them.
            await produce(cluster.bootstrap, 5, 10)
            second = await consume(members, 5 * PARTITIONS)
            # Nothing below the commits came back: the offsets survived the crash.
            assert second == {(p, o) for p in range(PARTITIONS) for o in range(10, 15)}
            for member in members:
                await commit_eventually(member)

            new_coordinator = await asyncio.to_thread(find_coordinator, cluster, coordinator)
            assert new_coordinator != coordinator

            # A third member joins: the rebalance runs on the new coordinator.
            third = consumer(cluster.bootstrap)
            await third.start()
            members.append(third)
            await wait_assignments(members, PARTITIONS)
            group = await asyncio.to_thread(describe, cluster, new_coordinator)
            assert (group.error_code, group.group_state, len(group.members)) == (0, "Stable", 3)
        finally:
            for member in members:
                await member.stop()

        late = consumer(cluster.bootstrap)
        await late.start()
        try:
            from aiokafka import TopicPartition

            for p in range(PARTITIONS):
                assert await late.committed(TopicPartition(TOPIC, p)) == 15
        finally:
            await late.stop()

    asyncio.run(asyncio.wait_for(scenario(), 240))


def test_a_lone_broker_killed_and_restarted_reloads_its_groups_and_commits(
        raftwood_broker_factory):
    """kill -9 of the only broker: on restart it loads __consumer_offsets again; the live
    consumer rejoins the reloaded group and resumes after its last commit."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    from tests.conftest import create_topic

    broker = raftwood_broker_factory(group_initial_rebalance_delay_ms=100)
    create_topic(broker.bootstrap, TOPIC, partitions=2)

    def produce_sync(start: int, count: int) -> None:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", retries=10,
                                 retry_backoff_ms=200)
        try:
            for i in range(start, start + count):
                producer.send(TOPIC, f"{i}".encode(), partition=i % 2)
            producer.flush(timeout=WAIT_S)
        finally:
            producer.close()

    def poll_until(member, want: int) -> set:
        seen: set = set()
        deadline = time.monotonic() + WAIT_S
        while len(seen) < want and time.monotonic() < deadline:
            for tp, records in member.poll(timeout_ms=300).items():
                seen |= {(tp.partition, r.offset) for r in records}
        return seen

    produce_sync(0, 10)
    member = KafkaConsumer(TOPIC, bootstrap_servers=broker.bootstrap, group_id=GROUP,
                           enable_auto_commit=False, auto_offset_reset="earliest",
                           session_timeout_ms=10000, heartbeat_interval_ms=500,
                           reconnect_backoff_ms=100, retry_backoff_ms=200)
    try:
        assert poll_until(member, 10) == {(p, o) for p in range(2) for o in range(5)}
        member.commit()
        broker.kill()
        broker.restart()
        produce_sync(10, 4)
        # Only records after the commit: positions and commits both survived.
        assert poll_until(member, 4) == {(p, o) for p in range(2) for o in range(5, 7)}
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                member.commit()
                break
            except Exception:
                assert time.monotonic() < deadline, "commit never succeeded after restart"
                time.sleep(0.5)
        with KafkaConnection(broker.bootstrap) as conn:
            group = conn.request(DescribeGroupsRequest[5](groups=[GROUP])).groups[0]
        assert (group.group_state, len(group.members)) == ("Stable", 1)
    finally:
        member.close(autocommit=False)
    fresh = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=GROUP)
    try:
        assert [fresh.committed(TopicPartition(TOPIC, p)) for p in range(2)] == [7, 7]
    finally:
        fresh.close(autocommit=False)

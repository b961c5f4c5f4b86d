"""Static membership (KIP-345) driven by real clients against real broker processes.

Invariants: a static consumer closed and restarted within its session comes back with
the same partitions and nobody else in the group rebalances (no revocation, same
generation); a second process with the same ``group.instance.id`` fences the first,
which is told FENCED_INSTANCE_ID; a static member that stays away past its session is
removed and the others rebalance; LeaveGroup by instance id removes a member at once;
a coordinator failover keeps the instance id → member id map.  Every wait is bounded.
"""
from __future__ import annotations

import asyncio
import itertools
import time

import pytest
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.admin import DescribeGroupsRequest
from kafka.protocol.consumer import LeaveGroupRequest
from kafka.protocol.metadata import FindCoordinatorRequest

import broker.testing as raftwood_testing
from broker.testing import BrokerProcess, KafkaConnection
from tests.conftest import create_topic

WAIT_S = 30.0
_names = itertools.count(1)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    home = tmp_path_factory.mktemp("groups-static")
    process = BrokerProcess(home / "data", log_path=home / "broker.log", extra_settings={
        "group.initial.rebalance.delay.ms": "300",
        "group.min.session.timeout.ms": "1000"}).start()
    yield process
    assert process.stop() == 0, process.log_tail()


def names(prefix: str) -> tuple[str, str]:
    n = next(_names)
    return f"{prefix}-topic-{n}", f"{prefix}-group-{n}"


def describe(bootstrap: str, group: str):
    """DescribeGroups v5 (v4+ carries group_instance_id) of ``group`` at ``bootstrap``."""
    with KafkaConnection(bootstrap) as conn:
        return conn.request(DescribeGroupsRequest[5](groups=[group])).groups[0]


def instances(described) -> dict[str, str]:
    return {m.group_instance_id: m.member_id for m in described.members}


# -- aiokafka ---------------------------------------------------------------------------------

class Recorder:
    """A rebalance listener that keeps every callback (an aiokafka ConsumerRebalanceListener)."""

    def __init__(self):
        self.events: list[tuple[str, frozenset]] = []

    def on_partitions_revoked(self, revoked):
        self.events.append(("revoked", frozenset(revoked)))

    def on_partitions_assigned(self, assigned):
        self.events.append(("assigned", frozenset(assigned)))


def aiokafka_member(bootstrap: str, topic: str, group: str, instance: str,
                    session_timeout_ms: int = 10000):
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                group_instance_id=instance, enable_auto_commit=False,
                                auto_offset_reset="earliest",
                                session_timeout_ms=session_timeout_ms,
                                heartbeat_interval_ms=300, request_timeout_ms=20000,
                                retry_backoff_ms=100)
    recorder = Recorder()
    consumer.subscribe([topic], listener=_listener(recorder))
    return consumer, recorder


def _listener(recorder: Recorder):
    from aiokafka import ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            recorder.on_partitions_revoked(revoked)

        def on_partitions_assigned(self, assigned):
            recorder.on_partitions_assigned(assigned)
    return Listener()


async def wait_assignments(consumers, total: int) -> list[frozenset]:
    """Until every consumer has partitions and together they hold ``total``, disjoint."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        assigned = [frozenset(c.assignment()) for c in consumers]
        if all(assigned) and sum(map(len, assigned)) == total \
                and len(frozenset().union(*assigned)) == total:
            return assigned
        await asyncio.sleep(0.1)
    raise AssertionError(f"assignments never settled: {[c.assignment() for c in consumers]}")


def test_aiokafka_static_member_restarted_within_its_session_keeps_its_partitions_and_nobody_rebalances(  # noqa: E501
        broker):
    topic, group = names("static-restart")
    create_topic(broker.bootstrap, topic, partitions=4)

    async def scenario():
        a, _ = aiokafka_member(broker.bootstrap, topic, group, "member-a")
        b, b_events = aiokafka_member(broker.bootstrap, topic, group, "member-b")
        await a.start()
        await b.start()
        restarted = None
        try:
            a_parts, b_parts = await wait_assignments([a, b], 4)
            await asyncio.sleep(1.0)  # let any rebalance in flight finish
            a_parts, b_parts = await wait_assignments([a, b], 4)
            before = describe(broker.bootstrap, group)
            b_generation, b_seen = b._coordinator.generation, list(b_events.events)

            await a.stop()  # static: no LeaveGroup; its member stays until the session ends
            during = describe(broker.bootstrap, group)
            assert (during.group_state, instances(during)) == ("Stable", instances(before))

            restarted, _ = aiokafka_member(broker.bootstrap, topic, group, "member-a")
            await restarted.start()
            (again,) = await wait_assignments([restarted], len(a_parts))
            assert again == a_parts  # the same partitions, from the stored assignment
            await asyncio.sleep(1.5)  # several heartbeats: a rebalance would show by now
            after = describe(broker.bootstrap, group)
            assert after.group_state == "Stable"
            assert instances(after)["member-b"] == instances(before)["member-b"]
            assert instances(after)["member-a"] != instances(before)["member-a"]
            assert instances(after)["member-a"] == restarted._coordinator.member_id
            # The other member saw nothing: no revocation, no new generation.
            assert b_events.events == b_seen
            assert b._coordinator.generation == b_generation
            assert frozenset(b.assignment()) == b_parts
        finally:
            for consumer in (a, b, restarted):
                if consumer is not None:
                    await consumer.stop()

    asyncio.run(asyncio.wait_for(scenario(), 120))


def test_aiokafka_static_member_away_past_its_session_is_removed_and_the_group_rebalances(
        broker):
    topic, group = names("static-expiry")
    create_topic(broker.bootstrap, topic, partitions=4)

    async def scenario():
        a, _ = aiokafka_member(broker.bootstrap, topic, group, "member-a",
                               session_timeout_ms=3000)
        b, b_events = aiokafka_member(broker.bootstrap, topic, group, "member-b",
                                      session_timeout_ms=3000)
        await a.start()
        await b.start()
        try:
            await wait_assignments([a, b], 4)
            await a.stop()  # no LeaveGroup
            stopped = time.monotonic()
            await asyncio.sleep(1.0)
            assert len(b.assignment()) == 2  # within the session: nothing moves
            assert "member-a" in instances(describe(broker.bootstrap, group))
            await wait_assignments([b], 4)  # after it: b takes every partition
            assert time.monotonic() - stopped >= 2.5
            assert b_events.events[-1] == ("assigned", frozenset(b.assignment()))
            after = describe(broker.bootstrap, group)
            assert list(instances(after)) == ["member-b"]
        finally:
            await a.stop()
            await b.stop()

    asyncio.run(asyncio.wait_for(scenario(), 120))


def test_leave_group_by_instance_id_removes_a_static_member_at_once(broker):
    """What an admin's "remove members from consumer group" sends: LeaveGroup v3+ naming
    members by group.instance.id alone; each gets its own error."""
    topic, group = names("static-leave")
    create_topic(broker.bootstrap, topic, partitions=4)
    identity = LeaveGroupRequest[4].MemberIdentity

    async def scenario():
        a, _ = aiokafka_member(broker.bootstrap, topic, group, "member-a",
                               session_timeout_ms=60000)
        b, _ = aiokafka_member(broker.bootstrap, topic, group, "member-b",
                               session_timeout_ms=60000)
        await a.start()
        await b.start()
        try:
            await wait_assignments([a, b], 4)
            await a.stop()  # gone for good, but its 60 s session would keep it
            with KafkaConnection(broker.bootstrap) as conn:
                answer = conn.request(LeaveGroupRequest[4](group_id=group, members=[
                    identity(member_id="", group_instance_id="member-a"),
                    identity(member_id="", group_instance_id="never-joined")]))
            assert answer.error_code == 0
            assert [(m.member_id, m.group_instance_id, m.error_code) for m in answer.members] \
                == [("", "member-a", 0), ("", "never-joined", 25)]  # UNKNOWN_MEMBER_ID
            await wait_assignments([b], 4)  # rebalanced long before a session timeout
            assert list(instances(describe(broker.bootstrap, group))) == ["member-b"]
        finally:
            await a.stop()
            await b.stop()

    asyncio.run(asyncio.wait_for(scenario(), 120))


# -- confluent-kafka (librdkafka) ----------------------------------------------------------------

def confluent_member(bootstrap: str, topic: str, group: str, instance: str, events: list,
                     errors: list | None = None):
    from confluent_kafka import Consumer

    def on_assign(consumer, partitions):
        events.append(("assigned", frozenset(p.partition for p in partitions)))

    def on_revoke(consumer, partitions):
        events.append(("revoked", frozenset(p.partition for p in partitions)))

    settings = {"bootstrap.servers": bootstrap, "group.id": group,
                "group.instance.id": instance, "auto.offset.reset": "earliest",
                "enable.auto.commit": False, "session.timeout.ms": 10000,
                "heartbeat.interval.ms": 300, "topic.metadata.refresh.interval.ms": 2000}
    if errors is not None:
        settings["error_cb"] = errors.append
    consumer = Consumer(settings)
    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    return consumer


def poll_until(consumers, condition, what: str, timeout_s: float = WAIT_S,
               errors: dict | None = None) -> None:
    """Poll every consumer until ``condition()``; errors polled go to ``errors[index]``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        for i, consumer in enumerate(consumers):
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is not None and errors is not None:
                errors.setdefault(i, []).append(msg.error())


def assigned_now(events: list) -> frozenset:
    current: frozenset = frozenset()
    for kind, parts in events:
        current = parts if kind == "assigned" else current - parts
    return current


def test_confluent_static_member_restart_keeps_partitions_without_a_rebalance(broker):
    topic, group = names("static-confluent")
    create_topic(broker.bootstrap, topic, partitions=4)
    a_events: list = []
    b_events: list = []
    a = confluent_member(broker.bootstrap, topic, group, "member-a", a_events)
    b = confluent_member(broker.bootstrap, topic, group, "member-b", b_events)
    restarted = None
    try:
        poll_until([a, b], lambda: len(assigned_now(a_events)) == 2
                   and len(assigned_now(b_events)) == 2, "a 2/2 split")
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            for consumer in (a, b):
                consumer.poll(0.1)
        a_parts, b_seen = assigned_now(a_events), list(b_events)
        before = describe(broker.bootstrap, group)
        a.close()  # static: librdkafka sends no LeaveGroup
        a = None

        again_events: list = []
        restarted = confluent_member(broker.bootstrap, topic, group, "member-a", again_events)
        poll_until([restarted, b], lambda: assigned_now(again_events) == a_parts,
                   "the restarted member gets its old partitions")
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            for consumer in (restarted, b):
                consumer.poll(0.1)
        assert b_events == b_seen  # no revocation, no new assignment on the other member
        after = describe(broker.bootstrap, group)
        assert after.group_state == "Stable"
        assert instances(after)["member-b"] == instances(before)["member-b"]
        assert instances(after)["member-a"] != instances(before)["member-a"]
    finally:
        for consumer in (a, b, restarted):
            if consumer is not None:
                consumer.close()


def test_confluent_a_second_process_with_the_same_instance_id_fences_the_first(broker):
    from confluent_kafka import KafkaError

    topic, group = names("static-fence")
    create_topic(broker.bootstrap, topic, partitions=2)
    first_events: list = []
    first_errors: list = []  # error_cb's
    first = confluent_member(broker.bootstrap, topic, group, "the-instance", first_events,
                             first_errors)
    polled: dict = {}
    second = None
    try:
        poll_until([first], lambda: len(assigned_now(first_events)) == 2, "first assigned")
        second_events: list = []
        second = confluent_member(broker.bootstrap, topic, group, "the-instance",
                                  second_events)
        poll_until([first, second], lambda: len(assigned_now(second_events)) == 2,
                   "second takes over", errors=polled)

        def fatal() -> list:
            return [e for e in first_errors + polled.get(0, [])
                    if e.fatal() or e.code() == KafkaError._FATAL]
        poll_until([first, second], fatal, "the first hears it is fenced", errors=polled)
        # librdkafka raises a fatal error whose cause is the broker's FENCED_INSTANCE_ID.
        reasons = " ".join(e.str() for e in fatal())
        assert "fenced" in reasons.lower() and "group.instance.id" in reasons, reasons
        described = describe(broker.bootstrap, group)
        assert list(instances(described)) == ["the-instance"]
        assert described.group_state == "Stable"
    finally:
        for consumer in (first, second):
            if consumer is not None:
                consumer.close()


def test_kafka_python_a_fenced_static_member_cannot_commit(broker):
    """kafka-python sends the instance id with OffsetCommit v7+: the replaced process
    gets FENCED_INSTANCE_ID (FencedInstanceIdError), the new one commits."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import FencedInstanceIdError
    from kafka.structs import OffsetAndMetadata

    topic, group = names("static-kafka-python")
    create_topic(broker.bootstrap, topic, partitions=1)
    tp = TopicPartition(topic, 0)

    def consumer():
        return KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                             group_instance_id="kp-instance", enable_auto_commit=False,
                             session_timeout_ms=10000, heartbeat_interval_ms=300)

    def poll_until_assigned(c) -> None:
        deadline = time.monotonic() + WAIT_S
        while not c.assignment():
            assert time.monotonic() < deadline, "never assigned"
            c.poll(timeout_ms=100)

    first = consumer()
    second = None
    try:
        poll_until_assigned(first)
        first.commit({tp: OffsetAndMetadata(1, "", -1)})
        second = consumer()
        poll_until_assigned(second)
        with pytest.raises(FencedInstanceIdError):
            first.commit({tp: OffsetAndMetadata(2, "", -1)})
        second.commit({tp: OffsetAndMetadata(3, "", -1)})
        assert second.committed(tp) == 3
    finally:
        for c in (first, second):
            if c is not None:
                c.close(autocommit=False)


# -- coordinator failover ----------------------------------------------------------------------

@pytest.fixture
def cluster_factory(request):
    if not hasattr(raftwood_testing, "ClusterProcess"):
        pytest.skip("broker.testing has no ClusterProcess / raftwood_cluster_factory")
    return request.getfixturevalue("raftwood_cluster_factory")


def find_coordinator(cluster, group: str, exclude: int | None = None) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for node_id in cluster.running():
            if node_id == exclude:
                continue
            try:
                with cluster.connect(node_id) as conn:
                    answer = conn.request(FindCoordinatorRequest[3](key=group, key_type=0))
            except OSError:
                continue
            if answer.error_code == 0 and answer.node_id != exclude:
                return answer.node_id
        time.sleep(0.2)
    raise AssertionError("no coordinator found")


def test_the_instance_map_survives_a_coordinator_failover(cluster_factory):
    """kill -9 of the coordinator: the new one loads the group with its static members, so
    a static member restarted afterwards still rejoins without a rebalance."""
    topic, group = "static-failover-events", "static-failover-group"
    cluster = cluster_factory(3, group_initial_rebalance_delay_ms=200)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=20000)
    try:
        admin.create_topics([NewTopic(topic, 4, 3)])
    finally:
        admin.close()

    def described_at(node_id: int):
        with cluster.connect(node_id) as conn:
            return conn.request(DescribeGroupsRequest[5](groups=[group])).groups[0]

    async def scenario():
        a, _ = aiokafka_member(cluster.bootstrap, topic, group, "member-a")
        b, b_events = aiokafka_member(cluster.bootstrap, topic, group, "member-b")
        await a.start()
        await b.start()
        restarted = None
        try:
            a_parts, b_parts = await wait_assignments([a, b], 4)
            await asyncio.sleep(1.0)
            a_parts, b_parts = await wait_assignments([a, b], 4)
            old = await asyncio.to_thread(find_coordinator, cluster, group)
            before = await asyncio.to_thread(described_at, old)
            await asyncio.to_thread(cluster.kill, old)
            new = await asyncio.to_thread(find_coordinator, cluster, group, old)

            deadline = time.monotonic() + 60
            while True:  # the new coordinator has loaded the group with both instances
                loaded = await asyncio.to_thread(described_at, new)
                if loaded.error_code == 0 and loaded.group_state == "Stable":
                    break
                assert time.monotonic() < deadline, loaded
                await asyncio.sleep(0.3)
            assert instances(loaded) == instances(before)
            generation, b_seen = b._coordinator.generation, list(b_events.events)

            await a.stop()
            restarted, _ = aiokafka_member(cluster.bootstrap, topic, group, "member-a")
            await restarted.start()
            (again,) = await wait_assignments([restarted], len(a_parts))
            assert again == a_parts
            await asyncio.sleep(1.5)
            after = await asyncio.to_thread(described_at, new)
            assert after.group_state == "Stable"
            assert instances(after)["member-a"] == restarted._coordinator.member_id
            assert instances(after)["member-b"] == instances(before)["member-b"]
            assert b._coordinator.generation == generation and b_events.events == b_seen
            assert frozenset(b.assignment()) == b_parts
        finally:
            for consumer in (a, b, restarted):
                if consumer is not None:
                    await consumer.stop()

    asyncio.run(asyncio.wait_for(scenario(), 240))

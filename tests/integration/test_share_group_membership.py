"""KIP-932 share groups, the group coordinator's side, against one real broker.

Raw ShareGroupHeartbeat / ShareGroupDescribe v1 requests (the layouts of
protocol/share_group_messages.py, sent over a socket) and confluent-kafka's
``ShareConsumer`` (librdkafka's share consumer).  Invariants:

* a member joins with epoch 0 and is answered with its epoch, the broker's heartbeat
  interval and its assignment; every subscribed partition is assigned to some member, and
  with no more members than partitions each partition to exactly one, the members'
  counts differing by at most one (Kafka's simple assignor);
* a member's epoch only moves forward: an epoch the coordinator did not give is
  FENCED_MEMBER_EPOCH, an id it does not know UNKNOWN_MEMBER_ID, a malformed join
  INVALID_REQUEST;
* share, consumer and classic groups share one id space, and each refuses the others with
  Kafka's errors (GROUP_ID_NOT_FOUND, INCONSISTENT_GROUP_PROTOCOL);
* ListGroups shows type ``share`` and filters on it; DeleteGroups refuses a group with
  members and deletes an empty one; a silent member is removed after its session;
* the group is durable: after a kill -9 and restart the coordinator loads its members,
  epochs and assignments, and a member heartbeating with its epoch is not fenced.

Every wait is bounded and waits on a condition.
"""
from __future__ import annotations

import contextlib
import threading
import time
import uuid

import pytest
from kafka.protocol.admin import (
    DeleteGroupsRequest,
    IncrementalAlterConfigsRequest,
    ListGroupsRequest,
)
from kafka.protocol.consumer import JoinGroupRequest
from kafka.protocol.metadata import FindCoordinatorRequest

from broker.cli.main import build_parser
from broker.testing import BrokerProcess, KafkaConnection, build_batch
from protocol.consumer_group_messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from protocol.share_group_messages import (
    AlterShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
    ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest,
)
from tests.conftest import create_topic

confluent_kafka = pytest.importorskip("confluent_kafka")

WAIT_S = 60.0
TOPIC = "share-queue"
PARTITIONS = 3
HEARTBEAT_MS = 500
SESSION_MS = 4000
UNKNOWN_TOPIC_OR_PARTITION = 3
UNKNOWN_MEMBER_ID = 25
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
INVALID_REQUEST = 42
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
FENCED_MEMBER_EPOCH = 110
GROUP_RESOURCE = 32
RETRIABLE = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    home = tmp_path_factory.mktemp("share-groups")
    broker = BrokerProcess(home / "data", log_path=home / "broker.log", extra_settings={
        "group.share.heartbeat.interval.ms": HEARTBEAT_MS,
        "group.share.session.timeout.ms": SESSION_MS,
        "group.share.min.session.timeout.ms": 1000})
    broker.start()
    create_topic(broker.bootstrap, TOPIC, PARTITIONS)
    wait_for_coordinator(broker)
    yield broker
    code = broker.stop()
    assert code == 0, f"broker exited {code} after SIGTERM\n{broker.log_tail()}"


def wait_for_coordinator(broker: BrokerProcess) -> None:
    """FindCoordinator creates ``__consumer_offsets``; wait until it answers."""
    deadline = time.monotonic() + WAIT_S
    with KafkaConnection(broker.bootstrap) as conn:
        while time.monotonic() < deadline:
            answer = conn.request(FindCoordinatorRequest[3](key="any", key_type=0))
            if answer.error_code == 0:
                return
            time.sleep(0.1)
    raise AssertionError(f"no group coordinator {WAIT_S} s after start")


def heartbeat(conn: KafkaConnection, group: str, member: str, epoch: int,
              topics: list[str] | None = None):
    """One ShareGroupHeartbeat, retried (bounded) while the coordinator loads."""
    deadline = time.monotonic() + WAIT_S
    while True:
        answer = conn.request(ShareGroupHeartbeatRequest[1](
            group_id=group, member_id=member, member_epoch=epoch, rack_id=None,
            subscribed_topic_names=topics))
        if answer.error_code not in RETRIABLE or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


def describe(conn: KafkaConnection, *groups: str):
    deadline = time.monotonic() + WAIT_S
    while True:
        answer = conn.request(ShareGroupDescribeRequest[1](
            group_ids=list(groups), include_authorized_operations=False))
        if not any(g.error_code in RETRIABLE for g in answer.groups) \
                or time.monotonic() > deadline:
            return answer.groups
        time.sleep(0.1)


def partitions_of(answer) -> set[int]:
    assert answer.assignment is not None, "no assignment in the answer"
    return {p for t in answer.assignment.topic_partitions for p in t.partitions}


def join(conn: KafkaConnection, group: str):
    member = str(uuid.uuid4())
    answer = heartbeat(conn, group, member, 0, [TOPIC])
    assert answer.error_code == 0, answer
    return member, answer


def wait_until(condition, what: str, timeout_s: float = WAIT_S):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout_s} s: {what}")


def test_a_joining_member_gets_its_epoch_the_interval_and_every_partition(broker):
    with KafkaConnection(broker.bootstrap) as conn:
        member, answer = join(conn, "sg-one")
        assert answer.member_id == member
        assert answer.member_epoch >= 1
        assert answer.heartbeat_interval_ms == HEARTBEAT_MS
        assert partitions_of(answer) == set(range(PARTITIONS))
        again = heartbeat(conn, "sg-one", member, answer.member_epoch)
        assert (again.error_code, again.member_epoch) == (0, answer.member_epoch)
        assert again.assignment is None, "an unchanged assignment is not sent again"


def test_two_members_split_the_partitions_and_describe_shows_them(broker):
    with KafkaConnection(broker.bootstrap) as conn:
        first, first_answer = join(conn, "sg-two")
        second, second_answer = join(conn, "sg-two")
        assert second_answer.member_epoch > first_answer.member_epoch, "group epoch moved"
        moved = heartbeat(conn, "sg-two", first, first_answer.member_epoch)
        assert moved.error_code == 0
        assert moved.member_epoch == second_answer.member_epoch
        mine, theirs = partitions_of(moved), partitions_of(second_answer)
        assert mine | theirs == set(range(PARTITIONS)), "every partition is assigned"
        assert not mine & theirs, "no sharing while members <= partitions"
        assert abs(len(mine) - len(theirs)) <= 1, "balanced"

        [group] = describe(conn, "sg-two")
        assert (group.error_code, group.group_state, group.assignor_name) == \
            (0, "Stable", "simple")
        assert group.group_epoch == group.assignment_epoch == moved.member_epoch
        described = {m.member_id: m for m in group.members}
        assert set(described) == {first, second}
        for member_id, expected in ((first, mine), (second, theirs)):
            m = described[member_id]
            assert m.subscribed_topic_names == [TOPIC]
            assert {(t.topic_name, p) for t in m.assignment.topic_partitions
                    for p in t.partitions} == {(TOPIC, p) for p in expected}


def test_more_members_than_partitions_share_every_partition(broker):
    with KafkaConnection(broker.bootstrap) as conn:
        members = [join(conn, "sg-many")[0] for _ in range(PARTITIONS + 1)]
        [group] = describe(conn, "sg-many")
        # Members answered before the last join still hold their older assignment;
        # the target moves them on their next heartbeat.
        for member in members:
            epoch = next(m.member_epoch for m in group.members if m.member_id == member)
            assert heartbeat(conn, "sg-many", member, epoch).error_code == 0
        [group] = describe(conn, "sg-many")
        counts = [sum(len(t.partitions) for t in m.assignment.topic_partitions)
                  for m in group.members]
        owners = [sum(p in t.partitions for m in group.members
                      for t in m.assignment.topic_partitions) for p in range(PARTITIONS)]
        assert all(owners), f"a partition with no member: {owners}"
        assert max(owners) == 2, "ceil(4 / 3) members per partition"
        assert max(counts) - min(counts) <= 1, counts


def test_epochs_and_ids_the_coordinator_did_not_give_are_refused(broker):
    with KafkaConnection(broker.bootstrap) as conn:
        member, answer = join(conn, "sg-errors")
        ahead = heartbeat(conn, "sg-errors", member, answer.member_epoch + 5)
        assert ahead.error_code == FENCED_MEMBER_EPOCH
        stranger = heartbeat(conn, "sg-errors", str(uuid.uuid4()), answer.member_epoch)
        assert stranger.error_code == UNKNOWN_MEMBER_ID
        assert heartbeat(conn, "sg-errors", str(uuid.uuid4()), 0, None).error_code == \
            INVALID_REQUEST, "a join without topics"
        assert heartbeat(conn, "sg-errors", "", 0, [TOPIC]).error_code == INVALID_REQUEST
        assert heartbeat(conn, "sg-errors", member, -2).error_code == INVALID_REQUEST
        assert heartbeat(conn, "sg-nobody", member, 3).error_code == GROUP_ID_NOT_FOUND
        assert heartbeat(conn, "sg-errors", member, answer.member_epoch).error_code == 0, \
            "the member is still in the group"
        unknown, empty = describe(conn, "sg-never", "")
        assert unknown.error_code == GROUP_ID_NOT_FOUND
        assert empty.error_code == INVALID_GROUP_ID


def consumer_heartbeat(conn: KafkaConnection, group: str, member: str):
    request = ConsumerGroupHeartbeatRequest[1](
        group_id=group, member_id=member, member_epoch=0, instance_id=None, rack_id=None,
        rebalance_timeout_ms=10_000, subscribed_topic_names=[TOPIC],
        subscribed_topic_regex=None, server_assignor=None, topic_partitions=[])
    request.response_type = ConsumerGroupHeartbeatResponse
    return conn.request(request)


def test_share_consumer_and_classic_groups_refuse_each_other(broker):
    with KafkaConnection(broker.bootstrap) as conn:
        share_member, _ = join(conn, "sg-typed")
        assert consumer_heartbeat(conn, "sg-typed", str(uuid.uuid4())).error_code == \
            GROUP_ID_NOT_FOUND
        joined = conn.request(JoinGroupRequest[5](
            group_id="sg-typed", session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
            member_id="", group_instance_id=None, protocol_type="consumer",
            protocols=[JoinGroupRequest[5].JoinGroupRequestProtocol(name="range",
                                                                    metadata=b"")]))
        assert joined.error_code == INCONSISTENT_GROUP_PROTOCOL
        # Even empty, a share group stays one: the other protocols are still refused.
        assert heartbeat(conn, "sg-typed", share_member, -1).error_code == 0
        assert consumer_heartbeat(conn, "sg-typed", str(uuid.uuid4())).error_code == \
            GROUP_ID_NOT_FOUND

        consumer_member = str(uuid.uuid4())
        assert consumer_heartbeat(conn, "cg-typed", consumer_member).error_code == 0
        assert heartbeat(conn, "cg-typed", str(uuid.uuid4()), 0, [TOPIC]).error_code == \
            GROUP_ID_NOT_FOUND
        [described] = describe(conn, "cg-typed")
        assert described.error_code == GROUP_ID_NOT_FOUND


def listed(conn: KafkaConnection, types: list[str]) -> dict[str, tuple[str, str, str]]:
    answer = conn.request(ListGroupsRequest[5](states_filter=[], types_filter=types))
    assert answer.error_code == 0
    return {g.group_id: (g.protocol_type, g.group_state, g.group_type) for g in answer.groups}


def test_list_shows_the_share_type_and_delete_needs_an_empty_group(broker):
    with KafkaConnection(broker.bootstrap) as conn:
        member, answer = join(conn, "sg-listed")
        consumer_heartbeat(conn, "cg-listed", str(uuid.uuid4()))
        shares = listed(conn, ["share"])
        assert shares["sg-listed"] == ("share", "Stable", "share")
        assert "cg-listed" not in shares
        assert listed(conn, [])["cg-listed"][2] == "consumer"

        delete = DeleteGroupsRequest[2](groups_names=["sg-listed"])
        assert conn.request(delete).results[0].error_code == NON_EMPTY_GROUP
        left = heartbeat(conn, "sg-listed", member, answer.member_epoch)
        assert heartbeat(conn, "sg-listed", member, -1).error_code == 0
        assert left.error_code == 0
        assert listed(conn, ["share"])["sg-listed"][1] == "Empty"
        assert conn.request(delete).results[0].error_code == 0
        assert "sg-listed" not in listed(conn, [])
        [gone] = describe(conn, "sg-listed")
        assert gone.error_code == GROUP_ID_NOT_FOUND


def test_a_silent_member_is_removed_after_its_session(broker):
    with KafkaConnection(broker.bootstrap) as conn:
        silent, _ = join(conn, "sg-silent")
        assert [m.member_id for m in describe(conn, "sg-silent")[0].members] == [silent]
        wait_until(lambda: describe(conn, "sg-silent")[0].group_state == "Empty",
                   "the silent member removed")
        assert heartbeat(conn, "sg-silent", silent, 1).error_code == UNKNOWN_MEMBER_ID


def set_group_configs(conn: KafkaConnection, group: str, changes: dict[str, str]) -> int:
    """IncrementalAlterConfigs SET on the GROUP resource (type 32): its error code."""
    resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    answer = conn.request(IncrementalAlterConfigsRequest[1](validate_only=False, resources=[
        resource(resource_type=GROUP_RESOURCE, resource_name=group, configs=[
            resource.AlterableConfig(name=k, config_operation=0, value=v)
            for k, v in changes.items()])]))
    return answer.responses[0].error_code


def test_the_group_configs_set_the_interval_and_session_of_that_group_only(broker):
    with KafkaConnection(broker.bootstrap) as conn:
        assert set_group_configs(conn, "sg-configured", {
            "share.heartbeat.interval.ms": "6000",
            "share.session.timeout.ms": "20000"}) == 0

        def joined_with_its_interval():
            member, answer = join(conn, "sg-configured")
            return member if answer.heartbeat_interval_ms == 6000 else None
        member = wait_until(joined_with_its_interval,
                            "the group's heartbeat interval in a join's answer")
        _, other = join(conn, "sg-unconfigured")
        assert other.heartbeat_interval_ms == HEARTBEAT_MS
        # Past the broker's session (SESSION_MS) the member is still there: its group's
        # session applies.  Another group's silent member is gone by then.
        wait_until(lambda: describe(conn, "sg-unconfigured")[0].group_state == "Empty",
                   "the unconfigured group's silent member removed")
        [group] = describe(conn, "sg-configured")
        assert member in {m.member_id for m in group.members}


def share_consumer(broker: BrokerProcess, group: str, topic: str = TOPIC):
    member = confluent_kafka.ShareConsumer({
        "bootstrap.servers": broker.bootstrap, "group.id": group,
        "topic.metadata.refresh.interval.ms": 2000})
    member.subscribe([topic])
    return member


def test_share_consumers_join_and_the_simple_assignor_splits_the_partitions(broker):
    members = [share_consumer(broker, "sg-librdkafka") for _ in range(2)]
    try:
        with KafkaConnection(broker.bootstrap) as conn:
            def settled():
                for member in members:
                    member.poll(0.1)
                [group] = describe(conn, "sg-librdkafka")
                if group.error_code != 0 or len(group.members) != 2 \
                        or any(m.member_epoch != group.assignment_epoch
                               for m in group.members):
                    return None
                return group
            group = wait_until(settled, "two ShareConsumers in the group at its epoch")
        owned = [{p for t in m.assignment.topic_partitions for p in t.partitions}
                 for m in group.members]
        assert owned[0] | owned[1] == set(range(PARTITIONS))
        assert not owned[0] & owned[1]
        assert all(m.client_id for m in group.members), "librdkafka's client id is kept"
    finally:
        for member in members:
            member.close()


def test_three_share_consumers_on_one_partition_each_get_distinct_records(broker):
    """The simple assignor gives the one partition to all three members (ceil(3 / 1));
    the partition leader hands each record to one of them (ShareFetch, implicit
    acknowledgement): together they get every record, none twice, each some."""
    topic = create_topic(broker.bootstrap, "share-one", 1)
    members = [confluent_kafka.ShareConsumer({
        "bootstrap.servers": broker.bootstrap, "group.id": "sg-e2e",
        "topic.metadata.refresh.interval.ms": 2000, "max.poll.records": 20})
        for _ in range(3)]
    for member in members:
        member.subscribe([topic])
    got: list[list[bytes]] = [[] for _ in members]
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap,
                                         "acks": "all", "linger.ms": 5})

    def poll_all() -> None:
        for i, member in enumerate(members):
            for message in member.poll(0.2):
                assert message.error() is None, message.error()
                got[i].append(message.value())

    def produce(values: list[bytes]) -> None:
        for value in values:
            producer.produce(topic, value, partition=0)
        assert producer.flush(WAIT_S) == 0
    try:
        with KafkaConnection(broker.bootstrap) as conn:
            def all_assigned():
                poll_all()
                [group] = describe(conn, "sg-e2e")
                return len(group.members) == 3 and all(
                    [p for t in m.assignment.topic_partitions for p in t.partitions] == [0]
                    for m in group.members)
            wait_until(all_assigned, "three ShareConsumers each assigned partition 0")
        # share.auto.offset.reset is latest: the share partition starts at the log end on
        # the first ShareFetch.  Probe records until one arrives; later ones all count.
        probes = iter(range(1000))
        wait_until(lambda: produce([b"probe-%d" % next(probes)]) or poll_all() or any(got),
                   "a probe record delivered")
        sent = [f"record-{i}".encode() for i in range(300)]
        produce(sent)

        def records() -> list[bytes]:
            return [v for values in got for v in values if v.startswith(b"record-")]
        wait_until(lambda: poll_all() or len(records()) >= len(sent),
                   "every record delivered to some member")
        for _ in range(5):  # a few more polls: a duplicate would show here
            poll_all()
        assert sorted(records()) == sorted(sent), "every record once, to one member"
        assert all(not set(a) & set(b) for i, a in enumerate(got) for b in got[i + 1:])
        per_member = [len([v for v in values if v.startswith(b"record-")]) for values in got]
        print("records per member:", per_member)
        # max.poll.records bounds each ShareFetch's acquisition, and the members poll in
        # turn (librdkafka's share consumer fetches when polled): each gets a share.
        assert all(per_member), per_member
    finally:
        for member in members:
            member.close()
    # Every record accepted (on the next poll, the last ones on close): the share-partition
    # start offset reaches the log end.
    with KafkaConnection(broker.bootstrap) as conn:
        log_end = conn.list_offsets(topic, 0, -1).offset
        wait_until(lambda: start_offsets(conn, "sg-e2e") == {(topic, 0): log_end},
                   f"the start offset of {topic}-0 at the log end {log_end}")
        # Deleting the (now empty) group deletes its share-partition state: the same id
        # joined again has no start offset.
        wait_until(lambda: describe(conn, "sg-e2e")[0].group_state == "Empty",
                   "the closed consumers left")
        delete = DeleteGroupsRequest[2](groups_names=["sg-e2e"])
        assert conn.request(delete).results[0].error_code == 0
        join(conn, "sg-e2e")
        assert start_offsets(conn, "sg-e2e") == {}


def start_offsets(conn: KafkaConnection, group: str, topics=None) -> dict:
    """DescribeShareGroupOffsets v0 of one group: {(topic, partition): start offset}, or
    the group's error code."""
    request_group = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
    [answer] = conn.request(DescribeShareGroupOffsetsRequest[0](groups=[
        request_group(group_id=group, topics=topics)])).groups
    if answer.error_code != 0:
        return answer.error_code
    return {(t.topic_name, p.partition_index): p.start_offset if p.error_code == 0
            else -p.error_code for t in answer.topics for p in t.partitions}


def test_describe_share_group_offsets_errors_and_named_partitions(broker):
    request_topic = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup \
        .DescribeShareGroupOffsetsRequestTopic
    with KafkaConnection(broker.bootstrap) as conn:
        assert start_offsets(conn, "sg-offsets-none") == GROUP_ID_NOT_FOUND
        consumer_heartbeat(conn, "cg-offsets", str(uuid.uuid4()))
        assert start_offsets(conn, "cg-offsets") == GROUP_ID_NOT_FOUND, "not a share group"
        join(conn, "sg-offsets")
        named = start_offsets(conn, "sg-offsets", [
            request_topic(topic_name=TOPIC, partitions=[0, 1]),
            request_topic(topic_name="no-such-topic", partitions=[0])])
        assert named == {(TOPIC, 0): -1, (TOPIC, 1): -1,
                         ("no-such-topic", 0): -UNKNOWN_TOPIC_OR_PARTITION}
        assert start_offsets(conn, "sg-offsets") == {}, "nothing fetched: no state listed"


def raftwood(capsys, *args: str) -> tuple[int, str, str]:
    """``raftwood ARGS`` in this process (a subprocess costs seconds of interpreter start
    on a loaded machine): (exit code, stdout, stderr)."""
    capsys.readouterr()
    parsed = build_parser().parse_args(list(args))
    code = parsed.func(parsed)
    out, err = capsys.readouterr()
    return code, out, err


def alter_offsets(conn: KafkaConnection, group: str, starts: dict[tuple[str, int], int]):
    topic_class = AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
    by_topic: dict[str, list] = {}
    for (topic, partition), start in starts.items():
        by_topic.setdefault(topic, []).append(topic_class.AlterShareGroupOffsetsRequestPartition(
            partition_index=partition, start_offset=start))
    return conn.request(AlterShareGroupOffsetsRequest[0](group_id=group, topics=[
        topic_class(topic_name=t, partitions=ps) for t, ps in by_topic.items()]))


def delete_offsets(conn: KafkaConnection, group: str, topics: list[str]):
    topic_class = DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic
    return conn.request(DeleteShareGroupOffsetsRequest[0](
        group_id=group, topics=[topic_class(topic_name=t) for t in topics]))


def test_altered_start_offsets_are_where_share_consumers_begin_and_delete_forgets(broker):
    topic = create_topic(broker.bootstrap, "share-altered", 1)
    with KafkaConnection(broker.bootstrap) as conn:
        records = [(None, b"v%d" % i, 1_700_000_000_000, []) for i in range(10)]
        assert conn.produce(topic, 0, build_batch(records)).error_code == 0
        assert alter_offsets(conn, "sg-altered", {(topic, 0): 7}).error_code == \
            GROUP_ID_NOT_FOUND
        member, _ = join(conn, "sg-altered")
        assert alter_offsets(conn, "sg-altered", {(topic, 0): 7}).error_code == NON_EMPTY_GROUP
        assert heartbeat(conn, "sg-altered", member, -1).error_code == 0
        answer = alter_offsets(conn, "sg-altered", {(topic, 0): 7, ("no-such-topic", 0): 1})
        assert answer.error_code == 0
        assert {(t.topic_name, p.partition_index): p.error_code for t in answer.responses
                for p in t.partitions} == {(topic, 0): 0,
                                           ("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION}
        assert start_offsets(conn, "sg-altered") == {(topic, 0): 7}
    consumer = share_consumer(broker, "sg-altered", topic)
    got: list[bytes] = []
    try:
        wait_until(lambda: got.extend(m.value() for m in consumer.poll(0.2)) or len(got) >= 3,
                   "the records from the altered start offset")
    finally:
        consumer.close()
    assert got == [b"v7", b"v8", b"v9"], "delivery begins at the altered start offset"
    with KafkaConnection(broker.bootstrap) as conn:
        wait_until(lambda: describe(conn, "sg-altered")[0].group_state == "Empty",
                   "the closed consumer left")
        [deleted] = delete_offsets(conn, "sg-altered", [topic]).responses
        assert (deleted.topic_name, deleted.error_code) == (topic, 0)
        assert start_offsets(conn, "sg-altered") == {}, "the state is gone"


@contextlib.contextmanager
def heartbeating(broker: BrokerProcess, group: str, members: dict[str, int]):
    """Heartbeat ``members`` (member id -> epoch) every interval until the block ends, so
    slow subprocesses do not outlive their sessions."""
    stop = threading.Event()

    def run() -> None:
        with KafkaConnection(broker.bootstrap) as conn:
            while not stop.wait(HEARTBEAT_MS / 1000):
                for member, epoch in members.items():
                    answer = heartbeat(conn, group, member, epoch)
                    if answer.error_code == 0:
                        members[member] = answer.member_epoch
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield members
    finally:
        stop.set()
        thread.join(WAIT_S)


def test_raftwood_groups_lists_and_describes_a_share_group(broker, capsys):
    with KafkaConnection(broker.bootstrap) as conn:
        first, first_answer = join(conn, "sg-cli")
        second, answer = join(conn, "sg-cli")
        members = {first: first_answer.member_epoch, second: answer.member_epoch}
    with heartbeating(broker, "sg-cli", members):
        code, listed, err = raftwood(capsys, "groups", "list", "--bootstrap-server",
                                     broker.bootstrap)
        assert code == 0, err
        code, described, err = raftwood(capsys, "groups", "describe", "sg-cli",
                                        "--bootstrap-server", broker.bootstrap)
        assert code == 0, err
    assert ["sg-cli", "Stable", "share", "1"] in [line.split()
                                                  for line in listed.splitlines()]
    lines = [line.split() for line in described.splitlines()]
    assert lines[0][:6] == ["group:", "sg-cli", "state:", "Stable", "type:", "share"]
    rows = {row[0]: row for row in lines[1:] if row and row[0] in (first, second)}
    assert set(rows) == {first, second}
    assert rows[second][1] == str(answer.member_epoch)
    assert rows[second][-1] == f"{TOPIC}:" + ",".join(
        map(str, sorted(partitions_of(answer))))
    code, _, err = raftwood(capsys, "groups", "describe", "sg-absent", "--bootstrap-server",
                            broker.bootstrap)
    assert code == 1 and "GROUP_ID_NOT_FOUND" in err


def test_the_group_survives_a_kill_and_restart_of_its_coordinator(broker):
    """Last in the module: it restarts the broker."""
    with KafkaConnection(broker.bootstrap) as conn:
        first, _ = join(conn, "sg-durable")
        second, answer = join(conn, "sg-durable")
        [before] = describe(conn, "sg-durable")
    broker.kill()
    broker.restart()
    with KafkaConnection(broker.bootstrap) as conn:
        [after] = describe(conn, "sg-durable")
        assert after.error_code == 0, after
        assert (after.group_epoch, after.assignment_epoch) == \
            (before.group_epoch, before.assignment_epoch)

        def assignments(group):
            return {m.member_id: (m.member_epoch, sorted(
                (t.topic_name, p) for t in m.assignment.topic_partitions
                for p in t.partitions)) for m in group.members}
        assert assignments(after) == assignments(before)
        again = heartbeat(conn, "sg-durable", second, answer.member_epoch)
        assert (again.error_code, again.member_epoch) == (0, answer.member_epoch), \
            "a member at its epoch is not fenced by the new coordinator"

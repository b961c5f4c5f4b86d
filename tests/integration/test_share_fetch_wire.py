"""ShareFetch (78) and ShareAcknowledge (79) on the wire, against one real broker.

Raw requests (the classes of protocol/share_fetch_messages.py over a KafkaConnection)
walk share partitions through KIP-932's delivery states: two members of one group get
distinct records; RELEASE redelivers with the delivery count raised; REJECT archives;
a lock left to expire is redelivered; the delivery limit archives; and the session and
acknowledgement errors are Kafka's.  The broker runs with a 4 s record lock and a
delivery limit of 2 so expiry and the limit are reached quickly; every wait is a
bounded loop on a condition (RENEW's timing is unit-tested with an injected clock).
Each test uses its own group and topic, so they share the broker.
"""
from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer
from kafka.protocol.admin import IncrementalAlterConfigsRequest

from broker.harness.wire import read_records
from broker.testing import BrokerProcess, KafkaConnection, build_batch
from protocol.share_fetch_messages import ShareAcknowledgeRequest, ShareFetchRequest
from protocol.share_state_messages import (
    ReadShareGroupStateRequest,
    WriteShareGroupStateRequest,
)

pytestmark = pytest.mark.slow  # a broker process, and a 4 s lock left to expire
LOCK_MS = 4000
DELIVERY_LIMIT = 2
ACCEPT, RELEASE, REJECT, RENEW = 1, 2, 3, 4
NONE = 0
INVALID_REQUEST = 42
UNKNOWN_TOPIC_ID = 100
INVALID_RECORD_STATE = 121
SHARE_SESSION_NOT_FOUND = 122
FENCED_STATE_EPOCH = 124
INVALID_SHARE_SESSION_EPOCH = 123
UNSUPPORTED_VERSION = 35
FetchTopic = ShareFetchRequest.FetchTopic
FetchPartition = FetchTopic.FetchPartition
FetchAck = FetchPartition.AcknowledgementBatch
AckTopic = ShareAcknowledgeRequest.AcknowledgeTopic
AckPartition = AckTopic.AcknowledgePartition
AckBatch = AckPartition.AcknowledgementBatch


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    home = tmp_path_factory.mktemp("share-fetch")
    broker = BrokerProcess(home / "data", log_path=home / "broker.log", extra_settings={
        "group.share.record.lock.duration.ms": LOCK_MS,
        "group.share.delivery.count.limit": DELIVERY_LIMIT}, start_timeout_s=60)
    broker.start()
    yield broker
    code = broker.stop()
    assert code == 0, f"broker exited {code} after SIGTERM\n{broker.log_tail()}"


class Member:
    """One share consumer speaking raw ShareFetch/ShareAcknowledge in one session."""

    def __init__(self, conn: KafkaConnection, group: str, topic_id: uuid.UUID,
                 member_id: str | None = None):
        self.conn, self.group, self.topic_id = conn, group, topic_id
        self.member_id = member_id or str(uuid.uuid4())
        self.epoch = 0

    def fetch(self, acks=(), *, max_records: int = 100, max_wait_ms: int = 0,
              version: int = 1, epoch: int | None = None):
        """One ShareFetch of partition 0; ``acks`` are (first, last, [types])."""
        request = ShareFetchRequest[version](
            group_id=self.group, member_id=self.member_id,
            share_session_epoch=self.epoch if epoch is None else epoch,
            max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
            max_records=max_records, batch_size=max_records, share_acquire_mode=0,
            topics=[FetchTopic(topic_id=self.topic_id, partitions=[FetchPartition(
                partition_index=0, acknowledgement_batches=[
                    FetchAck(first_offset=f, last_offset=last, acknowledge_types=types)
                    for f, last, types in acks])])],
            forgotten_topics_data=[])
        response = self.conn.request(request)
        if response.error_code == NONE and epoch is None:
            self.epoch += 1
        return response

    def acknowledge(self, acks, *, version: int = 1, epoch: int | None = None):
        request = ShareAcknowledgeRequest[version](
            group_id=self.group, member_id=self.member_id,
            share_session_epoch=self.epoch if epoch is None else epoch, is_renew_ack=any(
                RENEW in types for _, _, types in acks),
            topics=[AckTopic(topic_id=self.topic_id, partitions=[AckPartition(
                partition_index=0, acknowledgement_batches=[
                    AckBatch(first_offset=f, last_offset=last, acknowledge_types=types)
                    for f, last, types in acks])])])
        response = self.conn.request(request)
        if response.error_code == NONE and epoch is None:
            self.epoch += 1
        return response


def partition_of(response):
    """The one partition answered (None when the answer lists none)."""
    for topic in response.responses:
        for partition in topic.partitions:
            return partition
    return None


def acquired(response) -> list[tuple[int, int, int]]:
    p = partition_of(response)
    return [] if p is None else [(r.first_offset, r.last_offset, r.delivery_count)
                                 for r in p.acquired_records]


def fetch_until(member: Member, want, *, seconds: float = 30.0, **kw):
    """Fetch until ``want(response)`` holds (bounded in time and count).  A partition
    error (not led here yet, its state not loaded yet) is answered at once, without the
    long poll: asked again after a pause, so the count does not run out first."""
    deadline = time.monotonic() + seconds
    for _ in range(300):
        response = member.fetch(max_wait_ms=200, **kw)
        assert response.error_code == NONE, response
        if want(response):
            return response
        assert time.monotonic() < deadline, f"condition not met; last answer {response}"
        partition = partition_of(response)
        if partition is not None and partition.error_code != NONE:
            time.sleep(0.1)
    raise AssertionError(f"condition not met in 300 fetches; last answer {response}")


def new_topic(conn: KafkaConnection, name: str) -> uuid.UUID:
    assert conn.create_topic(name, 1) == 0
    return conn.metadata([name], version=12).topics[0].topic_id


def open_member(conn, group, topic_id) -> Member:
    """A member whose session is open on partition 0, led here.  A group's first fetch
    starts it at the high watermark (share.auto.offset.reset latest), so tests produce
    after this."""
    member = Member(conn, group, topic_id)
    deadline = time.monotonic() + 30
    while True:
        answer = member.fetch()
        assert answer.error_code == NONE, answer
        partition = partition_of(answer)
        if partition is None or partition.error_code == NONE:
            return member
        assert time.monotonic() < deadline, f"partition 0 of {topic_id} never led: {answer}"
        time.sleep(0.1)  # the new partition's leadership is not applied yet


def produce(conn, name: str, count: int, tag: bytes = b"v") -> None:
    records = [(None, tag + b"%d" % i, 1_700_000_000_000, []) for i in range(count)]
    assert conn.produce(name, 0, build_batch(records)).error_code == 0


def test_two_members_get_distinct_records_and_accept_moves_on(broker):
    with KafkaConnection(broker.bootstrap) as conn:
        topic_id = new_topic(conn, "distinct")
        a = open_member(conn, "g-distinct", topic_id)
        b = Member(conn, "g-distinct", topic_id)
        assert acquired(b.fetch()) == [], "a new group starts at the end: nothing yet"
        produce(conn, "distinct", 6)
        first = fetch_until(a, acquired, max_records=3)
        second = fetch_until(b, acquired, max_records=3)
        assert acquired(first) == [(0, 2, 1)] and acquired(second) == [(3, 5, 1)]
        values = [r[2] for r in read_records(partition_of(first).records)]
        assert values[:3] == [b"v0", b"v1", b"v2"]
        answer = a.acknowledge([(0, 2, [ACCEPT])])
        assert (answer.error_code, partition_of(answer).error_code) == (NONE, NONE)
        # a cannot acknowledge b's records, and nothing partial is applied.
        refused = a.acknowledge([(3, 5, [ACCEPT])])
        assert partition_of(refused).error_code == INVALID_RECORD_STATE
        assert partition_of(b.acknowledge([(3, 5, [ACCEPT])])).error_code == NONE
        assert acquired(a.fetch()) == [], "every record acknowledged: none redelivered"


def test_release_redelivers_with_the_count_raised_and_reject_archives(broker):
    with KafkaConnection(broker.bootstrap) as conn:
        topic_id = new_topic(conn, "release")
        a = open_member(conn, "g-release", topic_id)
        produce(conn, "release", 3)
        assert acquired(fetch_until(a, acquired)) == [(0, 2, 1)]
        # Piggy-backed on the next ShareFetch: 0 RELEASE, 1 REJECT, 2 ACCEPT.
        again = a.fetch([(0, 2, [RELEASE, REJECT, ACCEPT])])
        assert partition_of(again).acknowledge_error_code == NONE
        assert acquired(again) == [(0, 0, 2)], "only the released record, delivered twice"
        # The delivery limit (2) is reached: releasing it again archives it.
        assert a.acknowledge([(0, 0, [RELEASE])]).error_code == NONE
        assert acquired(a.fetch()) == []


def test_a_lock_left_to_expire_is_redelivered_to_another_member(broker):
    with KafkaConnection(broker.bootstrap) as conn:
        topic_id = new_topic(conn, "expiry")
        a = open_member(conn, "g-expiry", topic_id)
        b = open_member(conn, "g-expiry", topic_id)
        produce(conn, "expiry", 2)
        assert acquired(fetch_until(a, acquired)) == [(0, 1, 1)]
        assert acquired(b.fetch()) == [], "locked by a"
        # a goes silent; after the lock duration b gets them, delivered a second time.
        assert acquired(fetch_until(b, acquired)) == [(0, 1, 2)]
        late = a.acknowledge([(0, 1, [ACCEPT])])
        assert partition_of(late).error_code == INVALID_RECORD_STATE, "a's lock is gone"
        assert partition_of(b.acknowledge([(0, 1, [ACCEPT])])).error_code == NONE


def test_renew_keeps_the_lock_and_needs_version_2(broker):
    with KafkaConnection(broker.bootstrap) as conn:
        topic_id = new_topic(conn, "renew")
        a = open_member(conn, "g-renew", topic_id)
        b = open_member(conn, "g-renew", topic_id)
        produce(conn, "renew", 1)
        assert acquired(fetch_until(a, acquired)) == [(0, 0, 1)]
        refused = a.acknowledge([(0, 0, [RENEW])], version=1)
        assert partition_of(refused).error_code == INVALID_REQUEST, "RENEW needs v2"
        renewed = a.acknowledge([(0, 0, [RENEW])], version=2)
        assert partition_of(renewed).error_code == NONE
        assert renewed.acquisition_lock_timeout_ms == LOCK_MS
        assert acquired(b.fetch()) == [], "still a's: RENEW keeps the lock"
        assert partition_of(a.acknowledge([(0, 0, [ACCEPT])])).error_code == NONE


def test_closing_the_session_releases_the_members_locks(broker):
    with KafkaConnection(broker.bootstrap) as conn:
        topic_id = new_topic(conn, "close")
        a = open_member(conn, "g-close", topic_id)
        b = open_member(conn, "g-close", topic_id)
        produce(conn, "close", 2)
        assert acquired(fetch_until(a, acquired)) == [(0, 1, 1)]
        closing = a.acknowledge([(0, 0, [ACCEPT])], epoch=-1)
        assert partition_of(closing).error_code == NONE
        assert acquired(b.fetch()) == [(1, 1, 2)], "offset 1 released at once, not expired"
        assert a.fetch().error_code == SHARE_SESSION_NOT_FOUND


def test_a_member_whose_connection_closes_has_its_locks_released_at_once(broker):
    """A share session belongs to the connection that opened it (Kafka's
    ShareSessionCache): when that connection closes with the session still open (a
    consumer killed, or one that left its group and went away without closing it), the
    member's records are released at once with their delivery counts, not when their
    lock (60 s here) expires."""
    with KafkaConnection(broker.bootstrap) as conn:
        topic_id = new_topic(conn, "gone")
        set_group_configs(conn, "g-gone", {"share.record.lock.duration.ms": "60000"})
        b = open_member(conn, "g-gone", topic_id)
        with KafkaConnection(broker.bootstrap) as other:
            a = open_member(other, "g-gone", topic_id)
            produce(conn, "gone", 2)
            assert acquired(fetch_until(a, acquired)) == [(0, 1, 1)]
            assert acquired(b.fetch()) == [], "locked by a"
        assert acquired(fetch_until(b, acquired, seconds=30)) == [(0, 1, 2)]
        assert partition_of(b.acknowledge([(0, 1, [ACCEPT])])).error_code == NONE


def test_session_and_request_errors(broker):
    with KafkaConnection(broker.bootstrap) as conn:
        topic_id = new_topic(conn, "errors")
        stranger = Member(conn, "g-errors", topic_id)
        assert stranger.fetch(epoch=3).error_code == SHARE_SESSION_NOT_FOUND
        assert stranger.acknowledge([(0, 0, [ACCEPT])], epoch=0).error_code == \
            INVALID_SHARE_SESSION_EPOCH
        assert stranger.fetch([(0, 0, [ACCEPT])]).error_code == INVALID_REQUEST, \
            "no acknowledgements in the request opening a session"
        member = open_member(conn, "g-errors", topic_id)
        assert member.fetch(epoch=7).error_code == INVALID_SHARE_SESSION_EPOCH
        assert member.fetch().error_code == NONE, "the right epoch still works"
        never = member.acknowledge([(40, 41, [ACCEPT])])
        assert partition_of(never).error_code == INVALID_RECORD_STATE
        ghost = Member(conn, "g-errors", uuid.uuid4())
        answer = ghost.fetch()
        assert answer.error_code == NONE and partition_of(answer).error_code == UNKNOWN_TOPIC_ID
        versions = {k.api_key: (k.min_version, k.max_version)
                    for k in conn.api_versions(3).api_keys}
        assert versions[78] == (1, 2) and versions[79] == (1, 2)


def set_group_configs(conn: KafkaConnection, group: str, configs: dict[str, str]) -> None:
    """IncrementalAlterConfigs SET on the GROUP resource (type 32)."""
    resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    answer = conn.request(IncrementalAlterConfigsRequest[1](validate_only=False, resources=[
        resource(resource_type=32, resource_name=group, configs=[
            resource.AlterableConfig(name=k, config_operation=0, value=v)
            for k, v in configs.items()])]))
    assert [r.error_code for r in answer.responses] == [NONE], answer


def test_read_committed_share_groups_skip_aborted_transactions(broker):
    """share.isolation.level=read_committed (a group config): the records of an aborted
    transaction and the transaction markers are never acquired; committed ones are.
    share.auto.offset.reset=earliest starts the group at the log start."""
    with KafkaConnection(broker.bootstrap) as conn:
        topic_id = new_topic(conn, "txns")
        set_group_configs(conn, "g-txn", {"share.isolation.level": "read_committed",
                                          "share.auto.offset.reset": "earliest"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "share-t"})
    producer.init_transactions(30)
    for values, commit in (([b"c0", b"c1"], True), ([b"a0", b"a1"], False), ([b"c2"], True)):
        producer.begin_transaction()
        for value in values:
            producer.produce("txns", value, partition=0)
        assert producer.flush(30) == 0, "written before the abort (else never sent)"
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    with KafkaConnection(broker.bootstrap) as conn:
        member = Member(conn, "g-txn", topic_id)
        # c0 c1 marker a0 a1 marker c2 marker: offsets 0-1 and 6 only.
        answer = fetch_until(member, lambda a: acquired(a) and acquired(a)[-1][1] >= 6)
        assert acquired(answer) == [(0, 1, 1), (6, 6, 1)]
        values = {r[0]: r[2] for r in read_records(partition_of(answer).records)}
        assert [values[o] for o in (0, 1, 6)] == [b"c0", b"c1", b"c2"]


def persisted_batches(conn, group: str, topic_id) -> list[tuple[int, int, int, int]]:
    """The share partition's state batches as its share coordinator holds them
    (ReadShareGroupState, the inter-broker read): (first, last, state, delivery count)."""
    data = ReadShareGroupStateRequest.ReadStateData
    answer = conn.request(ReadShareGroupStateRequest[0](group_id=group, topics=[data(
        topic_id=topic_id, partitions=[data.PartitionData(partition=0, leader_epoch=-1)])]))
    partition = answer.results[0].partitions[0]
    assert partition.error_code == NONE, answer
    return [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in partition.state_batches]


def test_a_new_leader_that_loaded_an_older_state_is_refused_and_then_fences(broker):
    """The share coordinator's rule for WriteShareGroupState: a new leader's first write
    continues the sequence it loaded, so one of a newer leader epoch whose sequence is
    not past the one in place is refused (FENCED_STATE_EPOCH: an older leader wrote
    after that load, acknowledgements it answered, which the new leader would otherwise
    write over); once a newer leader epoch has written, an older one is refused."""
    with KafkaConnection(broker.bootstrap) as conn:
        topic_id = new_topic(conn, "fenced")
        open_member(conn, "g-fenced", topic_id)  # loaded and written: this leader's epoch
        epoch = conn.metadata(["fenced"], version=12).topics[0].partitions[0].leader_epoch
        data = ReadShareGroupStateRequest.ReadStateData
        read = conn.request(ReadShareGroupStateRequest[0](group_id="g-fenced", topics=[data(
            topic_id=topic_id, partitions=[data.PartitionData(partition=0, leader_epoch=-1)])]))
        seq = read.results[0].partitions[0].state_epoch

        def write(leader_epoch: int, state_epoch: int) -> int:
            state = WriteShareGroupStateRequest.WriteStateData
            answer = conn.request(WriteShareGroupStateRequest[0](group_id="g-fenced", topics=[
                state(topic_id=topic_id, partitions=[state.PartitionData(
                    partition=0, state_epoch=state_epoch, leader_epoch=leader_epoch,
                    start_offset=0, state_batches=[])])]))
            return answer.results[0].partitions[0].error_code

        assert write(epoch + 1, seq) == FENCED_STATE_EPOCH, "loaded an older state"
        assert write(epoch + 1, seq + 1) == NONE, "a new leader continuing the sequence"
        assert write(epoch, seq + 2) == FENCED_STATE_EPOCH, "the older leader, fenced"


def test_an_expired_lock_is_written_so_a_restart_keeps_the_delivery_count(broker):
    """A lock expiry (like a release) changes the share partition's state: it is written
    to __share_group_state, as Kafka's leader writes on lock timeouts, so a new leader
    redelivers the record with its delivery count raised (not as never delivered).  The
    second last test of the module: it kills the broker (kill -9) and restarts it."""
    with KafkaConnection(broker.bootstrap) as conn:
        topic_id = new_topic(conn, "expired")
        a = open_member(conn, "g-expired", topic_id)
        produce(conn, "expired", 1)
        assert acquired(fetch_until(a, acquired)) == [(0, 0, 1)]
        # a goes silent; after the 4 s lock the record is AVAILABLE, delivered once.
        deadline = time.monotonic() + 30
        while persisted_batches(conn, "g-expired", topic_id) != [(0, 0, 0, 1)]:
            assert time.monotonic() < deadline, persisted_batches(conn, "g-expired", topic_id)
            time.sleep(0.2)
    broker.kill()
    broker.restart()
    with KafkaConnection(broker.bootstrap) as conn:
        b = Member(conn, "g-expired", topic_id)
        assert acquired(fetch_until(b, acquired)) == [(0, 0, 2)]
        assert partition_of(b.acknowledge([(0, 0, [ACCEPT])])).error_code == NONE


def test_acknowledgements_survive_a_kill_9_and_only_unacknowledged_records_return(broker):
    """Last in the module: it kills the broker (kill -9) and restarts it.  The share
    partition's state is written to __share_group_state before an acknowledgement is
    answered, so the restarted leader loads it: the acknowledged and rejected records
    never come back, the two left in flight come back with their delivery count raised,
    and the two never fetched are delivered for the first time."""
    with KafkaConnection(broker.bootstrap) as conn:
        topic_id = new_topic(conn, "durable")
        a = open_member(conn, "g-durable", topic_id)
        produce(conn, "durable", 8)
        assert acquired(fetch_until(a, acquired, max_records=6)) == [(0, 5, 1)]
        answer = a.acknowledge([(0, 2, [ACCEPT, ACCEPT, REJECT]), (4, 4, [ACCEPT])])
        assert partition_of(answer).error_code == NONE
    broker.kill()
    broker.restart()
    with KafkaConnection(broker.bootstrap) as conn:
        b = Member(conn, "g-durable", topic_id)
        # Until the restarted broker leads the partition again and loaded its state (the
        # first answers may be NOT_LEADER_OR_FOLLOWER or COORDINATOR_NOT_AVAILABLE).
        redelivered = fetch_until(b, acquired)
        assert acquired(redelivered) == [(3, 3, 2), (5, 5, 2), (6, 7, 1)]
        assert partition_of(b.acknowledge([(3, 3, [ACCEPT]), (5, 7, [ACCEPT])])).error_code \
            == NONE
        assert acquired(b.fetch()) == []

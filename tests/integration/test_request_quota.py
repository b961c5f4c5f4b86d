"""``request_percentage`` client quotas (KIP-124) on one real broker process.

Invariants: ``request_percentage`` is accepted and described like the other client
quota keys, by the wire and by ``raftwood quotas`` (a value that is not positive is
INVALID_REQUEST).  A client over its quota (event-loop time spent on its requests, in
percent of one thread, over the quota window) gets ``throttle_time_ms`` > 0 — at most
one window, 1 s, as Kafka caps the request quota's throttle — in Metadata, ApiVersions
(not exempt in Kafka), Produce, Fetch and DescribeClientQuotas (an ``async`` handler)
answers, and its connection reads nothing more for that long: the next request's
answer comes no sooner than the throttle after the throttled request was sent.  A
client without a quota on the same broker is never throttled.  Exempt requests (a
follower Fetch, WriteTxnMarkers) answer throttle 0 and are not held back while the
same client's other requests are throttled.  Removing the quota ends the throttling.
Every loop is bounded in count and time.
"""
from __future__ import annotations

import time
import uuid

import pytest
from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.producer import ProduceRequest

from broker.cli.main import main as cli_main
from broker.harness.process import BrokerProcess
from broker.harness.wire import build_batch
from broker.testing import KafkaConnection
from protocol.errors import ErrorCode
from protocol.messages import WriteTxnMarkersRequest

WAIT_S = 30.0
START_S = 60.0  # a loaded machine starts a broker slowly
MAX_TRIES = 400  # requests a tiny quota needs at most before it throttles
ONE_WINDOW_MS = 1000  # Kafka caps a request-quota throttle at quota.window.size.seconds
TINY = 0.001  # percent of one thread: 0.1 ms per 10 s span, about one request


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    home = tmp_path_factory.mktemp("request-quota")
    broker = BrokerProcess(home / "data", log_path=home / "broker.log").start(timeout_s=START_S)
    yield broker
    assert broker.stop() == 0, broker.log_tail()


def alter(conn, entity: tuple, ops: dict) -> tuple[int, str | None]:
    entry = AlterClientQuotasRequest.EntryData
    answer = conn.request(AlterClientQuotasRequest[1](validate_only=False, entries=[entry(
        entity=[entry.EntityData(entity_type=t, entity_name=n) for t, n in entity],
        ops=[entry.OpData(key=k, value=0.0 if v is None else v, remove=v is None)
             for k, v in ops.items()])]))
    return answer.entries[0].error_code, answer.entries[0].error_message


def described(conn, client_id: str) -> dict:
    component = DescribeClientQuotasRequest.ComponentData
    answer = conn.request(DescribeClientQuotasRequest[1](strict=True, components=[
        component(entity_type="client-id", match_type=0, match=client_id)]))
    assert answer.error_code == ErrorCode.NONE, answer
    return {v.key: v.value for entry in answer.entries for v in entry.values}


def wait_described(conn, client_id: str, want: dict) -> None:
    deadline = time.monotonic() + WAIT_S
    while (seen := described(conn, client_id)) != want:
        assert time.monotonic() < deadline, f"client-id {client_id}: {seen}, wanted {want}"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def tiny(broker):
    """A client id with a tiny request_percentage, and a topic to produce to."""
    client = f"tiny-{uuid.uuid4().hex[:6]}"
    with KafkaConnection(broker.bootstrap, client_id="quota-admin") as admin:
        assert admin.create_topic(f"rq-{client}") == ErrorCode.NONE
        assert alter(admin, (("client-id", client),),
                     {"request_percentage": TINY}) == (ErrorCode.NONE, None)
        wait_described(admin, client, {"request_percentage": TINY})
    return client


def over_quota(conn) -> int:
    """Send Metadata until an answer is throttled (bounded); its throttle_time_ms."""
    deadline = time.monotonic() + WAIT_S
    for _ in range(MAX_TRIES):
        throttle_ms = conn.metadata(version=8).throttle_time_ms
        if throttle_ms > 0 or time.monotonic() > deadline:
            return throttle_ms
    return 0


def test_request_percentage_is_accepted_and_checked(broker):
    client = f"checked-{uuid.uuid4().hex[:6]}"
    with KafkaConnection(broker.bootstrap, client_id="quota-admin") as admin:
        for bad in (0.0, -1.0):
            code, message = alter(admin, (("client-id", client),), {"request_percentage": bad})
            assert code == ErrorCode.INVALID_REQUEST and "request_percentage" in message
        assert alter(admin, (("client-id", client),),
                     {"request_percentage": 250.5}) == (ErrorCode.NONE, None)
        wait_described(admin, client, {"request_percentage": 250.5})
        assert alter(admin, (("client-id", client),),
                     {"request_percentage": None}) == (ErrorCode.NONE, None)
        wait_described(admin, client, {})


def test_raftwood_quotas_sets_and_describes_request_percentage(broker, capsys):
    client = f"cli-{uuid.uuid4().hex[:6]}"
    bootstrap = ("--bootstrap-server", broker.bootstrap)
    assert cli_main(["quotas", "alter", *bootstrap, "--client-id", client,
                     "--add-config", "request_percentage=12.5"]) == 0, capsys.readouterr()
    with KafkaConnection(broker.bootstrap, client_id="quota-admin") as admin:
        wait_described(admin, client, {"request_percentage": 12.5})
    capsys.readouterr()
    assert cli_main(["quotas", "describe", *bootstrap, "--client-id", client]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert ["-", client, "request_percentage", "12.5"] in rows, rows
    assert cli_main(["quotas", "alter", *bootstrap, "--client-id", client,
                     "--delete-config", "request_percentage"]) == 0, capsys.readouterr()


def test_a_client_over_its_request_percentage_is_throttled_and_muted(broker, tiny):
    topic = f"rq-{tiny}"
    with KafkaConnection(broker.bootstrap, client_id=tiny, timeout_s=WAIT_S) as conn:
        first = over_quota(conn)
        assert 0 < first <= ONE_WINDOW_MS, f"no Metadata answer throttled ({first})"
        # The broker mutes after answering the request sent at ``sent``: the next
        # request is read, and answered, no sooner than the throttle after ``sent``.
        sent = time.monotonic()
        throttle_ms = conn.metadata(version=8).throttle_time_ms
        assert 0 < throttle_ms <= ONE_WINDOW_MS
        conn.metadata(version=8)
        assert time.monotonic() - sent >= throttle_ms / 1000 - 0.005
        produced = conn.request(_produce_request(topic))
        assert produced.throttle_time_ms > 0, "a Produce answer was not throttled"
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        fetch_topic = FetchRequest.FetchTopic
        fetched = conn.request(FetchRequest[11](
            replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
            session_id=0, session_epoch=-1, topics=[fetch_topic(topic=topic, partitions=[
                fetch_topic.FetchPartition(partition=0, current_leader_epoch=-1,
                                           fetch_offset=0, log_start_offset=-1,
                                           partition_max_bytes=1 << 20)])],
            forgotten_topics_data=[], rack_id=""))
        assert fetched.throttle_time_ms > 0, "a consumer Fetch answer was not throttled"
        assert fetched.responses[0].partitions[0].error_code == ErrorCode.NONE
    with KafkaConnection(broker.bootstrap, client_id=tiny, timeout_s=WAIT_S) as conn:
        versions = conn.request(ApiVersionsRequest[3](client_software_name="t",
                                                      client_software_version="1"))
        assert versions.throttle_time_ms > 0, "ApiVersions is throttled in Kafka"
        component = DescribeClientQuotasRequest.ComponentData
        own = conn.request(DescribeClientQuotasRequest[1](strict=True, components=[
            component(entity_type="client-id", match_type=0, match=tiny)]))
        # An ``async def`` handler, timed step by step, answers as usual and throttled.
        assert own.throttle_time_ms > 0 and own.error_code == ErrorCode.NONE
        assert [v.value for e in own.entries for v in e.values] == [TINY]


def _produce_request(topic: str):
    data = ProduceRequest.TopicProduceData
    return ProduceRequest[9](transactional_id=None, acks=1, timeout_ms=10_000, topic_data=[
        data(name=topic, partition_data=[data.PartitionProduceData(
            index=0, records=build_batch([(b"k", b"v", 0, [])]))])])


def test_a_client_without_a_quota_is_not_throttled(broker, tiny):
    with KafkaConnection(broker.bootstrap, client_id=tiny, timeout_s=WAIT_S) as conn:
        assert over_quota(conn) > 0
    with KafkaConnection(broker.bootstrap, client_id=f"free-{tiny}") as free:
        throttles = [free.metadata(version=8).throttle_time_ms for _ in range(100)]
    assert throttles == [0] * 100


def _follower_fetch():
    return FetchRequest[11](replica_id=1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                            isolation_level=0, session_id=0, session_epoch=-1, topics=[],
                            forgotten_topics_data=[], rack_id="")


def test_exempt_requests_are_never_throttled(broker, tiny):
    with KafkaConnection(broker.bootstrap, client_id=tiny, timeout_s=WAIT_S) as conn:
        assert over_quota(conn) > 0
    with KafkaConnection(broker.bootstrap, client_id=tiny, timeout_s=WAIT_S) as conn:
        for _ in range(50):
            assert conn.request(_follower_fetch()).throttle_time_ms == 0
            markers = conn.request(WriteTxnMarkersRequest[1](markers=[]))
            assert markers.markers == []
        # The same client's other requests are still over the quota.
        assert conn.metadata(version=8).throttle_time_ms > 0


def test_removing_the_quota_ends_the_throttling(broker, tiny):
    with KafkaConnection(broker.bootstrap, client_id="quota-admin") as admin:
        assert alter(admin, (("client-id", tiny),),
                     {"request_percentage": None}) == (ErrorCode.NONE, None)
        wait_described(admin, tiny, {})
    with KafkaConnection(broker.bootstrap, client_id=tiny) as conn:
        throttles = [conn.metadata(version=8).throttle_time_ms for _ in range(50)]
    assert throttles == [0] * 50

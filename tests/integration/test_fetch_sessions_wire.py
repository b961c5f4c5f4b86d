"""Incremental fetch sessions (KIP-227) on the wire, against one real broker.

Raw Fetch v11 requests (kafka-python's classes) walk a session through its life: a
full fetch that creates it, incremental fetches that name only what changed and are
answered only with what is new, forgotten partitions, the two session errors, closing,
a long poll over the whole session, and a cache too small for a second session
(``max.incremental.fetch.session.cache.slots=1``).  kafka-python's own consumer,
which uses sessions, reads everything back.
"""
from __future__ import annotations

import threading
import time

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.protocol.consumer import FetchRequest

from broker.harness.wire import read_records
from broker.testing import BrokerProcess, KafkaConnection, build_batch

TOPIC = "sessions"
PARTITIONS = 3
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
FETCH = FetchRequest[11]
FetchTopic = FETCH.FetchTopic
Forgotten = FETCH.ForgottenTopic


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    home = tmp_path_factory.mktemp("fetch-sessions")
    broker = BrokerProcess(home / "data", log_path=home / "broker.log", extra_settings={
        "max.incremental.fetch.session.cache.slots": 1})
    broker.start()
    with KafkaConnection(broker.bootstrap) as conn:
        assert conn.create_topic(TOPIC, PARTITIONS) == 0
        for partition in range(PARTITIONS):
            produce(conn, partition, 2)
    yield broker
    code = broker.stop()
    assert code == 0, f"broker exited {code} after SIGTERM\n{broker.log_tail()}"


def produce(conn: KafkaConnection, partition: int, count: int, tag: str = "") -> None:
    records = [(None, b"%s-%d-%d" % (tag.encode(), partition, i), 1_700_000_000_000, [])
               for i in range(count)]
    assert conn.produce(TOPIC, partition, build_batch(records)).error_code == 0


def fetch(conn, session_id: int, epoch: int, offsets: dict[int, int], forgotten=(), *,
          max_wait_ms: int = 0):
    """One Fetch in (session_id, epoch) naming ``offsets`` {partition: fetch offset}."""
    topics = [FetchTopic(topic=TOPIC, partitions=[FetchTopic.FetchPartition(
        partition=p, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
        partition_max_bytes=1 << 20) for p, offset in offsets.items()])] if offsets else []
    return conn.request(FETCH(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
        isolation_level=0, session_id=session_id, session_epoch=epoch, topics=topics,
        forgotten_topics_data=[Forgotten(topic=TOPIC, partitions=list(forgotten))]
        if forgotten else [], rack_id=""))


def listed(response) -> dict[int, tuple[int, int]]:
    """{partition: (high watermark, records in it)} of what an answer lists."""
    return {p.partition_index: (p.high_watermark, len(read_records(p.records)))
            for topic in response.responses for p in topic.partitions}


def test_a_session_lists_only_what_changed_both_ways(broker):
    with KafkaConnection(broker.bootstrap) as conn:
        full = fetch(conn, 0, 0, dict.fromkeys(range(PARTITIONS), 0))
        assert full.error_code == 0 and full.session_id > 0, "a session was created"
        session = full.session_id
        assert listed(full) == {0: (2, 2), 1: (2, 2), 2: (2, 2)}, "a full answer lists all"

        # The consumer read everything: it names its new positions, nothing is new.
        caught_up = fetch(conn, session, 1, dict.fromkeys(range(PARTITIONS), 2))
        assert (caught_up.error_code, caught_up.session_id) == (0, session)
        assert listed(caught_up) == {}

        # A record on partition 1: an incremental fetch naming nothing gets just that.
        produce(conn, 1, 1, "new")
        news = fetch(conn, session, 2, {})
        assert listed(news) == {1: (3, 1)}
        # Not named again, partition 1 keeps its cached offset (2) and answers again.
        again = fetch(conn, session, 3, {})
        assert listed(again) == {1: (3, 1)}
        assert listed(fetch(conn, session, 4, {1: 3})) == {}

        # Forgotten partitions are no longer read.
        assert listed(fetch(conn, session, 5, {}, forgotten=[0, 2])) == {}
        produce(conn, 0, 1, "forgotten")
        assert listed(fetch(conn, session, 6, {})) == {}
        # ...and a partition named again joins the session at its offset.
        assert listed(fetch(conn, session, 7, {0: 2})) == {0: (3, 1)}

        # (id, -1): the session is closed, the fetch answered without a session.
        closing = fetch(conn, session, -1, {2: 0})
        assert (closing.error_code, closing.session_id) == (0, 0)
        assert listed(closing) == {2: (2, 2)}
        gone = fetch(conn, session, 8, {})
        assert (gone.error_code, gone.session_id, listed(gone)) == \
            (FETCH_SESSION_ID_NOT_FOUND, 0, {})


def test_session_errors_leave_the_session_usable(broker):
    with KafkaConnection(broker.bootstrap) as conn:
        session = fetch(conn, 0, 0, {0: 0}).session_id
        assert session > 0
        for wrong in (2, 5, 2 ** 31 - 1):
            refused = fetch(conn, session, wrong, {1: 0})
            assert (refused.error_code, listed(refused)) == (INVALID_FETCH_SESSION_EPOCH, {})
        unknown = fetch(conn, session + 1 if session < 2 ** 31 - 1 else 1, 1, {})
        assert unknown.error_code == FETCH_SESSION_ID_NOT_FOUND
        # The refused fetches changed nothing: epoch 1 is still the one expected, and
        # partition 1 (named only by refused fetches) is not in the session.
        ok = fetch(conn, session, 1, {})
        assert (ok.error_code, ok.session_id) == (0, session)
        assert listed(ok) == {0: (3, 3)}
        assert fetch(conn, session, -1, {}).error_code == 0  # closed


def test_an_incremental_long_poll_wakes_for_any_partition_of_the_session(broker):
    """The fetch may wait a minute, the connection only 10 s: a poll that did not wake
    when the record came fails with the connection's timeout."""
    with KafkaConnection(broker.bootstrap, timeout_s=10) as conn, \
            KafkaConnection(broker.bootstrap) as producer:
        offsets = {p: fetch(conn, 0, -1, {p: 0}).responses[0].partitions[0].high_watermark
                   for p in range(PARTITIONS)}
        session = fetch(conn, 0, 0, offsets).session_id
        assert session > 0
        timer = threading.Timer(0.5, produce, (producer, 2, 1, "wake"))
        timer.start()
        try:
            woken = fetch(conn, session, 1, {}, max_wait_ms=60_000)
        finally:
            timer.join()
        assert listed(woken) == {2: (offsets[2] + 1, 1)}
        assert fetch(conn, session, -1, {}).error_code == 0


def test_a_full_cache_answers_without_a_session_until_a_slot_frees(broker):
    with KafkaConnection(broker.bootstrap) as first, KafkaConnection(broker.bootstrap) as second:
        kept = fetch(first, 0, 0, {0: 0}).session_id
        assert kept > 0
        # One slot, held by a session younger than two minutes: no room for another.
        refused = fetch(second, 0, 0, {1: 0})
        assert (refused.error_code, refused.session_id) == (0, 0)
        assert listed(refused) == {1: (3, 3)}, "answered in full all the same"
        assert fetch(first, kept, 1, {}).error_code == 0, "the first session is intact"
        assert fetch(first, kept, -1, {}).error_code == 0
        taken = fetch(second, 0, 0, {1: 0}).session_id
        assert taken > 0
        assert fetch(second, taken, -1, {}).error_code == 0  # the slot is free again


def test_kafka_python_consumer_reads_everything_through_a_session(broker):
    with KafkaConnection(broker.bootstrap) as conn:
        for partition in range(PARTITIONS):
            produce(conn, partition, 50, "bulk")
        ends = {p: conn.fetch(TOPIC, p, 0).high_watermark for p in range(PARTITIONS)}
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, consumer_timeout_ms=3000,
                             fetch_max_wait_ms=100)
    try:
        consumer.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        seen: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
        deadline = time.monotonic() + 60
        while any(len(seen[p]) < ends[p] for p in seen) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                for record in records:
                    seen[record.partition].append(record.offset)
        handler = consumer._fetcher._session_handlers.get(1)
    finally:
        consumer.close()
    assert dict(seen) == \
        {p: list(range(ends[p])) for p in range(PARTITIONS)}
    assert handler is not None and handler.next_metadata.session_id > 0, \
        "the consumer fetched in a session"

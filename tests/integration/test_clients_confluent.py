"""compat scenarios run by confluent-kafka (librdkafka: Producer, Consumer, AdminClient).

librdkafka requires a group.id for a Consumer even without a group; the consumers here
only ``assign()`` explicit offsets and never commit (the broker serves no group APIs yet).
"""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from compat.scenarios import WAIT_S, ClientDriver, Got, Rec, scenarios_for


class ConfluentDriver(ClientDriver):
    name = "confluent-kafka"
    lists_max_timestamp = True

    def __init__(self, bootstrap: str):
        super().__init__(bootstrap)
        self._consumer: Consumer | None = None
        self._admin: AdminClient | None = None

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()

    def _new_consumer(self) -> Consumer:
        return Consumer({"bootstrap.servers": self.bootstrap, "group.id": "compat-unused",
                         "enable.auto.commit": False, "enable.auto.offset.store": False,
                         "auto.offset.reset": "error", "enable.partition.eof": True,
                         "fetch.wait.max.ms": 100, "socket.timeout.ms": 10_000})

    @property
    def consumer(self) -> Consumer:
        if self._consumer is None:
            self._consumer = self._new_consumer()
        return self._consumer

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap})
        return self._admin

    def produce(self, topic: str, recs: list[Rec], *, acks, compression: str,
                idempotent: bool = False) -> list[int | None]:
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": str(acks),
                             "compression.type": compression, "linger.ms": 5,
                             "enable.idempotence": idempotent, "message.timeout.ms": 10_000})
        reports: dict[int, tuple] = {}

        def on_delivery(index):
            return lambda err, msg: reports.__setitem__(index, (err, msg.offset()))

        for index, r in enumerate(recs):
            producer.produce(topic, value=r.value, key=r.key, partition=r.partition,
                             timestamp=r.timestamp_ms or 0, headers=list(r.headers),
                             on_delivery=on_delivery(index))
        remaining = producer.flush(WAIT_S)
        assert remaining == 0, f"{remaining} messages undelivered after {WAIT_S} s"
        errors = [err for err, _ in reports.values() if err is not None]
        assert not errors, f"delivery errors: {errors[:3]}"
        # acks=0: librdkafka reports no offset (None, or OFFSET_INVALID -1001)
        offsets = [reports[i][1] for i in range(len(recs))]
        return [o if o is not None and o >= 0 else None for o in offsets]

    def consume(self, topic: str, partition: int, offset: int, count: int) -> list[Got]:
        consumer = self._new_consumer()
        got: list[Got] = []
        try:
            consumer.assign([TopicPartition(topic, partition, offset)])
            deadline = time.monotonic() + WAIT_S
            while len(got) < count and time.monotonic() < deadline:
                for msg in consumer.consume(num_messages=count - len(got), timeout=0.2):
                    if msg.error() is not None:
                        if msg.error().code() == KafkaError._PARTITION_EOF:
                            continue
                        raise AssertionError(f"consume {topic}-{partition}: {msg.error()}")
                    headers = tuple((k, v) for k, v in (msg.headers() or []))
                    got.append(Got(partition, msg.offset(), msg.key(), msg.value(),
                                   msg.timestamp()[1], headers))
        finally:
            consumer.close()
        return got[:count]

    def _watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        return self.consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                   timeout=10, cached=False)

    def earliest_offset(self, topic: str, partition: int) -> int:
        return self._watermarks(topic, partition)[0]

    def latest_offset(self, topic: str, partition: int) -> int:
        return self._watermarks(topic, partition)[1]

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        [found] = self.consumer.offsets_for_times(
            [TopicPartition(topic, partition, timestamp_ms)], timeout=10)
        assert found.error is None, f"offsets_for_times: {found.error}"
        return None if found.offset < 0 else found.offset

    def max_timestamp(self, topic: str, partition: int) -> tuple[int, int]:
        tp = TopicPartition(topic, partition)
        futures = self.admin.list_offsets({tp: OffsetSpec.max_timestamp()},
                                          request_timeout=10)
        [info] = [future.result(timeout=WAIT_S) for future in futures.values()]
        return info.offset, info.timestamp

    def topic_partitions(self, topic: str) -> int:
        metadata = self.admin.list_topics(topic=topic, timeout=10)
        return len(metadata.topics[topic].partitions)

    def brokers(self) -> list[tuple[int, str, int]]:
        metadata = self.admin.list_topics(timeout=10)
        return [(b.id, b.host, b.port) for b in metadata.brokers.values()]


@pytest.mark.parametrize("scenario", scenarios_for(ConfluentDriver), ids=str)
def test_confluent(scenario, compat_env):
    driver = ConfluentDriver(compat_env.bootstrap)
    try:
        scenario(driver, compat_env)
    finally:
        driver.close()

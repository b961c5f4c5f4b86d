"""compat scenarios run by kafka-python (KafkaProducer, KafkaConsumer, KafkaAdminClient).

Consumers use manual assignment (assign/seek, no group, no commits): the broker serves no
group APIs yet.  The producer sets ``enable_idempotence`` explicitly (kafka-python defaults
it on and would silently turn it off for acks 0/1).
"""
from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, OffsetSpec

from compat.scenarios import WAIT_S, ClientDriver, Got, Rec, scenarios_for


class KafkaPythonDriver(ClientDriver):
    name = "kafka-python"
    lists_max_timestamp = True

    api_version: tuple[int, int] | None = None  # None: negotiate with ApiVersions

    def __init__(self, bootstrap: str):
        super().__init__(bootstrap)
        self._consumer: KafkaConsumer | None = None
        self._admin: KafkaAdminClient | None = None

    def close(self) -> None:
        for client in (self._consumer, self._admin):
            if client is not None:
                client.close()

    @property
    def consumer(self) -> KafkaConsumer:
        """One consumer for the whole driver: consuming (assign + seek) and offset look-ups."""
        if self._consumer is None:
            self._consumer = self._new_consumer()
        return self._consumer

    def _new_consumer(self) -> KafkaConsumer:
        return KafkaConsumer(bootstrap_servers=self.bootstrap, api_version=self.api_version,
                             group_id=None,
                             enable_auto_commit=False, auto_offset_reset="none",
                             request_timeout_ms=10_000, fetch_max_wait_ms=100)

    def produce(self, topic: str, recs: list[Rec], *, acks, compression: str,
                idempotent: bool = False) -> list[int | None]:
        producer = KafkaProducer(
            bootstrap_servers=self.bootstrap, api_version=self.api_version, acks=acks, linger_ms=5,
            compression_type=None if compression == "none" else compression,
            enable_idempotence=idempotent, request_timeout_ms=10_000, max_block_ms=10_000)
        try:
            futures = [producer.send(topic, value=r.value, key=r.key, partition=r.partition,
                                     timestamp_ms=r.timestamp_ms, headers=list(r.headers))
                       for r in recs]
            producer.flush(timeout=WAIT_S)
            offsets = [f.get(timeout=WAIT_S).offset for f in futures]
        finally:
            producer.close(timeout=5)
        return [o if o >= 0 else None for o in offsets]

    def consume(self, topic: str, partition: int, offset: int, count: int) -> list[Got]:
        consumer, tp = self.consumer, TopicPartition(topic, partition)
        got: list[Got] = []
        consumer.assign([tp])
        consumer.seek(tp, offset)
        deadline = time.monotonic() + WAIT_S
        while len(got) < count and time.monotonic() < deadline:
            for record in consumer.poll(timeout_ms=200).get(tp, []):
                got.append(Got(partition, record.offset, record.key, record.value,
                               record.timestamp, tuple(record.headers)))
        return got[:count]

    def earliest_offset(self, topic: str, partition: int) -> int:
        tp = TopicPartition(topic, partition)
        return self.consumer.beginning_offsets([tp])[tp]

    def latest_offset(self, topic: str, partition: int) -> int:
        tp = TopicPartition(topic, partition)
        return self.consumer.end_offsets([tp])[tp]

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        tp = TopicPartition(topic, partition)
        found = self.consumer.offsets_for_times({tp: timestamp_ms})[tp]
        return None if found is None else found.offset

    @property
    def admin(self) -> KafkaAdminClient:
        if self._admin is None:
            self._admin = KafkaAdminClient(bootstrap_servers=self.bootstrap,
                                           request_timeout_ms=10_000)
        return self._admin

    def max_timestamp(self, topic: str, partition: int) -> tuple[int, int]:
        tp = TopicPartition(topic, partition)
        found = self.admin.list_partition_offsets({tp: OffsetSpec.MAX_TIMESTAMP})[tp]
        return found.offset, found.timestamp

    def topic_partitions(self, topic: str) -> int:
        return len(self.consumer.partitions_for_topic(topic) or ())

    def brokers(self) -> list[tuple[int, str, int]]:
        cluster = self.admin.describe_cluster()
        return [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]]


class KafkaPython011Driver(KafkaPythonDriver):
    """kafka-python told the broker is 0.11 (``api_version=(0, 11)``): the lowest versions
    we serve (Produce v3, Fetch v4/v5, ListOffsets v2), no zstd and no MAX_TIMESTAMP."""

    name = "kafka-python-0.11"
    api_version = (0, 11)
    codecs = ("none", "gzip", "snappy", "lz4")
    lists_max_timestamp = False
    idempotent = False  # the negotiated run covers the idempotent producer


@pytest.mark.parametrize("scenario", scenarios_for(KafkaPythonDriver), ids=str)
def test_kafka_python(scenario, compat_env):
    driver = KafkaPythonDriver(compat_env.bootstrap)
    try:
        scenario(driver, compat_env)
    finally:
        driver.close()


@pytest.mark.parametrize("scenario", scenarios_for(KafkaPython011Driver), ids=str)
def test_kafka_python_old_protocol(scenario, compat_env):
    driver = KafkaPython011Driver(compat_env.bootstrap)
    try:
        scenario(driver, compat_env)
    finally:
        driver.close()


def test_default_producer_config_delivers(compat_env):
    """A KafkaProducer with every default (idempotent, acks=all) delivers at offset 0."""
    topic = compat_env.new_topic(1)
    producer = KafkaProducer(bootstrap_servers=compat_env.bootstrap, max_block_ms=10_000,
                             request_timeout_ms=10_000)
    try:
        metadata = producer.send(topic, b"defaults", partition=0).get(timeout=WAIT_S)
    finally:
        producer.close(timeout=5)
    assert metadata.offset == 0

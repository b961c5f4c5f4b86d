"""compat scenarios run by aiokafka (AIOKafkaProducer, AIOKafkaConsumer, AIOKafkaAdminClient).

The driver owns one event loop and runs each operation to completion on it, so a single
consumer serves every offset look-up.  Consumers use manual assignment (no group).
"""
from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from compat.scenarios import WAIT_S, ClientDriver, Got, Rec, scenarios_for


class AiokafkaDriver(ClientDriver):
    name = "aiokafka"

    def __init__(self, bootstrap: str):
        super().__init__(bootstrap)
        self._loop = asyncio.new_event_loop()
        self._consumer: AIOKafkaConsumer | None = None

    def _run(self, coro):
        return self._loop.run_until_complete(asyncio.wait_for(coro, WAIT_S + 5))

    def close(self) -> None:
        if self._consumer is not None:
            self._run(self._consumer.stop())
        self._loop.close()

    def _new_consumer(self) -> AIOKafkaConsumer:
        return AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None,
                                enable_auto_commit=False, auto_offset_reset="none",
                                request_timeout_ms=10_000, fetch_max_wait_ms=100)

    async def _shared_consumer(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            self._consumer = self._new_consumer()
            await self._consumer.start()
        return self._consumer

    def produce(self, topic: str, recs: list[Rec], *, acks, compression: str,
                idempotent: bool = False) -> list[int | None]:
        async def run():
            producer = AIOKafkaProducer(
                bootstrap_servers=self.bootstrap, acks=acks, linger_ms=5,
                compression_type=None if compression == "none" else compression,
                enable_idempotence=idempotent, request_timeout_ms=10_000)
            await producer.start()
            try:
                futures = [await producer.send(topic, value=r.value, key=r.key,
                                               partition=r.partition,
                                               timestamp_ms=r.timestamp_ms,
                                               headers=list(r.headers))
                           for r in recs]
                return await asyncio.gather(*futures)
            finally:
                await producer.stop()

        # acks=0: aiokafka resolves each send with None (no RecordMetadata)
        return [m.offset if m is not None and m.offset >= 0 else None for m in self._run(run())]

    def consume(self, topic: str, partition: int, offset: int, count: int) -> list[Got]:
        async def run():
            consumer = self._new_consumer()
            tp = TopicPartition(topic, partition)
            got: list[Got] = []
            await consumer.start()
            try:
                consumer.assign([tp])
                consumer.seek(tp, offset)
                deadline = time.monotonic() + WAIT_S
                while len(got) < count and time.monotonic() < deadline:
                    batch = await consumer.getmany(tp, timeout_ms=200)
                    for record in batch.get(tp, []):
                        got.append(Got(partition, record.offset, record.key, record.value,
                                       record.timestamp, tuple(record.headers)))
            finally:
                await consumer.stop()
            return got[:count]

        return self._run(run())

    def _ask(self, method: str, topic: str, partition: int, *args):
        async def run():
            consumer = await self._shared_consumer()
            tp = TopicPartition(topic, partition)
            arg = {tp: args[0]} if args else [tp]
            return (await getattr(consumer, method)(arg))[tp]

        return self._run(run())

    def earliest_offset(self, topic: str, partition: int) -> int:
        return self._ask("beginning_offsets", topic, partition)

    def latest_offset(self, topic: str, partition: int) -> int:
        return self._ask("end_offsets", topic, partition)

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        found = self._ask("offsets_for_times", topic, partition, timestamp_ms)
        return None if found is None else found.offset

    def _admin(self, method: str, *args):
        async def run():
            admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap,
                                        request_timeout_ms=10_000)
            await admin.start()
            try:
                return await getattr(admin, method)(*args)
            finally:
                await admin.close()

        return self._run(run())

    def topic_partitions(self, topic: str) -> int:
        [described] = self._admin("describe_topics", [topic])
        assert described["error_code"] == 0, described
        return len(described["partitions"])

    def brokers(self) -> list[tuple[int, str, int]]:
        cluster = self._admin("describe_cluster")
        return [(b["node_id"], b["host"], b["port"]) for b in cluster["brokers"]]


@pytest.mark.parametrize("scenario", scenarios_for(AiokafkaDriver), ids=str)
def test_aiokafka(scenario, compat_env):
    driver = AiokafkaDriver(compat_env.bootstrap)
    try:
        scenario(driver, compat_env)
    finally:
        driver.close()

"""The Fetch handler (a plain def answering with a Later: no task) over a real ReplicaManager,
through a Connection.

A long-polling fetch runs without a task: it waits in the fetch purgatory, is answered
in the event-loop pass after the append that completes it (never inside the producer's
append), and a lost connection withdraws it from the purgatory without an answer.
"""
from __future__ import annotations

import asyncio

from kafka.protocol.consumer import FetchRequest, FetchResponse

from broker.network.connection import Connection
from broker.testing import read_records
from tests.unit.replication.test_log_dir_offline import (
    StubBroker,
    Transport,
    frames,
    produce,
    replica_manager,
    single_broker_image,
)


def fetch(offset: int, correlation_id: int, max_wait_ms: int = 10_000) -> bytes:
    topic = FetchRequest.FetchTopic
    request = FetchRequest[4](
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
        isolation_level=0, topics=[topic(topic="t", partitions=[topic.FetchPartition(
            partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])])
    request.with_header(correlation_id=correlation_id, client_id="unit")
    return bytes(request.encode(header=True, framed=True))


async def answers(transport: Transport, count: int) -> list:
    for _ in range(1000):
        if len(frames(transport.written)) >= count:
            break
        await asyncio.sleep(0.001)
    return [FetchResponse.decode(frame, version=4, header=True)
            for frame in frames(transport.written)]


def test_a_long_poll_is_answered_after_the_append_and_withdrawn_with_its_connection(
        tmp_path):
    async def main():
        rm, _ = replica_manager(tmp_path, single_broker_image())
        transport = Transport()
        connection = Connection(StubBroker(rm))
        connection.connection_made(transport)

        connection.data_received(fetch(0, 1))
        await asyncio.sleep(0.01)
        assert rm.fetch_purgatory.watched(("t", 0)) == 1 and transport.written == b""
        assert produce(rm, 0, b"hello").error == 0
        [waiting] = connection._queue
        assert not waiting.done, "answered inside the producer's append"
        [answer] = await answers(transport, 1)
        [[partition]] = [t.partitions for t in answer.responses]
        assert [r[2] for r in read_records(partition.records)] == [b"hello"]
        assert rm.fetch_purgatory.watched() == 0

        connection.data_received(fetch(1, 2))
        await asyncio.sleep(0.01)
        assert rm.fetch_purgatory.watched(("t", 0)) == 1
        connection.connection_lost(None)
        assert rm.fetch_purgatory.watched() == 0, "the lost connection's fetch still waits"
        assert produce(rm, 0, b"after").error == 0
        await asyncio.sleep(0.01)
        assert len(frames(transport.written)) == 1
        await rm.shutdown()

    asyncio.run(main())

"""A disk failure takes the log directory offline (Kafka's KIP-112), in one process.

The disk is made to fail by replacing ``os`` inside one storage module with a stand-in
whose ``write`` accepts ``room`` more bytes (a partial write, as a filling disk does)
and then raises ENOSPC.  The broker-level tests with a real full filesystem are in
tests/integration/test_storage_faults.py.
"""
from __future__ import annotations

import asyncio
import errno
import os
import struct

import pytest
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.producer import ProduceRequest

import storage.checkpoint
import storage.index
import storage.segment
from broker import config as config_module
from broker.controller.state import ClusterState
from broker.metrics.stats import DISCARD_REQUESTS
from broker.network.connection import Connection
from broker.network.limits import ConnectionLimits
from broker.replication.delayed import FetchPartitionStatus
from broker.replication.origin import AppendOrigin
from broker.replication.partition import PartitionError
from broker.replication.replica_manager import ReplicaManager
from broker.security.authorizer import ALLOW_ALL
from broker.testing import build_batch, read_records
from protocol.errors import ErrorCode
from protocol.records import assign_offset_and_epoch
from storage.config import LogConfig
from storage.errors import StorageIOError
from storage.log import PartitionLog

STORAGE_ERROR = ErrorCode.KAFKA_STORAGE_ERROR
MAX_BATCH = 1 << 20


class FullDisk:
    """Stands in for ``os`` in one storage module: ``room`` more bytes, then ENOSPC."""

    def __init__(self, room: int = 0):
        self.room = room

    def __getattr__(self, name):
        return getattr(os, name)

    def write(self, fd, data):
        if self.room <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written = os.write(fd, bytes(memoryview(data)[:self.room]))
        self.room -= written
        return written


def single_broker_image(partitions: int = 2, configs: dict | None = None,
                        replicas: list[int] | None = None) -> ClusterState:
    state = ClusterState()
    for node in sorted({1, *(replicas or [1])}):
        state.apply_register_broker(node, "127.0.0.1", 19090 + node, f"incarnation-{node}")
    state.apply_create_topic("t", "topic-id", [list(replicas or [1])] * partitions,
                             configs or {})
    return state


def replica_manager(tmp_path, image: ClusterState) -> tuple[ReplicaManager, list[str]]:
    stops: list[str] = []
    config = config_module.build({"node.id": 1, "log.dirs": str(tmp_path)})
    rm = ReplicaManager(config, on_fatal=stops.append)
    rm.apply_image(image)
    return rm, stops


def batch(*values: bytes) -> bytearray:
    return bytearray(build_batch([(None, v, 1_000, []) for v in values]))


def produce(rm: ReplicaManager, index: int, *values: bytes):
    return rm.append_one("t", index, batch(*values), 1, MAX_BATCH, origin=AppendOrigin.CLIENT)


def reopened(tmp_path, index: int) -> list[bytes]:
    """The values in t-``index`` after a restart (recovery from the files)."""
    directory = tmp_path / f"t-{index}"
    log = PartitionLog.open(directory, LogConfig())
    try:
        return [r[2] for r in read_records(log.read(0, 1 << 30))]
    finally:
        log.close()


def test_enospc_on_append_fails_that_partition_then_takes_the_directory_offline(
        tmp_path, monkeypatch):
    rm, stops = replica_manager(tmp_path, single_broker_image())
    acked = [produce(rm, 0, b"a", b"b"), produce(rm, 1, b"c")]
    assert [s.error for s in acked] == [ErrorCode.NONE, ErrorCode.NONE]
    segment_path = rm.partitions[("t", 0)].log.segments[-1].log_path
    size_before = os.path.getsize(segment_path)

    monkeypatch.setattr(storage.segment, "os", FullDisk(room=20))   # a partial write, then full
    failed = produce(rm, 0, b"never acknowledged")
    monkeypatch.undo()

    assert failed.error == STORAGE_ERROR and failed.base_offset == -1
    assert os.path.getsize(segment_path) == size_before, "the partial write was cut back"
    assert rm.log_dir_failure is not None
    assert len(stops) == 1 and str(tmp_path) in stops[0] and "No space left" in stops[0]
    for partition in rm.partitions.values():
        assert partition.offline and not partition.is_leader
    assert produce(rm, 1, b"healthy disk, offline directory").error == STORAGE_ERROR
    fetched = rm.read_partitions([FetchPartitionStatus(("t", 1), rm.partitions[("t", 1)], 0,
                                                       MAX_BATCH, -1)], -1, MAX_BATCH)
    assert fetched[0].error == STORAGE_ERROR and fetched[0].records == b""
    with pytest.raises(PartitionError) as listed:
        rm.partitions[("t", 0)].offset_for_timestamp(-1)
    assert listed.value.code == STORAGE_ERROR

    asyncio.run(rm.shutdown())
    assert not (tmp_path / "t-0" / ".clean-shutdown").exists(), "next start must recover"
    assert reopened(tmp_path, 0) == [b"a", b"b"]
    assert reopened(tmp_path, 1) == [b"c"]


def test_offline_partitions_ignore_later_images(tmp_path, monkeypatch):
    rm, _ = replica_manager(tmp_path, single_broker_image())
    monkeypatch.setattr(storage.segment, "os", FullDisk())
    assert produce(rm, 0, b"x").error == STORAGE_ERROR
    monkeypatch.undo()
    image = single_broker_image()
    image.apply_create_topic("u", "other-id", [[1]], {})
    rm.apply_image(image)   # a new epoch or a new topic: no leadership, no new log
    assert all(p.offline and p.leader_id == -1 for p in rm.partitions.values())
    assert ("u", 0) not in rm.partitions and not (tmp_path / "u-0").exists()
    asyncio.run(rm.shutdown())


def test_a_failed_roll_is_not_acknowledged_and_the_log_recovers(tmp_path, monkeypatch):
    rm, stops = replica_manager(tmp_path, single_broker_image(1, {"segment.bytes": "300"}))
    values = [b"%03d" % i * 20 for i in range(3)]
    for value in values:
        assert produce(rm, 0, value).error == ErrorCode.NONE
    log = rm.partitions[("t", 0)].log
    segments_before = len(log.segments)

    monkeypatch.setattr(storage.index, "os", FullDisk())   # the roll writes the indexes
    failed = produce(rm, 0, b"y" * 200)
    monkeypatch.undo()

    assert failed.error == STORAGE_ERROR
    assert len(log.segments) == segments_before, "no new segment after the failed roll"
    assert stops and rm.partitions[("t", 0)].offline
    asyncio.run(rm.shutdown())
    assert reopened(tmp_path, 0) == values


def test_a_failed_checkpoint_takes_the_directory_offline(tmp_path, monkeypatch):
    rm, stops = replica_manager(tmp_path, single_broker_image(1))
    assert produce(rm, 0, b"acked").error == ErrorCode.NONE
    monkeypatch.setattr(storage.checkpoint, "os", FullDisk())
    # written in a worker thread; the failure is reported back on the loop
    asyncio.run(rm._checkpoint_once())
    monkeypatch.undo()
    assert rm.partitions[("t", 0)].offline and stops
    asyncio.run(rm._checkpoint_once())       # offline: nothing is written, nothing raised
    asyncio.run(rm.shutdown())
    assert reopened(tmp_path, 0) == [b"acked"]


def test_a_failed_follower_append_takes_the_directory_offline(tmp_path, monkeypatch):
    async def main():
        rm, stops = replica_manager(tmp_path, single_broker_image(1, replicas=[2, 1]))
        partition = rm.partitions[("t", 0)]
        assert partition.leader_id == 2 and ("t", 0) in rm.fetchers.fetchers[2].partitions
        fetched = bytearray(build_batch([(None, b"from the leader", 1_000, [])]))
        assign_offset_and_epoch(fetched, 0, 0, 0)
        monkeypatch.setattr(storage.segment, "os", FullDisk())
        with pytest.raises(StorageIOError):
            partition.append_as_follower(bytes(fetched), 1)
        monkeypatch.undo()
        assert partition.offline and partition.leader_id == -1 and stops
        assert all(("t", 0) not in f.partitions for f in rm.fetchers.fetchers.values()), \
            "still following an offline partition"
        assert partition.log_end_offset == 0
        await rm.shutdown()

    asyncio.run(main())


# -- the client connection --------------------------------------------------------------------

class Transport:
    """Just enough of an asyncio transport for a Connection."""

    def __init__(self):
        self.written = bytearray()
        self.closed = False

    def get_extra_info(self, name):
        return ("127.0.0.1", 40000) if name == "peername" else None

    def write(self, data):
        self.written += data

    def writelines(self, buffers):
        for data in buffers:
            self.written += data

    def close(self):
        self.closed = True

    def is_closing(self):
        return self.closed

    def pause_reading(self):
        pass

    def resume_reading(self):
        pass


class StubBroker:
    """What the connection and the Produce handler use: the stub is its own ApiContext
    and the connection's ConnectionContext."""

    def __init__(self, rm: ReplicaManager):
        self.config = rm.config
        self.replica_manager = rm
        self.connections = set()
        self.api_context = self
        self.authorizer = ALLOW_ALL
        self.image = ClusterState()  # ApiVersions reads the finalized features of it
        self.limits = ConnectionLimits(rm.config, "")
        self.request_stats = DISCARD_REQUESTS


def frames(data: bytearray) -> list[bytes]:
    result, position = [], 0
    while position < len(data):
        (size,) = struct.unpack_from(">i", data, position)
        result.append(bytes(data[position + 4:position + 4 + size]))
        position += 4 + size
    return result


async def exchange(connection: Connection, transport: Transport, request, correlation_id: int):
    request.with_header(correlation_id=correlation_id, client_id="unit")
    already = len(frames(transport.written))
    connection.data_received(bytes(request.encode(header=True, framed=True)))
    for _ in range(1000):
        answers = frames(transport.written)
        if len(answers) > already or transport.closed:
            break
        await asyncio.sleep(0.001)
    assert not transport.closed, "the connection was closed"
    answer = frames(transport.written)[already]
    return request.header.get_response_class().decode(answer, version=request.API_VERSION,
                                                      header=True)


@pytest.mark.parametrize("acks", [1, -1])
def test_a_two_partition_produce_answers_both_and_keeps_the_connection(tmp_path, monkeypatch,
                                                                      acks):
    """The first partition's batch fits, the second's does not: the response has both
    partitions, the failed one with KAFKA_STORAGE_ERROR, and the connection serves on.
    With acks=1 the first is acknowledged (the leader wrote it); with acks=all it is not,
    because its directory is offline before its high watermark can be checked (Kafka
    answers the same)."""
    async def main():
        rm, _ = replica_manager(tmp_path, single_broker_image())
        transport = Transport()
        connection = Connection(StubBroker(rm))
        connection.connection_made(transport)
        small, large = build_batch([(None, b"fits", 1_000, [])]), \
            build_batch([(None, b"z" * 4000, 1_000, [])])
        data = ProduceRequest.TopicProduceData
        request = ProduceRequest[9](transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[
            data(name="t", partition_data=[data.PartitionProduceData(index=1, records=small),
                                           data.PartitionProduceData(index=0, records=large)])])
        monkeypatch.setattr(storage.segment, "os", FullDisk(room=len(small) + 100))
        response = await exchange(connection, transport, request, 1)
        monkeypatch.undo()
        answers = {p.index: p for t in response.responses for p in t.partition_responses}
        assert sorted(answers) == [0, 1]
        assert (answers[1].error_code, answers[1].base_offset) == \
            ((0, 0) if acks == 1 else (STORAGE_ERROR, -1))
        assert (answers[0].error_code, answers[0].base_offset) == (STORAGE_ERROR, -1)
        versions = await exchange(connection, transport, ApiVersionsRequest[0](), 2)
        assert versions.error_code == 0
        connection.connection_lost(None)
        await rm.shutdown()

    asyncio.run(main())
    assert reopened(tmp_path, 1) == [b"fits"]
    assert reopened(tmp_path, 0) == []

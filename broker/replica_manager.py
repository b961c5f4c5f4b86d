"""The partitions this broker hosts, and the produce/fetch paths through them.

Handlers translate messages into calls here; they never touch files.  This module
owns the purgatories and fires their triggers: an append may move the high watermark
(single-replica ISR), which completes waiting acks=all produces and consumer fetches.
"""
from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
from dataclasses import dataclass

from protocol.errors import ErrorCode, RecordError
from protocol.records import validate_produce_records
from storage.config import LogConfig
from storage.log import PartitionLog

from .config import BrokerConfig
from .delayed import (DelayedFetch, DelayedProduce, FetchPartitionStatus,
                      ProducePartitionStatus)
from .local_metadata import LocalMetadata, TopicRecord
from .partition import Partition, PartitionError, PartitionSettings
from .purgatory import Purgatory

log = logging.getLogger(__name__)

Key = tuple[str, int]


@dataclass
class FetchedPartition:
    """What a fetch answers for one partition."""

    error: ErrorCode
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes = b""


class ReplicaManager:
    """Hosts partitions for this broker. Event-loop only."""

    def __init__(self, config: BrokerConfig, metadata: LocalMetadata):
        self.config = config
        self.metadata = metadata
        self.node_id = config.node_id
        self.log_dir = config["log.dirs"]
        self.partitions: dict[Key, Partition] = {}
        self.produce_purgatory = Purgatory("produce")
        self.fetch_purgatory = Purgatory("fetch")
        self._tasks: set[asyncio.Task] = set()

    # -- lifecycle ---------------------------------------------------------------

    def startup(self) -> None:
        """Open (and recover) every partition of every known topic and lead it."""
        for topic in self.metadata.topics.values():
            self._host_topic(topic)
        log.info("[ReplicaManager broker=%d] hosting %d partitions", self.node_id,
                 len(self.partitions))

    def start_maintenance(self) -> None:
        """Background loops: retention, checkpoints. Each exits on cancellation."""
        for coro in (self._retention_loop(), self._checkpoint_loop()):
            task = asyncio.get_running_loop().create_task(coro)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def shutdown(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.produce_purgatory.shutdown()
        self.fetch_purgatory.shutdown()
        for partition in self.partitions.values():
            partition.log.close()
        log.info("[ReplicaManager broker=%d] closed %d partition logs", self.node_id,
                 len(self.partitions))

    async def _retention_loop(self) -> None:
        """Reacts to: the retention interval. Deletes expired segments. Exits on cancel."""
        interval_s = self.config["log.retention.check.interval.ms"] / 1000.0
        while True:
            await asyncio.sleep(interval_s)
            now_ms = int(time.time() * 1000)
            for partition in list(self.partitions.values()):
                deleted = partition.log.enforce_retention(now_ms)
                if deleted:
                    self.fetch_purgatory.check_and_complete(partition.key)

    async def _checkpoint_loop(self) -> None:
        """Reacts to: the checkpoint interval. Writes HW/recovery point/log start."""
        interval_s = self.config["log.flush.offset.checkpoint.interval.ms"] / 1000.0
        while True:
            await asyncio.sleep(interval_s)
            for partition in list(self.partitions.values()):
                partition.log.checkpoint()

    # -- topics ------------------------------------------------------------------

    def log_config(self, topic: TopicRecord) -> LogConfig:
        props = self.config.topic_defaults()
        props.update(topic.configs)
        return LogConfig.from_properties(props)

    def partition_settings(self, topic: TopicRecord) -> PartitionSettings:
        props = self.config.topic_defaults()
        props.update(topic.configs)
        return PartitionSettings(
            min_insync_replicas=int(props["min.insync.replicas"]),
            unclean_leader_election=props["unclean.leader.election.enable"] == "true")

    def _host_topic(self, topic: TopicRecord) -> None:
        log_config = self.log_config(topic)
        settings = self.partition_settings(topic)
        for index in range(topic.partitions):
            directory = os.path.join(self.log_dir, f"{topic.name}-{index}")
            partition_log = PartitionLog.open(directory, log_config)
            partition = Partition(topic.name, index, topic.topic_id, partition_log,
                                  self.node_id, settings)
            latest = partition_log.epoch_cache.latest_epoch
            partition.make_leader(leader_epoch=max(0, latest or 0), partition_epoch=0,
                                  replicas=[self.node_id], isr=[self.node_id])
            self.partitions[partition.key] = partition

    def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> TopicRecord:
        topic = self.metadata.create_topic(name, partitions, configs)
        self._host_topic(topic)
        return topic

    def delete_topic(self, name: str) -> None:
        topic = self.metadata.delete_topic(name)
        for index in range(topic.partitions):
            partition = self.partitions.pop((name, index), None)
            if partition is None:
                continue
            self.produce_purgatory.complete_all(partition.key)
            self.fetch_purgatory.complete_all(partition.key)
            partition.log.close()
            shutil.rmtree(partition.log.directory, ignore_errors=True)

    def validate_topic_configs(self, configs: dict[str, str]) -> None:
        """Raise ValueError naming the bad key if ``configs`` would not parse."""
        props = self.config.topic_defaults()
        props.update(configs)
        LogConfig.from_properties(props)
        min_isr = int(props["min.insync.replicas"])
        if min_isr < 1:
            raise ValueError("min.insync.replicas must be at least 1")

    def get_partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    # -- produce -----------------------------------------------------------------

    def append_one(self, topic: str, index: int, records, acks: int,
                   max_batch_bytes: int) -> ProducePartitionStatus:
        """Validate and append one partition's batch. Never raises for bad input."""
        partition = self.get_partition(topic, index)
        if partition is None:
            return ProducePartitionStatus(None, -1, -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        try:
            if records is not None and len(records) > max_batch_bytes:
                raise RecordError(ErrorCode.MESSAGE_TOO_LARGE,
                                  f"batch of {len(records)} bytes exceeds message.max.bytes")
            batch, header = validate_produce_records(records)
            info, duplicate = partition.append_as_leader(batch, header, acks)
        except RecordError as exc:
            log.warning("[Partition %s-%d] refused produce: %s", topic, index, exc)
            return ProducePartitionStatus(partition, -1, -1, exc.code)
        except PartitionError as exc:
            return ProducePartitionStatus(partition, -1, -1, exc.code)
        if not duplicate:
            self.on_append(partition)
        return ProducePartitionStatus(partition, info.last_offset + 1, info.first_offset,
                                      log_start_offset=partition.log_start_offset)

    def on_append(self, partition: Partition) -> None:
        """Trigger after an append: waiting fetches (and, if the HW moved, produces)."""
        self.fetch_purgatory.check_and_complete(partition.key)
        self.produce_purgatory.check_and_complete(partition.key)

    async def wait_for_acks(self, statuses: dict[Key, ProducePartitionStatus],
                            timeout_ms: int) -> dict[Key, ProducePartitionStatus]:
        """acks=all: answer once every appended partition's HW passed its batch."""
        future = asyncio.get_running_loop().create_future()

        def respond(result):
            if not future.done():
                future.set_result(result)

        operation = DelayedProduce(timeout_ms, statuses, respond)
        self.produce_purgatory.try_complete_else_watch(operation, list(statuses))
        try:
            return await future
        finally:
            operation.force_complete()  # connection lost: stop watching

    # -- fetch -------------------------------------------------------------------

    def read_partitions(self, statuses: list[FetchPartitionStatus], replica_id: int,
                        max_bytes: int) -> list[FetchedPartition]:
        """Read every requested partition, respecting the response's ``max_bytes``.

        The first partition with data may exceed the limits (KIP-74), so a consumer
        always makes progress past a batch larger than its fetch sizes.
        """
        results = []
        remaining = max_bytes
        for status in statuses:
            partition = status.partition
            if partition is None:
                results.append(FetchedPartition(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            limit = max(0, min(status.max_bytes, remaining))
            try:
                read = partition.read(status.fetch_offset, limit, replica_id=replica_id,
                                      current_leader_epoch=status.current_leader_epoch,
                                      min_one_batch=remaining == max_bytes)
            except PartitionError as exc:
                hw = partition.high_watermark if exc.code == ErrorCode.OFFSET_OUT_OF_RANGE else -1
                results.append(FetchedPartition(exc.code, hw, partition.log_start_offset))
                continue
            remaining -= len(read.records)
            results.append(FetchedPartition(ErrorCode.NONE, read.high_watermark,
                                            read.log_start_offset, read.records))
        return results

    async def fetch(self, statuses: list[FetchPartitionStatus], replica_id: int,
                    max_wait_ms: int, min_bytes: int, max_bytes: int) -> list[FetchedPartition]:
        """Answer at once if there is enough (or an error); otherwise long-poll."""
        results = self.read_partitions(statuses, replica_id, max_bytes)
        available = sum(len(r.records) for r in results)
        has_error = any(r.error != ErrorCode.NONE for r in results)
        if max_wait_ms <= 0 or available >= max(1, min_bytes) or has_error or not statuses:
            return results
        future = asyncio.get_running_loop().create_future()

        def respond():
            if not future.done():
                future.set_result(None)

        operation = DelayedFetch(max_wait_ms, min_bytes, replica_id, statuses, respond)
        self.fetch_purgatory.try_complete_else_watch(
            operation, [s.partition.key for s in statuses if s.partition is not None])
        try:
            await future
        finally:
            operation.force_complete()
        return self.read_partitions(statuses, replica_id, max_bytes)

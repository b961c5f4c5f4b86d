"""The partitions this broker hosts, and the produce/fetch paths through them.

Handlers translate messages into calls here; they never touch files.  This module
owns the purgatories and fires their triggers: an append may move the high watermark
(single-replica ISR), which completes waiting acks=all produces and consumer fetches.
Its collaborators, one job each: ``image_applier.py`` turns metadata images into
hosted partitions (opening, leading, following, removing), ``alter_partition.py``
proposes ISR changes to the controller, ``topic_configs.py`` reads topic configs.

Storage faults (Kafka's KIP-112): a disk failure on any partition (an OSError on
append, roll, index or checkpoint write, flush, read) is answered with
KAFKA_STORAGE_ERROR for that partition only, and takes the log directory offline:
every partition in it stops leading and following, closes its log without writing,
and answers KAFKA_STORAGE_ERROR from then on.  ``log.dirs`` is one directory, so the
broker then cannot serve anything: the stop callback (the Broker's) ends the process,
whose controlled shutdown fences it so the controller moves its leaderships away.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from protocol.errors import ErrorCode, RecordError
from protocol.primitives import Buffer
from protocol.record_filter import RecordFilterError, decode_records
from storage.errors import InvalidAppend, StorageError
from storage.file_records import FileRecords
from storage.producer_state import AbortedTxn

from ..config import RACK_AWARE_SELECTOR, BrokerConfig
from ..controller.metadata_client import MetadataClient
from ..controller.state import ClusterState
from ..metrics.stats import ReplicaStats
from ..purgatory import Purgatory
from ..tasks import StopCallback, TaskSupervisor
from ..topics import is_internal
from . import acks
from .acks import DelayedProduce, ProducePartitionStatus
from .alter_partition import AlterPartitionManager
from .delayed import DelayedFetch, FetchPartitionStatus
from .fetcher import ReplicaFetcherManager
from .image_applier import ImageApplier, Position
from .log_cleaner import LogCleanerManager
from .log_io import LogWriter
from .origin import AppendOrigin
from .partition import READ_UNCOMMITTED, Partition, PartitionError
from .replica_selector import preferred_read_replica
from .throttle import ReplicationThrottle
from .throttle_lists import ThrottleLists
from .topic_configs import TopicConfigs

if TYPE_CHECKING:
    from ..controller.store import LocalStore, RaftStore

log = logging.getLogger(__name__)

Key = tuple[str, int]


@dataclass
class FetchedPartition:
    """What a fetch answers for one partition."""

    error: ErrorCode
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes | memoryview | FileRecords = b""  # FileRecords: read with zero_copy
    last_stable_offset: int = -1
    aborted_transactions: tuple[AbortedTxn, ...] = ()
    preferred_read_replica: int = -1
    throttled: bool = False  # held back by leader.replication.throttled.rate (throttle.py)


class ReplicaManager:
    """Hosts partitions for this broker. Event-loop only.

    Invariant: once ``log_dir_failure`` is set (never unset) every hosted partition is
    offline and no partition log is opened or written again in this process.
    ``on_fatal`` (the Broker's stop callback) is called when that happens.

    ``metadata`` is the broker's MetadataClient (a bare store is wrapped in one): ISR
    proposals reach Raft through it alone.  None (tests driving a ReplicaManager alone)
    proposes no ISR change.
    """

    def __init__(self, config: BrokerConfig,
                 metadata: MetadataClient | LocalStore | RaftStore | None = None,
                 on_fatal: StopCallback | None = None) -> None:
        self.config = config
        self.metadata: MetadataClient | None = (
            MetadataClient.wrap(metadata) if metadata is not None else None)
        self.image = ClusterState()
        self.node_id = config.node_id
        self.log_dir = config["log.dirs"]
        self.partitions: dict[Key, Partition] = {}
        self.produce_purgatory = Purgatory("produce")
        self.fetch_purgatory = Purgatory("fetch")
        self.delete_records_purgatory = Purgatory("delete-records")  # delete_records.py
        self.stats = ReplicaStats()  # bytes per topic, ISR changes (broker/metrics)
        self._prefix = f"[ReplicaManager broker={self.node_id}]"
        self.tasks = TaskSupervisor(self._prefix, on_fatal)
        self.log_dir_failure: str | None = None
        self.inter_broker_listener = config.listener_plan.inter_broker_name
        self.fetchers = ReplicaFetcherManager(self.node_id, config, self._broker_address)
        # Consumers long-polling this broker as a follower wake when it makes progress.
        self.fetchers.on_progress = self.fetch_purgatory.check_and_complete
        self.rack_aware_reads = config["replica.selector.class"] == RACK_AWARE_SELECTOR
        self.throttle = ReplicationThrottle(config["leader.replication.throttled.rate"])
        self.fetchers.throttle = ReplicationThrottle(config["follower.replication.throttled.rate"])
        self.throttle_lists = ThrottleLists(self.node_id, lambda: self.image)
        self.leader_throttles = self.throttle_lists.leader_throttles
        self.follower_throttles = self.throttle_lists.follower_throttles
        self.fetchers.follower_throttles = self.follower_throttles
        self._leadership_listeners: list[Callable[[Partition], object]] = []
        self.lag_time_max_ms = config["replica.lag.time.max.ms"]
        self.topic_configs = TopicConfigs(config)
        self.cleaner = LogCleanerManager(self, config)
        # This process's registration id (BrokerLifecycle's), set by the Broker; None
        # (tests driving a ReplicaManager alone) applies every image.
        self.incarnation: str | None = None
        self.applier = ImageApplier(self)
        self.log_writer = LogWriter(f"log-io-{self.node_id}")  # checkpoint pass, close
        self._closing = False
        self.alter_partition = AlterPartitionManager(
            self.node_id, self.lag_time_max_ms, self.tasks, self.stats,
            lambda: self.metadata, lambda: self.image, self.on_isr_changed)
        if self.metadata is not None:  # a CreateTopics answer waits for our logs too
            self.metadata.propagation.follow_local(self.applier)

    # -- lifecycle ---------------------------------------------------------------

    def start_maintenance(self) -> None:
        """Background loops (TaskSupervisor.periodic: an exception is logged and the loop
        goes on; all exit at ``shutdown``):

        * log-retention, every ``log.retention.check.interval.ms``: deletes expired
          segments;
        * offset-checkpoint, every ``log.flush.offset.checkpoint.interval.ms``: flushes
          when due and writes HW / recovery point / log start offset (the writes in
          worker threads, log_io.py);
        * isr-shrink, every half ``replica.lag.time.max.ms``: proposes removing lagging
          ISR followers;
        * log-cleaner (``LogCleanerManager``): compacts the logs of compacted topics.
        A disk failure in the first two takes the log directory offline (see the module).
        """
        config = self.config
        self.tasks.periodic("log-retention", config["log.retention.check.interval.ms"] / 1000.0,
                            self._enforce_retention_once)
        self.tasks.periodic("offset-checkpoint",
                            config["log.flush.offset.checkpoint.interval.ms"] / 1000.0,
                            self._checkpoint_once)
        self.tasks.periodic("isr-shrink", max(0.05, self.lag_time_max_ms / 2000.0),
                            self._shrink_isr_once)
        self.cleaner.start()

    async def shutdown(self) -> None:
        """Stop fetching and the periodic tasks, answer what waits, then close every
        log in the worker threads (log_io.py); images arriving meanwhile are not acted
        on, so nothing on the loop touches a log being closed."""
        self._closing = True
        await self.fetchers.shutdown()
        await self.tasks.shutdown()
        self.cleaner.shutdown()
        self.produce_purgatory.shutdown()
        self.fetch_purgatory.shutdown()
        self.delete_records_purgatory.shutdown()
        # offline ones: only the files are closed
        for partition, exc in await self.log_writer.close(list(self.partitions.values())):
            log.error("%s closing %s failed: %s", self._prefix, partition.name, exc)
        log.info("%s closed %d partition logs%s", self._prefix, len(self.partitions),
                 f" (log directory offline: {self.log_dir_failure})"
                 if self.log_dir_failure else "")

    def _online_partitions(self) -> list[Partition]:
        return [p for p in self.partitions.values() if not p.offline]

    def _enforce_retention_once(self) -> None:
        now_ms = int(time.time() * 1000)
        for partition in self._online_partitions():
            if partition.enforce_retention(now_ms):
                self.fetch_purgatory.check_and_complete(partition.key)

    async def _checkpoint_once(self) -> None:
        """Flush the logs due a flush (on the loop), then write the offsets checkpoints
        that moved in the worker threads; a failure takes the log directory offline."""
        moved = [p for p in self._online_partitions() if p.flush_if_due()]
        for partition, exc in await self.log_writer.checkpoint(moved):
            self.on_storage_failure(partition, "writing the offsets checkpoint", exc)

    # -- storage failures (KIP-112) ------------------------------------------------------

    def on_storage_failure(self, partition: Partition, what: str, exc: Exception) -> None:
        """Partition listener: a disk failure on ``partition`` takes the directory offline."""
        self.take_log_dir_offline(f"{what} on {partition.name}: {exc}")

    def take_log_dir_offline(self, reason: str) -> None:
        """Every partition stops leading and following and closes its log unwritten; waiting
        produces and fetches are answered; then the stop callback ends the broker (its only
        log directory is gone).  Idempotent."""
        if self.log_dir_failure is not None:
            return
        self.log_dir_failure = reason
        log.error("%s log directory %s failed (%s): taking it offline; its %d partitions "
                  "answer KAFKA_STORAGE_ERROR from now on", self._prefix, self.log_dir, reason,
                  len(self.partitions))
        for partition in list(self.partitions.values()):
            partition.take_offline()
            self.fetchers.unfollow(partition.key)
            self.leadership_changed(partition)  # answers waiting produces and fetches
        self.tasks.fatal(f"log directory {self.log_dir} is offline ({reason}); it is this "
                         f"broker's only log directory")

    # -- metadata image -> partitions ----------------------------------------------

    def apply_image(self, image: ClusterState) -> None:
        """Listener: make the hosted partitions match the metadata image (the
        ImageApplier acts on what changed; new logs open in slices after this returns
        when there are many).

        Images that do not show this process registered (its incarnation) are not acted
        on: the Raft journal replayed at start-up publishes every historical image, and
        right after a restart within the session timeout the current image still names
        the previous process as leader in its epoch.  Leading in those epochs would serve
        a stale high watermark and, if the crash cut the log's unflushed tail, overwrite
        committed records that followers then truncate.  Registration fences the old
        incarnation first (new epochs), so the first image acted on is safe.
        """
        self.image = image
        if self._closing:
            return
        if self.incarnation is not None:
            me = image.brokers.get(self.node_id)
            if me is None or me.incarnation != self.incarnation:
                return
        self.applier.apply(image)

    @property
    def applied_position(self) -> Position:
        """The position of the newest image this broker has fully acted on: every log
        it names open, every leadership taken (what heartbeats report)."""
        return self.applier.applied_position

    def add_leadership_listener(self, listener: Callable[[Partition], object]) -> None:
        """``listener(partition)`` after this broker became leader or follower of a
        partition, or stopped hosting it (then ``partition.leader_id`` is -1). Used by
        coordinators that keep state per partition (consumer groups)."""
        self._leadership_listeners.append(listener)

    def leadership_changed(self, partition: Partition) -> None:
        """Waiting produces and fetches on this partition must hear about it now."""
        self.produce_purgatory.check_and_complete(partition.key)
        self.fetch_purgatory.complete_all(partition.key)
        self.delete_records_purgatory.check_and_complete(partition.key)
        for listener in self._leadership_listeners:
            try:
                listener(partition)
            except Exception:
                log.exception("leadership listener failed for %s", partition.name)

    def _broker_address(self, broker_id: int) -> tuple[str, int] | None:
        """The broker's endpoint on the inter-broker listener (what fetchers dial)."""
        info = self.image.brokers.get(broker_id)
        return info.endpoint(self.inter_broker_listener) if info is not None else None

    # -- leader: follower fetches and the ISR (Kafka's AlterPartition rule) -------------

    def record_follower_fetches(self, statuses: list[FetchPartitionStatus],
                                replica_id: int) -> None:
        """A follower fetched: its LEO is the fetch offset. Propose it for the ISR when it
        has caught up (the partition decides, ``maybe_expand_isr``); advance the HW (which
        may complete acks=all produces)."""
        now_ms = int(time.time() * 1000)
        for status in statuses:
            partition = status.partition
            if partition is None or not partition.is_leader:
                continue
            if not partition.update_follower_fetch(replica_id, status.fetch_offset, now_ms,
                                                   status.log_start_offset):
                continue
            self.delete_records_purgatory.check_and_complete(partition.key)
            self.alter_partition.maybe_expand(partition, replica_id)
            if partition.maybe_increment_high_watermark():
                self.on_high_watermark_moved(partition)

    def on_high_watermark_moved(self, partition: Partition) -> None:
        self.produce_purgatory.check_and_complete(partition.key)
        self.fetch_purgatory.check_and_complete(partition.key)

    def _shrink_isr_once(self) -> None:
        """Propose removing ISR followers that have not caught up within the lag time."""
        self.alter_partition.shrink_once(self.partitions.values())

    def log_end_offsets(self) -> dict[str, int]:
        """"topic:partition" → LEO of every online replica (the controller's hints)."""
        return {f"{t}:{p}": partition.log_end_offset
                for (t, p), partition in self.partitions.items() if not partition.offline}

    def validate_topic_configs(self, configs: dict[str, str]) -> None:
        """Raise ValueError naming the bad key if ``configs`` would not parse."""
        self.topic_configs.validate(configs)

    def get_partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def missing_partition_error(self, topic: str, index: int) -> ErrorCode:
        """Kafka's answer for a partition not hosted here: known elsewhere or unknown."""
        info = self.image.topics.get(topic)
        if info is not None and index in info.partitions:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    # -- produce -----------------------------------------------------------------

    def append_one(self, topic: str, index: int, records: Buffer | None, acks: int,
                   max_batch_bytes: int, *, origin: AppendOrigin) -> ProducePartitionStatus:
        """Validate and append one partition's batch as leader. Never raises for bad input.

        ``origin`` says who writes: a CLIENT append to an internal topic is refused with
        INVALID_TOPIC_EXCEPTION (Kafka's rule: only the coordinator writes there), before
        anything else is looked at.  REPLICATION is not a leader append (ValueError).
        """
        if origin is AppendOrigin.REPLICATION:
            raise ValueError("follower appends go through Partition.append_as_follower")
        if origin is AppendOrigin.CLIENT and is_internal(topic):
            log.warning("%s refused a client produce to internal topic %s-%d",
                        self._prefix, topic, index)
            return ProducePartitionStatus(None, -1, -1, ErrorCode.INVALID_TOPIC_EXCEPTION)
        partition = self.get_partition(topic, index)
        if partition is None:
            return ProducePartitionStatus(None, -1, -1, self.missing_partition_error(topic, index))
        try:
            # The topic's max.message.bytes, timestamp and compression rules.
            batch, header = partition.settings.append.prepare(records, max_batch_bytes,
                                                              topic, index)
            if partition.log.config.compact:
                _check_keys(batch)
            high_watermark = partition.high_watermark
            # A coordinator's transactional write (TxnOffsetCommit) has no sequences.
            info, duplicate = partition.append_as_leader(
                batch, header, acks, check_sequence=origin is not AppendOrigin.COORDINATOR)
        except RecordError as exc:
            log.warning("[Partition %s-%d] refused produce: %s", topic, index, exc)
            return ProducePartitionStatus(partition, -1, -1, exc.code)
        except PartitionError as exc:
            return ProducePartitionStatus(partition, -1, -1, exc.code)
        except StorageError as exc:  # never acknowledged; disk failures were reported
            log.warning("[Partition %s-%d] append failed: %s", topic, index, exc)
            return ProducePartitionStatus(partition, -1, -1, storage_error_code(exc))
        if not duplicate:
            self.stats.appended(topic, len(batch), info.last_offset - info.first_offset + 1)
            self.on_append(partition, partition.high_watermark > high_watermark)
        return ProducePartitionStatus(partition, info.last_offset + 1, info.first_offset,
                                      log_start_offset=partition.log_start_offset)

    def append_txn_marker(self, topic: str, index: int, producer_id: int, producer_epoch: int,
                          coordinator_epoch: int, commit: bool) -> ProducePartitionStatus:
        """Append a transaction's COMMIT/ABORT marker as leader (WriteTxnMarkers); wait
        for it with ``wait_for_acks``.  Never raises for bad input: the status carries
        Kafka's error (see ``Partition.append_marker_as_leader``)."""
        partition = self.get_partition(topic, index)
        if partition is None:
            return ProducePartitionStatus(None, -1, -1, self.missing_partition_error(topic, index))
        high_watermark = partition.high_watermark
        try:
            info = partition.append_marker_as_leader(producer_id, producer_epoch,
                                                     coordinator_epoch, commit)
        except PartitionError as exc:
            return ProducePartitionStatus(partition, -1, -1, exc.code)
        except StorageError as exc:
            log.warning("[Partition %s-%d] marker append failed: %s", topic, index, exc)
            return ProducePartitionStatus(partition, -1, -1, storage_error_code(exc))
        self.on_append(partition, partition.high_watermark > high_watermark)
        return ProducePartitionStatus(partition, info.last_offset + 1, info.first_offset,
                                      log_start_offset=partition.log_start_offset)

    def on_append(self, partition: Partition, high_watermark_moved: bool) -> None:
        """Trigger after an append: waiting fetches, and produces only if the HW moved
        (a leader alone in its ISR): an append cannot complete an acks=all produce
        otherwise, and re-checking every waiting produce at each append made their cost
        grow with the backlog."""
        self.fetch_purgatory.check_and_complete(partition.key)
        if high_watermark_moved:
            self.produce_purgatory.check_and_complete(partition.key)

    def on_isr_changed(self, partition: Partition) -> None:
        """Trigger after an ISR change: the HW may move, acks=all may complete or fail."""
        partition.maybe_increment_high_watermark()
        self.produce_purgatory.check_and_complete(partition.key)
        self.fetch_purgatory.check_and_complete(partition.key)

    async def wait_for_acks(self, statuses: dict[Key, ProducePartitionStatus],
                            timeout_ms: int) -> dict[Key, ProducePartitionStatus]:
        """acks=all: answer once every appended partition's HW passed its batch (the
        rules, and what each partition answers, are acks.py's)."""
        future: asyncio.Future[dict[Key, ProducePartitionStatus]] = \
            asyncio.get_running_loop().create_future()

        def respond(result: dict[Key, ProducePartitionStatus]) -> None:
            if not future.done():
                future.set_result(result)

        operation = self.watch_acks(statuses, timeout_ms, respond)
        try:
            return await future
        finally:
            operation.withdraw()  # cancelled (connection lost): stop watching

    def watch_acks(self, statuses: dict[Key, ProducePartitionStatus], timeout_ms: int,
                   respond: Callable[[dict[Key, ProducePartitionStatus]], None]
                   ) -> DelayedProduce:
        """``wait_for_acks`` in callback form: ``respond(statuses)`` once every
        partition is answered (maybe before this returns).  The returned operation's
        ``withdraw`` stops the wait without a response (a lost connection).  The rules
        are acks.py's."""
        return acks.watch(self.produce_purgatory, statuses, timeout_ms, respond)

    # -- fetch -------------------------------------------------------------------

    def read_partitions(self, statuses: list[FetchPartitionStatus], replica_id: int,
                        max_bytes: int, isolation_level: int = READ_UNCOMMITTED,
                        zero_copy: bool = False) -> list[FetchedPartition]:
        """Read every requested partition, respecting the response's ``max_bytes``.

        The first partition with data may exceed the limits (KIP-74), so a consumer
        always makes progress past a batch larger than its fetch sizes.  ``zero_copy``
        (the Fetch handler, whose response the connection writes in the same event-loop
        pass or refuses): records of at least 16 KiB come back as ``storage.FileRecords``
        for ``os.sendfile``, unless ``socket.sendfile.enable`` is false; ``len()`` is
        all this method and the handler need of them.
        """
        results = []
        remaining = max_bytes
        zero_copy = zero_copy and self.config["socket.sendfile.enable"]
        for status in statuses:
            partition = status.partition
            if partition is None:
                results.append(FetchedPartition(self.missing_partition_error(*status.key)))
                continue
            limit = max(0, min(status.max_bytes, remaining))
            throttled = self.throttle.enabled and replica_id >= 0 \
                and self.leader_throttles(partition, replica_id)
            if throttled:
                limit = min(limit, self.throttle.allowance())
                if limit == 0:
                    results.append(FetchedPartition(
                        ErrorCode.NONE, partition.high_watermark, partition.log_start_offset,
                        throttled=True))
                    continue
            try:
                read = partition.read(status.fetch_offset, limit, replica_id=replica_id,
                                      current_leader_epoch=status.current_leader_epoch,
                                      min_one_batch=remaining == max_bytes,
                                      isolation_level=isolation_level,
                                      follower_read=status.follower_read,
                                      zero_copy=zero_copy)
            except PartitionError as exc:
                hw = partition.high_watermark if exc.code == ErrorCode.OFFSET_OUT_OF_RANGE else -1
                results.append(FetchedPartition(exc.code, hw, partition.log_start_offset))
                continue
            except StorageError as exc:  # disk failures were reported by the partition
                log.warning("[Partition %s] read failed: %s", partition.name, exc)
                results.append(FetchedPartition(storage_error_code(exc)))
                continue
            remaining -= len(read.records)
            if throttled:
                self.throttle.record(len(read.records))
            results.append(FetchedPartition(ErrorCode.NONE, read.high_watermark,
                                            read.log_start_offset, read.records,
                                            read.last_stable_offset, read.aborted_transactions))
        return results

    def fetch(self, statuses: list[FetchPartitionStatus], replica_id: int,
              max_wait_ms: int, min_bytes: int, max_bytes: int,
              then: Callable[[Callable[[], list[FetchedPartition]]], None],
              isolation_level: int = READ_UNCOMMITTED, client_rack: str | None = None,
              zero_copy: bool = False) -> Callable[[], None] | None:
        """Answer at once if there is enough (or an error); otherwise long-poll.

        Callback form, as the Fetch handler runs without a task: ``then(read)`` is
        called once, when the fetch is answerable, where ``read()`` gives the results
        (the caller calls it where its errors are handled, and in the event-loop pass
        that writes them, which a zero-copy answer needs).  A long poll's ``then`` runs
        in an event-loop pass after the trigger's, so the appends of one pass reach a
        waiting follower in one answer, and an append never runs a reader's read.
        Returns None when ``then`` has run, else a function withdrawing the wait (the
        connection is gone).  ``zero_copy``: see ``read_partitions``.
        ``isolation_level`` READ_COMMITTED: consumers read below the last stable offset.
        ``client_rack``: None for fetches before v11 (only the leader answers); else the
        consumer's rack ("" when unset): a follower may answer (KIP-392), and a leader
        with the rack-aware selector sends the consumer to a replica of its rack."""
        if replica_id >= 0:
            self.record_follower_fetches(statuses, replica_id)
            isolation_level = READ_UNCOMMITTED
        elif client_rack is not None:
            for status in statuses:
                status.follower_read = status.partition is not None \
                    and not status.partition.is_leader

        def read() -> list[FetchedPartition]:
            return self.read_partitions(statuses, replica_id, max_bytes, isolation_level,
                                        zero_copy)

        redirected = self._redirect_to_preferred(statuses, client_rack) \
            if client_rack and self.rack_aware_reads and replica_id < 0 else {}
        if redirected:  # answered at once (Kafka's rule), the others read as they are
            others = [s for i, s in enumerate(statuses) if i not in redirected]

            def read_redirected() -> list[FetchedPartition]:
                rest = iter(self.read_partitions(others, replica_id, max_bytes,
                                                 isolation_level, zero_copy))
                return [redirected[i] if i in redirected else next(rest)
                        for i in range(len(statuses))]
            then(read_redirected)
            return None
        if max_wait_ms > 0 and min_bytes <= 1 and statuses and not self.throttle.enabled:
            # With min_bytes <= 1 (every follower, most consumers) "answer now" is exactly
            # what DelayedFetch.try_complete decides: a partition with any visible record
            # past its fetch offset, or one the reader must hear about (gone, not led here
            # any more, another epoch, the offset out of range; an offline directory is
            # never led).  A read finds nothing else to send, so the partitions are read
            # once, when the operation completed, instead of read empty, parked and read
            # again, which a caught-up follower did at every fetch.  Throttled
            # replication takes the path below (a throttled partition reads as empty
            # with data behind it).
            return self._when_answerable(statuses, replica_id, max_wait_ms, 1,
                                         isolation_level, lambda: then(read))
        results = read()
        available = sum(len(r.records) for r in results)
        if not available and any(r.throttled for r in results):
            # Nothing to send but throttled data: wait for the bucket, not in a spin.
            timer = asyncio.get_running_loop().call_later(
                min(self.throttle.delay_s(), max(0, max_wait_ms) / 1000), then, read)
            return timer.cancel
        has_error = any(r.error != ErrorCode.NONE for r in results)
        if max_wait_ms <= 0 or available >= max(1, min_bytes) or has_error or not statuses:
            then(lambda: results)
            return None
        return self._when_answerable(statuses, replica_id, max_wait_ms, min_bytes,
                                     isolation_level, lambda: then(read))

    def _when_answerable(self, statuses: list[FetchPartitionStatus], replica_id: int,
                         max_wait_ms: int, min_bytes: int, isolation_level: int,
                         answer: Callable[[], None]) -> Callable[[], None]:
        """``answer()`` in the event-loop pass after a DelayedFetch over ``statuses``
        completes: at once if it can, else when watched in the fetch purgatory a trigger
        or its timer completes it.  Returns the withdrawal for a lost connection."""
        loop = asyncio.get_running_loop()
        operation = DelayedFetch(max_wait_ms, min_bytes, replica_id, statuses,
                                 lambda: loop.call_soon(answer), isolation_level)
        self.fetch_purgatory.try_complete_else_watch(
            operation, [s.partition.key for s in statuses if s.partition is not None])
        return operation.withdraw

    def _redirect_to_preferred(self, statuses: list[FetchPartitionStatus], client_rack: str
                               ) -> dict[int, FetchedPartition]:
        """{status index: the answer sending the consumer to another replica} for the
        partitions this broker leads whose preferred read replica is elsewhere."""
        brokers = self.image.brokers

        def rack_of(broker_id: int) -> str | None:
            info = brokers.get(broker_id)
            return info.rack if info is not None else None

        def is_live(broker_id: int) -> bool:
            info = brokers.get(broker_id)
            return info is not None and not info.fenced

        redirected = {}
        for i, status in enumerate(statuses):
            partition = status.partition
            if partition is None or not partition.is_leader or partition.offline:
                continue
            preferred = preferred_read_replica(partition, status.fetch_offset, client_rack,
                                               rack_of, is_live)
            if preferred is not None:
                redirected[i] = FetchedPartition(
                    ErrorCode.NONE, partition.high_watermark, partition.log_start_offset, b"",
                    partition.log.last_stable_offset, preferred_read_replica=preferred)
        return redirected


def _check_keys(batch: bytearray) -> None:
    """Kafka's rule for compacted topics: every record has a key (INVALID_RECORD
    otherwise).  Decodes the batch: a cost only compacted topics pay."""
    try:
        records = decode_records(batch)
    except RecordFilterError as exc:
        raise RecordError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from exc
    if any(record.key is None for record in records):
        raise RecordError(ErrorCode.INVALID_RECORD,
                          "Compacted topic cannot accept message without key")


def storage_error_code(exc: StorageError) -> ErrorCode:
    """The Kafka code for a StorageError that reached a request (storage/errors.py):
    a refused batch is CORRUPT_MESSAGE, anything else KAFKA_STORAGE_ERROR."""
    if isinstance(exc, InvalidAppend):
        return ErrorCode.CORRUPT_MESSAGE
    return ErrorCode.KAFKA_STORAGE_ERROR

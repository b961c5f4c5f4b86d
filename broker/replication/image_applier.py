"""Metadata image -> hosted partitions: what this broker leads, follows, opens, removes.

Kafka's brokers act on a MetadataDelta: only the partitions and topics a change
touched.  An image published by the Raft consumer names them (``image.delta``,
``controller/image.py``) relative to the image before it; when this broker acted on
exactly that image the delta is all it looks at.  Any other image (the first, an
installed snapshot, the lone broker's store, an image after one that was skipped)
is compared whole with what each hosted partition last took, which costs a tuple
comparison a partition, not a log's or a config's work.

New logs are opened in the listener call when they are few (at most ``OPEN_SLICE``:
a topic of a few partitions is open when the image's listeners return); more are
opened by a task, a slice at a time (at most ``OPEN_SLICE`` logs and ``OPEN_SLICE_S``),
yielding to the event loop between slices, so a broker creating 10,000 partitions (a
few milliseconds each, mostly fsync) keeps answering requests, fetching and
heartbeating meanwhile.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from storage.errors import CorruptLog, StorageError, StorageIOError
from storage.log import PartitionLog

from ..controller.state import ClusterState, PartitionInfo, TopicInfo
from .partition import Partition

if TYPE_CHECKING:  # the applier's host; only its type is named here
    from .replica_manager import ReplicaManager

log = logging.getLogger(__name__)

Key = tuple[str, int]
Position = tuple[int, ...]  # ClusterState.position(); () before the first image

# Logs opened in one event-loop pass at most, and (by the task) for at most this long:
# one log takes 5-15 ms to open on a busy machine.
OPEN_SLICE = 50
OPEN_SLICE_S = 0.05


ImageState = tuple[int, int, int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]


def _image_state(info: PartitionInfo) -> ImageState:
    """What a hosted partition takes from the image (compared to skip unchanged ones)."""
    return (info.leader, info.leader_epoch, info.partition_epoch, tuple(info.replicas),
            tuple(info.isr), tuple(info.adding_replicas))


class ImageApplier:
    """Makes the replica manager's partitions match the newest image.  Event-loop only.

    Invariants:
    * a partition leads or follows only once its log is open; a partition waiting for
      its log (``pending``) is not hosted yet (requests for it answer
      NOT_LEADER_OR_FOLLOWER, as for a replica elsewhere);
    * every hosted partition holds the state of the newest image acted on: one opened
      later takes the image current when it opens, not the one that asked for it;
    * ``applied_position`` is the position of the newest image whose every change was
      acted on (no log pending); it never goes back, and the listeners added with
      ``add_caught_up_listener`` hear each time it moves;
    * once the log directory is offline nothing is opened again.

    Its host is the ReplicaManager: this class alone adds to and removes from
    ``host.partitions``, and uses its triggers (``leadership_changed``,
    ``on_isr_changed``, the purgatories), fetchers, stats, topic configs, tasks and
    log-directory failure handling (``on_storage_failure``, ``take_log_dir_offline``).
    """

    def __init__(self, host: ReplicaManager) -> None:
        self.host = host
        self.node_id = host.node_id
        self.image: ClusterState | None = None  # the newest image acted on
        self.pending: dict[Key, None] = {}  # keys waiting for their log, in image order
        self.applied_position: Position = ()
        self._taken: dict[Key, ImageState] = {}  # what each hosted partition took
        self._topic_configs: dict[str, dict[str, str]] = {}  # each topic's partitions follow
        self._opener: asyncio.Task[None] | None = None
        self._caught_up_listeners: list[Callable[[Position], None]] = []
        self._prefix = f"[ImageApplier broker={self.node_id}]"

    def add_caught_up_listener(self, listener: Callable[[Position], None]) -> None:
        """``listener(position)`` whenever ``applied_position`` moves."""
        self._caught_up_listeners.append(listener)

    def apply(self, image: ClusterState) -> None:
        """Act on ``image``: remove, re-configure and move the partitions it changed,
        open the first slice of new logs and leave the rest to the opener task."""
        previous, self.image = self.image, image
        keys, topics = self._changes(previous, image)
        if topics:
            self._apply_topics(topics, image)
        for key in keys:
            self._apply_partition(key, image)
        if len(self.pending) <= OPEN_SLICE and not self._opening() \
                or not self._start_opener():  # without a running loop: all at once
            while self.pending:
                self._open_slice(OPEN_SLICE, None)
        if not self.pending:
            self._caught_up()

    # -- what changed ---------------------------------------------------------------

    def _changes(self, previous: ClusterState | None, image: ClusterState
                 ) -> tuple[list[Key], set[str]]:
        """(partition keys, topic names) to look at: the delta when it follows
        ``previous``, else every partition and topic of the image, hosted or pending."""
        delta = image.delta
        if previous is not None and delta is not None and delta.base == previous.position():
            return sorted(delta.partitions), set(delta.topics)
        keys = [(topic.name, index) for topic, index, info in image.partitions()
                if self.node_id in info.replicas]
        wanted = set(keys)
        keys += [key for key in self.host.partitions if key not in wanted]
        keys += [key for key in self.pending if key not in wanted]
        topics = set(image.topics) | {name for name, _ in self.host.partitions}
        return keys, topics

    def _apply_topics(self, names: set[str], image: ClusterState) -> None:
        """Hosted partitions of a topic deleted or re-created are removed; those of a
        topic whose configs changed follow them."""
        hosted: dict[str, list[Partition]] = {}
        for (name, _), partition in self.host.partitions.items():
            if name in names:
                hosted.setdefault(name, []).append(partition)
        for name in names:
            topic = image.topics.get(name)
            partitions = hosted.get(name, [])
            if topic is None:
                self._topic_configs.pop(name, None)
            for partition in partitions:
                if topic is None or partition.topic_id != topic.topic_id:
                    self._remove(partition.key)
            if topic is not None and self._topic_configs.get(name) != topic.configs:
                self._follow_configs(topic, [p for p in partitions if not p.offline
                                             and p.key in self.host.partitions])

    def _follow_configs(self, topic: TopicInfo, partitions: list[Partition]) -> None:
        configs = self.host.topic_configs
        settings = configs.partition_settings(topic.configs)
        log_config = configs.log_config(topic.configs)
        for partition in partitions:
            if settings != partition.settings:
                partition.settings = settings
            if log_config != partition.log.config:
                partition.log.update_config(log_config)
        self._topic_configs[topic.name] = dict(topic.configs)

    def _apply_partition(self, key: Key, image: ClusterState) -> None:
        topic = image.topics.get(key[0])
        info = topic.partitions.get(key[1]) if topic is not None else None
        partition = self.host.partitions.get(key)
        if info is None or self.node_id not in info.replicas:
            self.pending.pop(key, None)
            if partition is not None:
                self._remove(key)
            return
        if partition is None:
            if self.host.log_dir_failure is None:
                self.pending[key] = None  # takes the newest image's state once open
            return
        if not partition.offline:
            self._take_state(partition, info)

    # -- partition state ------------------------------------------------------------

    def _take_state(self, partition: Partition, info: PartitionInfo) -> None:
        """Become leader or follower when the image's leader or leader epoch differs
        from ours, or take the new ISR when only that changed.  Skipped when the image
        says what this partition last took from one."""
        state = _image_state(info)
        if self._taken.get(partition.key) == state:
            return
        try:
            self._change_role(partition, info)
        except StorageError as exc:  # disk failures were reported: the dir is offline
            log.error("%s %s: could not take its new state: %s", self._prefix,
                      partition.name, exc)
            return
        self._taken[partition.key] = state

    def _change_role(self, partition: Partition, info: PartitionInfo) -> None:
        host = self.host
        partition.update_replicas(info.replicas, info.adding_replicas)
        if info.leader == self.node_id:
            if not partition.is_leader or partition.leader_epoch != info.leader_epoch:
                host.fetchers.unfollow(partition.key)
                partition.make_leader(info.leader_epoch, info.partition_epoch,
                                      info.replicas, info.isr)
                host.leadership_changed(partition)
            elif partition.partition_epoch != info.partition_epoch:
                host.stats.isr_changed(partition.isr, info.isr)
                partition.update_isr_from_metadata(info.isr, info.partition_epoch)
                host.on_isr_changed(partition)
        elif partition.leader_id != info.leader or partition.leader_epoch != info.leader_epoch \
                or partition.is_leader:
            partition.make_follower(info.leader, info.leader_epoch, info.partition_epoch,
                                    info.replicas, info.isr)
            host.leadership_changed(partition)
            host.fetchers.follow(partition)
        else:
            partition.update_isr_from_metadata(info.isr, info.partition_epoch)

    def _remove(self, key: Key) -> None:
        """Stop hosting ``key``: waiters hear of it, the log is deleted (kept when the
        directory is offline)."""
        self._taken.pop(key, None)
        host = self.host
        partition = host.partitions.pop(key)
        partition.leader_id = -1
        host.leadership_changed(partition)
        host.fetchers.unfollow(key)
        host.produce_purgatory.complete_all(key)
        host.fetch_purgatory.complete_all(key)
        if partition.offline:  # nothing is written (or removed) in an offline directory
            log.info("%s forgot offline partition %s-%d; its files stay", self._prefix, *key)
            return
        partition.log.delete()
        log.info("%s removed partition %s-%d and its log", self._prefix, *key)

    def _open(self, topic: TopicInfo, index: int) -> Partition | None:
        """Open (and recover) the partition's log and host it; None when the disk
        failed doing so (the log directory is then offline)."""
        host = self.host
        directory = os.path.join(host.log_dir, f"{topic.name}-{index}")
        partition_log = None
        try:
            partition_log = PartitionLog.open(directory,
                                              host.topic_configs.log_config(topic.configs))
            partition = Partition(topic.name, index, topic.topic_id, partition_log, self.node_id,
                                  host.topic_configs.partition_settings(topic.configs),
                                  storage_failure_listener=host.on_storage_failure)
        except (StorageIOError, CorruptLog) as exc:
            if partition_log is not None:
                partition_log.close_handlers()
            host.take_log_dir_offline(f"opening {topic.name}-{index}: {exc}")
            return None
        host.partitions[partition.key] = partition
        return partition

    # -- opening logs ---------------------------------------------------------------

    def _opening(self) -> bool:
        return self._opener is not None and not self._opener.done()

    def _start_opener(self) -> bool:
        """Make sure the opener task runs; False when there is no running loop."""
        if self._opening():
            return True
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False
        self._opener = self.host.tasks.spawn("open-logs", self._open_in_slices())
        return True

    async def _open_in_slices(self) -> None:
        """Loop: opens the pending logs a slice per event-loop pass; exits when none is
        left (then the applied position moves) or on cancellation (shutdown)."""
        total = len(self.pending)
        started = time.monotonic()
        log.info("%s opening %d partition logs in slices of %d", self._prefix, total,
                 OPEN_SLICE)
        while self.pending:
            self._open_slice(OPEN_SLICE, OPEN_SLICE_S)
            await asyncio.sleep(0)
        log.info("%s opened the pending partition logs in %.1f s", self._prefix,
                 time.monotonic() - started)
        self._caught_up()

    def _open_slice(self, count: int, budget_s: float | None) -> None:
        """Open up to ``count`` pending logs (for at most ``budget_s`` when given; at
        least one), each taking the newest image's state once open."""
        started = time.monotonic()
        opened = 0
        image = self.image
        if image is None:  # nothing is pending before the first image
            return
        while self.pending and opened < count:
            if budget_s is not None and opened and time.monotonic() - started >= budget_s:
                return
            key = next(iter(self.pending))
            del self.pending[key]
            if self.host.log_dir_failure is not None:
                self.pending.clear()  # no log is opened in an offline directory
                return
            topic = image.topics.get(key[0])
            info = topic.partitions.get(key[1]) if topic is not None else None
            if topic is None or info is None or self.node_id not in info.replicas \
                    or key in self.host.partitions:
                continue
            opened += 1
            partition = self._open(topic, key[1])
            if partition is not None:
                if topic.name not in self._topic_configs:
                    self._topic_configs[topic.name] = dict(topic.configs)
                self._take_state(partition, info)

    def _caught_up(self) -> None:
        if self.image is None:
            return
        position = self.image.position()
        if position <= self.applied_position:
            return
        self.applied_position = position
        for listener in list(self._caught_up_listeners):
            try:
                listener(position)
            except Exception:
                log.exception("%s caught-up listener failed", self._prefix)

"""Groups and committed offsets of the ``__consumer_offsets`` partitions this broker leads.

Kafka's ``GroupMetadataManager``: the cache of groups, their loading when this broker
becomes leader of an offsets partition, their unloading when it stops, and every write
to the topic (group metadata after a rebalance, offset commits, tombstones).

Ownership of the offsets partitions, their loading and the appends are the coordinator
core's (``broker/coordinator/runtime.py``): this manager is its shard, the loader of
what a record means and the cache loading publishes.  A new leader epoch without a
follower spell keeps the tenure.  Requests for groups of a LOADING partition get
COORDINATOR_LOAD_IN_PROGRESS, of a partition not owned NOT_COORDINATOR.

Writes have acks=all semantics: the batch is appended as leader, then the caller waits
until the high watermark passes it (``offsets.commit.timeout.ms``).  In-memory state
changes only after the write is acknowledged, and only while the ownership that issued
it is still current.  The topic is compacted (``cleanup.policy=compact``, so retention
never deletes its segments): the log cleaner keeps the latest record per group and per
committed partition, and removes tombstones (deleted groups, expired offsets) after
``delete.retention.ms``; a loading coordinator reads only what survives, through the
gaps compaction leaves.

Transactional offsets (KIP-98): a TxnOffsetCommit is written as a transactional batch
of the committing producer.  From its append until that producer's COMMIT or ABORT
marker on the same partition, its offsets are *pending* in the group
(``GroupMetadata.pending_txn_offsets``): not visible to OffsetFetch, and
UNSTABLE_OFFSET_COMMIT to a require_stable one.  ``complete_txn_offsets`` settles them
once the marker is acknowledged; the loader settles them as it meets the marker, and
keeps those whose marker is not in the log yet pending.  A tombstone of a partition
(expiry, group deletion) drops that partition's pending offsets too, live and when
loading alike, so the in-memory state is always what a reload of the log would give.
Loading reads to the log end offset as it is at each step, not as it was at the
start: markers are appended while a partition loads, and the last read and the
publishing of the groups happen without an ``await`` between them, so every marker is
either read by the loader or completed on the loaded groups.

KIP-848 consumer groups (``group.protocol=consumer``) are written with Kafka's record
types 3, 5-8 (records.py) through ``write_now``: unlike the classic group, their
memory changes first and the records are appended in the same step, with no ``await``
between, so the log holds every change in the order memory made it; the member's
heartbeat is answered once they are acknowledged.  A failed write is answered with its
error and memory keeps the change: the records were appended and either reach the
replicas or are truncated by a leadership change — which unloads the group, so the next
coordinator loads what the log kept (an append refused outright means leadership is
already gone).
The loader rebuilds such a group from the latest record of each key; a tombstone of
its type-3 record deletes it.

Event-loop only.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from protocol.control import COMMIT, marker_of
from protocol.errors import ErrorCode
from protocol.records import iter_headers

from ..coordinator import CoordinatorRuntime, InternalTopic, Ownership, PendingWrite
from ..coordinator.runtime import APPEND_ERRORS, drop_partition
from . import records, share_records
from .consumer_group import ConsumerGroupState, ConsumerMember, MemberState, copy_assignment
from .placement import OFFSETS_TOPIC
from .state import CommittedOffset, GroupMetadata, GroupState, MemberMetadata

log = logging.getLogger(__name__)

def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


# Kafka's mapping of append errors for group metadata (GroupMetadataManager.storeGroup).
_GROUP_STORE_ERRORS = {**APPEND_ERRORS,
                       ErrorCode.INVALID_FETCH_SIZE: ErrorCode.UNKNOWN_SERVER_ERROR}
# ... and for offset commits (GroupMetadataManager.storeOffsets).
_OFFSET_STORE_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}


def offsets_topic_configs(replication_factor: int = 0) -> dict[str, str]:
    """Topic configs of ``__consumer_offsets`` (see the module docstring), whatever its
    replication factor."""
    return {"cleanup.policy": "compact", "retention.ms": "-1", "retention.bytes": "-1",
            "segment.bytes": str(100 * 1024 * 1024)}


def offsets_topic(config) -> InternalTopic:
    """``__consumer_offsets`` as the settings describe it."""
    return InternalTopic(OFFSETS_TOPIC, config["offsets.topic.num.partitions"],
                         config["offsets.topic.replication.factor"], offsets_topic_configs)


class GroupMetadataManager:
    """The group cache and the offsets-topic I/O behind the coordinator; the coordinator
    core's shard for ``__consumer_offsets`` (``runtime``).

    ``on_loaded(group)`` runs for each group after its partition finished loading;
    ``on_unloaded(group)`` for each group of a partition this broker stopped leading
    (the coordinator answers its waiting members and cancels its timers there).
    """

    def __init__(self, config, replica_manager, image: Callable[[], object],
                 on_loaded: Callable[[GroupMetadata], None],
                 on_unloaded: Callable[[GroupMetadata], None],
                 clock_ms: Callable[[], int] = _wall_clock_ms):
        self.node_id = config.node_id
        self.commit_timeout_ms = config["offsets.commit.timeout.ms"]
        self.retention_ms = config["offsets.retention.minutes"] * 60_000
        self.retention_check_interval_ms = config["offsets.retention.check.interval.ms"]
        self.clock_ms = clock_ms
        self._on_loaded = on_loaded
        self._on_unloaded = on_unloaded
        self.groups: dict[str, GroupMetadata] = {}
        self._prefix = f"[GroupMetadataManager broker={self.node_id}]"
        self.topic = offsets_topic(config)
        self.runtime = CoordinatorRuntime(self.topic, config, replica_manager, image, self,
                                          _Loader, lambda: self.clock_ms(), self._prefix)

    # -- placement and status ----------------------------------------------------------------

    def num_partitions(self) -> int:
        """Partitions of the offsets topic: the existing topic's count wins over the config
        (the mapping of groups to partitions must never change under a running cluster)."""
        return self.runtime.num_partitions()

    def partition_for(self, group_id: str) -> int:
        return self.runtime.partition_for(group_id)

    def status_for(self, group_id: str) -> ErrorCode:
        """NONE if this broker coordinates ``group_id`` now; else the error to answer."""
        return self.runtime.status_for(group_id)

    def validate_group(self, group_id: str | None, allow_empty: bool = False) -> ErrorCode:
        """Kafka's validateGroupStatus: a usable group id whose partition we lead, loaded."""
        if group_id is None or (not group_id and not allow_empty):
            return ErrorCode.INVALID_GROUP_ID
        return self.status_for(group_id)

    # -- the cache -----------------------------------------------------------------------------

    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    def typed_group(self, group_id: str, part: str,
                    kind: str) -> tuple[ErrorCode, str | None, GroupMetadata | None]:
        """The live group ``group_id`` whose ``part`` ("consumer", "share") is set, as
        ``(NONE, None, group)``; else the error and message ConsumerGroupDescribe and
        ShareGroupDescribe answer (GROUP_ID_NOT_FOUND for a missing, dead or other-kind
        group, or the validation error)."""
        error = self.validate_group(group_id)
        if error != ErrorCode.NONE:
            return error, None, None
        group = self.get_group(group_id)
        if group is None or group.is_state(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None
        if getattr(group, part) is None:
            return (ErrorCode.GROUP_ID_NOT_FOUND,
                    f"Group {group_id} is not a {kind} group.", None)
        return ErrorCode.NONE, None, group

    def is_current(self, group: GroupMetadata) -> bool:
        return self.groups.get(group.group_id) is group

    def add_group(self, group: GroupMetadata) -> GroupMetadata:
        return self.groups.setdefault(group.group_id, group)

    def remove_group(self, group: GroupMetadata) -> None:
        if self.is_current(group):
            del self.groups[group.group_id]

    def loaded_groups(self) -> list[GroupMetadata]:
        return list(self.groups.values())

    # -- the runtime's shard: load / unload ------------------------------------------------------

    def on_loaded(self, ownership: Ownership, loader: _Loader) -> str | None:
        groups = loader.groups()
        self.groups.update((group.group_id, group) for group in groups)
        for group in groups:
            self._on_loaded(group)
        offsets = sum(len(g.offsets) for g in groups)
        return f"{len(groups)} groups and {offsets} offsets" if groups else None

    def on_unloaded(self, index: int) -> str | None:
        unloaded = drop_partition(self.groups, index)
        for group in unloaded:
            self._on_unloaded(group)
        return f"{len(unloaded)} groups" if unloaded else None

    # -- writes ------------------------------------------------------------------------------

    def _append_now(self, index: int, entries: list[tuple[bytes, bytes | None]],
                    producer_id: int = -1, producer_epoch: int = -1
                    ) -> PendingWrite | ErrorCode:
        """The runtime's append as leader, now (no ``await``); see ``runtime.append_now``."""
        return self.runtime.append_now(index, entries, producer_id, producer_epoch)

    async def _wait_for_acks(self, index: int,
                             pending: PendingWrite | ErrorCode) -> tuple[ErrorCode, int]:
        """(error, base offset) once the high watermark passed the write (acks=all).
        NOT_LEADER_OR_FOLLOWER when the tenure that wrote is gone by then."""
        if isinstance(pending, ErrorCode):
            return pending, -1
        error = await self.runtime.wait_for_acks(pending, self.commit_timeout_ms)
        if not self.runtime.holds(pending.ownership):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
        return error, pending.base_offset

    async def _append(self, index: int,
                      entries: list[tuple[bytes, bytes | None]]) -> tuple[ErrorCode, int]:
        """``_append_now`` then ``_wait_for_acks``; the append precedes the first ``await``."""
        return await self._wait_for_acks(index, self._append_now(index, entries))

    async def store_group(self, group: GroupMetadata, assignment: dict[str, bytes]) -> ErrorCode:
        """Write the group's generation with ``assignment`` (member id → bytes)."""
        value = records.GroupValue(
            protocol_type=group.protocol_type or "", generation_id=group.generation_id,
            protocol_name=group.protocol_name, leader_id=group.leader_id,
            state_timestamp_ms=group.state_timestamp_ms,
            members=tuple(records.MemberValue(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                m.rebalance_timeout_ms, m.session_timeout_ms,
                m.metadata_for(group.protocol_name), assignment.get(m.member_id, b""))
                for m in group.members.values()))
        entry = (records.group_key(group.group_id), records.group_value(value))
        error, _ = await self._append(group.partition, [entry])
        if error != ErrorCode.NONE:
            log.warning("%s storing group %s generation %d failed: %s", self._prefix,
                        group.group_id, group.generation_id, error.name)
        return _GROUP_STORE_ERRORS.get(error, error)

    async def store_offsets(self, group: GroupMetadata,
                            offsets: dict[tuple[str, int], records.OffsetValue]) -> ErrorCode:
        """Write commits; once acknowledged, put them in ``group.offsets``."""
        keys = list(offsets)
        entries = [(records.offset_key(group.group_id, t, p), records.offset_value(offsets[(t, p)]))
                   for t, p in keys]
        group.pending_offset_commits.update(keys)
        try:
            error, base_offset = await self._append(group.partition, entries)
        finally:
            group.pending_offset_commits.subtract(keys)
            for key in keys:
                if group.pending_offset_commits[key] <= 0:
                    del group.pending_offset_commits[key]
        if error == ErrorCode.NONE:
            for i, key in enumerate(keys):
                value = offsets[key]
                group.maybe_put_offset(key, CommittedOffset(
                    value.offset, value.leader_epoch, value.metadata, value.commit_timestamp_ms,
                    value.expire_timestamp_ms, record_offset=base_offset + i))
        return _OFFSET_STORE_ERRORS.get(error, error)

    async def store_txn_offsets(self, group: GroupMetadata, producer_id: int,
                                producer_epoch: int,
                                offsets: dict[tuple[str, int], records.OffsetValue]) -> ErrorCode:
        """Write a transaction's commits as ``producer_id``'s transactional batch.

        They are pending in the group from the append on (as Kafka's
        prepareTxnOffsetCommit): a marker acknowledged meanwhile settles them, as the
        loader would, for the batch precedes it in the log.  A failed write forgets
        them.  A stale ``producer_epoch`` is refused by the log (INVALID_PRODUCER_EPOCH,
        answered as it is, as Kafka's coordinator does)."""
        keys = list(offsets)
        entries = [(records.offset_key(group.group_id, t, p), records.offset_value(offsets[(t, p)]))
                   for t, p in keys]
        pending = self._append_now(group.partition, entries, producer_id, producer_epoch)
        written: dict[tuple[str, int], CommittedOffset] = {}
        if not isinstance(pending, ErrorCode):
            base_offset = pending.base_offset
            for i, key in enumerate(keys):
                value = offsets[key]
                written[key] = CommittedOffset(
                    value.offset, value.leader_epoch, value.metadata, value.commit_timestamp_ms,
                    value.expire_timestamp_ms, record_offset=base_offset + i)
            group.prepare_txn_offsets(producer_id, written)
        error, _ = await self._wait_for_acks(group.partition, pending)
        if error != ErrorCode.NONE:
            for key, committed in written.items():
                group.fail_pending_txn_offset(producer_id, key, committed)
            log.info("%s transactional commit of group %s by producer %d failed: %s",
                     self._prefix, group.group_id, producer_id, error.name)
        return _OFFSET_STORE_ERRORS.get(error, error)

    def complete_txn_offsets(self, producer_id: int, offsets_partitions: set[int],
                             commit: bool) -> None:
        """``producer_id``'s COMMIT (``commit``) or ABORT marker is acknowledged on these
        offsets partitions: settle its pending offsets in their groups (Kafka's
        handleTxnCompletion).  A partition still loading is skipped: its loader reads
        the marker from the log."""
        loaded = {index for index in offsets_partitions
                  if self.runtime.loaded_tenure(index) is not None}
        for group in self.groups.values():
            if group.partition in loaded and producer_id in group.pending_txn_offsets:
                count = group.complete_pending_txn_offsets(producer_id, commit)
                log.debug("%s %s %d transactional offsets of group %s from producer %d",
                          self._prefix, "committed" if commit else "aborted", count,
                          group.group_id, producer_id)

    def delete_group(self, group: GroupMetadata) -> Awaitable[ErrorCode]:
        """Drop the group from the cache and append tombstones for it and its offsets, now
        (no ``await``: nothing can slip in between); await the result for the acks.
        Partitions with only a transaction's pending offset get a tombstone too (a later
        marker must not revive them on a reload).  The caller made it Dead already."""
        keys = dict.fromkeys(group.offsets)
        for pending in group.pending_txn_offsets.values():
            keys.update(dict.fromkeys(pending))
        entries = [(records.offset_key(group.group_id, t, p), None) for t, p in keys]
        entries += group_tombstones(group)
        self.remove_group(group)
        pending = self._append_now(group.partition, entries)

        async def acknowledged() -> ErrorCode:
            error, _ = await self._wait_for_acks(group.partition, pending)
            return _GROUP_STORE_ERRORS.get(error, error)
        return acknowledged()

    def write_now(self, group: GroupMetadata,
                  entries: list[tuple[bytes, bytes | None]]) -> Awaitable[ErrorCode]:
        """Append ``entries`` (a KIP-848 group's records) to the group's partition now
        (no ``await``: the log gets them in the order memory changed); await the result
        for the acks, with Kafka's group-store error mapping."""
        pending = self._append_now(group.partition, entries)

        async def acknowledged() -> ErrorCode:
            error, _ = await self._wait_for_acks(group.partition, pending)
            if error != ErrorCode.NONE:
                log.warning("%s writing %d records of group %s failed: %s", self._prefix,
                            len(entries), group.group_id, error.name)
            return _GROUP_STORE_ERRORS.get(error, error)
        return acknowledged()

    # -- offset expiry -------------------------------------------------------------------------

    async def expire_once(self) -> int:
        """One expiry pass over every loaded group; returns how many offsets expired.

        Memory changes and appends happen together per partition without an ``await``
        between them, so a commit that arrives later is appended after the tombstone."""
        now_ms = self.clock_ms()
        expired_total = 0
        by_partition: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for group in list(self.groups.values()):
            if self.runtime.loaded_tenure(group.partition) is None:
                continue
            entries = by_partition.setdefault(group.partition, [])
            expired = group.expired_offsets(now_ms, self.retention_ms)
            group.remove_offsets(expired)
            entries += [(records.offset_key(group.group_id, *key), None) for key in expired]
            expired_total += len(expired)
            if group.is_empty() and not group.has_offsets() and group.share is None:
                group.transition_to(GroupState.DEAD, now_ms)
                self.remove_group(group)
                entries += group_tombstones(group)
                log.info("%s group %s is empty and has no offsets left: removed",
                         self._prefix, group.group_id)
        pending = [(p, self._append_now(p, entries)) for p, entries in by_partition.items()
                   if entries]
        if expired_total:
            log.info("%s removed %d expired offsets", self._prefix, expired_total)
        results = await asyncio.gather(*(self._wait_for_acks(p, w) for p, w in pending))
        for error, _ in results:
            if error != ErrorCode.NONE:
                log.warning("%s writing expiry tombstones failed: %s", self._prefix, error.name)
        return expired_total


class _Loader:
    """Replays one offsets partition's batches into groups (pure; see ``records``).

    Records of plain batches are applied in log order.  Offsets in a producer's
    transactional batch are held per producer until its control batch: COMMIT applies
    each where no later-written record is in place (Kafka's rule), ABORT drops them;
    whatever has no marker yet stays pending in the loaded group.  A plain tombstone of
    a partition drops the transactions' pending offsets of it as well.
    """

    def __init__(self, partition: int):
        self.partition = partition
        self.group_values: dict[str, records.GroupValue] = {}
        self.consumer_groups: dict[str, _ConsumerRecords] = {}
        self.share_groups: dict[str, share_records.ShareRecords] = {}
        self.offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        # producer id -> group -> partition -> offset, waiting for the producer's marker
        self.pending: dict[int, dict[str, dict[tuple[str, int], CommittedOffset]]] = {}

    def apply(self, chunk: bytes, position: int) -> int:
        """Apply the batches at or after ``position``; returns the next position: past
        the chunk's last batch, even one compaction left without records."""
        next_position = position
        for header in iter_headers(chunk):
            next_position = max(next_position, header.next_offset)
            if header.last_offset < position:
                continue
            if header.is_control:
                self._apply_marker(header, marker_of(chunk, header))
                continue
            producer_id = header.producer_id if header.is_transactional else None
            batch = chunk[header.position:header.position + header.size]
            for offset, key, value in records.iter_records(batch):
                if offset < position or key is None:
                    continue
                try:
                    self._apply_one(offset, key, value, producer_id)
                except (records.RecordFormatError, UnicodeDecodeError) as exc:
                    log.warning("[GroupMetadataManager] skipping unreadable record at %s-%d "
                                "offset %d: %s", OFFSETS_TOPIC, self.partition, offset, exc)
        return next_position

    def _apply_marker(self, header, marker: tuple[int, int] | None) -> None:
        """Any control batch of a producer ends its pending offsets here, as in Kafka;
        only a COMMIT marker applies them."""
        if marker is None:
            log.warning("[GroupMetadataManager] unreadable control batch at %s-%d offset %d: "
                        "producer %d's pending offsets dropped", OFFSETS_TOPIC, self.partition,
                        header.base_offset, header.producer_id)
        pending = self.pending.pop(header.producer_id, {})
        if marker is None or marker[0] != COMMIT:
            return
        for group_id, offsets in pending.items():
            group_offsets = self.offsets.setdefault(group_id, {})
            for tp, committed in offsets.items():
                current = group_offsets.get(tp)
                if current is None or current.record_offset < committed.record_offset:
                    group_offsets[tp] = committed

    def _apply_one(self, offset: int, key: bytes, value: bytes | None,
                   producer_id: int | None) -> None:
        if share_records.is_share_key(key):
            self._apply_share(share_records.decode_key(key), value)
            return
        decoded = records.decode_key(key)
        if isinstance(decoded, records.ConsumerGroupKey):
            self._apply_consumer(decoded, value)
            return
        if isinstance(decoded, records.GroupKey):
            if value is None:
                self.group_values.pop(decoded.group, None)
            else:
                self.group_values[decoded.group] = records.decode_group_value(value)
            return
        if producer_id is None:
            group_offsets = self.offsets.setdefault(decoded.group, {})
        else:
            group_offsets = self.pending.setdefault(producer_id, {}).setdefault(decoded.group, {})
        tp = (decoded.topic, decoded.partition)
        if value is None:
            group_offsets.pop(tp, None)
            if producer_id is None:
                for pending in self.pending.values():
                    pending.get(decoded.group, {}).pop(tp, None)
            return
        v = records.decode_offset_value(value)
        group_offsets[tp] = CommittedOffset(v.offset, v.leader_epoch, v.metadata,
                                            v.commit_timestamp_ms, v.expire_timestamp_ms,
                                            record_offset=offset)

    def _apply_consumer(self, key: records.ConsumerGroupKey, value: bytes | None) -> None:
        if key.record_type == records.CONSUMER_GROUP_METADATA and value is None:
            self.consumer_groups.pop(key.group, None)  # the group was deleted
            return
        group = self.consumer_groups.setdefault(key.group, _ConsumerRecords())
        if key.record_type == records.CONSUMER_GROUP_METADATA:
            group.epoch = records.decode_epoch_value(value)
        elif key.record_type == records.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
            group.assignment_epoch = 0 if value is None else records.decode_epoch_value(value)
        else:
            decode, table = {
                records.CONSUMER_GROUP_MEMBER_METADATA:
                    (records.decode_consumer_member_value, group.members),
                records.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
                    (records.decode_target_member_value, group.targets),
                records.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT:
                    (records.decode_current_assignment_value, group.current),
            }[key.record_type]
            if value is None:
                table.pop(key.member_id, None)
            else:
                table[key.member_id] = decode(value)

    def _apply_share(self, key: share_records.ShareGroupKey, value: bytes | None) -> None:
        if key.record_type == share_records.SHARE_GROUP_METADATA and value is None:
            self.share_groups.pop(key.group, None)  # the group was deleted
            return
        self.share_groups.setdefault(key.group, share_records.ShareRecords()).apply(
            key.record_type, key.member_id, value)

    def groups(self) -> list[GroupMetadata]:
        pending_by_group: dict[str, dict[int, dict[tuple[str, int], CommittedOffset]]] = {}
        for producer_id, by_group in self.pending.items():
            for group_id, offsets in by_group.items():
                if offsets:
                    pending_by_group.setdefault(group_id, {})[producer_id] = dict(offsets)
        result = []
        consumer_ids = {g for g, c in self.consumer_groups.items() if c.epoch is not None}
        share_ids = {g for g, c in self.share_groups.items() if c.epoch is not None}
        for group_id in sorted(set(self.group_values) | set(pending_by_group) | consumer_ids
                               | share_ids
                               | {g for g, o in self.offsets.items() if o}):
            group = GroupMetadata(group_id, self.partition)
            value = self.group_values.get(group_id)
            if group_id in share_ids:
                self.share_groups[group_id].restore(group)
            elif group_id in consumer_ids:
                self.consumer_groups[group_id].restore(group)
            elif value is not None:
                restore_group(group, value)
            group.offsets = dict(self.offsets.get(group_id, {}))
            group.pending_txn_offsets = pending_by_group.get(group_id, {})
            result.append(group)
        return result


@dataclass
class _ConsumerRecords:
    """What the log says of one KIP-848 group, by record type (the latest of each key)."""

    epoch: int | None = None
    assignment_epoch: int = 0
    members: dict = field(default_factory=dict)   # member id -> ConsumerMemberValue
    targets: dict = field(default_factory=dict)   # member id -> topic id -> partitions
    current: dict = field(default_factory=dict)   # member id -> CurrentAssignmentValue

    def restore(self, group: GroupMetadata) -> None:
        """The loaded group: its members with their epochs and assignments, the target;
        ``subscribed_metadata`` is left for the coordinator to take from its image."""
        state = ConsumerGroupState(group_epoch=self.epoch,
                                   assignment_epoch=self.assignment_epoch)
        for member_id, meta in self.members.items():
            member = ConsumerMember(
                member_id, meta.client_id, meta.client_host, meta.instance_id, meta.rack_id,
                meta.rebalance_timeout_ms, meta.subscribed_topic_names, meta.server_assignor,
                meta.subscribed_topic_regex)
            current = self.current.get(member_id)
            if current is not None:
                member.member_epoch = current.member_epoch
                member.previous_member_epoch = current.previous_member_epoch
                member.state = MemberState(current.state)
                member.assigned = copy_assignment(current.assigned)
                member.pending_revocation = copy_assignment(current.pending_revocation)
            state.members[member_id] = member
            state.target[member_id] = copy_assignment(self.targets.get(member_id, {}))
        group.consumer = state
        group.protocol_type = "consumer"


def group_tombstones(group: GroupMetadata) -> list[tuple[bytes, None]]:
    """The tombstones that delete an empty group's own record(s), offsets aside."""
    if group.share is not None:
        return [(share_records.key(t, group.group_id), None)
                for t in (share_records.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA,
                          share_records.SHARE_GROUP_METADATA)]
    if group.consumer is None:
        return [(records.group_key(group.group_id), None)]
    return [(records.consumer_group_key(t, group.group_id), None)
            for t in (records.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
                      records.CONSUMER_GROUP_METADATA)]


def restore_group(group: GroupMetadata, value: records.GroupValue) -> None:
    """A loaded group: Stable with its stored members, or Empty without any (Kafka's rule)."""
    group.protocol_type = value.protocol_type or None
    group.generation_id = value.generation_id
    group.protocol_name = value.protocol_name
    group.state_timestamp_ms = value.state_timestamp_ms
    for m in value.members:
        member = MemberMetadata(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                m.rebalance_timeout_ms, m.session_timeout_ms,
                                value.protocol_type, [(value.protocol_name or "", m.subscription)],
                                assignment=m.assignment)
        group.add(member)  # keeps the instance id -> member id map of static members
    group.leader_id = value.leader_id if value.leader_id in group.members else \
        next(iter(group.members), None)
    group.state = GroupState.STABLE if group.members else GroupState.EMPTY
    group.subscribed_topics = group._compute_subscribed_topics() if group.members else (
        set() if group.protocol_type == "consumer" else None)

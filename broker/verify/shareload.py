"""The verify share-group workload: share consumers of one group acknowledging every record.

``ShareWorker`` runs ``consumers`` confluent-kafka ``ShareConsumer``s (KIP-932, explicit
acknowledgement) of the group ``verify-share`` on the records workload's topics, each in
its own thread: every record delivered is ACCEPTed and the acknowledgements committed
after each poll.  The group's ``share.auto.offset.reset`` is set to ``earliest`` (a
GROUP config) before the first consumer joins, so every record produced is the
group's to deliver.

Evidence kept, per record (topic, partition, offset): how many times it was delivered
and the delivery counts the broker stamped.  A record is *outstanding* from its delivery
until a commit that carries its acknowledgement succeeds; while a fault is open the
worker keeps the peak number outstanding, the records a fault can make the broker
deliver again (their locks lost with a leader, their acknowledgements lost on the
wire).  ``check_share`` then holds the group to:

- every acknowledged (acks=all) record was delivered to the group and acknowledged by
  the end (``share-missing`` when never delivered): a commit that carried its ACCEPT
  succeeded, or it lies below its partition's share-group start offset
  (DescribeShareGroupOffsets: the group's coordinator answers every partition, asking
  each key's share coordinator; every broker is asked, as the coordinator may have
  moved in a fault, and the highest answer kept), or its
  commit's answer was lost in a fault and the broker never redelivered it through the
  drain (longer than the lock duration, so an acknowledgement the broker did not take
  would have come back): counted as ``unconfirmed_not_redelivered``, as Kafka's client
  too leaves such a commit's outcome open;
- deliveries beyond the first (duplicates) are at most the records outstanding at the
  faults plus those whose commit was refused (``share-duplicates``);
- no record is delivered again after a commit carrying its ACCEPT succeeded: the broker
  answers an acknowledgement only once it is written, so such a redelivery is an
  acknowledgement lost (``share-lost-acknowledgement``).

Threads: the consumers' threads write the evidence under one lock; ``stop()`` then
``finish(timeout_s)`` is the way out, bounded.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import Counter

from .workload import CLOSE_TIMEOUT_S, bounded

logger = logging.getLogger(__name__)

SHARE_GROUP = "verify-share"
POLL_S = 0.5
STARTS_EVERY_S = 5.0

Key = tuple[str, int, int]  # topic, partition, offset


def share_available() -> tuple[bool, str]:
    """(usable, why not): the workload needs confluent-kafka's ShareConsumer."""
    try:
        from confluent_kafka import ShareConsumer  # noqa: F401
    except ImportError as exc:
        return False, f"confluent-kafka with ShareConsumer is not importable ({exc})"
    return True, ""


class ShareWorker:
    """Share consumers of ``SHARE_GROUP`` acknowledging (ACCEPT) every record of
    ``topics``.  Invariant: a key is in ``outstanding`` exactly from a delivery until a
    commit without error after it."""

    def __init__(self, bootstrap: str, topics: list[str], consumers: int = 2,
                 group: str = SHARE_GROUP):
        self.bootstrap = bootstrap
        self.topics = topics
        self.group = group
        self.count = consumers
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.deliveries: Counter = Counter()        # key -> times delivered
        self.accepted: set[Key] = set()             # keys whose acknowledgement committed
        self.counts_seen: Counter = Counter()       # delivery count stamped -> deliveries
        self.outstanding: set[Key] = set()
        self.lost: set[Key] = set()                 # delivered again after accepted
        self.refused = 0                            # deliveries whose commit failed
        self.errors: Counter = Counter()
        self._fault_open = False
        self._peak = 0
        self.fault_peaks: list[int] = []
        self.starts: dict[tuple[str, int], int] = {}  # the group's start offsets at the end

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> ShareWorker:
        self._earliest()
        for i in range(self.count):
            thread = threading.Thread(target=self._run, args=(i,), daemon=True,
                                      name=f"share-{i}")
            thread.start()
            self._threads.append(thread)
        return self

    def _earliest(self) -> None:
        """The group reads from each partition's start (set before anyone joins)."""
        from confluent_kafka.admin import (
            AdminClient,
            AlterConfigOpType,
            ConfigEntry,
            ConfigResource,
            ResourceType,
        )
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        entry = ConfigEntry("share.auto.offset.reset", "earliest",
                            incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ResourceType.GROUP, self.group, incremental_configs=[entry])
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(timeout=30)

    def stop(self) -> None:
        self._stop.set()

    def finish(self, timeout_s: float) -> None:
        self.stop()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    # -- faults ------------------------------------------------------------------------
    def fault_begun(self) -> None:
        with self._lock:
            self._fault_open = True
            self._peak = len(self.outstanding)

    def fault_ended(self) -> None:
        with self._lock:
            self._fault_open = False
            self.fault_peaks.append(max(self._peak, len(self.outstanding)))

    # -- consumers ---------------------------------------------------------------------
    def _run(self, index: int) -> None:
        from confluent_kafka import ShareConsumer
        consumer = ShareConsumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                                  "client.id": f"verify-share-{index}",
                                  "share.acknowledgement.mode": "explicit",
                                  "log_level": 0})  # librdkafka logs every broker loss
        try:
            consumer.subscribe(self.topics)
            while not self._stop.is_set():
                self._poll_once(consumer)
        except Exception as exc:  # a client failure ends this consumer, counted
            self._error(type(exc).__name__)
            logger.warning("share consumer %d stopped: %s", index, exc)
        finally:
            bounded(consumer.close, CLOSE_TIMEOUT_S)

    def _poll_once(self, consumer) -> None:
        from confluent_kafka import AcknowledgeType
        got: list[Key] = []
        for message in consumer.poll(POLL_S):
            if message.error() is not None:
                self._error(message.error().name())
                continue
            key = (message.topic(), message.partition(), message.offset())
            consumer.acknowledge(message, AcknowledgeType.ACCEPT)
            got.append(key)
            self._delivered(key, message.delivery_count())
        if got:
            self._committed(got, self._commit(consumer))

    def _commit(self, consumer) -> set[tuple[str, int]] | None:
        """The partitions whose acknowledgements the broker refused; None: all of them
        (the commit itself failed)."""
        try:
            results = consumer.commit_sync(30.0)
        except Exception as exc:
            self._error(f"commit {type(exc).__name__}")
            return None
        refused = set()
        for tp, error in (results or {}).items():
            if error is not None:
                self._error(f"commit {error}")
                refused.add((tp.topic, tp.partition))
        return refused

    def _delivered(self, key: Key, delivery_count) -> None:
        with self._lock:
            if key in self.accepted:
                self.lost.add(key)
            self.deliveries[key] += 1
            self.counts_seen[delivery_count] += 1
            self.outstanding.add(key)
            if self._fault_open:
                self._peak = max(self._peak, len(self.outstanding))

    def _committed(self, keys: list[Key], refused: set[tuple[str, int]] | None) -> None:
        with self._lock:
            for key in keys:
                if refused is None or key[:2] in refused:
                    self.refused += 1
                    continue
                self.accepted.add(key)
                self.outstanding.discard(key)

    def _error(self, name: str) -> None:
        with self._lock:
            self.errors[name] += 1

    # -- the end -----------------------------------------------------------------------
    def missing(self, wanted: set[Key]) -> set[Key]:
        with self._lock:
            return wanted - self.accepted

    def drain(self, wanted: set[Key], timeout_s: float, starts=None) -> set[Key]:
        """Wait (bounded) until every key of ``wanted`` is acknowledged: confirmed to a
        consumer, or below the group's start offsets that ``starts()`` (asked every
        ``STARTS_EVERY_S``) answers; what is not, with ``self.starts`` the last answer."""
        deadline = time.monotonic() + timeout_s
        asked = time.monotonic()
        left = self.missing(wanted)
        while left and time.monotonic() < deadline and any(t.is_alive() for t in self._threads):
            time.sleep(0.2)
            left = self.missing(wanted)
            if starts is not None and time.monotonic() - asked > STARTS_EVERY_S:
                asked = time.monotonic()
                self.starts = starts()
                left = {k for k in left if k[2] >= self.starts.get(k[:2], -1)}
        return left


def group_starts(addresses: list[str], group: str, topics: list[str],
                 partitions: int) -> dict[tuple[str, int], int]:
    """{(topic, partition): the group's share-partition start offset}, the highest any
    broker answers with.  The group's coordinator answers every partition (each from its
    key's share coordinator, over ReadShareGroupStateSummary when another broker serves
    it); the others answer with an error.  Every broker is asked because the group
    coordinator may be moving after a fault; unreachable brokers are skipped."""
    from broker.harness import KafkaConnection
    from protocol.share_group_messages import DescribeShareGroupOffsetsRequest
    request_group = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
    request_topic = request_group.DescribeShareGroupOffsetsRequestTopic
    wanted = [request_topic(topic_name=t, partitions=list(range(partitions))) for t in topics]
    starts: dict[tuple[str, int], int] = {}
    for address in addresses:
        try:
            with KafkaConnection(address, timeout_s=10.0) as conn:
                [answer] = conn.request(DescribeShareGroupOffsetsRequest[0](groups=[
                    request_group(group_id=group, topics=wanted)])).groups
        except (OSError, ConnectionError, ValueError) as exc:
            logger.info("share start offsets from %s: %s", address, exc)
            continue
        for topic in answer.topics if answer.error_code == 0 else []:
            for p in topic.partitions:
                if p.error_code == 0 and p.start_offset >= 0:
                    key = (topic.topic_name, p.partition_index)
                    starts[key] = max(starts.get(key, -1), p.start_offset)
    return starts


def check_share(worker: ShareWorker, wanted: set[Key], violations) -> dict:
    """The share workload's invariants on ``worker``'s evidence against the records
    acknowledged to the producers (``wanted``); the summary for the report."""
    confirmed = wanted - worker.missing(wanted)
    below_start = {k for k in wanted - confirmed if k[2] < worker.starts.get(k[:2], -1)}
    with worker._lock:
        unsure = {k for k in wanted - confirmed - below_start if worker.deliveries[k] > 0}
    missing = wanted - confirmed - below_start - unsure
    with worker._lock:
        duplicates = sum(n - 1 for n in worker.deliveries.values() if n > 1)
        bound = sum(worker.fault_peaks) + worker.refused
        summary = {"group": worker.group, "consumers": worker.count, "wanted": len(wanted),
                   "acknowledged": len(confirmed) + len(below_start),
                   "outcome_unknown_to_client": len(below_start),
                   "unconfirmed_not_redelivered": len(unsure), "missing": len(missing),
                   "start_offsets": {f"{t}-{p}": o for (t, p), o in sorted(worker.starts.items())},
                   "deliveries": sum(worker.deliveries.values()), "duplicates": duplicates,
                   "duplicate_bound": bound, "in_flight_at_faults": list(worker.fault_peaks),
                   "commits_refused": worker.refused, "lost_acknowledgements": len(worker.lost),
                   "delivery_counts": {str(k): v for k, v in sorted(worker.counts_seen.items(),
                                                                    key=lambda kv: str(kv[0]))},
                   "errors": dict(worker.errors.most_common(6))}
    for key in sorted(missing)[:20]:
        start = worker.starts.get(key[:2])
        violations.add("share-missing", f"{key[0]}-{key[1]}@{key[2]}: acknowledged to the "
                       f"producer, never acknowledged by share group {worker.group} (delivered "
                       f"{worker.deliveries.get(key, 0)} times; the group's start offset "
                       f"{'not answered' if start is None else start})")
    if len(missing) > 20:
        violations.add("share-missing", f"... and {len(missing) - 20} more")
    for key in sorted(worker.lost)[:20]:
        violations.add("share-lost-acknowledgement", f"{key[0]}-{key[1]}@{key[2]}: delivered "
                       f"again to share group {worker.group} after a commit carrying its "
                       f"ACCEPT succeeded")
    if duplicates > bound:
        violations.add("share-duplicates", f"{duplicates} redeliveries beyond the first, more "
                       f"than the {bound} records in flight at faults or with a refused commit")
    return summary

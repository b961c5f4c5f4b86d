"""Progress of transactional ids and groups: the longest time one could not move on.

A coordinator must never leave a transactional id or a group blocked after a client gave
up on it (Kafka finishes a coordinator's write and its state transition whatever happens
to the client; only the answer is lost).  Two things measure it along a run:

* ``ProgressProbe`` (a thread; raw requests, no client library) is an impatient client:
  every ``PROBE_INTERVAL_S`` it runs one transaction for ``PROBE_TXN_ID``
  (InitProducerId, AddPartitionsToTxn on ``PROBE_TOPIC``, EndTxn commit) and one
  OffsetCommit for ``PROBE_GROUP``, each request on a connection to the coordinator
  with a ``CLIENT_TIMEOUT_S`` timeout; a request that times out closes the connection,
  as a client with a short request timeout does.  A round whose requests all answer
  NONE is progress for that id or group;
* ``ProgressClock`` keeps, per name, the time of the last progress and the longest
  gap between two (the open gap up to ``longest`` included): the probe's and the
  transactional workload's producer (each transaction it ends, committed or aborted).

The ``pause-coordinator-follower`` fault (``schedule``) pauses a follower of the probe's
coordinator partition (``coordinator_follower``) while the probe times out: the
scenario that once left a transactional id answering CONCURRENT_TRANSACTIONS for good.
A name without progress for longer than ``STUCK_BOUND_S`` (or, when a fault was held
longer, than that hold and ``HOLD_MARGIN_S``: a controller isolated for 75 s may keep a
coordinator away that long) is a ``stuck`` violation.

Threads: the probe runs its own thread and is the only user of its connections; the
clock is guarded by a lock (the workload's thread marks it too); ``stop`` is bounded.
"""
from __future__ import annotations

import logging
import threading
import time

from kafka.protocol.consumer import OffsetCommitRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest

from ..groups.placement import partition_for
from ..harness.wire import KafkaConnection

log = logging.getLogger(__name__)

PROBE_TXN_ID = "verify-probe"
PROBE_GROUP = "verify-probe"
PROBE_TOPIC = "verify-probe"
CLIENT_TIMEOUT_S = 2.5     # the impatient client's request timeout
PROBE_INTERVAL_S = 0.5
STUCK_BOUND_S = 60.0       # inclusive: longer without progress is a violation ...
HOLD_MARGIN_S = 30.0       # ... or than the longest fault held, and this margin
TXN_TIMEOUT_MS = 20_000
TXN_STATE_TOPIC = "__transaction_state"
OFFSETS_TOPIC = "__consumer_offsets"
KEY_TYPE = {"txn": 1, "group": 0}


class ProgressClock:
    """Per name: the last progress and the longest gap between progress (monotonic
    seconds from ``started``).  Thread-safe."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._longest: dict[str, float] = {}

    def watch(self, name: str) -> None:
        """``name`` is expected to progress from now on (its first gap starts here)."""
        with self._lock:
            self._last.setdefault(name, self.clock())
            self._longest.setdefault(name, 0.0)

    def mark(self, name: str) -> None:
        with self._lock:
            now = self.clock()
            last = self._last.get(name, now)
            self._longest[name] = max(self._longest.get(name, 0.0), now - last)
            self._last[name] = now

    def retire(self, name: str) -> None:
        """``name`` stopped on purpose (its gap from now on is not a stall)."""
        with self._lock:
            last = self._last.pop(name, None)
            if last is not None:
                self._longest[name] = max(self._longest[name], self.clock() - last)

    def longest(self) -> dict[str, float]:
        """Per name, the longest time without progress, the gap still open included."""
        with self._lock:
            now = self.clock()
            return {name: max(longest, now - self._last.get(name, now))
                    for name, longest in self._longest.items()}


def stuck_summary(longest: dict[str, float], bound_s: float = STUCK_BOUND_S) -> dict:
    """What the report shows: each name's longest stall, the worst, the bound."""
    worst = max(longest.items(), key=lambda item: item[1], default=("", 0.0))
    return {"longest_s": {name: round(s, 1) for name, s in sorted(longest.items())},
            "worst": worst[0], "worst_s": round(worst[1], 1), "bound_s": bound_s,
            "stuck": sorted(name for name, s in longest.items() if s > bound_s)}


def coordinator_follower(bootstrap: str, variant: str, pick: int) -> tuple[int, int, int]:
    """(follower, leader, partition) of the probe's coordinator partition: the
    ``__transaction_state`` one of PROBE_TXN_ID (``txn``) or the ``__consumer_offsets``
    one of PROBE_GROUP (``group``); the follower is the ``pick``-th of the in-sync ones."""
    topic, key = (TXN_STATE_TOPIC, PROBE_TXN_ID) if variant == "txn" \
        else (OFFSETS_TOPIC, PROBE_GROUP)
    with _any_broker(bootstrap) as conn:
        [info] = conn.metadata([topic]).topics
    if info.error_code != 0 or not info.partitions:
        raise RuntimeError(f"{topic} is not in the metadata (error {info.error_code})")
    index = partition_for(key, len(info.partitions))
    partition = next(p for p in info.partitions if p.partition_index == index)
    followers = sorted(n for n in partition.isr_nodes if n != partition.leader_id)
    if not followers:
        raise RuntimeError(f"{topic}-{index} has no in-sync follower")
    return followers[pick % len(followers)], partition.leader_id, index


def _any_broker(bootstrap: str, timeout_s: float = CLIENT_TIMEOUT_S) -> KafkaConnection:
    problems = []
    for address in bootstrap.split(","):
        try:
            return KafkaConnection(address, timeout_s=timeout_s, client_id="verify-probe")
        except OSError as exc:  # ConnectionFailed included
            problems.append(f"{address}: {exc}")
    raise ConnectionError("; ".join(problems))


class ProgressProbe:
    """The impatient client (see the module docstring).  ``start``/``stop`` from the
    runner thread; the rounds run on the probe's own thread until ``stop``."""

    def __init__(self, bootstrap: str, clock: ProgressClock, topic: str = PROBE_TOPIC):
        self.bootstrap = bootstrap
        self.clock = clock
        self.topic = topic
        self.rounds = 0
        self.timeouts = 0      # requests given up on (the connection closed)
        self._offset = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="verify-probe", daemon=True)

    @property
    def names(self) -> tuple[str, str]:
        return f"transactional.id {PROBE_TXN_ID}", f"group {PROBE_GROUP}"

    def start(self) -> ProgressProbe:
        for name in self.names:
            self.clock.watch(name)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def _run(self) -> None:
        """Rounds every PROBE_INTERVAL_S until ``stop``; reacts to nothing else."""
        txn_name, group_name = self.names
        while not self._stop.wait(PROBE_INTERVAL_S):
            self.rounds += 1
            if self._attempt(self._txn_round):
                self.clock.mark(txn_name)
            if self._attempt(self._group_round):
                self.clock.mark(group_name)

    def _attempt(self, round_fn) -> bool:
        try:
            return round_fn()
        except (OSError, RuntimeError) as exc:  # a timeout closed the connection
            self.timeouts += 1
            log.debug("[ProgressProbe] %s: %s", round_fn.__name__, exc)
            return False

    def _coordinator(self, kind: str, key: str) -> KafkaConnection | None:
        with _any_broker(self.bootstrap) as conn:
            answer = conn.request(FindCoordinatorRequest[3](key=key, key_type=KEY_TYPE[kind]))
        if answer.error_code != 0:
            return None
        return KafkaConnection((answer.host, answer.port), timeout_s=CLIENT_TIMEOUT_S,
                               client_id="verify-probe")

    def _txn_round(self) -> bool:
        conn = self._coordinator("txn", PROBE_TXN_ID)
        if conn is None:
            return False
        with conn:
            init = conn.request(InitProducerIdRequest[4](
                transactional_id=PROBE_TXN_ID, transaction_timeout_ms=TXN_TIMEOUT_MS,
                producer_id=-1, producer_epoch=-1))
            if init.error_code != 0:
                return False
            producer = (init.producer_id, init.producer_epoch)
            added = conn.request(AddPartitionsToTxnRequest[3](
                v3_and_below_transactional_id=PROBE_TXN_ID,
                v3_and_below_producer_id=producer[0], v3_and_below_producer_epoch=producer[1],
                v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(
                    name=self.topic, partitions=[0])]))
            if added.results_by_topic_v3_and_below[0].results_by_partition[0] \
                    .partition_error_code != 0:
                return False
            ended = conn.request(EndTxnRequest[3](
                transactional_id=PROBE_TXN_ID, producer_id=producer[0],
                producer_epoch=producer[1], committed=True))
            return ended.error_code == 0

    def _group_round(self) -> bool:
        conn = self._coordinator("group", PROBE_GROUP)
        if conn is None:
            return False
        self._offset += 1
        topic = OffsetCommitRequest.OffsetCommitRequestTopic
        with conn:
            answer = conn.request(OffsetCommitRequest[8](
                group_id=PROBE_GROUP, generation_id_or_member_epoch=-1, member_id="",
                group_instance_id=None, topics=[topic(name=self.topic, partitions=[
                    topic.OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=self._offset,
                        committed_leader_epoch=-1, committed_metadata="probe")])]))
        return answer.topics[0].partitions[0].error_code == 0


class ProgressWatch:
    """The run's side: a clock, the probe on it, and the verdict.  Runner thread only."""

    def __init__(self, bootstrap: str, bound_s: float = STUCK_BOUND_S):
        self.clock = ProgressClock()
        self.probe = ProgressProbe(bootstrap, self.clock)
        self.bound_s = bound_s
        self._longest: dict[str, float] | None = None  # fixed by the first ``stop``

    def start(self) -> ProgressWatch:
        self.probe.start()
        return self

    def stop(self) -> dict:
        """Stop the probe and fix the figures at this moment (the first call does);
        the summary against the current bound."""
        if self._longest is None:
            self.probe.stop()
            self._longest = self.clock.longest()
        summary = stuck_summary(self._longest, self.bound_s)
        summary.update(probe_rounds=self.probe.rounds, probe_timeouts=self.probe.timeouts)
        return summary

    def check(self, violations, longest_hold_s: float = 0.0) -> dict:
        """``stuck`` violations for every name over the bound (raised to the longest
        fault hold and HOLD_MARGIN_S when that is more); the summary."""
        self.bound_s = max(self.bound_s, longest_hold_s + HOLD_MARGIN_S)
        summary = self.stop()
        for name in summary["stuck"]:
            violations.add("stuck", f"{name} made no progress for "
                           f"{summary['longest_s'][name]:.1f}s (bound {self.bound_s:g}s)")
        return summary


def progress_line(summary: dict) -> str:
    """The report's line (``Report.render``)."""
    if not summary:
        return ""
    each = ", ".join(f"{name} {s:.1f}s" for name, s in summary["longest_s"].items())
    return (f"  progress    longest without progress {summary['worst_s']:.1f}s "
            f"({summary['worst'] or 'nothing watched'}; bound {summary['bound_s']:g}s): "
            f"{each}; probe {summary.get('probe_rounds', 0)} rounds, "
            f"{summary.get('probe_timeouts', 0)} timed out")

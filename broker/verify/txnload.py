"""The transactional workload: a transactional producer, read_committed readers.

``TxnProducerWorker`` (confluent-kafka, ``transactional.id``, acks=all) owns one topic
and runs a bounded stream of transactions over its partitions: each of 3 to 10 records
spread over at least two partitions, some deliberately aborted (about one in five; which
ones, and the partitions, come from the run's seed: ``plan_transaction``).  Its history
(``txncheck.Txn``: id, the records handed to the client, the outcome as the client saw
it) is what ``txncheck`` judges.  Faults run as for the other workload, so every client
error is handled the way an application must:
  * a retriable commit error: commit again (at most ``COMMIT_TRIES`` times);
  * an abortable error (or retries used up): abort_transaction, and go on with the next
    transaction (new values);
  * a fatal error (fenced, or an abort that does not go through): a new producer with
    the same transactional.id, whose InitProducerId aborts whatever the old epoch left
    open (bounded retries while the coordinator is unavailable);
  * once commit_transaction was called and raised, the outcome is ``unknown`` however
    the rest went (the commit may have been decided); before that, a transaction that
    was aborted or fenced is ``aborted`` (it was never asked to commit).
After ``finish`` it writes a closing transaction with one record on every partition
(retried until committed, bounded): reading that record under read_committed proves a
partition was read to its end, with nothing before it still open.

``ReadCommittedReader`` (confluent-kafka, isolation.level=read_committed, assign from
offset 0, no group membership, no commits) reads the topic along the run and keeps
every (partition, offset, value) served; ``final_read`` does the same from offset 0
after healing until the closing transaction's records are read (bounded).  The LSO is
polled by the ``observer`` (ListOffsets read_committed with the leader epoch, like its
other requests, so a deposed leader answers FENCED_LEADER_EPOCH, never a stale offset).

confluent-kafka is optional: without it ``txn_available`` says why and the runner
skips this workload (kafka-python's transactional producer is not used here: its
error classification under faults is coarser, and librdkafka is what the transaction
tests run).  Threads: each worker runs its own thread and is the only user of its
client; the history and sightings are guarded by locks; ``finish``/``stop`` are
bounded.
"""
from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter

from .payload import encode_value
from .txncheck import Sighting, Txn
from .workload import CLOSE_TIMEOUT_S, bounded

log = logging.getLogger(__name__)

TXN_CALL_S = 10.0          # one commit/abort/init/flush call
COMMIT_TRIES = 3
ABORT_TRIES = 3
INIT_WAIT_S = 60.0         # re-initialising a producer while the coordinator moves
ABORT_RATIO = 0.2
MIN_RECORDS, MAX_RECORDS = 3, 10
TXN_TIMEOUT_MS = 20_000    # the coordinator aborts a transaction left open this long
PRODUCER_NAME = "tx-0"


def txn_available() -> tuple[bool, str]:
    """(usable, why not): the transactional workload needs confluent-kafka."""
    try:
        import confluent_kafka  # noqa: F401
    except ImportError as exc:
        return False, f"confluent-kafka is not installed ({exc})"
    return True, ""


def plan_transaction(rng: random.Random, number: int, partitions: int
                     ) -> tuple[list[int], bool]:
    """(the partition of each record, abort it?) for transaction ``number``: 3 to 10
    records, the first two on different partitions, about ``ABORT_RATIO`` aborted.
    Pure given ``rng``'s state (so a seed gives the same stream of plans)."""
    count = rng.randint(MIN_RECORDS, MAX_RECORDS)
    start = rng.randrange(partitions)
    chosen = [(start + i) % partitions for i in range(min(2, partitions))]
    chosen += [rng.randrange(partitions) for _ in range(count - len(chosen))]
    return chosen, rng.random() < ABORT_RATIO


def _error(exc: BaseException):
    """The KafkaError inside a KafkaException (None for anything else)."""
    args = getattr(exc, "args", ())
    return args[0] if args and hasattr(args[0], "retriable") else None


class TxnProducerWorker:
    """See the module docstring.  Loop header: one transaction per turn at most
    ``rate`` per second; exits when ``stop()`` is called (between transactions; each
    call in a transaction is bounded by ``TXN_CALL_S``), then writes the closing
    transaction until ``finish``'s deadline."""

    def __init__(self, bootstrap: str, topic: str, partitions: list[int], seed: int, *,
                 rate: float = 5.0, transactional_id: str = "raftwood-verify-txn",
                 progress=None):
        self.bootstrap = bootstrap
        # stuck.ProgressClock, marked each time a transaction is committed or aborted as
        # planned (the transactional id moved on).
        self.progress = progress
        self.progress_name = f"transactional.id {transactional_id}"
        self.topic = topic
        self.partitions = list(partitions)
        self.rate = rate
        self.transactional_id = transactional_id
        self.rng = random.Random(seed * 7_919 + 104_729)
        self.history: list[Txn] = []
        self.errors: Counter = Counter()        # client error name -> count
        self.reinits = 0
        self.end_values: dict[int, bytes] | None = None   # partition -> closing record
        self.sequence = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._end_deadline = 0.0
        self._finished = False
        self._retired = []       # replaced producers, kept (destroying one may block)
        self.producer = None
        self.thread = threading.Thread(target=self._run, daemon=True, name="txn-producer")

    # -- the runner's side -------------------------------------------------------------
    def start(self, init_timeout_s: float = 30.0) -> TxnProducerWorker:
        """Initialise the producer (bounded; RuntimeError when it cannot) and start."""
        self.producer = self._new_producer(time.monotonic() + init_timeout_s)
        if self.producer is None:
            raise RuntimeError(f"the transactional producer could not initialise within "
                               f"{init_timeout_s:g}s ({dict(self.errors)})")
        if self.progress is not None:
            self.progress.watch(self.progress_name)
        self.thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self.progress is not None:  # no transaction is expected from here on
            self.progress.retire(self.progress_name)

    def finish(self, timeout_s: float) -> None:
        """Stop after the transaction in progress, write the closing transaction (until
        committed or ``timeout_s`` passed), wait for the thread.  Idempotent."""
        if self._finished:
            return
        self._finished = True
        self._end_deadline = time.monotonic() + timeout_s
        self._stop.set()
        if self.thread.is_alive():
            self.thread.join(timeout_s + 2 * TXN_CALL_S)

    def snapshot(self) -> list[Txn]:
        with self._lock:
            return [Txn(t.txn_id, list(t.records), t.outcome, t.planned_abort, t.end, t.note)
                    for t in self.history]

    def counts(self) -> Counter:
        with self._lock:
            return Counter(t.outcome for t in self.history if t.records)

    # -- the thread --------------------------------------------------------------------
    def _run(self) -> None:
        number = 0
        interval = 1.0 / self.rate
        while not self._stop.is_set():
            began = time.monotonic()
            layout, abort = plan_transaction(self.rng, number, len(self.partitions))
            self._transaction(number, [self.partitions[i] for i in layout], abort)
            number += 1
            self._stop.wait(max(0.0, interval - (time.monotonic() - began)))
        while self._finished and time.monotonic() < self._end_deadline:
            txn = self._transaction(number, list(self.partitions), False, end=True)
            number += 1
            if txn.outcome == "committed":
                self.end_values = dict(txn.records)
                return
            time.sleep(0.5)

    def _transaction(self, number: int, partitions: list[int], abort: bool, *,
                     end: bool = False) -> Txn:
        txn = Txn(number, planned_abort=abort, end=end)
        with self._lock:
            self.history.append(txn)
        if self.producer is None and not self._reinit("no producer"):
            txn.outcome, txn.note = "aborted", "no producer: nothing sent"
            return txn
        stage = "begin"
        try:
            self.producer.begin_transaction()
            stage = "produce"
            for partition in partitions:
                value = encode_value(PRODUCER_NAME, self.sequence)
                self.sequence += 1
                self.producer.produce(self.topic, value=value, partition=partition)
                with self._lock:
                    txn.records.append((partition, value))
                self.producer.poll(0)
            if abort:
                stage = "flush"    # the records reach the log before they are aborted
                self.producer.flush(TXN_CALL_S)
                stage = "abort"
                self._abort()
                self._end(txn, "aborted", progressed=True)
                return txn
            stage = "commit"
            self._commit()
            self._end(txn, "committed", progressed=True)
        except Exception as exc:  # KafkaException, BufferError (queue full)
            self._recover(txn, stage, exc)
        return txn

    def _end(self, txn: Txn, outcome: str, note: str = "", progressed: bool = False) -> None:
        with self._lock:
            txn.outcome, txn.note = outcome, note
        if progressed and self.progress is not None:
            self.progress.mark(self.progress_name)

    def _commit(self) -> None:
        for attempt in range(COMMIT_TRIES):
            try:
                self.producer.commit_transaction(TXN_CALL_S)
                return
            except Exception as exc:
                error = _error(exc)
                if error is None or not error.retriable() or error.txn_requires_abort() \
                        or error.fatal() or attempt == COMMIT_TRIES - 1:
                    raise
                self._note(exc)

    def _abort(self) -> None:
        for attempt in range(ABORT_TRIES):
            try:
                self.producer.abort_transaction(TXN_CALL_S)
                return
            except Exception as exc:
                error = _error(exc)
                if error is None or not error.retriable() or error.fatal() \
                        or attempt == ABORT_TRIES - 1:
                    raise
                self._note(exc)

    def _recover(self, txn: Txn, stage: str, exc: BaseException) -> None:
        """After an error in ``stage``: abort (or re-initialise on a fatal error or a
        failed abort); the outcome is unknown once commit was asked for."""
        name = self._note(exc)
        asked_commit = stage == "commit"
        error = _error(exc)
        how = f"{stage}: {name}"
        if error is None or not error.fatal():
            try:
                self._abort()
                how += "; aborted"
            except Exception as again:
                how += f"; abort failed: {self._note(again)}"
                self._reinit(how)
                how += "; re-initialised"
        else:
            self._reinit(how)
            how += "; re-initialised"
        if not txn.records:
            self._end(txn, "aborted", how + " (nothing sent)")
        else:
            self._end(txn, "unknown" if asked_commit else "aborted", how)

    def _note(self, exc: BaseException) -> str:
        error = _error(exc)
        name = error.name() if error is not None else type(exc).__name__
        with self._lock:
            self.errors[name] += 1
        return name

    def _reinit(self, why: str) -> bool:
        """A new producer with the same transactional.id (fences the old epoch, aborts
        its open transaction); bounded.  False when none could be made."""
        log.info("transactional producer re-initialised after %s", why)
        if self.producer is not None:
            self._retired.append(self.producer)
        self.reinits += 1
        self.producer = self._new_producer(time.monotonic() + INIT_WAIT_S)
        return self.producer is not None

    def _new_producer(self, deadline: float):
        from confluent_kafka import Producer

        producer = Producer({
            "bootstrap.servers": self.bootstrap, "transactional.id": self.transactional_id,
            "acks": "all", "linger.ms": 5, "socket.timeout.ms": 10_000,
            "transaction.timeout.ms": TXN_TIMEOUT_MS, "message.timeout.ms": TXN_TIMEOUT_MS,
            "retry.backoff.ms": 100, "reconnect.backoff.max.ms": 1_000,
            "topic.metadata.refresh.interval.ms": 2_000, "client.id": "raftwood-verify-txn",
            "log_level": 0})
        while time.monotonic() < deadline:
            try:
                producer.init_transactions(TXN_CALL_S)
                return producer
            except Exception as exc:
                self._note(exc)
                error = _error(exc)
                if error is not None and error.fatal():
                    self._retired.append(producer)
                    return self._new_producer(deadline) if time.monotonic() < deadline \
                        else None
                time.sleep(0.5)
        self._retired.append(producer)
        return None


def _consumer(bootstrap: str, client_id: str):
    from confluent_kafka import Consumer

    return Consumer({
        "bootstrap.servers": bootstrap, "group.id": "raftwood-verify-txn-reader",
        "isolation.level": "read_committed", "enable.auto.commit": False,
        "enable.auto.offset.store": False, "auto.offset.reset": "earliest",
        "enable.partition.eof": False, "fetch.wait.max.ms": 100, "socket.timeout.ms": 10_000,
        "topic.metadata.refresh.interval.ms": 2_000, "reconnect.backoff.max.ms": 1_000,
        "client.id": client_id, "log_level": 0})


def _assign_from_start(consumer, topic: str, partitions: list[int]) -> None:
    from confluent_kafka import TopicPartition

    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])


class ReadCommittedReader:
    """Reads ``topic`` under read_committed from offset 0 along the run and keeps every
    (partition, offset, value) served.  Loop header: reacts to consume() (0.2 s);
    exits when ``stop()`` is called."""

    def __init__(self, bootstrap: str, topic: str, partitions: list[int]):
        self.topic = topic
        self.sightings: list[Sighting] = []
        self.errors: Counter = Counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.consumer = _consumer(bootstrap, "raftwood-verify-txn-live")
        _assign_from_start(self.consumer, topic, partitions)
        self.thread = threading.Thread(target=self._run, daemon=True, name="txn-reader")

    def start(self) -> ReadCommittedReader:
        self.thread.start()
        return self

    def snapshot(self) -> list[Sighting]:
        with self._lock:
            return list(self.sightings)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop reading and close the client (idempotent, bounded)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self.thread.join(timeout_s)
        bounded(self.consumer.close, CLOSE_TIMEOUT_S)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                messages = self.consumer.consume(num_messages=500, timeout=0.2)
            except Exception as exc:  # a client error under faults: note it, go on
                self.errors[type(exc).__name__] += 1
                self._stop.wait(0.2)
                continue
            got = []
            for msg in messages:
                if msg.error() is not None:
                    self.errors[msg.error().name()] += 1
                    continue
                got.append(Sighting(msg.partition(), msg.offset(), msg.value()))
            if got:
                with self._lock:
                    self.sightings.extend(got)


def final_read(bootstrap: str, topic: str, partitions: list[int],
               end_values: dict[int, bytes] | None, timeout_s: float
               ) -> tuple[list[Sighting], set[int], Counter]:
    """Read ``topic`` under read_committed from offset 0 until every partition's closing
    record (``end_values``) was read, or ``timeout_s``: (sightings, partitions read to
    their end, client errors).  Without closing records it reads for at most 10 s and
    completes nothing."""
    consumer = _consumer(bootstrap, "raftwood-verify-txn-final")
    sightings: list[Sighting] = []
    completed: set[int] = set()
    errors: Counter = Counter()
    wanted = {v: p for p, v in (end_values or {}).items()}
    deadline = time.monotonic() + (timeout_s if end_values else min(timeout_s, 10.0))
    try:
        _assign_from_start(consumer, topic, partitions)
        while time.monotonic() < deadline and not (end_values and
                                                   completed >= set(end_values)):
            for msg in consumer.consume(num_messages=1000, timeout=0.2):
                if msg.error() is not None:
                    errors[msg.error().name()] += 1
                    continue
                sightings.append(Sighting(msg.partition(), msg.offset(), msg.value()))
                if msg.value() in wanted and wanted[msg.value()] == msg.partition():
                    completed.add(msg.partition())
    finally:
        bounded(consumer.close, CLOSE_TIMEOUT_S)
    return sightings, completed, errors

"""The verify workload: acks=all idempotent producers and a consumer reading along.

Each ``ProducerWorker`` owns one topic and writes numbered values (``payload``) to its
partitions in turn at a bounded pace, with at most ``max_pending`` unanswered sends;
every acknowledgement (topic, partition, offset, key, value) goes into the shared
``AckLog``, with the instant it arrived (for the stall windows of ``recovery``).  Two
clients are used when available — kafka-python (a Raftwood dependency) and
confluent-kafka (librdkafka; optional) — so both retry paths are exercised.
``ConsumerWorker`` (kafka-python, assign + seek, no group) reads every partition from
the start and hands each record to a callback (the observer's committed-content
memory).

Threads: each worker runs its own thread; clients' callbacks run in the clients'
threads and touch only ``AckLog`` (locked).  ``stop()`` then ``finish(timeout_s)``
is the way out, bounded.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import Counter

from .checker import AckedRecord
from .payload import encode_value

TICK_S = 0.05
CLOSE_TIMEOUT_S = 10.0


def bounded(call, timeout_s: float) -> bool:
    """Run ``call()`` in a daemon thread and wait at most ``timeout_s``; True when it
    finished.  Client libraries' flush/close may block past their own timeouts (a lock
    held by a thread stuck in I/O); a verify run must end regardless."""
    thread = threading.Thread(target=call, daemon=True, name="bounded-call")
    thread.start()
    thread.join(timeout_s)
    return not thread.is_alive()


class AckLog:
    """Acknowledged records and failure counts, shared by producers.  Thread-safe."""

    def __init__(self):
        self._lock = threading.Lock()
        self.acked: list[AckedRecord] = []
        self.times: dict[tuple[str, int], list[float]] = {}  # partition -> ack instants
        self.failed: Counter = Counter()   # error name -> count
        self.first_failed_s: dict[str, float] = {}   # error name -> seconds into the run
        self.started = time.monotonic()
        self.sent = 0

    def on_sent(self) -> None:
        with self._lock:
            self.sent += 1

    def on_ack(self, record: AckedRecord) -> None:
        now = time.monotonic()
        with self._lock:
            self.acked.append(record)
            self.times.setdefault((record.topic, record.partition), []).append(now)

    def on_error(self, error: str) -> None:
        with self._lock:
            self.failed[error] += 1
            self.first_failed_s.setdefault(error, round(time.monotonic() - self.started, 1))

    def counts(self) -> dict:
        with self._lock:
            failed = sum(self.failed.values())
            return {"sent": self.sent, "acked": len(self.acked), "failed": failed,
                    "pending": self.sent - len(self.acked) - failed,
                    "errors": dict(self.failed.most_common(5)),
                    "first_error_s": dict(self.first_failed_s)}

    def snapshot(self) -> list[AckedRecord]:
        with self._lock:
            return list(self.acked)

    def ack_times(self) -> dict[tuple[str, int], list[float]]:
        """{partition: sorted time.monotonic() instants of its acknowledgements}."""
        with self._lock:
            return {tp: sorted(times) for tp, times in self.times.items()}


class _Client:
    """One producer client behind a common face: send, serve callbacks, flush, close."""

    def send(self, topic, partition, key, value, on_ack, on_error) -> bool:
        raise NotImplementedError

    def serve(self) -> None:
        pass

    def flush(self, timeout_s: float) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class _KafkaPythonClient(_Client):
    def __init__(self, bootstrap: str):
        from kafka import KafkaProducer

        self.producer = KafkaProducer(
            bootstrap_servers=bootstrap.split(","), acks="all", enable_idempotence=True,
            linger_ms=5, request_timeout_ms=10_000, delivery_timeout_ms=120_000,
            metadata_max_age_ms=2_000, retry_backoff_ms=100, reconnect_backoff_max_ms=1_000,
            max_block_ms=2_000, client_id="raftwood-verify-kp")

    def send(self, topic, partition, key, value, on_ack, on_error) -> bool:
        try:
            future = self.producer.send(topic, value=value, key=key, partition=partition)
        except Exception as exc:  # metadata unavailable for max_block_ms, buffer full
            logging.getLogger(__name__).debug("kafka-python send refused: %r", exc)
            return False
        future.add_callback(lambda meta: on_ack(meta.offset))
        future.add_errback(lambda exc: on_error(type(exc).__name__))
        return True

    def flush(self, timeout_s: float) -> None:
        try:
            self.producer.flush(timeout=timeout_s)
        except Exception:  # KafkaTimeoutError: what is unanswered stays pending
            pass

    def close(self) -> None:
        try:
            self.producer.close(timeout=5)
        except Exception:
            pass


class _ConfluentClient(_Client):
    """librdkafka treats some broker answers as fatal for an idempotent producer (an
    OUT_OF_ORDER_SEQUENCE_NUMBER it cannot explain): the producer then refuses every
    send.  The worker replaces it with a fresh one (a new producer id), after serving
    the old one's delivery reports; ``fatal_errors`` counts the replacements."""

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap
        self.fatal_errors = 0
        self.fatal_reasons: list[str] = []
        self.producer = self._new_producer()

    def _new_producer(self):
        from confluent_kafka import Producer

        return Producer({
            "bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 5, "message.timeout.ms": 120_000, "retry.backoff.ms": 100,
            "socket.timeout.ms": 10_000, "topic.metadata.refresh.interval.ms": 2_000,
            "reconnect.backoff.max.ms": 1_000, "client.id": "raftwood-verify-ck",
            "log_level": 0})  # librdkafka logs every broker loss otherwise

    def send(self, topic, partition, key, value, on_ack, on_error) -> bool:
        from confluent_kafka import KafkaException

        def delivered(err, msg):
            if err is None:
                on_ack(msg.offset())
            else:
                on_error(err.name())

        try:
            self.producer.produce(topic, value=value, key=key, partition=partition,
                                  on_delivery=delivered)
            return True
        except BufferError:
            return False
        except KafkaException as exc:
            if not exc.args[0].fatal():
                return False
            self.fatal_errors += 1
            if len(self.fatal_reasons) < 3:
                self.fatal_reasons.append(str(exc.args[0].str()))
            logging.getLogger(__name__).warning("confluent-kafka producer failed fatally "
                                                "(%s); starting a new one", exc)
            self.producer.flush(5)  # serve the failed deliveries' reports
            self.producer = self._new_producer()
            return False

    def serve(self) -> None:
        self.producer.poll(0)

    def flush(self, timeout_s: float) -> None:
        self.producer.flush(timeout_s)


def available_clients() -> list[str]:
    """Producer clients importable here, kafka-python first."""
    clients = ["kafka-python"]
    try:
        import confluent_kafka  # noqa: F401
        clients.append("confluent-kafka")
    except ImportError:
        pass
    return clients


class ProducerWorker:
    """Writes ``name``'s numbered values to ``topic``'s partitions round-robin at
    ``rate`` records/s.  Loop header: reacts to its tick (TICK_S); exits when
    ``stop()`` is called, then waits for answers in ``finish``."""

    def __init__(self, name: str, client: str, bootstrap: str, topic: str,
                 partitions: list[int], acks: AckLog, *, rate: float = 150.0,
                 max_pending: int = 2_000):
        self.name = name
        self.client_name = client
        self.topic = topic
        self.partitions = partitions
        self.acks = acks
        self.rate = rate
        self.max_pending = max_pending
        self.sequence = 0
        self._pending = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._finished = False
        self.client: _Client = (_ConfluentClient if client == "confluent-kafka"
                                else _KafkaPythonClient)(bootstrap)
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"producer-{name}")

    def start(self) -> ProducerWorker:
        self.thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def finish(self, timeout_s: float) -> None:
        """Stop sending, wait up to ``timeout_s`` for answers, close the client.
        Idempotent: later calls return at once."""
        self._stop.set()
        if self._finished:
            return
        self._finished = True
        started = time.monotonic()
        self.thread.join(timeout_s)
        left = max(1.0, timeout_s - (time.monotonic() - started))
        bounded(lambda: self.client.flush(left), left + 5.0)
        bounded(self.client.close, CLOSE_TIMEOUT_S)

    def _run(self) -> None:
        due = 0.0
        while not self._stop.is_set():
            due += self.rate * TICK_S
            while due >= 1 and self._pending_count() < self.max_pending:
                if not self._send_next():
                    break
                due -= 1
            due = min(due, self.rate)  # do not burst after a stall
            self.client.serve()
            self._stop.wait(TICK_S)

    def _send_next(self) -> bool:
        sequence = self.sequence
        partition = self.partitions[sequence % len(self.partitions)]
        value = encode_value(self.name, sequence)
        key = b"%d" % sequence

        def on_ack(offset: int) -> None:
            self._done()
            self.acks.on_ack(AckedRecord(self.topic, partition, offset, key, value))

        def on_error(error: str) -> None:
            self._done()
            self.acks.on_error(error)

        with self._lock:
            self._pending += 1
        if not self.client.send(self.topic, partition, key, value, on_ack, on_error):
            with self._lock:
                self._pending -= 1
            return False
        self.sequence += 1
        self.acks.on_sent()
        return True

    def _done(self) -> None:
        with self._lock:
            self._pending -= 1

    def _pending_count(self) -> int:
        with self._lock:
            return self._pending


class ConsumerWorker:
    """Reads every partition from offset 0 with kafka-python and calls
    ``on_record(topic, partition, offset, key, value)`` for each record.  Loop header:
    reacts to poll results; exits when ``stop()`` is called."""

    def __init__(self, bootstrap: str, partitions: list[tuple[str, int]], on_record):
        from kafka import KafkaConsumer, TopicPartition

        self.on_record = on_record
        self.positions: dict[tuple[str, int], int] = dict.fromkeys(partitions, 0)
        self.records = 0
        self.errors: Counter = Counter()
        self._stop = threading.Event()
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap.split(","), enable_auto_commit=False, group_id=None,
            auto_offset_reset="earliest", fetch_max_wait_ms=200, request_timeout_ms=15_000,
            metadata_max_age_ms=2_000, reconnect_backoff_max_ms=1_000,
            client_id="raftwood-verify-consumer")
        assigned = [TopicPartition(t, p) for t, p in partitions]
        self.consumer.assign(assigned)
        for tp in assigned:
            self.consumer.seek(tp, 0)
        self.thread = threading.Thread(target=self._run, daemon=True, name="consumer")

    def start(self) -> ConsumerWorker:
        self.thread.start()
        return self

    def caught_up(self, high_watermarks: dict[tuple[str, int], int]) -> bool:
        return all(self.positions.get(tp, 0) >= hw for tp, hw in high_watermarks.items())

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop reading and close the client (idempotent)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self.thread.join(timeout_s)
        bounded(self._close, CLOSE_TIMEOUT_S)

    def _close(self) -> None:
        try:
            self.consumer.close()
        except Exception:
            pass

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                batches = self.consumer.poll(timeout_ms=200)
            except Exception as exc:  # a client error under faults: note it, go on
                self.errors[type(exc).__name__] += 1
                self._stop.wait(0.2)
                continue
            for tp, records in batches.items():
                for record in records:
                    self.on_record(tp.topic, tp.partition, record.offset, record.key,
                                   record.value)
                    self.records += 1
                    self.positions[(tp.topic, tp.partition)] = record.offset + 1

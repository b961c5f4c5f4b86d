#!/usr/bin/env python3
"""Produce/consume throughput of Raftwood and noida-db with confluent-kafka.

Prints figures; asserts nothing about speed. For each target the runner starts the
broker itself (127.0.0.1, free port, temporary data dir), creates the topic, produces
N values with one Producer (linger.ms=5, acks=1), then reads every one back with one
Consumer that assigns all partitions from offset 0 (no group commits), and stops the
broker — always, also on error or Ctrl-C.

Progress goes to stderr (a line a second); results go to stdout: a table, the
Raftwood/noida ratios, and with --json one JSON line. Exit status: 0 when every target
ran both phases, 1 when a target failed to start or a phase failed/timed out,
128 + signal number on interrupt. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import platform
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from servers import REPO_ROOT, STOP_GRACE_S, TARGETS, BrokerProcess, TargetError, free_port

MB = 1_000_000  # figures are in 10^6 bytes of record values (keys, headers, framing excluded)
PROGRESS_EVERY_S = 1.0
CONSUMER_STALL_S = 30.0  # no record for this long, short of the count: the phase fails
# librdkafka's largest allowed response. A broker honouring Fetch max_bytes never gets near
# it; noida-db ignores max_bytes and answers with the whole log (~110 MB per 1M records).
RECEIVE_MESSAGE_MAX_BYTES = 2_147_483_647
FETCH_MAX_BYTES = 52_428_800  # 50 MiB, librdkafka's default, set so the figures say it
# librdkafka (2.x) stops fetching a partition for fetch.queue.backoff.ms (default 1000)
# whenever more than queued.min.messages (100,000) wait in the client's queue.  A broker
# that answers faster than the application drains hits that on any big log, and the
# consume figure then measures the client's one-second pause (this is what made a 2M-record
# log read at a quarter of the rate of a 200k one).  10 ms keeps the pause out of the
# figures, for every target alike.
FETCH_QUEUE_BACKOFF_MS = 10


class PhaseError(Exception):
    """A benchmark phase could not finish: timeout, delivery errors, missing records."""


@dataclass(frozen=True)
class Workload:
    messages: int
    value_bytes: int
    partitions: int
    timeout_s: float
    start_timeout_s: float
    compression: str
    topic: str = "raftwood-bench"
    linger_ms: int = 5
    acks: str = "1"
    replication_factor: int = 1
    # 0: librdkafka's default partitioner (sticky, values have no key); else send record i
    # to partition i % spread_partitions, so every partition gets records evenly
    spread_partitions: int = 0
    # librdkafka's delivery.report.only.error: no Python callback per acked record (the
    # producer still waits for every ack; a record is counted acked when flush() ends
    # without reporting it failed), so the client spends less of the shared CPUs
    error_reports_only: bool = False
    # librdkafka's queue.buffering.max.messages (0: its default, 100,000): how many records
    # the client may hold unsent; a deep queue keeps more batches in flight to the broker
    queue_max_messages: int = 0
    # librdkafka's batch.size in bytes (0: its default, 1,000,000)
    batch_bytes: int = 0


@dataclass
class PhaseResult:
    messages: int
    value_bytes: int
    seconds: float
    per_partition: dict[int, int]

    @property
    def msg_per_s(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.value_bytes / MB / self.seconds if self.seconds > 0 else 0.0

    def as_json(self) -> dict:
        return {"messages": self.messages, "value_bytes": self.value_bytes,
                "seconds": round(self.seconds, 4), "msg_per_s": round(self.msg_per_s, 1),
                "mb_per_s": round(self.mb_per_s, 3),
                "per_partition": {str(p): n for p, n in sorted(self.per_partition.items())}}


@dataclass
class TargetResult:
    name: str
    label: str
    version: str = ""
    error: str | None = None
    topic_note: str = ""
    ready_s: float | None = None
    produce: PhaseResult | None = None
    consume: PhaseResult | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.produce is not None and self.consume is not None


@dataclass
class Progress:
    """Rate-limited progress lines on stderr, prefixed with the target name."""

    target: str
    last_s: float = field(default_factory=time.monotonic)

    def say(self, text: str) -> None:
        print(f"[{self.target}] {text}", file=sys.stderr, flush=True)

    def restart(self) -> None:
        """Start a new phase: the next line is due one interval from now."""
        self.last_s = time.monotonic()

    def due(self) -> bool:
        now = time.monotonic()
        if now - self.last_s >= PROGRESS_EVERY_S:
            self.last_s = now
            return True
        return False


# --- topic ------------------------------------------------------------------------------

def create_topic(bootstrap: str, workload: Workload, progress: Progress) -> tuple[int, str]:
    """Create the topic with CreateTopics, else auto-create: (partition count, how it went)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new_topic = NewTopic(workload.topic, num_partitions=workload.partitions,
                         replication_factor=workload.replication_factor)
    wait_s = max(60.0, workload.timeout_s)
    futures = admin.create_topics([new_topic], operation_timeout=wait_s, request_timeout=wait_s)
    started = time.monotonic()
    try:
        _wait_future(futures[workload.topic], started + wait_s + 5, progress,
                     f"creating {workload.topic!r} ({workload.partitions} partitions)")
        how = "CreateTopics"
    except (KafkaException, concurrent.futures.TimeoutError) as exc:
        error = exc.args[0] if exc.args else f"no answer in {wait_s:.0f} s"
        if isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            how = "already existed"
        else:
            if isinstance(error, KafkaError):
                error = f"{error.name()}: {error.str()}"
            how = f"auto-create (CreateTopics failed: {error})"
            progress.say(f"CreateTopics failed ({error}); falling back to auto-create")
            _trigger_auto_create(bootstrap, workload.topic)
    count = _wait_partitions_led(admin, workload.topic, time.monotonic() + wait_s, progress)
    note = f"{how}, {count} partition{'s' if count != 1 else ''}"
    if count != workload.partitions:
        note += f" (asked for {workload.partitions})"
    progress.say(f"topic {workload.topic!r}: {note}")
    return count, note


def _wait_future(future: concurrent.futures.Future, deadline_s: float, progress: Progress,
                 what: str) -> None:
    """future.result(), with a progress line a second; TimeoutError at the deadline."""
    started = time.monotonic()
    while not future.done():
        remaining_s = deadline_s - time.monotonic()
        if remaining_s <= 0:
            raise concurrent.futures.TimeoutError()
        concurrent.futures.wait([future], timeout=min(1.0, remaining_s))
        if not future.done():
            progress.say(f"{what}: {time.monotonic() - started:.0f} s")
    future.result()


def _trigger_auto_create(bootstrap: str, topic: str) -> None:
    """A producer's Metadata request for the topic asks the broker to auto-create it."""
    producer = Producer({"bootstrap.servers": bootstrap, "allow.auto.create.topics": True})
    try:
        producer.list_topics(topic, timeout=10)
    except KafkaException:
        pass  # _wait_partitions_led reports whether the topic appeared
    producer.flush(0)


def _wait_partitions_led(admin: AdminClient, topic: str, deadline_s: float,
                         progress: Progress) -> int:
    """Partition count once every partition of `topic` has a leader; PhaseError at deadline."""
    last = "not in Metadata"
    progress.restart()
    while time.monotonic() < deadline_s:
        if progress.due():
            progress.say(f"topic {topic!r}: waiting for leaders ({last})")
        try:
            metadata = admin.list_topics(topic, timeout=5)
            info = metadata.topics.get(topic)
            if info is not None and info.error is None and info.partitions:
                if all(p.leader >= 0 and p.error is None for p in info.partitions.values()):
                    return len(info.partitions)
                led = sum(p.leader >= 0 and p.error is None for p in info.partitions.values())
                last = f"{led} of {len(info.partitions)} partitions led"
            elif info is not None and info.error is not None:
                last = str(info.error)
        except KafkaException as exc:
            last = str(exc)
        time.sleep(0.2)
    raise PhaseError(f"topic {topic!r}: not every partition led in time: {last}")


# --- produce ----------------------------------------------------------------------------

@dataclass
class _Deliveries:
    """Delivery-report tally; updated from Producer.poll/flush on this thread only."""

    acked: int = 0
    failed: int = 0
    first_error: str | None = None
    per_partition: dict[int, int] = field(default_factory=dict)

    def on_delivery(self, err, msg) -> None:
        if err is not None:
            self.failed += 1
            self.first_error = self.first_error or str(err)
            return
        self.acked += 1
        partition = msg.partition()
        self.per_partition[partition] = self.per_partition.get(partition, 0) + 1


def produce_all(bootstrap: str, workload: Workload, progress: Progress) -> PhaseResult:
    """Send workload.messages values and wait for every delivery report (bounded by timeout_s)."""
    producer = Producer({
        "bootstrap.servers": bootstrap, "linger.ms": workload.linger_ms,
        "acks": workload.acks, "compression.type": workload.compression,
        "message.timeout.ms": int(workload.timeout_s * 1000),
        "delivery.report.only.error": workload.error_reports_only,
        **({"queue.buffering.max.messages": workload.queue_max_messages}
           if workload.queue_max_messages else {}),
        **({"batch.size": workload.batch_bytes} if workload.batch_bytes else {}),
    })
    producer.list_topics(workload.topic, timeout=10)  # connect + metadata outside the timing
    value = os.urandom(workload.value_bytes)
    tally = _Deliveries()
    progress.restart()
    started = time.monotonic()
    deadline = started + workload.timeout_s
    try:
        _send(producer, workload, value, tally, deadline, progress)
        _drain(producer, workload, tally, deadline, progress)
    except PhaseError:
        producer.purge()
        producer.flush(0)
        raise
    seconds = time.monotonic() - started
    if workload.error_reports_only:  # flush() ended: every record not reported failed was acked
        tally.acked = workload.messages - tally.failed
    if tally.failed:
        raise PhaseError(f"{tally.failed} of {workload.messages} deliveries failed "
                         f"(first: {tally.first_error})")
    return PhaseResult(tally.acked, tally.acked * workload.value_bytes, seconds,
                       tally.per_partition)


def _send(producer: Producer, workload: Workload, value: bytes, tally: _Deliveries,
          deadline: float, progress: Progress) -> None:
    spread = workload.spread_partitions
    for sent in range(workload.messages):
        while True:
            try:
                if spread:
                    producer.produce(workload.topic, value, partition=sent % spread,
                                     on_delivery=tally.on_delivery)
                else:
                    producer.produce(workload.topic, value, on_delivery=tally.on_delivery)
                break
            except BufferError:  # local queue full: serve delivery reports, then retry
                producer.poll(0.01)
                _check_deadline(deadline, "produce", tally.acked, workload.messages)
        if sent % 1000 == 0:
            producer.poll(0)
            if progress.due():
                _check_deadline(deadline, "produce", tally.acked, workload.messages)
                _report(progress, "produce", tally.acked, workload, f"sent {sent:,}")


def _drain(producer: Producer, workload: Workload, tally: _Deliveries, deadline: float,
           progress: Progress) -> None:
    while producer.flush(0.2) > 0:
        _check_deadline(deadline, "produce", tally.acked, workload.messages)
        if progress.due():
            _report(progress, "produce", tally.acked, workload, f"waiting for {len(producer):,}")


# --- consume ----------------------------------------------------------------------------

@dataclass
class _ConsumeState:
    received: int = 0
    value_bytes: int = 0
    per_partition: dict[int, int] = field(default_factory=dict)
    at_end: set[int] = field(default_factory=set)
    last_record_s: float = field(default_factory=time.monotonic)
    errors_seen: set[str] = field(default_factory=set)

    def add(self, msg) -> None:
        partition = msg.partition()
        self.received += 1
        self.value_bytes += len(msg.value() or b"")
        self.per_partition[partition] = self.per_partition.get(partition, 0) + 1
        self.at_end.discard(partition)
        self.last_record_s = time.monotonic()


def consume_all(bootstrap: str, workload: Workload, expected: int, partitions: int,
                progress: Progress) -> PhaseResult:
    """Read `expected` records from offset 0 of every partition (bounded by timeout_s)."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "raftwood-bench",
        "enable.auto.commit": False, "enable.auto.offset.store": False,
        "enable.partition.eof": True, "auto.offset.reset": "earliest",
        "receive.message.max.bytes": RECEIVE_MESSAGE_MAX_BYTES,
        "fetch.max.bytes": FETCH_MAX_BYTES,
        "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
    })
    try:
        consumer.list_topics(workload.topic, timeout=10)  # connect outside the timing
        consumer.assign([TopicPartition(workload.topic, p, 0) for p in range(partitions)])
        progress.restart()
        started = time.monotonic()
        state = _consume_until(consumer, workload, expected, partitions, started, progress)
        seconds = state.last_record_s - started
    finally:
        consumer.close()
    return PhaseResult(state.received, state.value_bytes, seconds, state.per_partition)


def _consume_until(consumer: Consumer, workload: Workload, expected: int, partitions: int,
                   started: float, progress: Progress) -> _ConsumeState:
    state = _ConsumeState(last_record_s=started)
    deadline = started + workload.timeout_s
    while state.received < expected:
        for msg in consumer.consume(num_messages=10_000, timeout=0.2):
            error = msg.error()
            if error is None:
                state.add(msg)
            elif error.code() == KafkaError._PARTITION_EOF:
                state.at_end.add(msg.partition())
            else:
                _note_consumer_error(error, state, progress)
        _check_deadline(deadline, "consume", state.received, expected)
        stalled_s = time.monotonic() - state.last_record_s
        if stalled_s > CONSUMER_STALL_S:
            raise PhaseError(f"no record for {stalled_s:.0f} s with {state.received:,} of "
                             f"{expected:,} read; {len(state.at_end)} of {partitions} partitions "
                             f"at their end; consumer errors: "
                             f"{sorted(state.errors_seen) or 'none'}")
        if progress.due():
            _report(progress, "consume", state.received, workload, f"of {expected:,}")
    return state


def _note_consumer_error(error: KafkaError, state: _ConsumeState, progress: Progress) -> None:
    """Fatal errors end the phase; others are reported once each (the client retries them)."""
    if error.fatal():
        raise PhaseError(f"fatal consumer error: {error}")
    text = error.str()
    if text not in state.errors_seen:
        state.errors_seen.add(text)
        progress.say(f"consumer error (client retries): {text}")


# --- shared helpers ---------------------------------------------------------------------

def _check_deadline(deadline: float, phase: str, done: int, total: int) -> None:
    if time.monotonic() >= deadline:
        raise PhaseError(f"{phase} timed out with {done:,} of {total:,} records done "
                         "(raise --timeout?)")


def _report(progress: Progress, phase: str, done: int, workload: Workload, extra: str) -> None:
    pct = 100.0 * done / workload.messages if workload.messages else 100.0
    verb = "acked" if phase == "produce" else "read"
    progress.say(f"{phase}: {done:,} {verb} ({pct:.0f}%), {extra}")


def run_target(name: str, workload: Workload, keep_data: bool) -> TargetResult:
    """Start one target, run both phases, stop it; never raises TargetError/PhaseError."""
    target = TARGETS[name]()
    result = TargetResult(name=name, label=target.label, version=target.version())
    progress = Progress(name)
    data_root = Path(tempfile.mkdtemp(prefix=f"raftwood-bench-{name}-"))
    broker = None
    try:
        target.prepare(progress.say)
        port, data_dir = free_port(), data_root / "data"
        data_dir.mkdir()
        broker = BrokerProcess(name, target.command(port, data_dir), port,
                               data_root / "broker.log", REPO_ROOT)
        _run_phases(broker, workload, progress, result)
    except (TargetError, PhaseError) as exc:
        result.error = str(exc).splitlines()[0]
        progress.say(f"FAILED: {exc}")
        if broker is not None and isinstance(exc, PhaseError):
            progress.say(broker.log_tail(15))
    finally:
        if broker is not None:
            progress.say(f"stopping: SIGTERM, up to {STOP_GRACE_S:g} s, then SIGKILL")
            code = broker.stop()
            how = (f"killed by signal {-code}" if code is not None and code < 0
                   else f"exit code {code}")
            progress.say(f"stopped ({how})")
        if keep_data:
            progress.say(f"kept data and log under {data_root}")
        else:
            shutil.rmtree(data_root, ignore_errors=True)
    return result


def _run_phases(broker: BrokerProcess, workload: Workload, progress: Progress,
                result: TargetResult) -> None:
    progress.say(f"starting: {' '.join(broker.argv)}")
    broker.start()
    result.ready_s = broker.wait_ready(workload.start_timeout_s)
    progress.say(f"ready on {broker.bootstrap_servers} after {result.ready_s:.1f} s")
    partitions, result.topic_note = create_topic(broker.bootstrap_servers, workload, progress)
    progress.say(f"produce: {workload.messages:,} x {workload.value_bytes} B")
    result.produce = produce_all(broker.bootstrap_servers, workload, progress)
    progress.say(_phase_line("produce", result.produce))
    result.consume = consume_all(broker.bootstrap_servers, workload, result.produce.messages,
                                 partitions, progress)
    progress.say(_phase_line("consume", result.consume))


def _phase_line(phase: str, figures: PhaseResult) -> str:
    return (f"{phase} done: {figures.messages:,} records in {figures.seconds:.2f} s = "
            f"{figures.msg_per_s:,.0f} msg/s, {figures.mb_per_s:.2f} MB/s")


# --- output -----------------------------------------------------------------------------

COLUMNS = ("target", "records", "produce s", "produce msg/s", "produce MB/s",
           "consume s", "consume msg/s", "consume MB/s", "status")


def _row(result: TargetResult) -> tuple[str, ...]:
    def phase_cells(figures: PhaseResult | None) -> tuple[str, str, str]:
        if figures is None:
            return ("-", "-", "-")
        return (f"{figures.seconds:.2f}", f"{figures.msg_per_s:,.0f}", f"{figures.mb_per_s:.2f}")

    records = f"{result.produce.messages:,}" if result.produce else "-"
    status = "ok" if result.ok else f"FAILED: {result.error}"
    return (result.label, records, *phase_cells(result.produce), *phase_cells(result.consume),
            status)


def print_table(results: list[TargetResult]) -> None:
    rows = [COLUMNS] + [_row(r) for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS) - 1)]
    for row in rows:
        cells = [row[0].ljust(widths[0])]
        cells += [cell.rjust(width) for cell, width in zip(row[1:-1], widths[1:])]
        print("  ".join(cells + [row[-1]]))
    for result in results:
        if result.topic_note:
            print(f"{result.label}: topic {result.topic_note}; "
                  f"ready after {result.ready_s:.1f} s; {_spread(result)}")


def _spread(result: TargetResult) -> str:
    def fmt(figures: PhaseResult | None) -> str:
        if figures is None:
            return "-"
        return "/".join(f"{n:,}" for _, n in sorted(figures.per_partition.items()))

    return f"records per partition produced {fmt(result.produce)}, consumed {fmt(result.consume)}"


def ratios(results: list[TargetResult]) -> dict[str, float] | None:
    """Raftwood/noida msg/s for each phase, when both targets finished both phases."""
    by_name = {r.name: r for r in results if r.ok}
    ours, theirs = by_name.get("raftwood"), by_name.get("noida")
    if ours is None or theirs is None:
        return None
    return {phase: getattr(ours, phase).msg_per_s / getattr(theirs, phase).msg_per_s
            for phase in ("produce", "consume")}


def print_ratios(results: list[TargetResult], names: list[str]) -> None:
    found = ratios(results)
    if found is not None:
        print(f"Raftwood/noida: produce {found['produce']:.3f}x, consume {found['consume']:.3f}x "
              "(msg/s; MB/s ratios are the same)")
    elif {"raftwood", "noida"} <= set(names):
        print("Raftwood/noida: n/a (a target did not finish both phases)")


def environment() -> dict[str, str]:
    return {"python": platform.python_version(), "machine": platform.machine(),
            "cpus": str(os.cpu_count()), "confluent_kafka": confluent_kafka.__version__,
            "librdkafka": confluent_kafka.libversion()[0]}


def json_line(workload: Workload, results: list[TargetResult]) -> str:
    targets = {}
    for r in results:
        targets[r.name] = {
            "ok": r.ok, "error": r.error, "version": r.version, "topic": r.topic_note,
            "ready_s": None if r.ready_s is None else round(r.ready_s, 3),
            "produce": r.produce.as_json() if r.produce else None,
            "consume": r.consume.as_json() if r.consume else None}
    found = ratios(results)
    return json.dumps({
        "benchmark": "throughput", "workload": asdict(workload), "environment": environment(),
        "targets": targets,
        "raftwood_over_noida": None if found is None else
        {phase: round(value, 4) for phase, value in found.items()},
    }, sort_keys=True)


# --- main -------------------------------------------------------------------------------

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="raftwood,noida",
                        help="comma-separated, from: " + ", ".join(TARGETS) + " (default: both)")
    parser.add_argument("--messages", type=_positive_int, default=200_000)
    parser.add_argument("--value-bytes", type=_positive_int, default=100)
    parser.add_argument("--partitions", type=_positive_int, default=3)
    parser.add_argument("--compression", default="none",
                        choices=("none", "gzip", "snappy", "lz4", "zstd"),
                        help="producer compression.type (default: none)")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds allowed for each of produce and consume (default: 300)")
    parser.add_argument("--start-timeout", type=float, default=60.0,
                        help="seconds allowed for a target to start answering (default: 60)")
    parser.add_argument("--keep-data", action="store_true",
                        help="keep each target's temporary data dir and log")
    parser.add_argument("--json", action="store_true", help="also print one JSON line of figures")
    args = parser.parse_args(argv)
    args.target_names = [t.strip() for t in args.targets.split(",") if t.strip()]
    unknown = [t for t in args.target_names if t not in TARGETS]
    if unknown or not args.target_names:
        parser.error(f"--targets: unknown {unknown or 'empty list'}; "
                     f"choose from {', '.join(TARGETS)}")
    return args


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(signum)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for signum in (signal.SIGTERM, signal.SIGHUP):  # so `finally` stops the brokers
        signal.signal(signum, _raise_interrupt)
    workload = Workload(messages=args.messages, value_bytes=args.value_bytes,
                        partitions=args.partitions, timeout_s=args.timeout,
                        start_timeout_s=args.start_timeout, compression=args.compression)
    env = environment()
    print(f"workload: {workload.messages:,} x {workload.value_bytes} B values, "
          f"{workload.partitions} partitions, linger.ms={workload.linger_ms}, "
          f"acks={workload.acks}, compression={workload.compression}; "
          f"confluent-kafka {env['confluent_kafka']} (librdkafka {env['librdkafka']}), "
          f"{env['cpus']} CPUs", flush=True)
    results = []
    try:
        for name in args.target_names:
            results.append(run_target(name, workload, args.keep_data))
    except KeyboardInterrupt as exc:
        BrokerProcess.stop_all()
        signum = exc.args[0] if exc.args else signal.SIGINT
        print(f"interrupted by {signal.Signals(signum).name}; brokers stopped", file=sys.stderr)
        return 128 + signum
    print()
    print_table(results)
    print_ratios(results, args.target_names)
    if args.json:
        print(json_line(workload, results))
    failed = [r for r in results if not r.ok]
    for r in failed:
        print(f"error: {r.label}: {r.error}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""One ``raftwood verify`` run, phase by phase.

1. plan     — the network mode (``netns`` where namespaces can be made, else the
              proxy; ``choose_network``) and the seed give the fault schedule
              (printed first, for replays).
2. start    — a cluster in a temporary directory (each broker in a network namespace
              of its own, or behind the cut proxy when cuts are scheduled),
              RF=min(3, brokers) topics with min.insync.replicas=2; 3 brokers unless
              ``brokers`` says otherwise, 4 when the faults include ``reassign`` (a
              broker outside every replica set, see ``reassign``).
3. load     — producers (acks=all, idempotent), a consumer and the observer start;
              with the transactional workload (``txnload``; on by default when
              confluent-kafka is importable, else skipped with the reason printed) a
              transactional producer on a topic of its own and a read_committed reader
              too, the observer polling that topic's LSO.
4. faults   — each step waits for a healthy cluster (bounded), for its planned time,
              then is applied, held and undone; then the time until the cluster has
              converged is measured (bounded, ``recovery``); the load runs on for
              ``duration_s``.
5. heal     — everything undone (with ``reassign``: every move ended, leftovers
              cancelled, bounded; ``Reassigner.settle``), producers stopped and
              drained (bounded), the transactional producer writes its closing
              transaction (bounded), then the cluster must reach "every replica
              of each partition's current replica list has the leader's LEO as LEO
              and HW" (a broker a move dropped is not among them); a final
              read_committed read of the transactional topic (bounded).
6. check    — stored logs read from every broker's data directory and compared with
              what was acknowledged and observed (``checker``); broker logs scanned for
              unclean elections; the transaction history against what read_committed
              served and the LSOs observed (``txncheck``); every move started ended
              completed or cancelled, none still in progress (``reassign``).
7. report   — counts, violations with examples, the summary line.

Every phase is bounded in time; every process is stopped and the test network
deleted in ``finally`` (also on Ctrl-C, and on SIGTERM, which ``execute`` turns into
KeyboardInterrupt while it runs).  A harness error (a broker that will not start, a
cluster that never heals) is a violation of its own kind and the run still reaches
the check with what it has.
The temporary directory is removed after a PASS unless ``keep_data``; after a FAIL
it is kept and named, with the brokers' logs in it.

Workloads (``VerifyOptions.workloads``, ``--workloads`` on the command line):
``records`` (always: every fault check is built on it), ``txn`` and ``share`` (share
consumers of one group acknowledging every record of the records topics,
``shareload``).  ``txn`` and ``share`` are part of a default run (each where its client
is installed, else skipped with the reason) rather than separate modes because the
faults are the point: the transactions and the share group run through the same
kills, pauses and cuts as the records, at no cost to the records' checks (their
topics and groups are not among the schedule's partitions, so a seed replays the same
schedule with or without them); ``--workloads records`` leaves them out (a run
comparable with one made before they existed).

Size (about 700 lines): the seven phases above in their order, sharing one run's state
(cluster, workloads, schedule, deadlines); the work of each phase is in its own module
(``cluster``, ``workload``, ``txnload``, ``shareload``, ``faults``, ``recovery``,
``checker``, ``txncheck``, ``report``). Splitting the sequence itself is next when it grows.
"""
from __future__ import annotations

import contextlib
import dataclasses
import faulthandler
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

from broker.harness import read_records
from broker.harness.netns import netns_available

from .checker import FinalPartition, ViolationLog, check_final
from .cluster import TOPIC_CONFIGS, VerifyCluster
from .faults import FaultInjector
from .observer import Observer
from .reassign import REASSIGN_KIND, Reassigner, ReassignLedger, default_brokers
from .recovery import CONVERGENCE_BOUND_S, RecoveryStats, stalls, wait_converged
from .report import AppliedFault, Progress, Report
from .schedule import (
    NETNS_FAULT_KINDS,
    FaultStep,
    default_kinds,
    format_schedule,
    generate_schedule,
)
from .shareload import ShareWorker, check_share, group_starts, share_available
from .stuck import PROBE_TOPIC, ProgressWatch
from .txncheck import check_transactions
from .txnload import ReadCommittedReader, TxnProducerWorker, final_read, txn_available
from .workload import AckLog, ConsumerWorker, ProducerWorker, available_clients

HEALTH_WAIT_S = 30.0          # before each fault
FIRST_ACKS_WAIT_S = 30.0
PRODUCER_DRAIN_S = 60.0
FINAL_REPLICATION_WAIT_S = 90.0
CONSUMER_CATCH_UP_S = 20.0
TXN_END_S = 60.0              # the closing transaction, retried until committed
TXN_FINAL_READ_S = 60.0       # the final read_committed read to every partition's end
TXN_TOPIC = "verify-txn"
WORKLOADS = ("records", "txn", "share")
KNOWN_WORKLOADS = ("records", "txn", "share")
SHARE_DRAIN_S = 60.0          # the share group acknowledging the last records
CLOSE_WAIT_S = 15.0           # the share consumers' threads ending
FAULT_PHASE_SLACK_S = 120.0   # the fault phase may overrun duration_s by this much
WATCHDOG_S = 600.0            # healing, checking and stopping take far less than this


@dataclass
class VerifyOptions:
    brokers: int | None = None       # None: default_brokers(the fault kinds), 3 or 4
    duration_s: float = 60.0
    seed: int | None = None
    faults: tuple[str, ...] | None = None   # None: every kind the network mode runs
    network: str = "proxy"           # proxy, netns, or auto (netns where available)
    keep_data: bool = False
    data_dir: str | None = None      # parent of the run's temporary directory
    topics: int = 2
    partitions: int = 3
    rate: float = 150.0              # records/s per producer
    max_faults: int | None = None
    workloads: tuple[str, ...] = WORKLOADS   # "records" always; the others when importable
    txn_rate: float = 5.0            # transactions/s of the transactional producer


def topic_names(count: int) -> list[str]:
    return [f"verify-{chr(ord('a') + i)}" for i in range(count)]


def choose_network(requested: str) -> tuple[str, str]:
    """(mode, why) for ``--network``: ``auto`` is netns where ``netns_available()``,
    the proxy otherwise; ValueError when netns is asked for but unavailable."""
    if requested == "proxy":
        return "proxy", "asked for with --network proxy"
    if requested not in ("netns", "auto"):
        raise ValueError(f"unknown network mode {requested!r} (netns, proxy or auto)")
    usable, why = netns_available()
    if usable:
        return "netns", why
    if requested == "netns":
        raise ValueError(f"--network netns is not possible here: {why}")
    return "proxy", f"network namespaces unavailable: {why}"


def plan(options: VerifyOptions, network: str = "proxy"
         ) -> tuple[int, list[FaultStep], list[str]]:
    """(seed, schedule, partition names) for ``options``: the part a replay repeats."""
    seed = options.seed if options.seed is not None else random.SystemRandom().randrange(1 << 31)
    names = [f"{t}-{p}" for t in topic_names(options.topics) for p in range(options.partitions)]
    steps = generate_schedule(seed, options.duration_s,
                              options.faults or default_kinds(network, _workloads(options)),
                              len(names), max_faults=options.max_faults)
    return seed, steps, names


def _workloads(options: VerifyOptions) -> tuple[str, ...]:
    """The workloads that will run: ``txn`` only where its client is installed."""
    return tuple(w for w in options.workloads if w != "txn" or txn_available()[0])


@contextlib.contextmanager
def sigterm_as_interrupt():
    """While inside: SIGTERM raises KeyboardInterrupt in the main thread, so the
    ``finally`` blocks stop the brokers and delete the test network."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class VerifyRun:
    """State of one run; ``execute()`` once, from one thread."""

    def __init__(self, options: VerifyOptions, progress: Progress | None = None):
        self.progress = progress or Progress()
        self.network, self.network_why = choose_network(options.network)
        self.kinds = tuple(options.faults or default_kinds(self.network, _workloads(options)))
        if options.brokers is None:
            options = dataclasses.replace(options, brokers=default_brokers(self.kinds))
        if options.brokers < 3:
            raise ValueError("verify needs at least 3 brokers (RF 3, min.insync.replicas 2)")
        self.options = options
        foreign = [k for k in self.kinds if k in NETNS_FAULT_KINDS] \
            if self.network != "netns" else []
        if foreign:
            raise ValueError(f"faults {foreign} need --network netns ({self.network_why})")
        self.seed, self.steps, self.partition_names = plan(options, self.network)
        self.violations = ViolationLog()
        self.acks = AckLog()
        self.report = Report(self.seed, options.brokers, options.duration_s, len(self.steps),
                             network=self.network, network_why=self.network_why,
                             faults_chosen=self._chosen_kinds())
        self.recovery = RecoveryStats(CONVERGENCE_BOUND_S)
        self.reassignments = ReassignLedger()
        self.reassigner: Reassigner | None = None
        self.windows: dict[int, tuple[float, float]] = {}  # step index -> (begun, end)
        self.home: str | None = None
        self.vc: VerifyCluster | None = None
        self.observer: Observer | None = None
        self.consumer: ConsumerWorker | None = None
        self.producers: list[ProducerWorker] = []
        unknown = [w for w in options.workloads if w not in KNOWN_WORKLOADS]
        if unknown or "records" not in options.workloads:
            raise ValueError(f"workloads {list(options.workloads)}: choose among "
                             f"{', '.join(KNOWN_WORKLOADS)}, records included (every fault check "
                             f"is built on it)")
        usable, why = txn_available()
        self.txn_wanted = "txn" in options.workloads
        self.txn_skip_why = None if not self.txn_wanted or usable else why
        self.txn_skipped = (f"transactional workload skipped: {why}" if self.txn_skip_why
                            else None)
        self.txn_worker: TxnProducerWorker | None = None
        share_usable, share_why = share_available()
        self.share_skipped = (share_why if "share" in options.workloads and not share_usable
                              else None)
        self.share_worker: ShareWorker | None = None
        self.txn_reader: ReadCommittedReader | None = None
        self.txn_final: tuple | None = None      # final_read's answer
        self.watch: ProgressWatch | None = None  # ids and groups making progress (stuck)
        self.notes: list[str] = []
        self._closed = False

    # -- the whole run -----------------------------------------------------------------
    def execute(self) -> Report:
        """Run every phase; KeyboardInterrupt (or SIGTERM) stops everything and
        propagates."""
        with sigterm_as_interrupt():
            return self._execute()

    def _chosen_kinds(self) -> tuple[str, ...]:
        default = default_kinds(self.network, _workloads(self.options))
        return self.kinds if self.kinds != default else ()

    def _execute(self) -> Report:
        started = time.monotonic()
        self._print_plan()
        self.home = tempfile.mkdtemp(prefix="raftwood-verify-", dir=self.options.data_dir)
        self.report.data_dir = self.home
        final = None
        try:
            try:
                self._start()
                self._load()
                self._faults()
                # Every step of the rest is bounded; should one still hang, the stacks
                # of every thread go to stderr (the run itself is not ended by this).
                faulthandler.dump_traceback_later(WATCHDOG_S, file=sys.stderr)
                final = self._heal()
            except Exception as exc:  # a harness failure: reported, then checked as far as possible
                self.violations.add("error", f"{type(exc).__name__}: {exc}")
                self.progress(f"error: {type(exc).__name__}: {str(exc).splitlines()[0]}")
            self._stop_load()
            if self.vc is not None:
                self._check(final)
        finally:
            self._stop_load()
            self._close_cluster()
            faulthandler.cancel_dump_traceback_later()
        self.report.runtime_s = time.monotonic() - started
        if self.report.result is None:  # the cluster never started
            from .checker import CheckResult
            self.report.result = CheckResult(violations=self.violations)
        if self.report.passed and not self.options.keep_data:
            shutil.rmtree(self.home, ignore_errors=True)
            self.report.data_dir = None
        return self.report

    # -- phases ------------------------------------------------------------------------
    def _print_plan(self) -> None:
        o = self.options
        # One short first line (seed, network), then the schedule with its replay command:
        # scripts read these two; the long details (kinds, why this network) follow.
        self.progress.raw(f"raftwood verify: seed {self.seed}, {o.brokers} brokers, duration "
                          f"{o.duration_s:g}s, network {self.network}")
        chosen = self._chosen_kinds()
        self.progress.raw(f"schedule ({len(self.steps)} faults; replay with --seed {self.seed} "
                          f"--brokers {o.brokers} --duration {o.duration_s:g} "
                          f"--network {self.network}"
                          + (f" --faults {','.join(chosen)}" if chosen else "") + "):")
        self.progress.raw(format_schedule(self.steps, self.partition_names))
        self.progress.raw(f"  faults      drawn from {', '.join(self.kinds)}")
        self.progress.raw(f"  network     {self.network} ({self.network_why})")
        if self.txn_skipped:
            self.progress.raw(self.txn_skipped)
        if self.share_skipped:
            self.progress.raw(f"share workload skipped: {self.share_skipped}")

    def _start(self) -> None:
        o = self.options
        self.vc = VerifyCluster(self.home, o.brokers, proxy="cut" in self.kinds,
                                netns=self.network == "netns")
        self.vc.start()
        self.vc.create_topics(topic_names(o.topics), o.partitions, min(3, o.brokers))
        if self._txn_on():  # not among vc.partitions: the schedule's roles stay the same
            self.vc.cluster.create_topic(TXN_TOPIC, partitions=o.partitions,
                                         replication_factor=min(3, o.brokers),
                                         configs=TOPIC_CONFIGS)
            self.vc.cluster.create_topic(PROBE_TOPIC, partitions=1,
                                         replication_factor=min(3, o.brokers))
        problem = self.vc.wait_healthy(HEALTH_WAIT_S)
        if problem:
            raise RuntimeError(f"the new cluster is not healthy: {problem}")
        self.progress(f"cluster up: {o.brokers} brokers in {self.home}, "
                      f"{len(self.vc.partitions)} partitions (RF {min(3, o.brokers)}, "
                      f"min.insync.replicas 2)" + self._network_words())

    def _network_words(self) -> str:
        net = self.vc.net
        if net is not None:
            return (f", each broker in its network namespace {net.prefix}-b<id> on "
                    f"{net.subnet} (bridge {net.bridge}; cuts are nftables rules, Raft "
                    f"included)")
        return ", inter-broker links through the cut proxy" if self.vc.proxy else ""

    def _load(self) -> None:
        vc, o = self.vc, self.options
        txn_partitions = [(TXN_TOPIC, p) for p in range(o.partitions)] if self._txn_on() else []
        self.observer = Observer(vc.cluster, vc.partitions, self.violations,
                                 lso_partitions=txn_partitions).start()
        self.consumer = ConsumerWorker(vc.bootstrap, vc.partitions,
                                       self.observer.on_consumed).start()
        clients = available_clients()
        for i, topic in enumerate(topic_names(o.topics)):
            client = clients[i % len(clients)]
            name = f"{'kp' if client == 'kafka-python' else 'ck'}-{i}"
            self.producers.append(ProducerWorker(
                name, client, vc.bootstrap, topic, list(range(o.partitions)), self.acks,
                rate=o.rate).start())
        deadline = time.monotonic() + FIRST_ACKS_WAIT_S
        while self.acks.counts()["acked"] < len(self.producers) and time.monotonic() < deadline:
            time.sleep(0.1)
        if self.acks.counts()["acked"] == 0:
            raise RuntimeError(f"no acknowledgement within {FIRST_ACKS_WAIT_S:.0f}s "
                               f"({self.acks.counts()})")
        txn_words = self._start_share()
        if self._txn_on():
            partitions = list(range(o.partitions))
            self.txn_reader = ReadCommittedReader(vc.bootstrap, TXN_TOPIC, partitions).start()
            self.watch = ProgressWatch(vc.bootstrap).start()
            self.txn_worker = TxnProducerWorker(vc.bootstrap, TXN_TOPIC, partitions,
                                                self.seed, rate=o.txn_rate,
                                                progress=self.watch.clock).start()
            txn_words = (f"; transactions on {TXN_TOPIC} (confluent-kafka, up to "
                         f"{o.txn_rate:g}/s, 3-10 records each, about 1 in 5 aborted), a "
                         f"read_committed reader, the LSO polled; a probe timing out "
                         f"after 2.5s commits transactions and offsets")
        self.progress(f"load running: {len(self.producers)} producers "
                      f"({', '.join(p.client_name for p in self.producers)}), "
                      f"{o.rate:g} records/s each, acks=all, idempotent; 1 consumer; observer"
                      + txn_words)

    def _start_share(self) -> str:
        if "share" not in self.options.workloads or self.share_skipped:
            return ""
        topics = topic_names(self.options.topics)
        self.share_worker = ShareWorker(self.vc.bootstrap, topics).start()
        return (f"; share group {self.share_worker.group} ({self.share_worker.count} "
                f"confluent-kafka ShareConsumers) acknowledging every record of "
                f"{', '.join(topics)}")

    def _txn_on(self) -> bool:
        return self.txn_wanted and self.txn_skipped is None

    def _txn_words(self) -> str:
        if self.txn_worker is None:
            return ""
        c = self.txn_worker.counts()
        return (f"; txns {c['committed']} committed, {c['aborted']} aborted, "
                f"{c['unknown']} unknown")

    def _faults(self) -> None:
        self.reassigner = Reassigner(self.vc.cluster, self.reassignments, self.progress)
        injector = FaultInjector(self.vc, self.progress, self.reassigner)
        phase_start = time.monotonic()
        hard_stop = phase_start + self.options.duration_s + FAULT_PHASE_SLACK_S
        total = len(self.steps)
        for step in self.steps:
            if time.monotonic() > hard_stop:
                self._skip(step, "the fault phase ran out of time")
                continue
            problem = self.vc.wait_healthy(HEALTH_WAIT_S)
            if problem:
                self.progress(f"  cluster not healthy after {HEALTH_WAIT_S:.0f}s: {problem}")
                if step.kind == "corrupt-tail":  # would be a double fault: data could be lost
                    self._skip(step, f"cluster not healthy ({problem})")
                    continue
            delay = phase_start + step.at_s - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            self.progress(f"fault {step.index}/{total} {step.kind}")
            begun = time.monotonic()
            if self.share_worker is not None:
                self.share_worker.fault_begun()
            applied = injector.apply(step, self.progress.elapsed())
            self.report.applied.append(applied)
            self._converge(applied, begun)
            if self.share_worker is not None:
                self.share_worker.fault_ended()
            counts = self.acks.counts()
            self.progress(f"  #{step.index} done in {applied.took_s:.1f}s: {applied.action}; "
                          f"{self._converged_words(applied)}; acked {counts['acked']}, "
                          f"failed {counts['failed']}, pending {counts['pending']}"
                          + self._txn_words())
        rest = phase_start + self.options.duration_s - time.monotonic()
        if rest > 0:
            time.sleep(rest)

    def _converge(self, applied: AppliedFault, begun: float) -> None:
        """Measure heal -> converged (bounded); a fault the cluster does not converge
        from within the bound is a violation."""
        healed = time.monotonic()
        converged_s, problem = wait_converged(self.vc, CONVERGENCE_BOUND_S)
        applied.converged_s = None if converged_s is None else round(converged_s, 2)
        end = healed + (CONVERGENCE_BOUND_S if converged_s is None else converged_s)
        self.windows[applied.index] = (begun, end)
        if converged_s is None:
            self.violations.add("not_converged", f"fault #{applied.index} {applied.kind} "
                                f"({applied.action}): not converged {CONVERGENCE_BOUND_S:g}s "
                                f"after healing: {problem}")

    @staticmethod
    def _converged_words(applied: AppliedFault) -> str:
        if applied.converged_s is None:
            return f"NOT converged within {CONVERGENCE_BOUND_S:g}s"
        return f"converged {applied.converged_s:.1f}s after healing"

    def _measure_stalls(self) -> None:
        """Per applied fault: the longest windows without an acks=all success (from
        the producers' acknowledgement instants), aggregated per kind."""
        times = self.acks.ack_times()
        for applied in self.report.applied:
            window = self.windows.get(applied.index)
            if applied.skipped is not None or window is None:
                continue
            overall, worst, _tp = stalls(times, *window)
            applied.stall_s, applied.partition_stall_s = round(overall, 2), round(worst, 2)
            self.recovery.add(applied.kind, applied.converged_s, overall, worst)
        self.report.recovery = self.recovery.to_dict()

    def _skip(self, step: FaultStep, reason: str) -> None:
        self.report.applied.append(AppliedFault(step.index, step.kind, None, "",
                                                self.progress.elapsed(), 0.0, skipped=reason))
        self.progress(f"fault {step.index} {step.kind} skipped: {reason}")

    def _heal(self) -> dict:
        done = self.vc.heal_everything()
        if self.reassigner is not None and REASSIGN_KIND in self.kinds:
            done += self.reassigner.settle()
        self.progress("healing" + (f": {', '.join(done)}" if done else ": nothing left to undo"))
        for producer in self.producers:
            producer.stop()
        for producer in self.producers:
            producer.finish(PRODUCER_DRAIN_S / max(1, len(self.producers)))
        counts = self.acks.counts()
        self.progress(f"producers stopped: {counts['sent']} sent, {counts['acked']} acked, "
                      f"{counts['failed']} failed, {counts['pending']} unanswered"
                      + (f" (errors: {counts['errors']}, first after "
                         f"{counts['first_error_s']} s)" if counts["errors"] else ""))
        if self.txn_worker is not None:
            self.txn_worker.finish(TXN_END_S)
            ended = self.txn_worker.end_values is not None
            self.progress("transactional producer stopped" + self._txn_words()
                          + ("; closing transaction committed" if ended else
                             f"; closing transaction NOT committed within {TXN_END_S:g}s"))
        final = self.vc.wait_fully_replicated(FINAL_REPLICATION_WAIT_S)
        hws = {tp: info["high_watermark"] for tp, info in final.items()}
        deadline = time.monotonic() + CONSUMER_CATCH_UP_S
        while self.consumer and not self.consumer.caught_up(hws) and time.monotonic() < deadline:
            time.sleep(0.2)
        self._txn_final_read(TXN_FINAL_READ_S)
        self._share_drain()
        time.sleep(2 * self.observer.interval_s)  # one more observation of the final state
        self.progress(f"healed: every replica at the leader's LEO (HW {min(hws.values())}.."
                      f"{max(hws.values())})")
        return final

    def _share_drain(self) -> None:
        """Wait (bounded) for the share group to acknowledge every acknowledged record.
        The transactions are over by now: their progress figures are fixed first, or
        the drain's minute would count as a transactional id making no progress."""
        if self.share_worker is None:
            return
        if self.watch is not None:
            self.watch.stop()
        worker, o = self.share_worker, self.options

        def starts() -> dict:
            return group_starts(self.vc.bootstrap.split(","), worker.group,
                                topic_names(o.topics), o.partitions)

        left = worker.drain(self._share_wanted(), SHARE_DRAIN_S, starts)
        worker.finish(CLOSE_WAIT_S)
        worker.starts = starts()
        self.progress(f"share group drained: {len(left)} acknowledged records not "
                      f"acknowledged by the group")

    def _share_wanted(self) -> set:
        """The records the share group must acknowledge: every one acknowledged to a
        producer with its offset (an acknowledgement without one is the records
        check's to judge; the share group cannot be held to an unknown offset)."""
        return {(r.topic, r.partition, r.offset) for r in self.acks.snapshot()
                if isinstance(r.offset, int) and r.offset >= 0}

    def _txn_final_read(self, timeout_s: float) -> None:
        """The read_committed read of the transactional topic to every partition's
        closing record (bounded; once)."""
        if self.txn_worker is None or self.txn_final is not None:
            return
        partitions = list(range(self.options.partitions))
        self.txn_final = final_read(self.vc.bootstrap, TXN_TOPIC, partitions,
                                    self.txn_worker.end_values, timeout_s)
        sightings, completed, _errors = self.txn_final
        self.progress(f"read_committed final read of {TXN_TOPIC}: {len(sightings)} records, "
                      f"{len(completed)} of {len(partitions)} partitions read to their end")

    def _stop_load(self) -> None:
        """Stop producers, consumer and observer (bounded; idempotent)."""
        for producer in self.producers:
            producer.stop()
        if self.txn_worker is not None:
            self.txn_worker.stop()
        if self.share_worker is not None:
            self.share_worker.stop()
        if self.watch is not None:
            self.watch.stop()
        if self.consumer is not None:
            self.consumer.stop()
        if self.txn_reader is not None:
            self.txn_reader.stop()
        if self.observer is not None:
            self.observer.stop()
        for producer in self.producers:
            try:
                producer.finish(5.0)
            except Exception as exc:
                self.notes.append(f"stopping producer {producer.name}: {exc!r}")
        if self.txn_worker is not None:
            try:
                self.txn_worker.finish(5.0)
            except Exception as exc:
                self.notes.append(f"stopping the transactional producer: {exc!r}")

    def _check(self, final: dict | None) -> None:
        vc = self.vc
        if final is None:
            final = self._partial_final_view()
        partitions = []
        for tp, info in sorted(final.items()):
            replicas = {n: vc.stored_log(n, tp) for n in info["replicas"]}
            partitions.append(FinalPartition(tp, info["high_watermark"], replicas,
                                             info.get("log_start_offset", 0)))

        def decode(data: bytes):
            return [(r[0], r[1], r[2]) for r in read_records(data)]

        snapshots = self.observer.snapshots if self.observer else None
        if snapshots is None:
            from .checker import CommittedSnapshots
            snapshots = CommittedSnapshots(self.violations)
        result = check_final(self.acks.snapshot(), partitions, snapshots, self.violations,
                             decode, self.observer.epochs if self.observer else None)
        self._measure_stalls()
        self._scan_broker_logs(result)
        if self.observer is not None and self.observer.errors:
            result.notes.append(f"observer errors: {self.observer.errors[:3]}")
        if self.consumer is not None and self.consumer.errors:
            result.notes.append(f"consumer client errors (retried): "
                                f"{dict(self.consumer.errors)}")
        for producer in self.producers:
            fatal = getattr(producer.client, "fatal_errors", 0)
            if fatal:
                result.notes.append(
                    f"producer {producer.name} ({producer.client_name}) failed fatally "
                    f"{fatal} time(s) and was replaced: {producer.client.fatal_reasons}")
        self._check_transactions(result)
        if self.share_skipped:
            self.report.share = {"skipped": self.share_skipped}
        elif self.share_worker is not None:
            self.share_worker.finish(CLOSE_WAIT_S)
            self.report.share = check_share(self.share_worker, self._share_wanted(),
                                            self.violations)
        if REASSIGN_KIND in self.kinds:
            self.reassignments.check(self.violations)
            self.report.reassignments = self.reassignments.summary()
        result.notes.extend(self.notes)
        self.report.result = result
        self.report.workload = self.acks.counts()
        self.report.observations = self.observer.summary() if self.observer else {}
        hws = [p.high_watermark for p in partitions] or [0]
        self.report.final = {"min_hw": min(hws), "max_hw": max(hws),
                             "partitions": {f"{t}-{p}": info["high_watermark"]
                                            for (t, p), info in sorted(final.items())}}

    def _check_transactions(self, result) -> None:
        """``txncheck`` on the transactional workload's evidence (the final read made
        here, bounded, when healing did not get to it)."""
        if self.txn_skipped:
            self.report.transactions = {"skipped": self.txn_skip_why}
            result.notes.append(self.txn_skipped)
            return
        if self.txn_worker is None:
            return
        if self.watch is not None:
            held = [s.hold_s for s in self.steps
                    if any(a.index == s.index and a.skipped is None for a in self.report.applied)]
            self.report.progress = self.watch.check(self.violations, max(held, default=0.0))
        try:
            self._txn_final_read(TXN_FINAL_READ_S / 2)
        except Exception as exc:
            self.violations.add("error", f"final read_committed read: {exc!r}")
        sightings, completed, read_errors = self.txn_final or ([], set(), {})
        partitions = list(range(self.options.partitions))
        lso = self.observer.lso if self.observer is not None else None
        with (self.observer.lock if self.observer is not None else contextlib.nullcontext()):
            txn = check_transactions(TXN_TOPIC, self.txn_worker.snapshot(),
                                     self.txn_reader.snapshot() if self.txn_reader else [],
                                     sightings, completed, partitions, self.violations, lso)
        summary = txn.to_dict()
        summary.update(topic=TXN_TOPIC, reinits=self.txn_worker.reinits,
                       closing_committed=self.txn_worker.end_values is not None,
                       client_errors=dict(self.txn_worker.errors.most_common(6)))
        for kind in ("txn-lost", "aborted-visible", "txn-partial", "txn-duplicate",
                     "txn-stranger", "txn-unread", "lso-backwards"):
            summary[kind.replace("-", "_")] = self.violations.count(kind)
        self.report.transactions = summary
        reader_errors = dict(self.txn_reader.errors) if self.txn_reader else {}
        if self.txn_worker.errors or reader_errors or read_errors:
            result.notes.append(
                f"transactional client errors (handled): producer "
                f"{dict(self.txn_worker.errors.most_common(6))}"
                + (f", {self.txn_worker.reinits} producer re-initialisation(s)"
                   if self.txn_worker.reinits else "")
                + (f"; read_committed reader {reader_errors}" if reader_errors else "")
                + (f"; final read {dict(read_errors)}" if read_errors else ""))

    def _partial_final_view(self) -> dict:
        """When the cluster never healed: each partition's leader HW and the replicas
        that reach it (so a lagging replica is not mistaken for a divergent one)."""
        cluster = self.vc.cluster
        try:
            statuses = cluster.statuses()
        except Exception:
            statuses = {}
        image = cluster.freshest(statuses) if statuses else None
        view = {}
        for tp in self.vc.partitions:
            state = image and cluster.find_partition(image, *tp)
            leader = state and statuses.get(state["leader"])
            hosted = leader and cluster.find_hosted(leader, *tp)
            if not hosted:
                self.notes.append(f"{tp[0]}-{tp[1]}: no leader at the end; not checked")
                continue
            hw = hosted["high_watermark"]
            replicas = [n for n in state["replicas"] if n in statuses
                        and (cluster.find_hosted(statuses[n], *tp) or {}).get(
                            "log_end_offset", -1) >= hw]
            view[tp] = {"high_watermark": hw, "replicas": replicas,
                        "log_start_offset": hosted["log_start_offset"]}
        if self.vc.partitions and not view:
            self.violations.add("unhealed", "no partition could be read at the end")
        return view

    def _scan_broker_logs(self, result) -> None:
        tracebacks = 0
        for broker in self.vc.cluster.brokers:
            try:
                text = broker.log_path.read_text(errors="replace")
            except OSError:
                continue
            for line in text.splitlines():
                if "UNCLEAN leader election" in line:
                    self.violations.add("out_of_isr_election",
                                        f"broker {broker.node_id}'s log: {line.strip()}")
            tracebacks += text.count("Traceback (most recent call last)")
        if tracebacks:
            result.notes.append(f"{tracebacks} Python tracebacks in the broker logs "
                                f"(not a violation by themselves; see the logs)")

    def _close_cluster(self) -> None:
        """Stop every broker and the proxy, delete the test network (idempotent)."""
        vc = self.vc
        if vc is None or self._closed:
            return
        self._closed = True
        try:
            codes = vc.close()
        except Exception as exc:
            self.notes.append(f"stopping the cluster: {exc!r}")
            if self.report.result is not None:
                self.report.result.notes.append(f"stopping the cluster: {exc!r}")
            return
        bad = {n: c for n, c in codes.items() if c != 0}
        if bad and self.report.result is not None:
            self.report.result.notes.append(f"exit codes after SIGTERM at the end: {bad}")

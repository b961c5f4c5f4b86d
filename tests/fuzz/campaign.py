"""One fuzzing run: the cluster, the load, the requests, the checks, the report.

Steps of ``run(options)``, each named in the report:

1. cluster: start a fresh 3-broker cluster on 127.0.0.1 in a temporary directory (or
   attach to ``--bootstrap``); create the fuzz topics and the load topic.
2. load: start the acks=all producer.
3. fuzz: the engine sends requests until ``--requests`` are judged or ``--duration``
   has passed.
4. checks: stop the load; every broker process alive and answering ApiVersions and
   Metadata; a fresh producer and consumer round-trip on a new topic; every
   acknowledged record read back intact; the brokers' logs free of tracebacks,
   CRITICAL and fatal lines; (started cluster) every broker exits 0 on SIGTERM.

``report["ok"]`` is False when any check failed or the engine saw a violation.
"""
from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from kafka.protocol.admin import CreateTopicsRequest

from broker.harness import ClusterProcess, KafkaConnection
from protocol.messages import SERVED

from .batches import BatchFactory
from .corpus import Corpus
from .engine import Engine
from .judge import Judge
from .load import LOAD_PARTITIONS, LOAD_TOPIC, LOAD_TOPIC_CONFIGS, AckedLoad, verify
from .mutate import Mutator
from .requests import RequestFactory, Vocabulary

FUZZ_TOPICS = {"fz-a": 3, "fz-b": 3}  # never deleted (Vocabulary.doomed_topics are)
# Each broker in a rack of its own, with Kafka's rack-aware selector: consumers' fetches on
# followers (KIP-392) are served, so the fuzzer reaches that path too.
CLUSTER_SETTINGS = {"auto.create.topics.enable": "false",
                    "replica.selector.class":
                        "org.apache.kafka.common.replica.RackAwareReplicaSelector"}
RACKS = {n: {"broker.rack": f"r{n}"} for n in (1, 2, 3)}
# Valid requests clean connections do not send: none now (a refused SaslAuthenticate is
# answered and then closed, which the engine allows).
CLEAN_EXCLUDED: frozenset[int] = frozenset()
LOG_PATTERNS = {"traceback": re.compile(r"Traceback"), "critical": re.compile(r" CRITICAL "),
                "fatal": re.compile(r"fatal", re.IGNORECASE), "error": re.compile(r" ERROR ")}
FAILING_LOG_KINDS = ("traceback", "critical", "fatal")


def run(options, say=print) -> dict:
    """Run one campaign as ``options`` (the command line's namespace) say; the report."""
    home = Path(tempfile.mkdtemp(prefix="raftwood-fuzz-"))
    cluster = None
    report: dict = {"seed": options.seed, "requests_target": options.requests,
                    "duration_limit_s": options.duration, "violations": []}
    try:
        if options.bootstrap:
            bootstrap = options.bootstrap
            brokers = _attached_brokers(bootstrap)
        else:
            say(f"starting 3 brokers in {home}")
            cluster = ClusterProcess(home, 3, settings=dict(CLUSTER_SETTINGS),
                                     broker_settings=RACKS)
            cluster.start_all()
            bootstrap = cluster.bootstrap
            brokers = {b.node_id: ("127.0.0.1", b.port) for b in cluster.brokers}
        _create_topics(cluster, bootstrap, brokers)
        report["bootstrap"] = bootstrap
        load = AckedLoad(bootstrap, options.seed, options.load_rate).start()
        engine = _engine(options, brokers, say)
        say(f"fuzzing {bootstrap}: up to {options.requests:,} requests or {options.duration:.0f} s,"
            f" seed {options.seed}")
        cpu_before = _cpu_seconds(cluster)
        elapsed = engine.run(options.requests, options.duration)
        report.update(_engine_report(engine, elapsed))
        report["cpu_s"] = _cpu_used(cpu_before, _cpu_seconds(cluster))
        _check(report, "stuck_stacks", lambda: _stuck_stacks(cluster, report))
        _check(report, "load", lambda: _stop_and_verify(load, cluster, bootstrap))
        _check(report, "brokers", lambda: _broker_health(cluster, brokers))
        _check(report, "fresh_client", lambda: _fresh_client(cluster, bootstrap, options.seed))
        _check(report, "logs", lambda: _scan_logs(_log_paths(cluster, options)))
        if cluster is not None:
            codes = cluster.stop_all()
            report["exit_codes"] = {str(k): v for k, v in codes.items()}
            cluster = None
    finally:
        if cluster is not None:
            cluster.stop_all()
        if options.keep_data:
            say(f"data and broker logs kept in {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)
    report["failures"] = _failures(report)
    report["ok"] = not report["failures"]
    return report


# -- step 1: the cluster ---------------------------------------------------------------------
def _attached_brokers(bootstrap: str) -> dict[int, tuple[str, int]]:
    with KafkaConnection(bootstrap.split(",")[0], timeout_s=30.0) as conn:
        metadata = conn.metadata(None)
    return {b.node_id: (b.host, b.port) for b in metadata.brokers}


def _create_topics(cluster, bootstrap: str, brokers: dict) -> None:
    """The fuzz topics and the load topic, replicated on up to three brokers (an attached
    cluster's topics of these names are used as they are)."""
    replication = min(3, len(brokers))
    topics = {**FUZZ_TOPICS, LOAD_TOPIC: LOAD_PARTITIONS}
    for name, partitions in topics.items():
        configs = dict(LOAD_TOPIC_CONFIGS) if name == LOAD_TOPIC else {}
        if configs:
            configs["min.insync.replicas"] = str(min(2, replication))
        if cluster is not None:
            cluster.create_topic(name, partitions, replication, configs)
            continue
        topic_class = CreateTopicsRequest.CreatableTopic
        topic = topic_class(name=name, num_partitions=partitions,
                            replication_factor=replication, assignments=[],
                            configs=[topic_class.CreatableTopicConfig(name=k, value=v)
                                     for k, v in configs.items()])
        with KafkaConnection(bootstrap.split(",")[0], timeout_s=30.0) as conn:
            answer = conn.request(CreateTopicsRequest[4](topics=[topic], timeout_ms=30_000,
                                                         validate_only=False))
        code = answer.topics[0].error_code
        if code not in (0, 36):  # 36: TOPIC_ALREADY_EXISTS
            raise RuntimeError(f"CreateTopics {name}: error {code}")


def _engine(options, brokers, say) -> Engine:
    generation = random.Random(options.seed)
    batches = BatchFactory(generation)
    factory = RequestFactory(generation, Vocabulary(topics=list(FUZZ_TOPICS)), batches)
    corpus = Corpus(generation, factory, skip_clean=CLEAN_EXCLUDED)
    mutator = Mutator(random.Random(options.seed + 1))
    names = {key: spec.name for key, spec in SERVED.items()}

    def progress(tally, elapsed):
        rate = tally.judged / elapsed if elapsed > 0 else 0.0
        top = ", ".join(f"{k} {v:,}" for k, v in tally.refusals.most_common(4))
        say(f"[{elapsed:7.1f} s] {tally.judged:,} judged ({rate:,.0f}/s), "
            f"{tally.connections:,} connections, violations {tally.violation_count}; {top}")

    return Engine(brokers, corpus, mutator, Judge(), names, fuzz_links=options.connections,
                  clean_links=options.clean_connections, depth=options.depth,
                  hold_s=options.hold, serve_timeout_s=options.serve_timeout,
                  progress=progress if not options.quiet else None)


# -- step 3: what the engine saw ---------------------------------------------------------------
def _cpu_seconds(cluster) -> dict[str, float]:
    """CPU seconds (user + system) so far: this process, and each broker (Linux /proc)."""
    seconds = {"fuzzer": time.process_time()}
    for broker in cluster.brokers if cluster is not None else ():
        try:
            fields = Path(f"/proc/{broker.pid}/stat").read_text().rsplit(")", 1)[1].split()
            seconds[f"broker {broker.node_id}"] = (int(fields[11]) + int(fields[12])) \
                / os.sysconf("SC_CLK_TCK")
        except (OSError, TypeError, IndexError, ValueError):
            continue
    return seconds


def _cpu_used(before: dict, after: dict) -> dict[str, float]:
    return {k: round(after[k] - before[k], 1) for k in after if k in before}



def _engine_report(engine: Engine, elapsed: float) -> dict:
    tally = engine.tally
    by_api: dict = {}
    by_mutation: dict = {}
    outcomes: dict = {}
    for (api, label, outcome), count in tally.outcomes.items():
        for table, key in ((by_api, api), (by_mutation, label)):
            row = table.setdefault(key, {})
            row[outcome] = row.get(outcome, 0) + count
        outcomes[outcome] = outcomes.get(outcome, 0) + count
    served = {(k, v) for k, spec in SERVED.items()
              for v in range(spec.min_version, spec.max_version + 1)}
    missing = sorted(served - tally.sent_versions)
    return {"elapsed_s": round(elapsed, 1), "requests": tally.judged,
            "requests_per_s": round(tally.judged / elapsed, 1) if elapsed else 0.0,
            "dropped_behind_close": tally.dropped, "connections": tally.connections,
            "unconfirmed_closes": tally.unconfirmed_closes,
            "connect_failures": tally.connect_failures, "outcomes": outcomes,
            "refusals": dict(tally.refusals.most_common()), "by_api": by_api,
            "by_mutation": by_mutation,
            "coverage": {"served_versions": len(served),
                         "sent_unmutated": len(served & tally.sent_versions),
                         "missing": [f"{SERVED[k].name} v{v}" for k, v in missing],
                         "build_failures": {f"{SERVED[k].name} v{v}": e for (k, v), e
                                            in engine.corpus.build_failures.items()}},
            "sentinel_max_wait_s": {str(k): round(v, 3)
                                    for k, v in tally.sentinel_max_wait_s.items()},
            "violation_count": tally.violation_count, "violations": tally.violations}


# -- step 4: the checks ------------------------------------------------------------------------
def _check(report: dict, name: str, check) -> None:
    """``report[name] = check()``; a check that raises (a wedged broker's timeouts) is
    itself a failure, and the run goes on to the next check."""
    try:
        report[name] = check()
    except Exception as exc:
        report.setdefault("check_errors", {})[name] = repr(exc)[:2000]


def _stuck_stacks(cluster, report: dict) -> dict:
    """Every thread's stack (py-spy dump) of each broker that stopped answering the
    sentinel, when py-spy is installed: where its event loop is stuck."""
    stuck = {v["node_id"] for v in report["violations"] if "left ApiVersions" in v["what"]}
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not stuck or cluster is None or not Path(spy).exists():
        return {}
    stacks = {}
    for node_id in sorted(stuck):
        done = subprocess.run([spy, "dump", "--pid", str(cluster.broker(node_id).pid)],
                              capture_output=True, text=True, timeout=60)
        stacks[str(node_id)] = (done.stdout + done.stderr)[-6000:]
    return stacks


def _stop_and_verify(load: AckedLoad, cluster, bootstrap: str) -> dict:
    load.stop()
    result = verify(cluster, bootstrap, list(load.acked))
    result.update(produced=load.produced, failed=dict(load.failed))
    return result


def _broker_health(cluster, brokers) -> dict:
    health = {}
    for node_id, (host, port) in sorted(brokers.items()):
        entry = {"running": True if cluster is None else cluster.broker(node_id).is_running()}
        try:
            with KafkaConnection(f"{host}:{port}", timeout_s=10.0) as conn:
                versions = conn.api_versions(version=3)
                metadata = conn.metadata([LOAD_TOPIC])
            entry["serving"] = versions.error_code == 0 and metadata.topics[0].error_code == 0
        except Exception as exc:  # a broker that does not answer is the finding
            entry["serving"], entry["error"] = False, repr(exc)
        health[str(node_id)] = entry
    return health


def _fresh_client(cluster, bootstrap: str, seed: int, count: int = 30) -> dict:
    """A new producer (acks=all) and consumer round-trip ``count`` records on a new topic."""
    topic = f"fz-after-{seed}-{uuid.uuid4().hex[:6]}"
    try:
        if cluster is not None:
            cluster.create_topic(topic, 3, 3)
        else:
            with KafkaConnection(bootstrap.split(",")[0], timeout_s=30.0) as conn:
                conn.create_topic(topic, 3)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        values = {b"after-%d" % i for i in range(count)}
        for value in sorted(values):
            producer.produce(topic, value=value)
        left = producer.flush(60)
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic,
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
        seen: set[bytes] = set()
        deadline = time.monotonic() + 60
        while seen != values and time.monotonic() < deadline:
            for message in consumer.consume(100, timeout=1.0):
                if message.error() is None:
                    seen.add(message.value())
        consumer.close()
        ok = left == 0 and seen == values
        return {"ok": ok, "topic": topic, "produced": count - left, "consumed": len(seen)}
    except Exception as exc:
        return {"ok": False, "topic": topic, "error": repr(exc)}


def _log_paths(cluster, options) -> list[Path]:
    if cluster is not None:
        return [b.log_path for b in cluster.brokers]
    return [Path(p) for p in options.broker_log or []]


def _scan_logs(paths: list[Path], samples: int = 5) -> dict:
    """Counts of traceback, CRITICAL, fatal and ERROR lines, with the first few of each
    (a traceback with the lines that follow it)."""
    counts = dict.fromkeys(LOG_PATTERNS, 0)
    found: dict[str, list[str]] = {kind: [] for kind in LOG_PATTERNS}
    for path in paths:
        try:
            lines = path.read_text(errors="replace").splitlines()
        except OSError:
            continue
        for index, line in enumerate(lines):
            for kind, pattern in LOG_PATTERNS.items():
                if pattern.search(line):
                    counts[kind] += 1
                    if len(found[kind]) < samples:
                        found[kind].append(f"{path.name}: " + _excerpt(lines, index, kind))
    return {"counts": counts, "samples": {k: v for k, v in found.items() if v},
            "files": [str(p) for p in paths]}


def _excerpt(lines: list[str], index: int, kind: str) -> str:
    """The line, or for a traceback the log line before it and the whole traceback."""
    if kind != "traceback":
        return lines[index]
    end = index + 1
    while end < len(lines) and (lines[end].startswith(" ") or end == index + 1):
        end += 1
    return "\n".join(lines[max(0, index - 1):min(end + 1, len(lines), index + 60)])


def _failures(report: dict) -> list[str]:
    failures = [f"check {name} could not run: {error}"
                for name, error in report.get("check_errors", {}).items()]
    if report.get("violation_count"):
        failures.append(f"{report['violation_count']} protocol violations")
    load = report.get("load", {})
    if load.get("produced") and not load.get("acked"):
        failures.append(f"the acks=all load was never acknowledged: {load.get('failed')}")
    if load.get("lost_count") or load.get("changed_count"):
        failures.append(f"acknowledged records lost {load['lost_count']}, "
                        f"changed {load['changed_count']}")
    for node_id, entry in report.get("brokers", {}).items():
        if not (entry["running"] and entry["serving"]):
            failures.append(f"broker {node_id} not running or not serving: {entry}")
    if not report.get("fresh_client", {}).get("ok", False):
        failures.append(f"a fresh client could not round-trip: {report.get('fresh_client')}")
    counts = report.get("logs", {}).get("counts", {})
    for kind in FAILING_LOG_KINDS:
        if counts.get(kind):
            failures.append(f"{counts[kind]} {kind} line(s) in the broker logs")
    for node_id, code in report.get("exit_codes", {}).items():
        if code != 0:
            failures.append(f"broker {node_id} exited {code} after SIGTERM")
    missing = report.get("coverage", {}).get("missing")
    if missing and report.get("requests", 0) >= 5_000:
        failures.append(f"served versions never sent: {missing[:10]}")
    return failures

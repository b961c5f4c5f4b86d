"""The workloads of `bench.py`. Each starts the brokers it needs (a fresh deployment per
target, so no workload sees another's data), measures, stops them, and returns a
`Section`. A failure of one target or phase is recorded in the section; the workload
goes on with the next target. Main thread only.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from cpu import CpuMeter
from profiler import Profiler
from report import CpuRow, Section, SummaryRow, fmt_ratio, num, ratio
from servers import TARGETS, Deployment, TargetError, make_target
from throughput import (
    PhaseError,
    PhaseResult,
    Progress,
    Workload,
    consume_all,
    create_topic,
    produce_all,
)

LATENCY_GOAL_P99_MS = 50.0
BACKLOG_GOAL = 0.8      # consume rate of the big log / of the small log, at least
CLUSTER_GOAL = 0.8      # RF 3 acks=all / RF 1 acks=1 produce rate, at least
DEEP_QUEUE_RATIO_GOAL = 1.0     # W2 deep queue: Raftwood / noida-db produce rate, at least
DEEP_QUEUE_MB_S_GOAL = 430.0    # ... and MB/s of values on a quiet run (half this disk's
                                # 860 MB/s with fdatasync), at least
DEEP_QUEUE_MESSAGES = 2_000_000  # queue.buffering.max.messages of the W2 deep-queue producer


@dataclass
class Context:
    """Options shared by every workload, and the CPU rows they add to."""

    quick: bool
    targets: list[str]
    timeout_s: float
    start_timeout_s: float
    keep_data: bool
    profiler: Profiler
    raftwood_src: Path | None = None
    raftwood_settings: dict[str, str] = field(default_factory=dict)  # --raftwood-set
    many_partitions: int = 1000  # --partitions: the `partitions` workload's topic
    cpu_rows: list[CpuRow] = field(default_factory=list)

    def count(self, full: int) -> int:
        """A record count, divided by 10 in --quick mode."""
        return max(1, full // 10) if self.quick else full

    def workload(self, messages: int, value_bytes: int = 100, **kw) -> Workload:
        return Workload(messages=messages, value_bytes=value_bytes,
                        partitions=kw.pop("partitions", 3), timeout_s=self.timeout_s,
                        start_timeout_s=self.start_timeout_s, compression="none", **kw)


@dataclass
class Running:
    """A started deployment, with its CPU meter and progress printer."""

    deployment: Deployment
    meter: CpuMeter
    progress: Progress
    label: str


TEMP_PREFIX = "raftwood-bench-"  # + runner pid + "-" + target + "-" + random


def sweep_stale_dirs(say) -> None:
    """Delete temp dirs left by runners that died without cleaning up (SIGKILL): their
    name holds the runner's pid, and no process has that pid any more."""
    for path in Path(tempfile.gettempdir()).glob(f"{TEMP_PREFIX}[0-9]*-*"):
        pid = path.name[len(TEMP_PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        shutil.rmtree(path, ignore_errors=True)
        say(f"deleted {path}, left by runner {pid} that is gone")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def session(target_name: str, brokers: int, ctx: Context) -> Iterator[Running]:
    """Start `brokers` brokers of a target in a temp dir; always stop them and delete it."""
    target = make_target(target_name, ctx.raftwood_src, ctx.raftwood_settings)
    label = target.label if brokers == 1 else f"{target.label} x{brokers}"
    progress = Progress(label)
    data_root = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-{target_name}-"))
    deployment = None
    try:
        target.prepare(progress.say)
        deployment = Deployment(target, brokers, data_root)
        ready_s = deployment.start(ctx.start_timeout_s, progress.say)
        progress.say(f"ready on {deployment.bootstrap_servers} after {ready_s:.1f} s")
        yield Running(deployment, CpuMeter(deployment.pgids), progress, label)
    except (TargetError, PhaseError) as exc:
        progress.say(f"FAILED: {exc}")
        if deployment is not None and isinstance(exc, PhaseError):
            progress.say(deployment.log_tail(15))
        raise
    finally:
        if deployment is not None:
            deployment.stop(progress.say)
        if ctx.keep_data:
            progress.say(f"kept data and logs under {data_root}")
        else:
            shutil.rmtree(data_root, ignore_errors=True)


def measured_produce(run: Running, workload: Workload, ctx: Context, key: str) -> PhaseResult:
    bootstrap = run.deployment.bootstrap_servers
    run.progress.say(f"{key} produce: {workload.messages:,} x {workload.value_bytes} B "
                     f"to {workload.topic!r}, acks={workload.acks}")
    mark = run.meter.mark()
    with ctx.profiler.during(f"{key}.produce", run.deployment.pgids):
        result = produce_all(bootstrap, workload, run.progress)
    used = run.meter.since(mark)
    ctx.cpu_rows.append(CpuRow(key, run.label, "produce", result.value_bytes, used.cpu_s,
                               used.wall_s))
    run.progress.say(f"{key} produce: {result.msg_per_s:,.0f} msg/s, broker CPU {used.cpu_s:.1f} s")
    return result


def measured_consume(run: Running, workload: Workload, expected: int, partitions: int,
                     ctx: Context, key: str) -> PhaseResult:
    mark = run.meter.mark()
    with ctx.profiler.during(f"{key}.consume", run.deployment.pgids):
        result = consume_all(run.deployment.bootstrap_servers, workload, expected, partitions,
                             run.progress)
    used = run.meter.since(mark)
    ctx.cpu_rows.append(CpuRow(key, run.label, "consume", result.value_bytes, used.cpu_s,
                               used.wall_s))
    run.progress.say(f"{key} consume: {result.msg_per_s:,.0f} msg/s, broker CPU {used.cpu_s:.1f} s")
    return result


def _cpu_per_gb(ctx: Context, key: str, label: str, phase: str) -> str:
    found = [r for r in ctx.cpu_rows if (r.workload, r.target, r.phase) == (key, label, phase)]
    return num(found[-1].cpu_s_per_gb, 1) if found else "-"


# --- W1 / W2: produce then consume, both targets --------------------------------------------

THROUGHPUT_COLUMNS = ["target", "records", "produce msg/s", "produce MB/s", "consume msg/s",
                      "consume MB/s", "prod CPU s/GB", "cons CPU s/GB", "status"]


def produce_consume(key: str, title: str, workload: Workload, ctx: Context,
                    after=None) -> Section:
    """Each target: create the topic, produce, consume it all from offset 0. `after(run,
    section)` runs on the Raftwood broker once both phases passed (the backlog check)."""
    section = Section(key, title, THROUGHPUT_COLUMNS)
    figures: dict[str, dict] = {}
    for name in ctx.targets:
        label = TARGETS[name].label
        produced = consumed = None
        try:
            with session(name, 1, ctx) as run:
                partitions, _ = create_topic(run.deployment.bootstrap_servers, workload,
                                             run.progress)
                produced = measured_produce(run, workload, ctx, key)
                consumed = measured_consume(run, workload, produced.messages, partitions,
                                            ctx, key)
                if after is not None and name == "raftwood":
                    after(run, section, consumed)
            status = "ok"
        except (TargetError, PhaseError) as exc:
            status = f"FAILED: {brief(exc)}"
            section.errors.append(f"{label}: {brief(exc)}")
        figures[name] = {"produce": produced.as_json() if produced else None,
                         "consume": consumed.as_json() if consumed else None}
        section.rows.append([label, num(produced.messages if produced else None),
                             num(produced.msg_per_s if produced else None),
                             num(produced.mb_per_s if produced else None, 2),
                             num(consumed.msg_per_s if consumed else None),
                             num(consumed.mb_per_s if consumed else None, 2),
                             _cpu_per_gb(ctx, key, label, "produce"),
                             _cpu_per_gb(ctx, key, label, "consume"), status])
    _add_ratios(section, figures)
    return section


def _add_ratios(section: Section, figures: dict[str, dict]) -> None:
    ours, theirs = figures.get("raftwood"), figures.get("noida")
    section.figures["targets"] = figures
    if ours is None or theirs is None:
        return
    found = {}
    for phase in ("produce", "consume"):
        a, b = ours.get(phase), theirs.get(phase)
        found[phase] = ratio(a and a["msg_per_s"], b and b["msg_per_s"])
        section.summary.append(SummaryRow(f"{phase} Raftwood/noida (msg/s)", "-",
                                          fmt_ratio(found[phase])))
    section.figures["raftwood_over_noida"] = found
    section.notes.append(f"Raftwood/noida: produce {fmt_ratio(found['produce'])}, consume "
                         f"{fmt_ratio(found['consume'])} (msg/s; MB/s ratios are the same)")


def w1(ctx: Context, with_backlog: bool) -> list[Section]:
    """W1, and the backlog check on the W1 Raftwood broker when both are asked for."""
    workload = ctx.workload(ctx.count(2_000_000))
    title = (f"W1: {workload.messages:,} x 100 B, 3 partitions, linger.ms 5, acks=1, consume "
             "from offset 0 (fetch.max.bytes 50 MiB)")
    backlog = Section("backlog", "", BACKLOG_COLUMNS)
    hook = (lambda run, _s, big: _backlog_small(run, ctx, backlog, big)) if with_backlog else None
    section = produce_consume("W1", title, workload, ctx, after=hook)
    sections = [section]
    if with_backlog:
        _finish_backlog(backlog, ctx, workload.messages)
        sections.append(backlog)
    return sections


def w2(ctx: Context) -> Section:
    workload = ctx.workload(ctx.count(200_000), value_bytes=1024, topic="bench-w2")
    title = f"W2: {workload.messages:,} x 1 KiB, 3 partitions, linger.ms 5, acks=1"
    section = produce_consume("W2", title, workload, ctx)
    for row in section.summary:
        row.what = row.what.replace("(msg/s)", "(MB/s)")
    return section


def w2_deep(ctx: Context) -> Section:
    """W2 with a deep client queue: a producer streaming bulk data keeps up to 2M records
    queued (librdkafka's default is 100,000), so many 1 MB batches are in flight to the
    broker at once.  Produce only: the goal is the broker's intake."""
    workload = ctx.workload(ctx.count(1_000_000), value_bytes=1024, topic="bench-w2-deep",
                            queue_max_messages=DEEP_QUEUE_MESSAGES, batch_bytes=1_000_000)
    title = (f"W2 deep queue: {workload.messages:,} x 1 KiB, 3 partitions, linger.ms 5, "
             f"batch.size 1 MB, queue.buffering.max.messages {DEEP_QUEUE_MESSAGES:,}, acks=1; "
             "produce only")
    section = Section("W2deep", title, ["target", "records", "produce msg/s", "produce MB/s",
                                        "prod CPU s/GB", "status"])
    figures: dict[str, dict | None] = {}
    for name in ctx.targets:
        label = TARGETS[name].label
        produced = None
        try:
            with session(name, 1, ctx) as run:
                create_topic(run.deployment.bootstrap_servers, workload, run.progress)
                produced = measured_produce(run, workload, ctx, "W2deep")
            status = "ok"
        except (TargetError, PhaseError) as exc:
            status = f"FAILED: {brief(exc)}"
            section.errors.append(f"{label}: {brief(exc)}")
        figures[name] = produced.as_json() if produced else None
        section.rows.append([label, num(produced.messages if produced else None),
                             num(produced.msg_per_s if produced else None),
                             num(produced.mb_per_s if produced else None, 2),
                             _cpu_per_gb(ctx, "W2deep", label, "produce"), status])
    _deep_queue_goals(section, figures)
    return section


def _deep_queue_goals(section: Section, figures: dict[str, dict | None]) -> None:
    ours, theirs = figures.get("raftwood"), figures.get("noida")
    section.figures["targets"] = figures
    mb_s = ours["mb_per_s"] if ours else None
    section.summary.append(SummaryRow(
        "produce MB/s (quiet run)", f">= {DEEP_QUEUE_MB_S_GOAL:.0f}",
        num(mb_s, 1), "-" if mb_s is None else ("yes" if mb_s >= DEEP_QUEUE_MB_S_GOAL else "no")))
    if "noida" not in figures:
        return
    found = ratio(ours and ours["msg_per_s"], theirs and theirs["msg_per_s"])
    section.figures["raftwood_over_noida"] = found
    section.summary.append(SummaryRow("produce Raftwood/noida (MB/s)",
                                      f">= {DEEP_QUEUE_RATIO_GOAL:.1f}x", fmt_ratio(found),
                                      _met(found, DEEP_QUEUE_RATIO_GOAL)))
    section.notes.append(f"Raftwood/noida produce: {fmt_ratio(found)} (goal: at least "
                         f"{DEEP_QUEUE_RATIO_GOAL:.1f}x, and at least {DEEP_QUEUE_MB_S_GOAL:.0f} "
                         "MB/s on a quiet run)")


# --- backlog: consume rate of a small log vs a big one --------------------------------------

BACKLOG_COLUMNS = ["log", "records", "consume msg/s", "consume MB/s", "cons CPU s/GB", "status"]


def _backlog_small(run: Running, ctx: Context, section: Section, big: PhaseResult) -> None:
    """On a broker already holding the big log: write and read a small log beside it."""
    small = ctx.workload(ctx.count(200_000), topic="bench-backlog-small")
    partitions, _ = create_topic(run.deployment.bootstrap_servers, small, run.progress)
    produced = produce_all(run.deployment.bootstrap_servers, small, run.progress)
    consumed = measured_consume(run, small, produced.messages, partitions, ctx, "backlog")
    section.figures = {"small": consumed.as_json(), "big": big.as_json()}


def _finish_backlog(section: Section, ctx: Context, big_count: int) -> None:
    section.title = (f"Backlog check (Raftwood): consume a {ctx.count(200_000):,}-record log vs "
                     f"a {big_count:,}-record log (100 B, 3 partitions)")
    small, big = section.figures.get("small"), section.figures.get("big")
    for name, figures, count in (("small", small, ctx.count(200_000)), ("big", big, big_count)):
        section.rows.append([name, num(count), num(figures and figures["msg_per_s"]),
                             num(figures and figures["mb_per_s"], 2),
                             _cpu_per_gb(ctx, "backlog" if name == "small" else "W1",
                                         "Raftwood", "consume"),
                             "ok" if figures else "FAILED (see W1)"])
    found = ratio(big and big["msg_per_s"], small and small["msg_per_s"])
    section.figures["big_over_small"] = found
    section.notes.append(f"big/small consume rate: {fmt_ratio(found)} (goal: at least "
                         f"{BACKLOG_GOAL:.2f}, i.e. within 20 %)")
    section.summary.append(SummaryRow("consume rate, big log / small log", f">= {BACKLOG_GOAL:.2f}",
                                      fmt_ratio(found), _met(found, BACKLOG_GOAL)))


def backlog_alone(ctx: Context) -> Section:
    """The backlog check without W1: one Raftwood broker, the big log written here."""
    first_row = len(ctx.cpu_rows)
    sections = w1(replace(ctx, targets=["raftwood"]), with_backlog=True)
    for row in ctx.cpu_rows[first_row:]:
        row.workload = "backlog"
    backlog = sections[-1]
    backlog.errors += sections[0].errors
    return backlog


def brief(exc: Exception) -> str:
    """One line for a table: the error's first line, and the last line of a broker log
    tail when the message carries one (the broker's own last words, often a traceback's)."""
    lines = [line.strip(" |") for line in str(exc).splitlines() if line.strip(" |")]
    if len(lines) > 1 and "last lines of" in str(exc):
        return f"{lines[0]} ({lines[-1]})"
    return lines[0] if lines else type(exc).__name__


def _met(value: float | None, goal: float) -> str:
    return "-" if value is None else ("yes" if value >= goal else "no")

"""Workloads on a 3-broker Raftwood cluster: W3 (replication cost), W5 (latency sweep) and
many partitions (create time, idle CPU, memory, produce spread over N partitions). See
workloads.py for the conventions: fresh brokers per workload, failures recorded in the Section.
"""

from __future__ import annotations

import time

from cpu import CpuMeter
from latency import LatencyResult, paced_produce, serial_produce
from memory import MemorySample, group_memory
from report import Section, SummaryRow, fmt_ratio, num, ratio
from servers import TargetError
from throughput import PhaseError, PhaseResult, create_topic
from workloads import (
    CLUSTER_GOAL,
    LATENCY_GOAL_P99_MS,
    Context,
    Running,
    _cpu_per_gb,
    _met,
    brief,
    measured_produce,
    session,
)

CLUSTER_BROKERS = 3
LATENCY_RATES = (0, 1000, 2500, 5000, 10000)  # 0: one record in flight (serial_produce)
SERIAL_RECORDS = 2000             # records of the one-in-flight run (--quick: / 10)
LATENCY_SLACK_S = 60.0        # a rate's run may last its duration plus this, then fails
ON_RATE = 0.9                 # achieved/asked below this: the rate was not sustained
CREATE_GOAL_S = 30.0          # the partitions workload: created and all led within this
IDLE_GOAL_PCT = 10.0          # idle CPU of each broker holding them, % of a core, at most


# --- W3: RF 3 acks=all on 3 brokers vs RF 1 acks=1 on one ------------------------------------

def w3(ctx: Context) -> Section:
    count = ctx.count(1_000_000)
    section = Section("W3", f"W3: {count:,} x 100 B, 3 partitions, linger.ms 5: replication cost",
                      ["setup", "records", "produce msg/s", "produce MB/s", "prod CPU s/GB",
                       "status"])
    setups = [("cluster", CLUSTER_BROKERS, "Raftwood x3, RF 3, acks=all",
               ctx.workload(count, topic="bench-w3", acks="all", replication_factor=3)),
              ("single", 1, "Raftwood x1, RF 1, acks=1",
               ctx.workload(count, topic="bench-w3", acks="1")),
              # The same pair with delivery reports for errors only: the Python callback
              # per record is a large share of the client's CPU, which the brokers share.
              ("cluster_lean", CLUSTER_BROKERS, "same RF 3, reports for errors only",
               ctx.workload(count, topic="bench-w3", acks="all", replication_factor=3,
                            error_reports_only=True)),
              ("single_lean", 1, "same RF 1, reports for errors only",
               ctx.workload(count, topic="bench-w3", acks="1", error_reports_only=True))]
    results: dict[str, PhaseResult | None] = {}
    for key, brokers, what, workload in setups:
        produced, status, label = None, "ok", ""
        try:
            with session("raftwood", brokers, ctx) as run:
                label = run.label
                create_topic(run.deployment.bootstrap_servers, workload, run.progress)
                produced = measured_produce(run, workload, ctx, "W3")
        except (TargetError, PhaseError) as exc:
            status = f"FAILED: {brief(exc)}"
            section.errors.append(f"{what}: {status}")
        results[key] = produced
        section.rows.append([what, num(produced and produced.messages),
                             num(produced and produced.msg_per_s),
                             num(produced and produced.mb_per_s, 2),
                             _cpu_per_gb(ctx, "W3", label, "produce") if label else "-", status])
    found = ratio(results["cluster"] and results["cluster"].msg_per_s,
                  results["single"] and results["single"].msg_per_s)
    lean = ratio(results["cluster_lean"] and results["cluster_lean"].msg_per_s,
                 results["single_lean"] and results["single_lean"].msg_per_s)
    section.figures = {k: v.as_json() if v else None for k, v in results.items()}
    section.figures["cluster_over_single"] = found
    section.figures["cluster_over_single_error_reports_only"] = lean
    section.notes.append(f"RF 3 acks=all / RF 1 acks=1: {fmt_ratio(found)} "
                         f"(goal: at least {CLUSTER_GOAL:.2f}); CPU s/GB sums all brokers")
    section.notes.append(f"the same with delivery reports for errors only (no Python call "
                         f"per acked record in the client): {fmt_ratio(lean)}")
    section.summary.append(SummaryRow("produce, RF 3 acks=all / RF 1 acks=1",
                                      f">= {CLUSTER_GOAL:.2f}", fmt_ratio(found),
                                      _met(found, CLUSTER_GOAL)))
    section.summary.append(SummaryRow("same, delivery reports for errors only",
                                      f">= {CLUSTER_GOAL:.2f}", fmt_ratio(lean),
                                      _met(lean, CLUSTER_GOAL)))
    return section


# --- W5: delivery latency at fixed rates ------------------------------------------------------

def w5(ctx: Context, rates: tuple[int, ...] = LATENCY_RATES) -> Section:
    duration_s = 2.0 if ctx.quick else 10.0
    section = Section("W5", f"W5: delivery latency, Raftwood x3, RF 3, acks=all, 1 KiB, "
                      f"linger.ms 0, paced producer, {duration_s:g} s per rate",
                      ["rate asked/s", "achieved/s", "acked", "p50 ms", "p99 ms", "max ms",
                       "p99 <= 50 ms", "CPU us/msg", "busiest broker", "its loop waited",
                       "status"])
    results: list[LatencyResult] = []
    try:
        with session("raftwood", CLUSTER_BROKERS, ctx) as run:
            topic = ctx.workload(1, value_bytes=1024, topic="bench-w5", acks="all",
                                 replication_factor=3)
            create_topic(run.deployment.bootstrap_servers, topic, run.progress)
            for rate in rates:
                results.append(_one_rate(run, ctx, rate, duration_s, section))
    except (TargetError, PhaseError) as exc:
        section.errors.append(brief(exc))
        section.rows.append([num(rates[len(results)]) if len(results) < len(rates) else "-",
                             "-", "-", "-", "-", "-", "-", "-", "-", "-",
                             f"FAILED: {brief(exc)}"])
    best = max((r.rate_per_s for r in results if _within_goal(r)), default=None)
    section.figures = {"rates": [r.as_json() for r in results], "best_rate_per_s": best,
                       "goal_p99_ms": LATENCY_GOAL_P99_MS}
    section.notes.append("latency = produce() call to delivery callback; a rate counts only "
                         f"if at least {ON_RATE:.0%} of it was achieved")
    section.notes.append("CPU us/msg = CPU time of all three brokers during the rate's phase "
                         "(utime + stime from /proc) / records acked; with 1 in flight (rate "
                         "0: produce, wait for the report, repeat) that is the cluster's "
                         "cost of one acks=all round trip, unchanged by batching")
    section.notes.append("busiest broker = the most CPU one broker used during the rate's "
                         "phase, as a share of one core (/proc)")
    section.notes.append("its loop waited = the time that broker's main thread (its event "
                         "loop) was ready to run but waited for a CPU, as a share of the "
                         "phase (/proc/<pid>/schedstat).  A broker serves requests on one "
                         "event loop: when the two add up to near 100 %, its requests queue "
                         "and p99 grows far beyond what one costs; a large wait means the "
                         "other brokers and the client held the cores")
    section.notes.append(f"highest rate with p99 <= {LATENCY_GOAL_P99_MS:g} ms: "
                         f"{num(best)}{'/s' if best else ''}")
    section.summary.append(SummaryRow(f"highest rate with p99 <= {LATENCY_GOAL_P99_MS:g} ms",
                                      "report", f"{num(best)}/s" if best else "none"))
    return section


def _one_rate(run: Running, ctx: Context, rate: int, duration_s: float,
              section: Section) -> LatencyResult:
    serial = ctx.count(SERIAL_RECORDS)
    run.progress.say(f"W5: {rate}/s for {duration_s:g} s" if rate else
                     f"W5: {serial:,} records, one in flight")
    meter = CpuMeter(run.deployment.pgids)
    brokers = [CpuMeter([pgid]) for pgid in run.deployment.pgids]
    with ctx.profiler.during(f"W5.{rate}", run.deployment.pgids):
        start = meter.mark()
        broker_starts = [broker.mark() for broker in brokers]
        if rate:
            result = paced_produce(run.deployment.bootstrap_servers, "bench-w5", rate,
                                   duration_s, 1024, "all", duration_s + LATENCY_SLACK_S,
                                   run.progress)
        else:
            result = serial_produce(run.deployment.bootstrap_servers, "bench-w5", serial,
                                    1024, "all", LATENCY_SLACK_S, run.progress)
        used = meter.since(start)
        busiest = max((broker.since(mark) for broker, mark in zip(brokers, broker_starts)),
                      key=lambda sample: sample.cpu_s)
    result.cpu_s = used.cpu_s
    busiest_share = result.busiest_share = (
        busiest.cpu_s / busiest.wall_s if busiest.wall_s > 0 else None)
    waited_share = result.busiest_wait_share = (
        busiest.wait_s / busiest.wall_s if busiest.wall_s > 0 else None)
    per_msg_us = 1e6 * used.cpu_s / result.acked if result.acked else None
    p50, p99 = result.percentile_ms(50), result.percentile_ms(99)
    section.rows.append([num(rate) if rate else "1 in flight", num(result.achieved_per_s),
                         num(result.acked),
                         num(p50, 1), num(p99, 1), num(max(result.latencies_ms, default=None), 1),
                         ("yes" if _within_goal(result) else "no") if rate else "-",
                         num(per_msg_us),
                         f"{100 * busiest_share:.0f} %" if busiest_share is not None else "-",
                         f"{100 * waited_share:.0f} %" if waited_share is not None else "-",
                         "ok"])
    run.progress.say(f"W5: {rate}/s: p50 {num(p50, 1)} ms, p99 {num(p99, 1)} ms, "
                     f"broker CPU {used.cpu_s:.1f} s ({num(per_msg_us)} us/msg) in "
                     f"{used.wall_s:.1f} s, busiest broker {busiest.cpu_s:.1f} s (its loop waited "
                     f"{busiest.wait_s:.1f} s for a CPU)")
    return result


def _within_goal(result: LatencyResult) -> bool:
    p99 = result.percentile_ms(99)
    return (result.rate_per_s > 0 and p99 is not None and p99 <= LATENCY_GOAL_P99_MS
            and result.achieved_per_s >= ON_RATE * result.rate_per_s)


# --- many partitions: create time, idle CPU, memory, produce spread -------------------------

def partitions(ctx: Context) -> Section:
    """`ctx.many_partitions` partitions (1,000 by default) RF 3 on 3 brokers: how long until
    all are led, idle CPU and resident memory per broker, then acks=all produce to all."""
    n = ctx.many_partitions
    idle_s = 5.0 if ctx.quick else 20.0
    section = Section("partitions", f"Many partitions: {n:,} partitions, RF 3, Raftwood x3",
                      ["measure", "value", "unit", "per broker", "target / status"])
    try:
        with session("raftwood", CLUSTER_BROKERS, ctx) as run:
            _partitions_run(ctx, run, n, idle_s, section)
    except (TargetError, PhaseError) as exc:
        section.errors.append(brief(exc))
        section.rows.append(["(stopped)", "-", "-", "-", f"FAILED: {brief(exc)}"])
    section.notes.append(f"idle CPU: % of one core over {idle_s:g} s with no client traffic, "
                         "the sum of the 3 brokers, then each broker; measured once every "
                         "broker has opened its replicas (open files), not just once Metadata "
                         "shows every partition led")
    return section


def _partitions_run(ctx: Context, run: Running, n: int, idle_s: float,
                    section: Section) -> None:
    count = ctx.count(max(100_000, 10 * n))
    workload = ctx.workload(count, partitions=n, topic="bench-partitions",
                            acks="all", replication_factor=3, spread_partitions=n)
    _idle(run, idle_s, "idle CPU before the topic", section)
    before = _memory(run, "resident set before the topic", section)
    started, cpu_mark = time.monotonic(), run.meter.mark()
    create_topic(run.deployment.bootstrap_servers, workload, run.progress)
    create_s = time.monotonic() - started
    section.rows.append([f"create + all led ({n:,} partitions)", f"{create_s:.1f}",
                         "s", "", f"<= {CREATE_GOAL_S:g} s"])
    section.figures["create_s"] = round(create_s, 2)
    section.summary.append(SummaryRow(f"{n:,} partitions RF 3: create + all led",
                                      f"<= {CREATE_GOAL_S:g} s", f"{create_s:.1f} s",
                                      _yes(create_s <= CREATE_GOAL_S)))
    open_s = _wait_replicas_open(run, before, n, started + ctx.timeout_s)
    if open_s is not None:
        open_s += create_s  # from the CreateTopics call, as create_s
    section.rows.append(["  ... until every broker opened all its replicas",
                         f"{open_s:.1f}" if open_s is not None else "-", "s", "",
                         "report" if open_s is not None else "not seen in --timeout"])
    section.figures["replicas_open_s"] = round(open_s, 2) if open_s is not None else None
    create_cpu_s = run.meter.since(cpu_mark).cpu_s  # less noisy than wall time on a busy host
    section.rows.append(["  broker CPU for it (3 brokers)", f"{create_cpu_s:.1f}", "CPU s",
                         f"{1e3 * create_cpu_s / n:.1f} ms per partition", "report"])
    section.figures["create_cpu_s"] = round(create_cpu_s, 2)
    with ctx.profiler.during("partitions.idle", run.deployment.pgids):
        total, each = _idle(run, idle_s, f"idle CPU with {n:,} partitions", section,
                            goal=f"<= {IDLE_GOAL_PCT:g} % per broker")
    busiest = max(each, default=0.0)
    section.summary.append(SummaryRow(f"idle CPU, {n:,} partitions, busiest broker",
                                      f"<= {IDLE_GOAL_PCT:g} % of a core",
                                      f"{busiest:.1f} % (3 brokers: {total:.1f} %)",
                                      _yes(busiest <= IDLE_GOAL_PCT)))
    after = _memory(run, f"resident set with {n:,} partitions", section)
    _memory_note(section, before, after, n)
    section.summary.append(SummaryRow(f"resident set per broker, {n:,} partitions", "report",
                                      " / ".join(f"{m.rss_mib:.0f}" for m in after) + " MiB"))
    produced = measured_produce(run, workload, ctx, "partitions")
    section.rows.append([f"produce {count:,} x 100 B over all partitions, acks=all",
                         num(produced.msg_per_s), "msg/s", "", "report"])
    section.rows.append(["  broker CPU per GB produced",
                         _cpu_per_gb(ctx, "partitions", run.label, "produce"),
                         "CPU s/GB", "", "report"])
    section.figures["produce"] = produced.as_json()
    section.summary.append(SummaryRow(f"produce acks=all spread over {n:,} partitions",
                                      "report", f"{produced.msg_per_s:,.0f} msg/s"))


def _wait_replicas_open(run: Running, before: list[MemorySample], n: int,
                        deadline: float) -> float | None:
    """Seconds from now until every broker holds `n` more open files than `before` (a
    replica's log keeps its active segment open), or None at `deadline`."""
    started = time.monotonic()
    while time.monotonic() < deadline:
        now = [group_memory(pgid) for pgid in run.deployment.pgids]
        short = [b.open_fds + n - m.open_fds for b, m in zip(before, now)]
        if max(short, default=0) <= 0:
            return time.monotonic() - started
        if run.progress.due():
            run.progress.say(f"replicas not open yet, per broker: {short}")
        time.sleep(0.2)
    return None


def _yes(met: bool) -> str:
    return "yes" if met else "no"


def _memory(run: Running, what: str, section: Section) -> list[MemorySample]:
    """Resident set and open files of each broker now, as a row."""
    samples = [group_memory(pgid) for pgid in run.deployment.pgids]
    section.rows.append([what, f"{sum(s.rss_mib for s in samples):.0f}", "MiB",
                         " / ".join(f"{s.rss_mib:.0f}" for s in samples), "report"])
    section.figures.setdefault("rss_mib", {})[what] = [round(s.rss_mib, 1) for s in samples]
    section.figures.setdefault("open_fds", {})[what] = [s.open_fds for s in samples]
    return samples


def _memory_note(section: Section, before: list[MemorySample], after: list[MemorySample],
                 n: int) -> None:
    """What holds the memory: the growth per replica (each broker holds all n at RF 3)."""
    if not before or len(before) != len(after):
        return
    grown = [a.rss_kib - b.rss_kib for b, a in zip(before, after)]
    per_replica = sum(grown) / len(grown) / n
    fds = [a.open_fds - b.open_fds for b, a in zip(before, after)]
    section.rows.append(["  resident growth per partition replica", f"{per_replica:.1f}",
                         "KiB", " / ".join(f"{g / 1024:.0f} MiB" for g in grown), "report"])
    section.rows.append(["  open files added per broker", " / ".join(map(str, fds)),
                         "fds", f"{sum(fds) / len(fds) / n:.2f} per replica", "report"])
    section.figures["rss_kib_per_replica"] = round(per_replica, 2)
    section.notes.append(
        "resident set: VmRSS of each broker from /proc; at RF 3 on 3 brokers each broker "
        "holds a replica of every partition, so the growth from creating the topic divided "
        "by the partition count is what one replica holds (its Partition and log objects, "
        "index maps and buffers; open files are the segment and index files)")


def _idle(run: Running, idle_s: float, what: str, section: Section,
          goal: str = "report") -> tuple[float, list[float]]:
    """CPU % of one core over `idle_s` with no traffic: (sum of all brokers, each broker)."""
    meters = [CpuMeter([pgid]) for pgid in run.deployment.pgids]
    marks = [m.mark() for m in meters]
    total_mark = run.meter.mark()
    deadline = time.monotonic() + idle_s
    run.progress.restart()
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, 0.2))
        if run.progress.due():
            used = run.meter.since(total_mark)
            run.progress.say(f"{what}: {100 * used.cpu_s / max(used.wall_s, 1e-9):.1f} % "
                             f"so far ({left:.0f} s left)")
    used = run.meter.since(total_mark)
    pct = 100.0 * used.cpu_s / used.wall_s
    each = [100.0 * p.cpu_s / p.wall_s for p in (m.since(mark) for m, mark in zip(meters, marks))]
    section.rows.append([what, f"{pct:.1f}", "% of a core",
                         " / ".join(f"{p:.1f}" for p in each), goal])
    section.figures.setdefault("idle_cpu_pct", {})[what] = round(pct, 2)
    section.figures.setdefault("idle_cpu_pct_per_broker", {})[what] = [round(p, 2) for p in each]
    return pct, each

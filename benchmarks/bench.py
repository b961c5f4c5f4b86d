#!/usr/bin/env python3
"""Raftwood vs noida-db: every benchmark workload in one run, one report (`make bench`).

Workloads (see benchmarks/README.md): w1 (2M x 100 B produce/consume, both targets), w2
(200k x 1 KiB, both targets), w2deep (1M x 1 KiB produce with up to 2M records queued in
the client, both targets), backlog (consume rate of a 200k-record vs a 2M-record log,
Raftwood), w3 (3-broker RF 3 acks=all vs 1 broker RF 1 acks=1), w5 (delivery latency at
fixed rates on 3 brokers), partitions (1,000 partitions on 3 brokers: idle CPU, produce).
Each starts its own brokers on 127.0.0.1 (free ports, temp dirs) and stops them, always.

Progress goes to stderr (about a line a second); stdout gets a table per workload, broker
CPU per GB, and a goal-vs-measured summary. Figures only: nothing here asserts a speed.
Exit status: 0 when every phase ran, 1 when any failed, 2 on bad arguments, 128 + signal
number when interrupted.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path

from cluster_workloads import LATENCY_RATES, partitions, w3, w5
from profiler import Profiler
from report import print_cpu, print_section, print_summary
from servers import TARGETS, BrokerProcess
from throughput import environment
from workloads import Context, backlog_alone, sweep_stale_dirs, w1, w2, w2_deep

WORKLOADS = ("w1", "w2", "w2deep", "backlog", "w3", "w5", "partitions")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help="comma-separated, from: " + ", ".join(WORKLOADS) + " (default: all)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: record counts / 10, 2 s per latency rate, 5 s idle")
    parser.add_argument("--targets", default="raftwood,noida",
                        help="targets of w1, w2 and w2deep (default: raftwood,noida)")
    parser.add_argument("--rates", default=",".join(map(str, LATENCY_RATES)),
                        help="w5 produce rates, msg/s; 0 is one record in flight "
                             "(default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds allowed per phase (default 300, 60 with --quick)")
    parser.add_argument("--start-timeout", type=float, default=60.0,
                        help="seconds allowed for brokers to start answering (default 60)")
    parser.add_argument("--raftwood-src", type=Path, metavar="DIR",
                        help="run the Raftwood broker from DIR (e.g. a `git archive` of a "
                             "commit) instead of this work tree")
    parser.add_argument("--raftwood-set", action="append", default=[], metavar="KEY=VALUE",
                        help="one more broker setting for every Raftwood broker, e.g. "
                             "socket.sendfile.enable=false (repeatable)")
    parser.add_argument("--partitions", type=int, default=1000, metavar="N",
                        help="partitions of the `partitions` workload's topic, RF 3 "
                             "(default: %(default)s; the goal is 10,000)")
    parser.add_argument("--keep-data", action="store_true",
                        help="keep each deployment's temporary data dirs and logs")
    parser.add_argument("--json", nargs="?", const="-", metavar="PATH",
                        help="write every figure as JSON to PATH (no PATH: one line on stdout)")
    parser.add_argument("--profile", type=Path, metavar="PATH",
                        help="py-spy record the Raftwood broker(s) during --profile-phase into "
                             "PATH (.svg flamegraph, .txt raw, else speedscope JSON)")
    parser.add_argument("--profile-phase", default="W1.produce",
                        help="phase to profile: W1.produce, W1.consume, W2.produce, W2.consume, "
                             "W2deep.produce, "
                             "backlog.consume, W3.produce, W5.<rate>, partitions.idle, "
                             "partitions.produce "
                             "(default: %(default)s)")
    args = parser.parse_args(argv)
    args.workload_names = _names(parser, "--workloads", args.workloads, WORKLOADS)
    args.target_names = _names(parser, "--targets", args.targets, tuple(TARGETS))
    args.raftwood_settings = {}
    for pair in args.raftwood_set:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            parser.error(f"--raftwood-set: expected KEY=VALUE, got {pair!r}")
        args.raftwood_settings[name.strip()] = value.strip()
    try:
        args.rate_list = tuple(int(r) for r in args.rates.split(",") if r.strip())
    except ValueError:
        parser.error(f"--rates: not a list of integers: {args.rates}")
    if not args.rate_list or min(args.rate_list) < 0:
        parser.error("--rates: give rates >= 0 (0: one record in flight)")
    if args.partitions < 1:
        parser.error("--partitions: give at least 1")
    if args.timeout is None:
        args.timeout = 60.0 if args.quick else 300.0
    return args


def _names(parser, option: str, text: str, allowed: tuple[str, ...]) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in allowed]
    if unknown or not names:
        parser.error(f"{option}: unknown {unknown or 'empty list'}; choose from "
                     f"{', '.join(allowed)}")
    return names


def say(text: str) -> None:
    print(f"[bench] {text}", file=sys.stderr, flush=True)


def run_workloads(args: argparse.Namespace, ctx: Context) -> list:
    names = args.workload_names
    # the backlog check rides on W1's Raftwood broker when W1 runs one
    backlog_in_w1 = "backlog" in names and "w1" in names and "raftwood" in args.target_names
    sections = []
    for name in names:
        started = time.monotonic()
        if name == "backlog" and backlog_in_w1:
            say("--- backlog: runs on the W1 Raftwood broker (see w1) ---")
            continue
        say(f"--- {name} ---")
        if name == "w1":
            sections += w1(ctx, with_backlog=backlog_in_w1)
        elif name == "backlog":
            sections.append(backlog_alone(ctx))
        elif name == "w2":
            sections.append(w2(ctx))
        elif name == "w2deep":
            sections.append(w2_deep(ctx))
        elif name == "w3":
            sections.append(w3(ctx))
        elif name == "w5":
            sections.append(w5(ctx, args.rate_list))
        elif name == "partitions":
            sections.append(partitions(ctx))
        say(f"--- {name} done in {time.monotonic() - started:.0f} s ---")
    return sections


def write_json(path: str, args: argparse.Namespace, ctx: Context, sections: list) -> None:
    doc = {"benchmark": "bench", "quick": args.quick, "workloads": args.workload_names,
           "targets": args.target_names, "environment": environment(),
           "started_utc": args.started_utc, "raftwood_settings": args.raftwood_settings,
           "sections": {s.key: {"title": s.title, "figures": s.figures, "errors": s.errors,
                                "summary": [r.as_json() for r in s.summary]}
                        for s in sections},
           "cpu": [r.as_json() for r in ctx.cpu_rows]}
    text = json.dumps(doc, sort_keys=True, default=str)
    if path == "-":
        print(text)
    else:
        Path(path).write_text(text + "\n")
        say(f"figures written to {path}")


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(signum)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for signum in (signal.SIGTERM, signal.SIGHUP):  # so `finally` blocks stop the brokers
        signal.signal(signum, _raise_interrupt)
    args.started_utc = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    profiler = Profiler(args.profile, args.profile_phase, say)
    if (why := profiler.check()) is not None:
        print(f"bench: {why}", file=sys.stderr)
        return 2
    ctx = Context(quick=args.quick, targets=args.target_names, timeout_s=args.timeout,
                  start_timeout_s=args.start_timeout, keep_data=args.keep_data,
                  profiler=profiler, raftwood_src=args.raftwood_src,
                  raftwood_settings=args.raftwood_settings, many_partitions=args.partitions)
    env = environment()
    print(f"bench {'--quick ' if args.quick else ''}at {args.started_utc}: "
          f"{', '.join(args.workload_names)}; confluent-kafka {env['confluent_kafka']} "
          f"(librdkafka {env['librdkafka']}), Python {env['python']}, {env['cpus']} CPUs"
          + "".join(f"; --raftwood-set {k}={v}" for k, v in args.raftwood_settings.items()),
          flush=True)
    started = time.monotonic()
    sweep_stale_dirs(say)
    try:
        sections = run_workloads(args, ctx)
    except KeyboardInterrupt as exc:
        BrokerProcess.stop_all()
        signum = exc.args[0] if exc.args else signal.SIGINT
        print(f"interrupted by {signal.Signals(signum).name}; brokers stopped", file=sys.stderr)
        return 128 + signum
    for section in sections:
        print_section(section)
    if ctx.cpu_rows:
        print_cpu(ctx.cpu_rows)
    print_summary(sections)
    print(f"\ntotal {time.monotonic() - started:.0f} s")
    if profiler.enabled and profiler.phase and not profiler.written and not profiler.failures:
        print(f"note: --profile-phase {profiler.phase} did not run in this selection",
              file=sys.stderr)
    if args.json:
        write_json(args.json, args, ctx, sections)
    failed = [e for s in sections for e in s.errors] + profiler.failures
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

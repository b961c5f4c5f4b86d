"""Command line: ``python -m tests.fuzz [--requests N] [--duration S] [--seed N] ...``.

Exit status 0 when every check passed, 1 when any failed (the final table says which),
2 on a usage error.
"""
from __future__ import annotations

import argparse
import json
import sys

from .campaign import run


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m tests.fuzz",
        description="Fuzz a real 3-broker Raftwood cluster under an acks=all load.")
    parser.add_argument("--requests", type=int, default=100_000,
                        help="stop after this many requests are judged (default 100,000)")
    parser.add_argument("--duration", type=float, default=600.0,
                        help="stop after this many seconds of fuzzing (default 600)")
    parser.add_argument("--seed", type=int, default=1, help="the generators' seed (default 1)")
    parser.add_argument("--connections", type=int, default=48,
                        help="fuzz connections, spread over the brokers (default 48)")
    parser.add_argument("--clean-connections", type=int, default=6,
                        help="connections sending only valid requests (default 6)")
    parser.add_argument("--depth", type=int, default=4,
                        help="requests in flight per connection (default 4)")
    parser.add_argument("--hold", type=float, default=3.0,
                        help="seconds a request may go unanswered before we close (default 3)")
    parser.add_argument("--serve-timeout", type=float, default=30.0,
                        help="seconds a broker may leave ApiVersions unanswered (default 30)")
    parser.add_argument("--load-rate", type=float, default=200.0,
                        help="acks=all records per second beside the fuzzing (default 200)")
    parser.add_argument("--bootstrap", help="attach to this cluster instead of starting one")
    parser.add_argument("--broker-log", action="append",
                        help="with --bootstrap: a broker log to scan (repeatable)")
    parser.add_argument("--json", metavar="PATH", help="write the whole report as JSON to PATH")
    parser.add_argument("--keep-data", action="store_true",
                        help="keep the cluster's data and logs (the path is printed)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    return parser.parse_args(argv)


def print_table(report: dict, out=sys.stdout) -> None:
    """The final table: totals, refusals by kind, outcomes per API and per mutation."""
    def line(text=""):
        print(text, file=out)

    line(f"\nrequests judged {report.get('requests', 0):,} in {report.get('elapsed_s', 0)} s "
         f"({report.get('requests_per_s', 0):,}/s), {report.get('connections', 0):,} "
         f"connections, {report.get('dropped_behind_close', 0):,} dropped behind a close, "
         f"{report.get('unconfirmed_closes', 0):,} valid requests closed on but answered "
         f"when sent again")
    line("outcomes: " + ", ".join(f"{k} {v:,}" for k, v in
                                  sorted(report.get("outcomes", {}).items())))
    line("refusals by kind: " + ", ".join(f"{k} {v:,}" for k, v in
                                          report.get("refusals", {}).items()))
    columns = ("answered", "refused (error code)", "closed", "held", "no-answer",
               "malformed answer")
    for title, table in (("API", report.get("by_api", {})),
                         ("mutation", report.get("by_mutation", {}))):
        line(f"\n{title:<32}" + "".join(f"{c:>12.12}" for c in columns))
        for name, row in sorted(table.items()):
            line(f"{name:<32}" + "".join(f"{row.get(c, 0):>12,}" for c in columns))
    load = report.get("load", {})
    line(f"\nacks=all load: produced {load.get('produced', 0):,}, acknowledged "
         f"{load.get('acked', 0):,}, read back {load.get('checked', 0):,}, lost "
         f"{load.get('lost_count', 0)}, changed {load.get('changed_count', 0)}, "
         f"refused {load.get('failed', {})}")
    line(f"brokers: {report.get('brokers', {})}; exit codes {report.get('exit_codes', {})}")
    line(f"fresh client: {report.get('fresh_client', {})}")
    line(f"sentinel max wait (s): {report.get('sentinel_max_wait_s', {})}; CPU seconds while "
         f"fuzzing: {report.get('cpu_s', {})}")
    logs = report.get("logs", {})
    line(f"broker logs: {logs.get('counts', {})}")
    for kind, samples in logs.get("samples", {}).items():
        for sample in samples[:3]:
            line(f"  [{kind}] {sample}")
    coverage = report.get("coverage", {})
    line(f"coverage: {coverage.get('sent_unmutated', 0)}/{coverage.get('served_versions', 0)} "
         f"served API versions sent unmutated; missing {coverage.get('missing', [])[:10]}")
    for node_id, stack in (report.get("stuck_stacks") or {}).items():
        line(f"broker {node_id} stopped serving; its stacks:\n{stack}")
    for violation in report.get("violations", [])[:10]:
        shown = {k: (v[:160] + "..." if k == "frame_hex" and len(v) > 160 else v)
                 for k, v in violation.items()}
        line(f"VIOLATION: {shown}")
    line("\nRESULT: " + ("ok" if report.get("ok") else "FAILED: " + "; ".join(
        report.get("failures", []))))


def main(argv=None) -> int:
    options = parse_args(argv)
    report = run(options, say=lambda text: print(text, flush=True))
    print_table(report)
    if options.json:
        with open(options.json, "w") as out:
            json.dump(report, out, indent=1, default=str)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

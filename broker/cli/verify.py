"""``raftwood verify``: start a cluster, load it, inject faults, check, report.

    raftwood verify [--brokers N] [--duration SECONDS] [--seed N] [--faults LIST]
                    [--network auto|netns|proxy] [--workloads records,txn,share]
                    [--keep-data] [--json]

``--network netns`` (the default where this process can make network namespaces:
root, iproute2, nftables) runs every broker in a namespace of its own and cuts links
with nftables, Raft included; ``proxy`` cuts replica fetching through a loopback
proxy.  The first line says which ran and why.

``--faults`` may add ``reassign`` (moving a partition's replicas while writing), which
no default set includes; such a run starts 4 brokers unless ``--brokers`` is given,
so a replica has a broker to move to (``broker/verify/reassign.py`` says why).

Workloads: ``records`` (idempotent acks=all producers; always), ``txn`` (a
transactional producer, read_committed readers and the LSO) and ``share`` (share
consumers of one group acknowledging every record of the records topics; the check
wants each acknowledged record acknowledged by the group, with redeliveries no more
than the records in flight at faults).  The default runs all three, ``txn`` and
``share`` where confluent-kafka is importable (saying so when one is skipped).  A flag
rather than a mode: transactions and share groups are worth most under the same faults
as everything else, and ``--workloads records`` still gives a run without them.

Prints the seed and the fault schedule first (replay a failure with ``--seed``),
progress lines while it runs, a report, and as its last line::

    verify: PASS faults=12 acked=18034 lost=0 duplicates=0 hw_regressions=0 divergent=0

Exit code 0 on PASS, 1 on FAIL, 2 on a usage error, 130 when interrupted.  With
``--json`` the progress goes to stderr and stdout carries one JSON object (the
report, with ``summary`` holding the line above).
"""
from __future__ import annotations

import json
import sys

EXIT_PASS, EXIT_FAIL, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def add_command(subparsers) -> None:
    from ..verify.schedule import FAULT_KINDS, NETNS_ALIASES, NETNS_FAULT_KINDS, OPT_IN_FAULT_KINDS

    parser = subparsers.add_parser(
        "verify", help="fault injection and invariant checking on a throwaway cluster",
        description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=int,
                        help="cluster size (>= 3; default 3, or 4 when --faults includes "
                             "reassign)")
    parser.add_argument("--duration", type=float, default=60.0, metavar="SECONDS",
                        help="length of the fault schedule (setup and checks come on top)")
    parser.add_argument("--seed", type=int, help="schedule seed (printed; default random)")
    parser.add_argument("--faults", metavar="LIST",
                        help=f"comma-separated kinds: {', '.join(FAULT_KINDS)}; with "
                             f"--network netns also {', '.join(NETNS_FAULT_KINDS)}; or "
                             f"{', '.join(NETNS_ALIASES)} (default all the mode runs); "
                             f"only when named: {', '.join(OPT_IN_FAULT_KINDS)} (move a "
                             f"partition's replicas while writing)")
    parser.add_argument("--network", choices=("auto", "netns", "proxy"), default="auto",
                        help="how links are cut: netns (brokers in network namespaces, "
                             "nftables, Raft included; needs root, iproute2, nftables) or "
                             "proxy (replica fetching only); auto: netns where possible")
    parser.add_argument("--keep-data", action="store_true",
                        help="keep the data directory and logs after a PASS too")
    parser.add_argument("--data-dir", help="where to create the run's temporary directory")
    parser.add_argument("--rate", type=float, default=150.0,
                        help="records per second per producer (default 150)")
    parser.add_argument("--workloads", default="records,txn,share", metavar="LIST",
                        help="comma-separated: records (always), txn (transactions, "
                             "read_committed, LSO; needs confluent-kafka), share (a share "
                             "group acknowledging every record; needs confluent-kafka) "
                             "(default records,txn,share)")
    parser.add_argument("--json", action="store_true",
                        help="report as JSON on stdout (progress on stderr)")
    parser.set_defaults(func=cmd_verify)


def cmd_verify(args) -> int:
    import faulthandler
    import logging
    import signal

    from ..verify.report import Progress
    from ..verify.runner import VerifyOptions, VerifyRun, choose_network
    from ..verify.schedule import parse_fault_kinds

    try:
        network, _why = choose_network(args.network)
        faults = parse_fault_kinds(args.faults, network) if args.faults else None
        options = VerifyOptions(brokers=args.brokers, duration_s=args.duration, seed=args.seed,
                                faults=faults, network=args.network,
                                keep_data=args.keep_data, data_dir=args.data_dir,
                                rate=args.rate, workloads=tuple(
                                    w.strip() for w in args.workloads.split(",") if w.strip()))
        if options.duration_s <= 0 or options.rate <= 0:
            raise ValueError("--duration and --rate must be positive")
        run = VerifyRun(options, Progress(sys.stderr if args.json else sys.stdout))
    except ValueError as exc:
        print(f"raftwood verify: {exc}", file=sys.stderr)
        return EXIT_USAGE
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # kill -USR1: every stack
    if getattr(args, "log_level", "INFO").upper() != "DEBUG":
        logging.getLogger("kafka").setLevel(logging.CRITICAL)  # clients retry through faults
    try:
        report = run.execute()
    except KeyboardInterrupt:
        print(f"verify: interrupted; every broker stopped; data and logs in {run.home}",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report.render(), flush=True)
    return EXIT_PASS if report.passed else EXIT_FAIL

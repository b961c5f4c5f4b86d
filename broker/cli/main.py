"""The ``raftwood`` command line.

    raftwood start [--config FILE] [--set key=value ...]   one broker, foreground
    raftwood dev [--brokers 3] [--data-dir ./data] [--port 9092]
                                                          a local cluster of N brokers
    raftwood topics create|list|describe|delete ... [--bootstrap-server HOST:PORT]
    raftwood produce TOPIC [--key-separator SEP]          standard input's lines as records
    raftwood consume TOPIC [--from-beginning] [--max-messages N] [--timeout-ms MS]
                                                          print a topic's records
    raftwood cluster [--bootstrap-server HOST:PORT]       brokers, controller, problems
    raftwood groups list|describe GROUP [--bootstrap-server HOST:PORT]
                                                          consumer groups, offsets, lag
    raftwood users add|list|delete NAME ...               SCRAM users
    raftwood quotas describe|alter [--user U] [--client-id C] [--add-config k=v,...]
                                                          client quotas (KIP-546)
    raftwood acls add|list|remove [--allow-principal User:x] [--operation read] [--topic T]
                                                          ACLs (kafka-acls.sh's options)
    raftwood configs --entity-type brokers|topics|groups|broker-loggers
        --entity-name N|--entity-default --describe|--alter [--add-config k=v,...]
        [--delete-config k]                               configs (kafka-configs.sh's options)
    raftwood reassign --topics T1,T2 [--brokers 1,2,4] [--execute|--status|--cancel]
                                                          move replicas (KIP-455)
    raftwood brokers decommission ID [--execute]          move every replica off a broker
    raftwood verify [--brokers 3] [--duration S] [--seed N] [--faults LIST]
                                                          fault injection + invariant checks
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from .. import config as config_module
from .. import config_doc, logs
from . import (
    acls,
    admin,
    configs,
    console,
    dev,
    groups,
    quorum,
    quotas,
    reassign,
    users,
    verify,
)


def _setup_logging(level: str, log_format: str = "text") -> None:
    logs.configure(level, log_format, sys.stderr)


def _run(coro):
    """Run ``coro`` to completion on a new event loop (uvloop when installed); its result."""
    try:
        import uvloop  # optional: faster event loop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def check_security(config) -> None:
    """Build every TLS context once (ConfigError when one cannot be built)."""
    from ..security import client, tls

    try:
        tls.server_contexts(config)
        client.inter_broker_security(config)
    except tls.SettingError as exc:
        raise config_module.ConfigError(str(exc)) from exc


def cmd_start(args) -> int:
    from ..malloc_thresholds import keep_large_buffers_on_heap
    from ..node import Broker

    try:
        config = config_module.load(args.config, args.set)
        check_security(config)  # keystores and truststores load, or a clear refusal
    except (config_module.ConfigError, OSError) as exc:
        print(f"raftwood: {exc}", file=sys.stderr)
        return 2
    _setup_logging(args.log_level, config["log.format"])
    keep_large_buffers_on_heap()  # 1 MB batches without a page fault per 4 KiB

    async def main() -> int:
        broker = Broker(config)
        await broker.serve_until_signalled()
        return broker.exit_code  # 1 after a fatal failure (its log directory went offline)

    try:
        return _run(main())
    except OSError as exc:  # e.g. the listener's port is taken
        logging.getLogger("broker").error("cannot start: %s", exc)
        print(f"raftwood: cannot start: {exc}", file=sys.stderr)
        return 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="raftwood", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--log-level", default="INFO")
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser(
        "start", help="run one broker in the foreground",
        description="Run one broker in the foreground (SIGTERM or Ctrl-C stops it cleanly).",
        epilog=config_doc.help_listing(),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    start.add_argument("--config", help="properties or TOML file with Kafka's config names")
    start.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="override one setting (repeatable); settings are listed below")
    start.set_defaults(func=cmd_start)
    dev.add_command(commands)
    admin.add_commands(commands)
    console.add_commands(commands)
    reassign.add_commands(commands)
    quorum.add_commands(commands)
    groups.add_commands(commands)
    users.add_commands(commands)
    quotas.add_commands(commands)
    acls.add_commands(commands)
    configs.add_commands(commands)
    verify.add_command(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _setup_logging(args.log_level)
    return args.func(args)


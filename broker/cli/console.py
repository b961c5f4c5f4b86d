"""``raftwood produce`` and ``raftwood consume``: records from a terminal, as Kafka's
console producer and consumer (the same option names where they have one).

    printf 'a\\nb\\n' | raftwood produce TOPIC [--key-separator :] [--partition N] [--acks all]
    raftwood consume TOPIC [--from-beginning] [--max-messages N] [--timeout-ms MS]
                           [--group G] [--partition N] [--print-key]

``produce`` sends one record per line of standard input (the line without its newline;
with ``--key-separator`` the text before the first separator is the key) and reports on
standard error how many records the cluster acknowledged.  ``consume`` prints one value
per line (``key<TAB>value`` with ``--print-key``): without ``--group`` it reads every
partition (or the one named) from its end, or from its start with ``--from-beginning``;
with ``--group`` the group's committed offsets decide, and it commits what it printed.
It stops after ``--max-messages``, after ``--timeout-ms`` without a record, or at Ctrl-C.

Both use kafka-python's producer and consumer, the client this package depends on, with
the ``--command-config`` security of the other client commands.  Every failure a user
can cause (no broker at the address, a topic that does not exist, SASL refused) is one
line on standard error and exit status 1.
"""
from __future__ import annotations

import argparse
import logging
import socket
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaConnectionError, KafkaError

from .admin import _client_options
from .client import format_address

ENCODING = "utf-8"
CONNECT_HINT = "is a cluster running there? `make run` starts one on 127.0.0.1:9092"
CONNECT_PROBE_S = 5.0


def _reachable(args) -> bool:
    """Whether the bootstrap address accepts a TCP connection (kafka-python would retry a
    refused one for the whole request timeout before saying so)."""
    try:
        socket.create_connection(args.bootstrap_server, timeout=CONNECT_PROBE_S).close()
        return True
    except OSError:
        return False


def _open(args, make):
    """The client ``make(**settings)`` builds, or None after one line saying why not.
    kafka-python's own log lines (every retry, at ERROR) stay quiet unless --log-level
    DEBUG asked for them."""
    if args.log_level.upper() != "DEBUG":
        logging.getLogger("kafka").setLevel(logging.CRITICAL)
    if not _reachable(args):
        _fail(args, KafkaConnectionError("refused"))
        return None
    try:
        return make(**_client_settings(args))
    except (KafkaError, OSError) as exc:
        _fail(args, exc)
        return None


def _security_options(security) -> dict:
    """kafka-python's settings for the ``--command-config`` security (None: PLAINTEXT)."""
    if security is None or security.listener_name == "PLAINTEXT":
        return {}
    options = {"security_protocol": security.listener_name}
    if security.ssl_context is not None:
        options["ssl_context"] = security.ssl_context
    if security.sasl_mechanism:
        options.update(sasl_mechanism=security.sasl_mechanism,
                       sasl_plain_username=security.username,
                       sasl_plain_password=security.password)
    return options


def _client_settings(args) -> dict:
    return {"bootstrap_servers": format_address(args.bootstrap_server),
            "request_timeout_ms": int(args.timeout * 1000) + 1000,
            **_security_options(args.security)}


def _fail(args, exc: Exception) -> int:
    where = format_address(args.bootstrap_server)
    if isinstance(exc, KafkaConnectionError) or "NoBrokersAvailable" in type(exc).__name__:
        print(f"raftwood: no broker answers at {where}: {CONNECT_HINT}", file=sys.stderr)
    else:
        text = str(exc) or type(exc).__name__
        print(f"raftwood: {args.command} {args.topic} via {where}: {text}", file=sys.stderr)
    return 1


def _acks(text: str):
    if text in ("all", "-1"):
        return "all"
    if text in ("0", "1"):
        return int(text)
    raise argparse.ArgumentTypeError(f"--acks is all, 1 or 0, not {text!r}")


def cmd_produce(args) -> int:
    producer = _open(args, lambda **settings: KafkaProducer(acks=args.acks, **settings))
    if producer is None:
        return 1
    futures = []
    try:
        for line in sys.stdin:
            text = line.rstrip("\r\n")
            key = None
            if args.key_separator and args.key_separator in text:
                key_text, text = text.split(args.key_separator, 1)
                key = key_text.encode(ENCODING)
            futures.append(producer.send(args.topic, text.encode(ENCODING), key=key,
                                         partition=args.partition))
        producer.flush(timeout=args.timeout)
        partitions = sorted({future.get(timeout=args.timeout).partition
                             for future in futures})
    except (KafkaError, OSError) as exc:
        return _fail(args, exc)
    except KeyboardInterrupt:
        return 130
    finally:
        producer.close(timeout=args.timeout)
    where = f" (partitions {', '.join(map(str, partitions))})" if partitions else ""
    print(f"{len(futures)} records written to {args.topic}{where}", file=sys.stderr)
    return 0


def _assign(consumer: KafkaConsumer, args) -> None:
    """Without a group: every partition of the topic (or the one named), at its start
    or end."""
    deadline = time.monotonic() + args.timeout
    numbers = consumer.partitions_for_topic(args.topic)
    while not numbers and time.monotonic() < deadline:
        time.sleep(0.2)
        numbers = consumer.partitions_for_topic(args.topic)
    if not numbers:
        raise KafkaError(f"topic {args.topic} does not exist (`raftwood topics list` "
                         f"shows the topics)")
    if args.partition is not None:
        if args.partition not in numbers:
            raise KafkaError(f"topic {args.topic} has no partition {args.partition} "
                             f"(it has {len(numbers)})")
        numbers = {args.partition}
    partitions = [TopicPartition(args.topic, n) for n in sorted(numbers)]
    consumer.assign(partitions)
    if args.from_beginning:
        consumer.seek_to_beginning(*partitions)
    else:
        consumer.seek_to_end(*partitions)


def _print_record(record, print_key: bool) -> None:
    value = "" if record.value is None else record.value.decode(ENCODING, "replace")
    if print_key:
        key = "" if record.key is None else record.key.decode(ENCODING, "replace")
        value = f"{key}\t{value}"
    print(value, flush=True)


def cmd_consume(args) -> int:
    grouped = args.group is not None
    if grouped and args.partition is not None:
        print("raftwood: consume takes --group or --partition, not both (a group's "
              "members are assigned their partitions)", file=sys.stderr)
        return 2
    consumer = _open(args, lambda **settings: KafkaConsumer(
        group_id=args.group, enable_auto_commit=False,
        auto_offset_reset="earliest" if args.from_beginning else "latest", **settings))
    if consumer is None:
        return 1
    printed = 0
    try:
        if grouped:
            consumer.subscribe([args.topic])
        else:
            _assign(consumer, args)
        idle_since = time.monotonic()
        while args.max_messages is None or printed < args.max_messages:
            batches = consumer.poll(timeout_ms=200, max_records=(
                None if args.max_messages is None else args.max_messages - printed))
            records = [record for batch in batches.values() for record in batch]
            for record in records:
                _print_record(record, args.print_key)
            printed += len(records)
            if records:
                idle_since = time.monotonic()
                if grouped:
                    consumer.commit()
            elif args.timeout_ms is not None \
                    and time.monotonic() - idle_since >= args.timeout_ms / 1000:
                break
    except (KafkaError, OSError) as exc:
        return _fail(args, exc)
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close(autocommit=False)
    print(f"{printed} records read from {args.topic}", file=sys.stderr)
    return 0


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


def add_commands(commands) -> None:
    """Register ``produce`` and ``consume`` on the ``raftwood`` sub-command parser."""
    common = _client_options()
    produce = commands.add_parser(
        "produce", parents=[common], help="send standard input's lines as records",
        description="Send one record per line of standard input.")
    produce.add_argument("topic")
    produce.add_argument("--key-separator", metavar="SEP", default="",
                         help="text before the first SEP of a line is the record's key")
    produce.add_argument("--partition", type=_non_negative, default=None,
                         help="send every record to this partition (default: by key, "
                              "or spread)")
    produce.add_argument("--acks", type=_acks, default="all",
                         help="all (the default), 1 or 0")
    produce.set_defaults(func=cmd_produce)

    consume = commands.add_parser(
        "consume", parents=[common], help="print a topic's records",
        description="Print one record value per line.")
    consume.add_argument("topic")
    consume.add_argument("--from-beginning", action="store_true",
                         help="start at the log start, not the end")
    consume.add_argument("--max-messages", type=_non_negative, default=None, metavar="N",
                         help="stop after N records")
    consume.add_argument("--timeout-ms", type=_non_negative, default=None, metavar="MS",
                         help="stop after MS milliseconds without a record")
    consume.add_argument("--group", default=None,
                         help="read as this consumer group, committing what is printed")
    consume.add_argument("--partition", type=_non_negative, default=None,
                         help="only this partition (not with --group)")
    consume.add_argument("--print-key", action="store_true",
                         help="print key<TAB>value")
    consume.set_defaults(func=cmd_consume)

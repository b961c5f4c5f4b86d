"""``raftwood topics create|list|describe|delete`` and ``raftwood cluster``.

Client-side commands, as Kafka's tools: ``--bootstrap-server HOST:PORT`` names any broker.
CreateTopics and DeleteTopics go to the controller named in Metadata (falling back to the
bootstrap broker when the controller's advertised address does not connect) and are
retried there on NOT_CONTROLLER until ``--timeout``.  ``describe`` and ``cluster`` use
Raftwood's private status request (``protocol/status.py``): the bootstrap broker's
cluster image, plus, for ``describe``, every broker's own view of what it hosts.

Exit codes: 0 done; 1 the cluster answered with a Kafka error (its name is printed, e.g.
TOPIC_ALREADY_EXISTS); 2 no usable answer (cannot connect, no status answer, bad usage).
"""
from __future__ import annotations

import argparse
import sys
import time

from kafka.protocol.admin import CreateTopicsRequest, DeleteTopicsRequest
from kafka.protocol.metadata import MetadataRequest

from protocol.errors import ErrorCode

from ..security.client import ClientSecurity
from . import command_config
from . import status as cli_status
from .client import (
    DEFAULT_TIMEOUT_S,
    EXIT_KAFKA_ERROR,
    EXIT_OK,
    Address,
    ClientError,
    CommandFailure,
    Connection,
    error_name,
    fetch_status,
    fetch_statuses,
    format_address,
    guarded,
    parse_address,
)

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
CREATE_TOPICS_VERSION = 5   # KIP-464 defaults (-1) and error messages; served 2-7
DELETE_TOPICS_VERSION = 5   # error messages; served 1-6
METADATA_VERSION = 8        # controller id, leader epochs; served 0-12
RETRY_BACKOFF_S = 0.5


class KafkaFailure(CommandFailure):
    """The cluster answered with an error code (printed as ``NAME: message``)."""

    def __init__(self, code: int, message: str | None, subject: str):
        self.code = code
        name = error_name(code)
        detail = f": {message}" if message and message != name else ""
        super().__init__(f"{subject}: {name}{detail}")


# -- argument parsing -----------------------------------------------------------------------

def _address_arg(text: str) -> Address:
    try:
        return parse_address(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _config_arg(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key.strip(), value.strip()


def _command_config_arg(path: str) -> ClientSecurity:
    try:
        return command_config.load(path)
    except command_config.CommandConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _client_options() -> argparse.ArgumentParser:
    """The options of every command that talks to brokers (topics, cluster, groups,
    users, acls)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--bootstrap-server", type=_address_arg,
                        default=parse_address(DEFAULT_BOOTSTRAP), metavar="HOST:PORT",
                        help=f"any broker of the cluster (default {DEFAULT_BOOTSTRAP})")
    common.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                        help=f"per request and for retries (default {DEFAULT_TIMEOUT_S:g})")
    common.add_argument("--command-config", type=_command_config_arg, dest="security",
                        default=None, metavar="FILE",
                        help="client properties for a TLS or SASL listener (security.protocol, "
                             "sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ...)")
    return common


def add_commands(commands) -> None:
    """Register ``topics`` and ``cluster`` on the ``raftwood`` sub-command parser."""
    common = _client_options()
    topics = commands.add_parser("topics", help="create, list, describe or delete topics")
    actions = topics.add_subparsers(dest="topics_command", required=True, metavar="ACTION")
    create = actions.add_parser("create", parents=[common], help="create a topic")
    create.add_argument("name")
    create.add_argument("--partitions", type=int, default=-1,
                        help="partition count (default: the broker's num.partitions)")
    create.add_argument("--replication-factor", type=int, default=-1,
                        help="replicas per partition (default: default.replication.factor)")
    create.add_argument("--config", type=_config_arg, action="append", default=[],
                        metavar="KEY=VALUE", help="topic config override (repeatable)")
    create.add_argument("--if-not-exists", action="store_true",
                        help="succeed when the topic already exists")
    create.set_defaults(func=cmd_topics_create)
    listing = actions.add_parser("list", parents=[common], help="topic names, one a line")
    listing.set_defaults(func=cmd_topics_list)
    describe = actions.add_parser(
        "describe", parents=[common],
        help="partitions: leader, epochs, replicas, ISR, HW, each replica's state/LEO/lag")
    describe.add_argument("names", nargs="*", metavar="NAME", help="topics (default: all)")
    describe.set_defaults(func=cmd_topics_describe)
    delete = actions.add_parser("delete", parents=[common], help="delete a topic")
    delete.add_argument("name")
    delete.add_argument("--if-exists", action="store_true",
                        help="succeed when the topic does not exist")
    delete.set_defaults(func=cmd_topics_delete)
    cluster = commands.add_parser(
        "cluster", parents=[common],
        help="brokers, controller, offline / under-replicated / under-min-ISR partitions")
    cluster.set_defaults(func=cmd_cluster)


# -- requests ---------------------------------------------------------------------------------

def _metadata(conn: Connection, topics: list[str] | None):
    topic_list = None if topics is None else [
        MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
    return conn.request(MetadataRequest[METADATA_VERSION](
        topics=topic_list, allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False))


def _controller_connection(bootstrap: Address, timeout_s: float, security) -> Connection:
    """A connection to the controller per Metadata, else to the bootstrap broker."""
    conn = Connection(bootstrap, timeout_s, security)
    try:
        metadata = _metadata(conn, [])
    except ClientError:
        conn.close()
        raise
    controller = next((b for b in metadata.brokers if b.node_id == metadata.controller_id), None)
    if controller is None or (controller.host, controller.port) == bootstrap:
        return conn
    try:
        other = Connection((controller.host, controller.port), timeout_s, security)
    except ClientError:
        return conn  # advertised address not reachable from here (e.g. inside Docker)
    conn.close()
    return other


def _admin_call(args, build_request, result_of) -> tuple[int, str | None]:
    """Send an admin request to the controller, retrying on NOT_CONTROLLER until the timeout.

    ``result_of(response)`` picks ``(error_code, error_message)`` of our single topic.
    """
    deadline = time.monotonic() + args.timeout
    while True:
        with _controller_connection(args.bootstrap_server, args.timeout, args.security) as conn:
            code, message = result_of(conn.request(build_request()))
        if code != ErrorCode.NOT_CONTROLLER or time.monotonic() + RETRY_BACKOFF_S > deadline:
            return code, message
        time.sleep(RETRY_BACKOFF_S)


# -- commands ---------------------------------------------------------------------------------

@guarded
def cmd_topics_create(args) -> int:
    topic_class = CreateTopicsRequest.CreatableTopic
    config_class = topic_class.CreatableTopicConfig
    timeout_ms = int(args.timeout * 1000)

    def build():
        topic = topic_class(name=args.name, num_partitions=args.partitions,
                            replication_factor=args.replication_factor, assignments=[],
                            configs=[config_class(name=k, value=v) for k, v in args.config])
        return CreateTopicsRequest[CREATE_TOPICS_VERSION](
            topics=[topic], timeout_ms=timeout_ms, validate_only=False)

    created = {}

    def result_of(response):
        created["topic"] = response.topics[0]
        return created["topic"].error_code, created["topic"].error_message

    code, message = _admin_call(args, build, result_of)
    if code == ErrorCode.TOPIC_ALREADY_EXISTS and args.if_not_exists:
        print(f"topic {args.name} already exists")
        return EXIT_OK
    if code != ErrorCode.NONE:
        raise KafkaFailure(code, message, f"cannot create topic {args.name}")
    topic = created["topic"]
    print(f"created topic {args.name} (partitions: {topic.num_partitions}, "
          f"replication factor: {topic.replication_factor})")
    return EXIT_OK


@guarded
def cmd_topics_delete(args) -> int:
    timeout_ms = int(args.timeout * 1000)

    def build():
        return DeleteTopicsRequest[DELETE_TOPICS_VERSION](topic_names=[args.name],
                                                          timeout_ms=timeout_ms)

    def result_of(response):
        result = response.responses[0]
        return result.error_code, result.error_message

    code, message = _admin_call(args, build, result_of)
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and args.if_exists:
        print(f"topic {args.name} does not exist")
        return EXIT_OK
    if code != ErrorCode.NONE:
        raise KafkaFailure(code, message, f"cannot delete topic {args.name}")
    print(f"deleted topic {args.name}")
    return EXIT_OK


@guarded
def cmd_topics_list(args) -> int:
    with Connection(args.bootstrap_server, args.timeout, args.security) as conn:
        metadata = _metadata(conn, None)
    for name in sorted(t.name for t in metadata.topics if t.name):
        print(name)
    return EXIT_OK


def collect_view(bootstrap: Address, timeout_s: float, security=None) -> cli_status.ClusterView:
    """The bootstrap broker's image, then every broker's hosted view (asked in parallel)."""
    image = fetch_status(bootstrap, timeout_s, security)
    view = cli_status.ClusterView(image=image)
    self_id = image.get("broker_id")
    if self_id is not None:
        view.hosted[self_id] = image.get("hosted") or []
    others = [b for b in view.brokers if b.get("id") != self_id]
    addresses = [(b.get("host"), b.get("port")) for b in others]
    for broker, result in zip(others, fetch_statuses(addresses, timeout_s, security)):
        if isinstance(result, ClientError):
            view.unreachable[broker.get("id")] = str(result)
        else:
            view.hosted[broker.get("id")] = result.get("hosted") or []
    return view


@guarded
def cmd_topics_describe(args) -> int:
    view = collect_view(args.bootstrap_server, args.timeout, args.security)
    topics = view.topics(args.names)
    missing = sorted(set(args.names) - {t["name"] for t in topics})
    fenced = {b.get("id") for b in view.brokers if b.get("fenced")}
    for broker_id, reason in sorted(view.unreachable.items()):
        if broker_id not in fenced:
            print(f"warning: {reason}; its replicas show ?", file=sys.stderr)
    if topics:
        print(cli_status.render_describe(view, topics))
    elif not missing:
        print("no topics")
    for name in missing:
        print(f"raftwood: topic {name}: {error_name(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)}",
              file=sys.stderr)
    return EXIT_KAFKA_ERROR if missing else EXIT_OK


@guarded
def cmd_cluster(args) -> int:
    image = fetch_status(args.bootstrap_server, args.timeout, args.security)
    print(f"bootstrap: {format_address(args.bootstrap_server)} "
          f"(broker {image.get('broker_id', cli_status.UNKNOWN)})")
    print(cli_status.render_cluster(cli_status.ClusterView(image=image)))
    return EXIT_OK

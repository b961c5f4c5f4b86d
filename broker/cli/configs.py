"""``raftwood configs``: describe and alter configs as kafka-configs.sh does.

    raftwood configs --entity-type brokers --entity-name 1 --describe
    raftwood configs --entity-type brokers --entity-default --alter \\
        --add-config log.retention.ms=3600000,follower.replication.throttled.rate=1048576
    raftwood configs --entity-type topics --entity-name orders --alter --delete-config retention.ms
    raftwood configs --entity-type groups --entity-name app --alter \\
        --add-config consumer.session.timeout.ms=50000
    raftwood configs --entity-type broker-loggers --entity-name 1 --alter \\
        --add-config broker.replication=DEBUG
    raftwood configs --entity-type client-metrics --entity-name producers --alter \\
        --add-config 'metrics=org.apache.kafka.producer.,interval.ms=5000,match=[client_id=app-.*]'
    raftwood configs --entity-type client-metrics --describe

``--describe`` prints the configs that are set (as kafka-configs.sh: dynamic ones for
brokers, overrides for topics and groups); ``--all`` prints every config with its
source.  ``--alter`` sends one IncrementalAlterConfigs (SET for ``--add-config``, DELETE
for ``--delete-config``).  A request about one broker (brokers, broker-loggers with
``--entity-name``) goes to that broker, as Kafka's admin client sends it; the others go
to ``--bootstrap-server``.  ``client-metrics`` (KIP-714 subscriptions) without
``--entity-name`` describes every one the cluster has (ListConfigResources).
"""
from __future__ import annotations

from kafka.protocol.admin import (
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
    ListConfigResourcesRequest,
)
from kafka.protocol.metadata import MetadataRequest

from protocol.errors import ErrorCode

from .admin import KafkaFailure, _client_options
from .client import EXIT_OK, CommandFailure, Connection, guarded
from .tables import format_table

ENTITY_TYPES = {"brokers": 4, "topics": 2, "groups": 32, "broker-loggers": 8,
                "client-metrics": 16}
SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
           3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
           6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG"}
# Sources that count as "set" for --describe without --all, by entity type.
SET_SOURCES = {4: {2, 3}, 2: {1}, 32: {8}, 8: {6}, 16: {7}}
SET, DELETE = 0, 1


def add_commands(commands) -> None:
    parser = commands.add_parser(
        "configs", parents=[_client_options()],
        help="describe or alter broker, topic, group, logger and client-metrics configs "
             "(kafka-configs.sh)")
    parser.add_argument("--entity-type", required=True, choices=sorted(ENTITY_TYPES))
    entity = parser.add_mutually_exclusive_group()
    entity.add_argument("--entity-name", metavar="NAME",
                        help="broker id, topic, group id, client-metrics subscription "
                             "(broker-loggers: broker id)")
    entity.add_argument("--entity-default", action="store_true",
                        help="the cluster-wide default (brokers only)")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true")
    action.add_argument("--alter", action="store_true")
    parser.add_argument("--all", action="store_true",
                        help="with --describe: every config, not only those set")
    parser.add_argument("--add-config", default="", metavar="K=V,K=V",
                        help="configs to set (a value with commas in [brackets])")
    parser.add_argument("--delete-config", action="append", default=[], metavar="K",
                        help="configs to remove (repeatable, or comma-separated)")
    parser.set_defaults(func=cmd_configs)


def parse_add_config(text: str) -> dict[str, str]:
    """``k=v,k2=[a,b]`` → {k: v, k2: "a,b"} (kafka-configs.sh's square brackets)."""
    values, depth, item = {}, 0, ""
    for char in text + ",":
        if char == "," and depth == 0:
            if item.strip():
                key, sep, value = item.partition("=")
                if not sep or not key.strip():
                    raise CommandFailure(f"--add-config: expected key=value, got {item!r}")
                values[key.strip()] = value.strip().removeprefix("[").removesuffix("]")
            item = ""
            continue
        depth += (char == "[") - (char == "]")
        item += char
    return values


def _target(args, conn: Connection):
    """The address to send to: the named broker's for brokers/broker-loggers."""
    if args.entity_type not in ("brokers", "broker-loggers") or args.entity_default:
        return args.bootstrap_server
    response = conn.request(MetadataRequest[1](topics=[]))
    for broker in response.brokers:
        if str(broker.node_id) == args.entity_name:
            return broker.host, broker.port
    raise CommandFailure(f"no broker {args.entity_name} in the cluster")


def _entity(args) -> tuple[int, str | None]:
    """(resource type, name); name None: every client-metrics resource (--describe)."""
    kind = ENTITY_TYPES[args.entity_type]
    if args.entity_name is None and not args.entity_default:
        if kind == 16 and args.describe:
            return kind, None
        raise CommandFailure("--entity-name or --entity-default is required")
    if args.entity_default:
        if kind != 4:
            raise CommandFailure("--entity-default applies to --entity-type brokers only")
        return kind, ""
    return kind, args.entity_name


@guarded
def cmd_configs(args) -> int:
    kind, name = _entity(args)
    with Connection(args.bootstrap_server, args.timeout, args.security) as conn:
        address = _target(args, conn)
    with Connection(address, args.timeout, args.security) as conn:
        if name is None:
            _describe_every(args, conn, kind)
        elif args.describe:
            _describe(args, conn, kind, name)
        else:
            _alter(args, conn, kind, name)
    return EXIT_OK


def _describe_every(args, conn: Connection, kind: int) -> None:
    response = conn.request(ListConfigResourcesRequest[1](resource_types=[kind]))
    if response.error_code != ErrorCode.NONE:
        raise KafkaFailure(response.error_code, None, args.entity_type)
    names = sorted(r.resource_name for r in response.config_resources)
    if not names:
        print(f"no {args.entity_type} resources")
    for name in names:
        args.entity_name = name
        _describe(args, conn, kind, name)


def _describe(args, conn: Connection, kind: int, name: str) -> None:
    resource = DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=kind, resource_name=name, configuration_keys=None)
    response = conn.request(DescribeConfigsRequest[1](resources=[resource],
                                                      include_synonyms=False))
    [result] = response.results
    if result.error_code != ErrorCode.NONE:
        raise KafkaFailure(result.error_code, result.error_message, _subject(args))
    shown = [c for c in result.configs if args.all or c.config_source in SET_SOURCES[kind]]
    rows = [[c.name, "(sensitive)" if c.is_sensitive else c.value,
             SOURCES.get(c.config_source, c.config_source)]
            for c in sorted(shown, key=lambda c: c.name)]
    if not rows and not args.all:
        print(f"{_subject(args)}: no configs set (--all lists every config)")
        return
    if kind == 16:
        print(f"{_subject(args)}:")
    print(format_table(["NAME", "VALUE", "SOURCE"], rows))


def _alter(args, conn: Connection, kind: int, name: str) -> None:
    changes = {k: (SET, v) for k, v in parse_add_config(args.add_config).items()}
    for item in args.delete_config:
        changes.update({k.strip(): (DELETE, None) for k in item.split(",") if k.strip()})
    if not changes:
        raise CommandFailure("--alter needs --add-config or --delete-config")
    resource_class = IncrementalAlterConfigsRequest.AlterConfigsResource
    resource = resource_class(resource_type=kind, resource_name=name, configs=[
        resource_class.AlterableConfig(name=k, config_operation=op, value=v)
        for k, (op, v) in changes.items()])
    response = conn.request(IncrementalAlterConfigsRequest[0](resources=[resource],
                                                              validate_only=False))
    [answer] = response.responses
    if answer.error_code != ErrorCode.NONE:
        raise KafkaFailure(answer.error_code, answer.error_message, _subject(args))
    print(f"Completed updating config for {_subject(args)}.")


def _subject(args) -> str:
    if args.entity_default:
        return "default broker"
    singular = {"brokers": "broker", "topics": "topic", "groups": "group",
                "broker-loggers": "broker-logger",
                "client-metrics": "client-metrics"}[args.entity_type]
    return f"{singular} {args.entity_name}"

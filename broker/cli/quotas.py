"""``raftwood quotas describe|alter``: client quotas (KIP-546), like kafka-configs.sh's
``--entity-type users|clients|ips``.

    raftwood quotas alter --user alice --add-config producer_byte_rate=1048576
    raftwood quotas alter --client-id-default --add-config consumer_byte_rate=2097152
    raftwood quotas alter --user alice --client-id app --delete-config controller_mutation_rate
    raftwood quotas alter --ip 10.0.0.7 --add-config connection_creation_rate=20
    raftwood quotas describe [--user alice] [--client-id app] [--strict]
    raftwood quotas describe --ip 10.0.0.7 | --ip-default

An entity is a user, a client id, or both, or an IP address alone (KIP-612);
``--user-default`` / ``--client-id-default`` / ``--ip-default`` name the default one.
``describe`` without an entity lists every quota; with one it lists the entities that
contain it (``--strict``: exactly it).  Keys: producer_byte_rate, consumer_byte_rate
(bytes per second, per broker), controller_mutation_rate (partitions per second) and
request_percentage (percent of one thread's time per quota window, per broker: KIP-124)
for users and client ids; connection_creation_rate (connections per second) for IPs.
A user error (an IP with a user, an address that is not one, a value that is not a
number) is one line on stderr, exit 1.
"""
from __future__ import annotations

import argparse
import ipaddress

from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest

from protocol.errors import ErrorCode

from .admin import KafkaFailure, _client_options
from .client import EXIT_OK, CommandFailure, Connection, guarded
from .tables import format_table

ALTER = AlterClientQuotasRequest[1]
DESCRIBE = DescribeClientQuotasRequest[1]
DEFAULT = "<default>"
MATCH_EXACT, MATCH_DEFAULT = 0, 1


def add_commands(commands) -> None:
    common = _client_options()
    quotas = commands.add_parser("quotas", help="client quotas: describe, alter")
    actions = quotas.add_subparsers(dest="action", required=True)
    describe = actions.add_parser("describe", parents=[common, _entity_options()],
                                  help="the quotas of every entity, or of those matching")
    describe.add_argument("--strict", action="store_true",
                          help="only entities of exactly the types named")
    describe.set_defaults(func=cmd_quotas_describe)
    alter = actions.add_parser("alter", parents=[common, _entity_options()],
                               help="set or remove quota keys of one entity")
    alter.add_argument("--add-config", default="", metavar="K=V,...",
                       help="keys to set, e.g. producer_byte_rate=1048576")
    alter.add_argument("--delete-config", default="", metavar="K,...", help="keys to remove")
    alter.add_argument("--validate-only", action="store_true")
    alter.set_defaults(func=cmd_quotas_alter)


def _entity_options() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    user = options.add_mutually_exclusive_group()
    user.add_argument("--user", help="a user (principal name)")
    user.add_argument("--user-default", action="store_true", help="the default user")
    client = options.add_mutually_exclusive_group()
    client.add_argument("--client-id", help="a client id")
    client.add_argument("--client-id-default", action="store_true",
                        help="the default client id")
    ip = options.add_mutually_exclusive_group()
    ip.add_argument("--ip", help="an IP address (connection_creation_rate)")
    ip.add_argument("--ip-default", action="store_true", help="the default IP")
    return options


def _entity(args) -> list[tuple[str, str | None]]:
    pairs: list[tuple[str, str | None]] = []
    if args.user is not None or args.user_default:
        pairs.append(("user", args.user))
    if args.client_id is not None or args.client_id_default:
        pairs.append(("client-id", args.client_id))
    if args.ip is not None or args.ip_default:
        if pairs:
            raise CommandFailure("--ip/--ip-default cannot be combined with --user or "
                                 "--client-id (an IP quota stands alone)")
        if args.ip is not None:
            try:
                ipaddress.ip_address(args.ip)
            except ValueError:
                raise CommandFailure(f"--ip {args.ip!r} is not an IP address") from None
        pairs.append(("ip", args.ip))
    return pairs


def _ops(args) -> list:
    ops = []
    for item in filter(None, (part.strip() for part in args.add_config.split(","))):
        key, sep, value = item.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = None
        if not sep or number is None:
            raise CommandFailure(f"--add-config {item!r}: expected KEY=NUMBER")
        ops.append(ALTER.EntryData.OpData(key=key.strip(), value=number, remove=False))
    for key in filter(None, (part.strip() for part in args.delete_config.split(","))):
        ops.append(ALTER.EntryData.OpData(key=key, value=0.0, remove=True))
    return ops


@guarded
def cmd_quotas_alter(args) -> int:
    pairs = _entity(args)
    if not pairs:
        raise CommandFailure("name an entity: --user/--user-default and/or "
                             "--client-id/--client-id-default, or --ip/--ip-default")
    ops = _ops(args)
    if not ops:
        raise CommandFailure("nothing to change: give --add-config and/or --delete-config")
    entry = ALTER.EntryData(entity=[ALTER.EntryData.EntityData(entity_type=t, entity_name=n)
                                    for t, n in pairs], ops=ops)
    with Connection(args.bootstrap_server, args.timeout, args.security) as conn:
        response = conn.request(ALTER(entries=[entry], validate_only=args.validate_only))
    for result in response.entries:
        if result.error_code != ErrorCode.NONE:
            raise KafkaFailure(result.error_code, result.error_message,
                               f"cannot alter the quotas of {_name(pairs)}")
    print(f"quotas of {_name(pairs)}: "
          f"{'valid' if args.validate_only else 'altered'}")
    return EXIT_OK


@guarded
def cmd_quotas_describe(args) -> int:
    components = [DESCRIBE.ComponentData(entity_type=t,
                                          match_type=MATCH_DEFAULT if n is None else MATCH_EXACT,
                                          match=n)
                  for t, n in _entity(args)]
    with Connection(args.bootstrap_server, args.timeout, args.security) as conn:
        response = conn.request(DESCRIBE(components=components, strict=args.strict))
    if response.error_code != ErrorCode.NONE:
        raise KafkaFailure(response.error_code, response.error_message,
                           "cannot describe client quotas")
    entities = [({e.entity_type: DEFAULT if e.entity_name is None else e.entity_name
                  for e in entry.entity}, entry.values) for entry in response.entries or []]
    types = ["user", "client-id"] if any("ip" not in names for names, _ in entities) else []
    if any("ip" in names for names, _ in entities):
        types.append("ip")
    rows = [[names.get(t) for t in types] + [value.key, _number(value.value)]
            for names, values in entities for value in sorted(values, key=lambda v: v.key)]
    if not rows:
        print("no client quotas (set one with raftwood quotas alter --user NAME "
              "--add-config producer_byte_rate=1048576)")
        return EXIT_OK
    print(format_table([t.upper() for t in types] + ["KEY", "VALUE"], rows,
                       right=[len(types) + 1]))
    return EXIT_OK


def _name(pairs: list[tuple[str, str | None]]) -> str:
    return ", ".join(f"{t} {DEFAULT if n is None else n}" for t, n in pairs)


def _number(value: float) -> str:
    """1048576.0 → 1048576, 0.5 → 0.5."""
    return str(int(value)) if value == int(value) else repr(value)

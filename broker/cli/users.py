"""``raftwood users add|list|delete``: SCRAM credentials through KIP-554's requests.

The password is salted here, on the client, as Kafka's kafka-configs.sh does: the
broker receives the salt and the salted password (AlterUserScramCredentials) and keeps
only the keys derived from them.  The connection goes to ``--bootstrap-server``, over
PLAINTEXT or as ``--command-config`` says (TLS, SASL: ``command_config.py``).
"""
from __future__ import annotations

import getpass
import os
import secrets

from kafka.protocol.admin import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
)

from protocol.errors import ErrorCode

from ..security import scram
from .admin import KafkaFailure, _client_options
from .client import EXIT_OK, Connection, guarded

ALTER = AlterUserScramCredentialsRequest[0]
DESCRIBE = DescribeUserScramCredentialsRequest[0]
PASSWORD_ENV = "RAFTWOOD_USER_PASSWORD"


def add_commands(commands) -> None:
    common = _client_options()
    users = commands.add_parser("users", help="SCRAM users: add, list, delete")
    actions = users.add_subparsers(dest="action", required=True)
    add = actions.add_parser("add", parents=[common],
                             help="create a user or change its password")
    add.add_argument("name")
    add.add_argument("--password", help=f"the password (else ${PASSWORD_ENV}, else asked)")
    add.add_argument("--mechanism", action="append", choices=sorted(scram.MECHANISMS),
                     help="repeatable (default: both SCRAM-SHA-256 and SCRAM-SHA-512)")
    add.add_argument("--iterations", type=int, default=scram.DEFAULT_ITERATIONS,
                     help=f"{scram.MIN_ITERATIONS}..{scram.MAX_ITERATIONS} "
                          f"(default {scram.DEFAULT_ITERATIONS})")
    add.set_defaults(func=cmd_users_add)
    listing = actions.add_parser("list", parents=[common], help="users and their mechanisms")
    listing.set_defaults(func=cmd_users_list)
    delete = actions.add_parser("delete", parents=[common], help="remove a user's credentials")
    delete.add_argument("name")
    delete.add_argument("--mechanism", action="append", choices=sorted(scram.MECHANISMS),
                        help="repeatable (default: every mechanism the user has)")
    delete.set_defaults(func=cmd_users_delete)


def _alter(args, upsertions=(), deletions=()) -> None:
    with Connection(args.bootstrap_server, args.timeout, args.security) as conn:
        response = conn.request(ALTER(upsertions=list(upsertions), deletions=list(deletions)))
    for result in response.results:
        if result.error_code != ErrorCode.NONE:
            raise KafkaFailure(result.error_code, result.error_message,
                               f"cannot change user {result.user}")


def _describe(args, names: list[str] | None):
    with Connection(args.bootstrap_server, args.timeout, args.security) as conn:
        users = None if names is None else [DESCRIBE.UserName(name=n) for n in names]
        response = conn.request(DESCRIBE(users=users))
    if response.error_code != ErrorCode.NONE:
        raise KafkaFailure(response.error_code, response.error_message, "cannot list users")
    return response.results


def scram_upsertion(name: str, mechanism: str, password: str,
                    iterations: int = scram.DEFAULT_ITERATIONS):
    """One AlterUserScramCredentials upsertion, salted here (a fresh salt)."""
    salt = secrets.token_bytes(32)
    return ALTER.ScramCredentialUpsertion(
        name=name, mechanism=scram.TYPE_OF[mechanism], iterations=iterations, salt=salt,
        salted_password=scram.salted_password(mechanism, password, salt, iterations))


@guarded
def cmd_users_add(args) -> int:
    password = args.password or os.environ.get(PASSWORD_ENV) or getpass.getpass(
        f"password for {args.name}: ")
    upsertions = [scram_upsertion(args.name, mechanism, password, args.iterations)
                  for mechanism in args.mechanism or sorted(scram.MECHANISMS)]
    _alter(args, upsertions=upsertions)
    print(f"user {args.name}: {', '.join(args.mechanism or sorted(scram.MECHANISMS))} set")
    return EXIT_OK


@guarded
def cmd_users_list(args) -> int:
    results = _describe(args, None)
    if not results:
        print("no SCRAM users (add one with raftwood users add NAME)")
    for result in results:
        mechanisms = ", ".join(f"{scram.MECHANISM_TYPES.get(c.mechanism, c.mechanism)} "
                               f"(iterations {c.iterations})" for c in result.credential_infos)
        print(f"{result.user}\t{mechanisms}")
    return EXIT_OK


@guarded
def cmd_users_delete(args) -> int:
    mechanisms = args.mechanism
    if not mechanisms:
        result = _describe(args, [args.name])[0]
        if result.error_code != ErrorCode.NONE:
            raise KafkaFailure(result.error_code, result.error_message,
                               f"cannot delete user {args.name}")
        mechanisms = [scram.MECHANISM_TYPES[c.mechanism] for c in result.credential_infos]
    _alter(args, deletions=[ALTER.ScramCredentialDeletion(name=args.name,
                                                          mechanism=scram.TYPE_OF[m])
                            for m in mechanisms])
    print(f"user {args.name}: {', '.join(mechanisms)} deleted")
    return EXIT_OK

"""``raftwood quorum``: the metadata quorum's voters and observers (KIP-853's voter changes).

    raftwood quorum                                  # voters, observers, leader, lag
    raftwood quorum add-voter 4 --raft-address 10.0.0.4:9196
    raftwood quorum remove-voter 3

Every broker takes part in the Raft group holding the cluster metadata: the voters
elect the leader (the controller) and commit, the observers only receive the log.
``add-voter`` turns a running observer into a voter at the Raft address given (the
broker binds it once the change commits); ``remove-voter`` takes a voter out (a
running one carries on as an observer).  Both send Kafka's AddRaftVoter /
RemoveRaftVoter; removal goes to the broker leaving when it is reachable (so it learns
at once that it left), else to the bootstrap broker.  Exit codes as the other
commands: 0 done, 1 refused (the reason printed), 2 unreachable.
"""
from __future__ import annotations

import time

from protocol.errors import ErrorCode
from protocol.raft_voter_messages import AddRaftVoterRequest, RemoveRaftVoterRequest, VoterListener

from .admin import _address_arg, _client_options, _metadata
from .client import (
    EXIT_KAFKA_ERROR,
    EXIT_OK,
    ClientError,
    CommandFailure,
    Connection,
    error_name,
    guarded,
)
from .tables import format_table

# The voter-change answer comes once the change committed, within this.
CHANGE_TIMEOUT_MS = 30_000


def add_commands(commands) -> None:
    common = _client_options()
    quorum = commands.add_parser(
        "quorum", parents=[common],
        help="the metadata quorum: voters, observers, and changing the voters")
    actions = quorum.add_subparsers(dest="quorum_command", metavar="ACTION")
    add = actions.add_parser("add-voter", parents=[common],
                             help="make a running observer a voter of the metadata quorum")
    add.add_argument("broker_id", type=int)
    add.add_argument("--raft-address", type=_address_arg, required=True, metavar="HOST:PORT",
                     help="where the new voter listens for Raft traffic (a free port there)")
    add.set_defaults(func=cmd_add_voter)
    remove = actions.add_parser("remove-voter", parents=[common],
                                help="take a voter out of the metadata quorum")
    remove.add_argument("broker_id", type=int)
    remove.set_defaults(func=cmd_remove_voter)
    quorum.set_defaults(func=cmd_describe)


def describe_rows(status: dict, leader_status: dict | None) -> tuple[list[list], list[str]]:
    """Table rows (node, role, Raft address, state, log position) and the lines a new
    broker should start with: ``controller.quorum.voters`` and a reminder of the secret
    (a quorum refuses a broker without it; the status never carries the secret)."""
    quorum = status.get("quorum")
    if not quorum:
        raise CommandFailure("this broker runs alone: its metadata is not in a Raft quorum")
    leading = (leader_status or {}).get("quorum") or {}
    positions = {v["id"]: v.get("match_index") for v in leading.get("voters", [])}
    commit = leading.get("commit_index")
    leader = quorum.get("leader_id", -1)
    rows, voter_ids = [], set()
    for voter in quorum["voters"]:
        voter_ids.add(voter["id"])
        position = positions.get(voter["id"])
        behind = "" if position is None or commit is None else max(0, commit - position)
        rows.append([voter["id"], "voter", voter["address"],
                     "leader" if voter["id"] == leader else
                     ("follower" if voter["connected"] or voter["id"] == status["broker_id"]
                      else "unreachable"),
                     "" if position is None else position, behind])
    for broker in status.get("brokers", []):
        if broker["id"] not in voter_ids:
            rows.append([broker["id"], "observer", "", "fenced" if broker["fenced"] else
                         "registered", "", ""])
    voters_line = ",".join(f"{v['id']}@{v['address']}" for v in quorum["voters"])
    return rows, [f"controller.quorum.voters={voters_line}",
                  "controller.quorum.password.file=<the cluster's secret file: a copy of "
                  "the file every broker of this cluster names>"]


@guarded
def cmd_describe(args) -> int:
    with Connection(args.bootstrap_server, args.timeout, args.security) as conn:
        status = conn.status()
        metadata = _metadata(conn, [])
    leader_status = None
    leader = (status.get("quorum") or {}).get("leader_id", -1)
    broker = next((b for b in metadata.brokers if b.node_id == leader), None)
    if broker is not None:
        try:
            with Connection((broker.host, broker.port), args.timeout, args.security) as other:
                leader_status = other.status()
        except ClientError:
            pass  # leader unreachable from here: positions stay blank
    rows, lines = describe_rows(status, leader_status)
    quorum = status["quorum"]
    print(f"leader {quorum['leader_id']}, term {quorum['term']}, "
          f"commit index {quorum['commit_index']} (as broker {status['broker_id']} knows it)")
    print(format_table(["NODE", "ROLE", "RAFT ADDRESS", "STATE", "LOG INDEX", "BEHIND"],
                       rows, right=[0, 4, 5]))
    print("a broker joining the cluster starts with:")
    for line in lines:
        print(f"  {line}")
    return EXIT_OK


def _answer(name: str, response) -> int:
    if response.error_code != ErrorCode.NONE:
        print(f"raftwood: {name}: {error_name(response.error_code)}"
              + (f": {response.error_message}" if response.error_message else ""))
        return EXIT_KAFKA_ERROR
    return EXIT_OK


@guarded
def cmd_add_voter(args) -> int:
    host, port = args.raft_address
    with Connection(args.bootstrap_server, max(args.timeout, CHANGE_TIMEOUT_MS / 1000 + 5),
                    args.security) as conn:
        response = conn.request(AddRaftVoterRequest[0](
            timeout_ms=CHANGE_TIMEOUT_MS, voter_id=args.broker_id,
            listeners=[VoterListener("CONTROLLER", host, port)]))
    code = _answer("AddRaftVoter", response)
    if code == EXIT_OK:
        print(f"broker {args.broker_id} is a voter at {host}:{port}")
    return code


def remove_voter(bootstrap, broker_id: int, timeout_s: float, security) -> object:
    """Send RemoveRaftVoter to the broker leaving if it is reachable, else to the
    bootstrap broker; the response."""
    wait_s = max(timeout_s, CHANGE_TIMEOUT_MS / 1000 + 10)
    target = bootstrap
    with Connection(bootstrap, timeout_s, security) as conn:
        metadata = _metadata(conn, [])
    leaving = next((b for b in metadata.brokers if b.node_id == broker_id), None)
    if leaving is not None:
        target = (leaving.host, leaving.port)
    try:
        conn = Connection(target, wait_s, security)
    except ClientError:
        conn = Connection(bootstrap, wait_s, security)
    with conn:
        return conn.request(RemoveRaftVoterRequest[0](voter_id=broker_id))


@guarded
def cmd_remove_voter(args) -> int:
    started = time.monotonic()
    response = remove_voter(args.bootstrap_server, args.broker_id, args.timeout, args.security)
    code = _answer("RemoveRaftVoter", response)
    if code == EXIT_OK:
        print(f"broker {args.broker_id} left the voters ({time.monotonic() - started:.1f} s)")
    return code

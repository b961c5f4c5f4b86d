"""``raftwood reassign`` and ``raftwood brokers decommission``: moving replicas (KIP-455).

    raftwood reassign --topics orders,events --brokers 1,2,4              # print the plan
    raftwood reassign --topics orders,events --brokers 1,2,4 --execute    # start it
    raftwood reassign --topics orders,events --brokers 1,2,4 --execute --throttle
    raftwood reassign --topics orders,events --status                     # progress
    raftwood reassign --topics orders,events --cancel                     # back to before
    raftwood brokers decommission 3 [--execute]     # move every replica off broker 3,
                                                    # then take it out of the Raft voters

The plan (``reassign_plan.py``) keeps each partition's replica count, evens the load over
the brokers named and moves as little as it can (rack-aware when brokers have
``broker.rack``).  ``--execute`` sends AlterPartitionReassignments to the controller; the
controller adds the new replicas, waits until they are in sync, then drops the old ones
(see docs/reassignment.md).  ``--status`` lists the partitions still
moving (ListPartitionReassignments) with their ISR.  ``--throttle`` (with ``--execute``)
first writes the topics' throttled-replica lists as kafka-reassign-partitions --throttle
does: the leader list names the current replicas of each moving partition, the follower
list the replicas being added, so the brokers' ``leader.replication.throttled.rate`` and
``follower.replication.throttled.rate`` apply to the move (the rates themselves are
broker settings here, not written by the command).  ``--cancel``, and ``--status`` once
no partition of the topics is moving, delete the lists again (Kafka's --cancel and
--verify).  ``decommission --execute`` then
waits (printing progress) until the broker holds no replica and, if it is a voter of
the metadata quorum, removes it from the voters (``quorum.remove_voter``): it can then
be stopped without leaving the quorum a voter short.  Exit codes as the other commands:
0 done, 1 the cluster refused something (each refusal printed), 2 unreachable.
"""
from __future__ import annotations

import argparse
import time

from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
    ListPartitionReassignmentsRequest,
)

from protocol.errors import ErrorCode

from ..topics import FOLLOWER_THROTTLED_REPLICAS, LEADER_THROTTLED_REPLICAS
from .admin import _client_options, _controller_connection, _metadata
from .client import EXIT_KAFKA_ERROR, EXIT_OK, CommandFailure, Connection, error_name, guarded
from .quorum import remove_voter
from .reassign_plan import PlanError, moves, plan, replace_broker
from .tables import format_table

ALTER_VERSION = 0
LIST_VERSION = 0
TOPIC_RESOURCE = 2
CONFIG_SET, CONFIG_DELETE = 0, 1
THROTTLE_LISTS = (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS)


def _broker_list(text: str) -> list[int]:
    try:
        brokers = [int(b) for b in text.split(",") if b.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected broker ids like 1,2,4, got {text!r}") from None
    if not brokers:
        raise argparse.ArgumentTypeError("no broker id given")
    return brokers


def add_commands(commands) -> None:
    common = _client_options()
    reassign = commands.add_parser(
        "reassign", parents=[common],
        help="move topics' replicas onto a set of brokers (plan, --execute, --status, --cancel)")
    reassign.add_argument("--topics", required=True, metavar="T1,T2",
                          type=lambda text: [t for t in text.split(",") if t])
    reassign.add_argument("--brokers", type=_broker_list, metavar="1,2,4",
                          help="the brokers the replicas may live on (plan / --execute)")
    action = reassign.add_mutually_exclusive_group()
    action.add_argument("--execute", action="store_true", help="start the planned moves")
    action.add_argument("--status", action="store_true", help="partitions still moving")
    action.add_argument("--cancel", action="store_true",
                        help="cancel the topics' moves in progress (back to before)")
    reassign.add_argument("--throttle", action="store_true",
                          help="with --execute: write the topics' throttled-replica lists "
                               "for the moves (the brokers' *.replication.throttled.rate "
                               "settings then apply); --cancel and --status once done "
                               "remove them")
    reassign.set_defaults(func=cmd_reassign)
    brokers = commands.add_parser("brokers", help="broker operations")
    actions = brokers.add_subparsers(dest="brokers_command", required=True, metavar="ACTION")
    decommission = actions.add_parser(
        "decommission", parents=[common],
        help="plan (or --execute) moving every replica off a broker")
    decommission.add_argument("broker_id", type=int)
    decommission.add_argument("--execute", action="store_true",
                              help="start the moves, wait for them, then leave the voters")
    decommission.add_argument("--wait-timeout", type=float, default=600.0, metavar="SECONDS",
                              help="how long --execute waits for the moves (default 600)")
    decommission.set_defaults(func=cmd_decommission)


def _current(conn, topics: list[str] | None) -> tuple[dict, dict, list[int], dict]:
    """(replicas by (topic, partition), ISR by (topic, partition), live broker ids, racks)."""
    metadata = _metadata(conn, topics)
    replicas, isr = {}, {}
    for topic in metadata.topics:
        if topic.error_code != ErrorCode.NONE:
            raise CommandFailure(f"topic {topic.name}: {error_name(topic.error_code)}")
        for p in topic.partitions:
            replicas[(topic.name, p.partition_index)] = list(p.replica_nodes)
            isr[(topic.name, p.partition_index)] = list(p.isr_nodes)
    brokers = sorted(b.node_id for b in metadata.brokers)
    racks = {b.node_id: b.rack for b in metadata.brokers}
    return replicas, isr, brokers, racks


def _alter(conn, targets: dict) -> list[tuple]:
    """Send the moves; [(topic, partition, error code, message)] of the refused ones."""
    T = AlterPartitionReassignmentsRequest.ReassignableTopic
    by_topic: dict[str, list] = {}
    for (name, index), replicas in sorted(targets.items()):
        by_topic.setdefault(name, []).append(T.ReassignablePartition(
            partition_index=index, replicas=replicas))
    response = conn.request(AlterPartitionReassignmentsRequest[ALTER_VERSION](
        timeout_ms=30_000, allow_replication_factor_change=True,
        topics=[T(name=name, partitions=partitions) for name, partitions in by_topic.items()]))
    refused = []
    for topic in response.responses:
        for p in topic.partitions:
            code = p.error_code if p.error_code != ErrorCode.NONE else response.error_code
            if code != ErrorCode.NONE:
                refused.append((topic.name, p.partition_index, code,
                                p.error_message or response.error_message))
    return refused


def _print_plan(current: dict, targets: dict) -> None:
    if not targets:
        print("nothing to move: the replicas are already where the plan puts them")
        return
    print(format_table(["TOPIC", "PARTITION", "CURRENT", "PROPOSED"],
                       [[name, index, current[(name, index)], replicas]
                        for (name, index), replicas in sorted(targets.items())],
                       right=[1]))


def throttle_lists(current: dict, targets: dict) -> dict[str, dict[str, str]]:
    """Per topic, the throttled-replica lists of its moves (kafka-reassign-partitions
    --throttle): the leader list names every current replica of a moving partition (the
    leader may be any of them), the follower list the replicas the move adds."""
    lists: dict[str, tuple[list, list]] = {}
    for (name, index), target in sorted(targets.items()):
        leader, follower = lists.setdefault(name, ([], []))
        before = current[(name, index)]
        leader.extend(f"{index}:{b}" for b in before)
        follower.extend(f"{index}:{b}" for b in target if b not in before)
    return {name: {LEADER_THROTTLED_REPLICAS: ",".join(leader),
                   FOLLOWER_THROTTLED_REPLICAS: ",".join(follower)}
            for name, (leader, follower) in lists.items()}


def _alter_topic_configs(conn, name: str, changes: dict) -> None:
    """IncrementalAlterConfigs on one topic (a value None deletes); CommandFailure if refused."""
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    response = conn.request(IncrementalAlterConfigsRequest[0](validate_only=False, resources=[
        R(resource_type=TOPIC_RESOURCE, resource_name=name, configs=[
            R.AlterableConfig(name=key, value=value, config_operation=CONFIG_DELETE
                              if value is None else CONFIG_SET)
            for key, value in changes.items()])]))
    [answer] = response.responses
    if answer.error_code != ErrorCode.NONE:
        raise CommandFailure(f"topic {name}: configs {sorted(changes)}: "
                             f"{error_name(answer.error_code)}"
                             + (f": {answer.error_message}" if answer.error_message else ""))


def _clear_throttle_lists(conn, topics: list[str]) -> None:
    """Delete the throttled-replica lists the topics have (Kafka's --verify / --cancel)."""
    D = DescribeConfigsRequest.DescribeConfigsResource
    response = conn.request(DescribeConfigsRequest[1](include_synonyms=False, resources=[
        D(resource_type=TOPIC_RESOURCE, resource_name=name, configuration_keys=list(THROTTLE_LISTS))
        for name in topics]))
    for result in response.results:
        if result.error_code == ErrorCode.NONE and any(
                c.name in THROTTLE_LISTS and c.value for c in result.configs):
            _alter_topic_configs(conn, result.resource_name, dict.fromkeys(THROTTLE_LISTS))
            print(f"removed the throttled-replica lists of {result.resource_name}")


def _execute(conn, current: dict, targets: dict, throttle: bool = False) -> int:
    _print_plan(current, targets)
    if not targets:
        return EXIT_OK
    if throttle:
        for name, lists in throttle_lists(current, targets).items():
            _alter_topic_configs(conn, name, lists)
            print(f"throttled {name}: " + ", ".join(f"{k}={v}" for k, v in lists.items()))
    refused = _alter(conn, targets)
    for name, index, code, message in refused:
        print(f"raftwood: {name}-{index}: {error_name(code)}"
              + (f": {message}" if message else ""))
    print(f"started {len(targets) - len(refused)} of {len(targets)} moves; follow them with "
          f"--status")
    return EXIT_KAFKA_ERROR if refused else EXIT_OK


@guarded
def cmd_reassign(args) -> int:
    with _controller_connection(args.bootstrap_server, args.timeout, args.security) as conn:
        current, isr, brokers, racks = _current(conn, args.topics)
        if args.status:
            return _status(conn, args.topics, isr)
        if args.cancel:
            moving = _ongoing(conn, args.topics)
            if not moving:
                print("nothing to cancel: no partition of these topics is moving")
                return EXIT_OK
            refused = _alter(conn, {(name, index): None for name, index, *_ in moving})
            for name, index, code, _message in refused:
                print(f"raftwood: {name}-{index}: {error_name(code)}")
            print(f"cancelled {len(moving) - len(refused)} of {len(moving)} moves")
            _clear_throttle_lists(conn, args.topics)
            return EXIT_KAFKA_ERROR if refused else EXIT_OK
        if args.brokers is None:
            raise CommandFailure("--brokers is required to plan or --execute a reassignment")
        if args.throttle and not args.execute:
            raise CommandFailure("--throttle goes with --execute")
        unknown = sorted(set(args.brokers) - set(brokers))
        if unknown:
            raise CommandFailure(f"brokers {unknown} are not in the cluster ({brokers})")
        try:
            targets = moves(current, plan(current, args.brokers, racks))
        except PlanError as exc:
            raise CommandFailure(str(exc)) from exc
        if not args.execute:
            _print_plan(current, targets)
            if targets:
                print("(a plan only: add --execute to start it)")
            return EXIT_OK
        return _execute(conn, current, targets, args.throttle)


def _ongoing(conn, topics: list[str]) -> list[tuple]:
    response = conn.request(ListPartitionReassignmentsRequest[LIST_VERSION](
        timeout_ms=30_000, topics=None))
    if response.error_code != ErrorCode.NONE:
        raise CommandFailure(f"ListPartitionReassignments: {error_name(response.error_code)}"
                             + (f": {response.error_message}" if response.error_message
                                else ""))
    return [(topic.name, p.partition_index, list(p.replicas), list(p.adding_replicas),
             list(p.removing_replicas))
            for topic in response.topics if topic.name in topics for p in topic.partitions]


def _status(conn, topics: list[str], isr: dict) -> int:
    moving = _ongoing(conn, topics)
    if not moving:
        print("no partition of these topics is moving")
        _clear_throttle_lists(conn, topics)
        return EXIT_OK
    print(format_table(
        ["TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING", "ISR", "IN-SYNC"],
        [[name, index, replicas, adding, removing, isr.get((name, index)),
          f"{sum(r in isr.get((name, index), ()) for r in adding)}/{len(adding)}"]
         for name, index, replicas, adding, removing in sorted(moving)], right=[1]))
    return EXIT_OK


@guarded
def cmd_decommission(args) -> int:
    with _controller_connection(args.bootstrap_server, args.timeout, args.security) as conn:
        current, _, brokers, racks = _current(conn, None)
        if args.broker_id not in brokers:
            raise CommandFailure(f"broker {args.broker_id} is not in the cluster ({brokers})")
        remaining = [b for b in brokers if b != args.broker_id]
        hosted = {k: r for k, r in current.items() if args.broker_id in r}
        try:
            targets = replace_broker(current, args.broker_id, remaining, racks)
        except PlanError as exc:
            raise CommandFailure(str(exc)) from exc
        if not args.execute:
            _print_plan(hosted, targets)
            if targets:
                print("(a plan only: add --execute to start it)")
            return EXIT_OK
        code = _execute(conn, hosted, targets)
    if code != EXIT_OK:
        return code
    if not _wait_drained(args):
        return EXIT_KAFKA_ERROR
    return _leave_quorum(args)


def _wait_drained(args) -> bool:
    """Wait until no partition lists the broker and none is moving, with progress."""
    deadline = time.monotonic() + args.wait_timeout
    last_print = 0.0
    while True:
        with _controller_connection(args.bootstrap_server, args.timeout, args.security) as conn:
            current, _, _, _ = _current(conn, None)
            moving = _ongoing(conn, sorted({name for name, _ in current}))
        hosted = sorted(k for k, replicas in current.items() if args.broker_id in replicas)
        if not hosted and not moving:
            print(f"broker {args.broker_id} holds no replica")
            return True
        now = time.monotonic()
        if now >= deadline:
            print(f"raftwood: after {args.wait_timeout:g} s broker {args.broker_id} still holds "
                  f"{len(hosted)} replicas ({len(moving)} partitions moving); follow them with "
                  f"`raftwood reassign --topics ... --status`")
            return False
        if now - last_print >= 5:
            print(f"  waiting: {len(hosted)} replicas still on broker {args.broker_id}, "
                  f"{len(moving)} partitions moving")
            last_print = now
        time.sleep(1.0)


def _leave_quorum(args) -> int:
    with Connection(args.bootstrap_server, args.timeout, args.security) as conn:
        quorum = conn.status().get("quorum")
    if not quorum or args.broker_id not in {v["id"] for v in quorum["voters"]}:
        print(f"broker {args.broker_id} is not a voter of the metadata quorum: it can be "
              f"stopped")
        return EXIT_OK
    response = remove_voter(args.bootstrap_server, args.broker_id, args.timeout, args.security)
    if response.error_code != ErrorCode.NONE:
        print(f"raftwood: RemoveRaftVoter: {error_name(response.error_code)}"
              + (f": {response.error_message}" if response.error_message else ""))
        return EXIT_KAFKA_ERROR
    print(f"broker {args.broker_id} left the metadata quorum's voters: it can be stopped")
    return EXIT_OK

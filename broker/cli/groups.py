"""``raftwood groups list|describe``: consumer groups seen from the client side.

    raftwood groups list [--bootstrap-server HOST:PORT]
    raftwood groups describe GROUP [--bootstrap-server HOST:PORT]

``list`` asks every broker of the cluster (from Metadata) for the groups it coordinates
(ListGroups), as Kafka's tools do.  ``describe`` finds the group's coordinator
(FindCoordinator, which creates ``__consumer_offsets`` on first use, as in Kafka), asks
it for the members (DescribeGroups) and the committed offsets (OffsetFetch), reads each
partition's log end offset from its leader (ListOffsets, latest: what a consumer can
reach) and prints per partition CURRENT-OFFSET, LOG-END-OFFSET and LAG with the member
that owns it, then the members with their assignments (decoded when the protocol type is
``consumer``).  A share group (KIP-932), which DescribeGroups reports Dead, is described
with ShareGroupDescribe instead (share_groups.py).  Retriable coordinator errors are
retried until ``--timeout``.

Exit codes as in ``raftwood topics``: 0 done; 1 the cluster answered with a Kafka error
(e.g. GROUP_ID_NOT_FOUND); 2 no usable answer.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

from kafka.protocol.admin import DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer import ListOffsetsRequest, OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

from protocol.errors import ErrorCode

from ..groups.consumer_protocol import assigned_partitions
from .admin import _client_options
from .client import (
    EXIT_OK,
    Address,
    ClientError,
    CommandFailure,
    Connection,
    error_name,
    format_address,
    guarded,
)
from .share_groups import (
    describe_share_group,
    render_share_group,
    share_group_view,
    share_partition_rows,
    share_start_offsets,
)
from .tables import format_table

METADATA_VERSION = 8
LIST_GROUPS_VERSION = 4        # group state
FIND_COORDINATOR_VERSION = 3
DESCRIBE_GROUPS_VERSION = 5
OFFSET_FETCH_VERSION = 7       # null topics = all partitions
LIST_OFFSETS_VERSION = 7
LATEST_TIMESTAMP = -1
RETRY_BACKOFF_S = 0.5
RETRIABLE = {ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
             ErrorCode.NOT_COORDINATOR}


class GroupFailure(CommandFailure):
    """The cluster answered with an error code (exit 1)."""

    def __init__(self, code: int, subject: str):
        super().__init__(f"{subject}: {error_name(code)}")
        self.code = code


# -- what describe shows (pure) ------------------------------------------------------------------

@dataclass
class Member:
    member_id: str
    client_id: str
    client_host: str
    assignment: dict[str, list[int]] | None  # None: not the consumer protocol / unreadable
    group_instance_id: str | None = None  # set for a static member (KIP-345)


@dataclass
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    coordinator: tuple[int, str]
    members: list[Member] = field(default_factory=list)
    committed: dict[tuple[str, int], int] = field(default_factory=dict)
    log_end: dict[tuple[str, int], int | None] = field(default_factory=dict)

    def partitions(self) -> list[tuple[str, int]]:
        owned = {(t, p) for m in self.members for t, ps in (m.assignment or {}).items()
                 for p in ps}
        return sorted(owned | set(self.committed))

    def owner(self, tp: tuple[str, int]) -> Member | None:
        return next((m for m in self.members if tp[1] in (m.assignment or {}).get(tp[0], [])),
                    None)


def render_group(desc: GroupDescription) -> str:
    node, address = desc.coordinator
    lines = [f"group: {desc.group_id}  state: {desc.state}  "
             f"protocol: {desc.protocol_type or '-'}/{desc.protocol or '-'}  "
             f"coordinator: {node} ({address})  members: {len(desc.members)}", ""]
    rows = []
    for tp in desc.partitions():
        current = desc.committed.get(tp)
        end = desc.log_end.get(tp)
        lag = end - current if current is not None and end is not None else None
        owner = desc.owner(tp)
        rows.append([tp[0], tp[1], current, end, lag, owner.member_id if owner else None,
                     owner.client_host if owner else None, owner.client_id if owner else None])
    lines.append(format_table(["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                               "CONSUMER-ID", "HOST", "CLIENT-ID"], rows, right=(1, 2, 3, 4)))
    if desc.members:
        lines.append("")
        lines.append(format_table(
            ["MEMBER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "ASSIGNMENT"], [
                [m.member_id, m.group_instance_id, m.client_host or None, m.client_id,
                 _assignment_text(m.assignment)] for m in desc.members]))
    return "\n".join(lines)


def _assignment_text(assignment: dict[str, list[int]] | None) -> str | None:
    if assignment is None:
        return "?"
    return " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in sorted(assignment.items())) \
        or None


def render_list(rows: list[tuple[str, str, str, int]]) -> str:
    """rows: (group, state, protocol type, coordinator id)."""
    return format_table(["GROUP", "STATE", "PROTOCOL-TYPE", "COORDINATOR"],
                        [[g, s, p or None, c] for g, s, p, c in sorted(rows)], right=(3,))


# -- arguments -------------------------------------------------------------------------------------

def add_commands(commands) -> None:
    """Register ``groups list|describe`` on the ``raftwood`` sub-command parser."""
    common = _client_options()
    groups = commands.add_parser("groups", help="list or describe consumer groups")
    actions = groups.add_subparsers(dest="groups_command", required=True, metavar="ACTION")
    listing = actions.add_parser("list", parents=[common],
                                 help="every group with its state and coordinator")
    listing.set_defaults(func=cmd_groups_list)
    describe = actions.add_parser(
        "describe", parents=[common],
        help="members, assignment, committed offset and lag per partition")
    describe.add_argument("group")
    describe.set_defaults(func=cmd_groups_describe)


# -- requests --------------------------------------------------------------------------------------

def _metadata(conn: Connection, topics: list[str] | None):
    return conn.request(MetadataRequest[METADATA_VERSION](
        topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t)
                                            for t in topics],
        allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False))


def _find_coordinator(bootstrap: Address, group: str, timeout_s: float, deadline: float,
                      security=None):
    while True:
        with Connection(bootstrap, timeout_s, security) as conn:
            answer = conn.request(FindCoordinatorRequest[FIND_COORDINATOR_VERSION](
                key=group, key_type=0))
        if answer.error_code == ErrorCode.NONE:
            return answer.node_id, (answer.host, answer.port)
        _maybe_retry(answer.error_code, deadline, f"group {group}: no coordinator")


def _maybe_retry(code: int, deadline: float, subject: str) -> None:
    if code not in RETRIABLE or time.monotonic() + RETRY_BACKOFF_S > deadline:
        raise GroupFailure(code, subject)
    time.sleep(RETRY_BACKOFF_S)


def _describe_at_coordinator(args, deadline: float):
    """(coordinator, DescribedGroup, OffsetFetch response), retried while the coordinator moves."""
    while True:
        node, address = _find_coordinator(args.bootstrap_server, args.group, args.timeout,
                                          deadline, args.security)
        with Connection(address, args.timeout, args.security) as conn:
            described = conn.request(DescribeGroupsRequest[DESCRIBE_GROUPS_VERSION](
                groups=[args.group], include_authorized_operations=False)).groups[0]
            if described.error_code != ErrorCode.NONE:
                _maybe_retry(described.error_code, deadline, f"group {args.group}")
                continue
            offsets = conn.request(OffsetFetchRequest[OFFSET_FETCH_VERSION](
                group_id=args.group, topics=None, require_stable=False))
            if offsets.error_code != ErrorCode.NONE:
                _maybe_retry(offsets.error_code, deadline, f"group {args.group}")
                continue
        return (node, format_address(address)), described, offsets


def _log_end_offsets(bootstrap: Address, partitions: list[tuple[str, int]], timeout_s: float,
                     security=None) -> dict[tuple[str, int], int | None]:
    """Latest offset of each partition from its leader; None where it cannot be read."""
    result: dict[tuple[str, int], int | None] = dict.fromkeys(partitions)
    if not partitions:
        return result
    with Connection(bootstrap, timeout_s, security) as conn:
        metadata = _metadata(conn, sorted({t for t, _ in partitions}))
    addresses = {b.node_id: (b.host, b.port) for b in metadata.brokers}
    leaders = {(t.name, p.partition_index): p.leader_id
               for t in metadata.topics for p in t.partitions}
    by_leader: dict[int, list[tuple[str, int]]] = {}
    for tp in partitions:
        if leaders.get(tp, -1) in addresses:
            by_leader.setdefault(leaders[tp], []).append(tp)
    topic_class = ListOffsetsRequest.ListOffsetsTopic
    for leader, tps in by_leader.items():
        topics: dict[str, list] = {}
        for topic, partition in tps:
            topics.setdefault(topic, []).append(topic_class.ListOffsetsPartition(
                partition_index=partition, current_leader_epoch=-1, timestamp=LATEST_TIMESTAMP))
        try:
            with Connection(addresses[leader], timeout_s, security) as conn:
                response = conn.request(ListOffsetsRequest[LIST_OFFSETS_VERSION](
                    replica_id=-1, isolation_level=0,
                    topics=[topic_class(name=t, partitions=ps) for t, ps in topics.items()]))
        except ClientError:
            continue
        for topic in response.topics:
            for p in topic.partitions:
                if p.error_code == ErrorCode.NONE:
                    result[(topic.name, p.partition_index)] = p.offset
    return result


# -- commands -------------------------------------------------------------------------------------

@guarded
def cmd_groups_list(args) -> int:
    with Connection(args.bootstrap_server, args.timeout, args.security) as conn:
        brokers = [(b.node_id, (b.host, b.port)) for b in _metadata(conn, []).brokers]
    rows, seen = [], set()
    for node_id, address in sorted(brokers):
        try:
            with Connection(address, args.timeout, args.security) as conn:
                answer = conn.request(ListGroupsRequest[LIST_GROUPS_VERSION](states_filter=[]))
        except ClientError as exc:
            print(f"warning: broker {node_id}: {exc}", file=sys.stderr)
            continue
        if answer.error_code != ErrorCode.NONE:
            print(f"warning: broker {node_id}: {error_name(answer.error_code)} "
                  f"(its list may be incomplete)", file=sys.stderr)
        for g in answer.groups:
            if g.group_id not in seen:
                seen.add(g.group_id)
                rows.append((g.group_id, g.group_state, g.protocol_type, node_id))
    print(render_list(rows) if rows else "no groups")
    return EXIT_OK


@guarded
def cmd_groups_describe(args) -> int:
    deadline = time.monotonic() + args.timeout
    coordinator, described, offsets = _describe_at_coordinator(args, deadline)
    committed = {(t.name, p.partition_index): p.committed_offset
                 for t in offsets.topics for p in t.partitions if p.committed_offset >= 0}
    if described.group_state == "Dead" and not committed:
        return _describe_share_group(args, deadline)
    consumer = described.protocol_type == "consumer"
    members = [Member(m.member_id, m.client_id, m.client_host,
                      assigned_partitions(bytes(m.member_assignment)) if consumer else None,
                      m.group_instance_id)
               for m in described.members]
    desc = GroupDescription(args.group, described.group_state, described.protocol_type,
                            described.protocol_data, coordinator, members, committed)
    desc.log_end = _log_end_offsets(args.bootstrap_server, desc.partitions(), args.timeout,
                                    args.security)
    print(render_group(desc))
    return EXIT_OK


def _describe_share_group(args, deadline: float) -> int:
    """No classic group of that id: a share group, or GROUP_ID_NOT_FOUND."""
    while True:
        node, address = _find_coordinator(args.bootstrap_server, args.group, args.timeout,
                                          deadline, args.security)
        with Connection(address, args.timeout, args.security) as conn:
            described = describe_share_group(conn, args.group)
            starts = share_start_offsets(conn, args.group) \
                if described.error_code == ErrorCode.NONE else {}
        if described.error_code == ErrorCode.NONE:
            break
        _maybe_retry(described.error_code, deadline, f"group {args.group}")
    view = share_group_view(described, (node, format_address(address)))
    view.partitions = share_partition_rows(args.bootstrap_server, args.group, starts,
                                           args.timeout, args.security)
    print(render_share_group(view))
    return EXIT_OK

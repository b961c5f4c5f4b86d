"""``raftwood groups describe`` for a KIP-932 share group: its members and assignments.

DescribeGroups reports a share group as Dead (it is not a classic group, as in Kafka), so
``groups describe`` asks the coordinator with ShareGroupDescribe when DescribeGroups
finds no classic group, and prints the group's state, epochs and assignor, then each
member with its epoch, host, client id and assigned partitions (topic:p,p).  Share groups
commit no offsets: the per-partition offsets of ``groups describe`` do not apply.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from protocol.share_group_messages import ShareGroupDescribeRequest

from .tables import format_table

SHARE_GROUP_DESCRIBE_VERSION = 1


@dataclass
class ShareMemberRow:
    member_id: str
    member_epoch: int
    client_host: str
    client_id: str
    assignment: dict[str, list[int]]


@dataclass
class ShareGroupView:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    coordinator: tuple[int, str]
    members: list[ShareMemberRow] = field(default_factory=list)


def describe_share_group(conn, group: str):
    """The ShareGroupDescribe answer for ``group`` from ``conn`` (its coordinator)."""
    return conn.request(ShareGroupDescribeRequest[SHARE_GROUP_DESCRIBE_VERSION](
        group_ids=[group], include_authorized_operations=False)).groups[0]


def share_group_view(described, coordinator: tuple[int, str]) -> ShareGroupView:
    members = [ShareMemberRow(
        m.member_id, m.member_epoch, m.client_host, m.client_id,
        {t.topic_name: sorted(t.partitions) for t in m.assignment.topic_partitions})
        for m in described.members]
    return ShareGroupView(described.group_id, described.group_state, described.group_epoch,
                          described.assignment_epoch, described.assignor_name, coordinator,
                          members)


def render_share_group(view: ShareGroupView) -> str:
    node, address = view.coordinator
    lines = [f"group: {view.group_id}  state: {view.state}  type: share  "
             f"epoch: {view.group_epoch}  assignor: {view.assignor}  "
             f"coordinator: {node} ({address})  members: {len(view.members)}"]
    if view.members:
        lines.append("")
        lines.append(format_table(
            ["MEMBER-ID", "MEMBER-EPOCH", "HOST", "CLIENT-ID", "ASSIGNMENT"],
            [[m.member_id, m.member_epoch, m.client_host or None, m.client_id,
              " ".join(f"{t}:{','.join(map(str, ps))}"
                       for t, ps in sorted(m.assignment.items())) or None]
             for m in sorted(view.members, key=lambda m: m.member_id)], right=(1,)))
    return "\n".join(lines)

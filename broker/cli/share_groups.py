"""``raftwood groups describe`` for a KIP-932 share group: its members and partitions.

DescribeGroups reports a share group as Dead (it is not a classic group, as in Kafka), so
``groups describe`` asks the coordinator with ShareGroupDescribe when DescribeGroups
finds no classic group, and prints the group's state, epochs and assignor, then each
member with its epoch, host, client id and assigned partitions (topic:p,p).

Share groups commit no offsets; per share partition the table shows what Kafka's
``kafka-share-groups.sh --describe --offsets`` does, the start offset
(DescribeShareGroupOffsets at the coordinator) and the lag, and beside them what the
partition's leader holds in its in-flight window (Raftwood's status request): records
IN-FLIGHT (acquired by a member, locked) and ACKNOWLEDGED (finished, acknowledged or
archived, past the start offset, which waits for an earlier record).  LAG is the high
watermark minus the start offset minus ACKNOWLEDGED: the records not yet finished.
A value the cluster cannot give now (a leader down, a share partition not loaded on its
leader since it was elected) prints ``-``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from kafka.protocol.metadata import MetadataRequest

from protocol.errors import ErrorCode
from protocol.share_group_messages import (
    DescribeShareGroupOffsetsRequest,
    ShareGroupDescribeRequest,
)

from .client import ClientError, Connection
from .tables import format_table

SHARE_GROUP_DESCRIBE_VERSION = 1
DESCRIBE_OFFSETS_VERSION = 0
METADATA_VERSION = 8


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
    partitions: list[SharePartitionRow] = field(default_factory=list)


@dataclass
class SharePartitionRow:
    """One share partition; None where the cluster did not say."""

    topic: str
    partition: int
    start_offset: int | None
    high_watermark: int | None = None
    in_flight: int | None = None
    acknowledged: int | None = None

    @property
    def lag(self) -> int | None:
        if self.start_offset is None or self.high_watermark is None:
            return None
        return max(0, self.high_watermark - self.start_offset - (self.acknowledged or 0))


def describe_share_group(conn, group: str):
    """The ShareGroupDescribe answer for ``group`` from ``conn`` (its coordinator)."""
    return conn.request(ShareGroupDescribeRequest[SHARE_GROUP_DESCRIBE_VERSION](
        group_ids=[group], include_authorized_operations=False)).groups[0]


def share_start_offsets(conn, group: str) -> dict[tuple[str, int], int | None]:
    """{(topic, partition): start offset} of every partition the coordinator (``conn``)
    knows the group's state of; None for a partition answered with an error."""
    request_group = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
    [answer] = conn.request(DescribeShareGroupOffsetsRequest[DESCRIBE_OFFSETS_VERSION](
        groups=[request_group(group_id=group, topics=None)])).groups
    if answer.error_code != ErrorCode.NONE:
        return {}
    return {(t.topic_name, p.partition_index):
            p.start_offset if p.error_code == ErrorCode.NONE and p.start_offset >= 0 else None
            for t in answer.topics for p in t.partitions}


def share_partition_rows(bootstrap, group: str, starts: dict[tuple[str, int], int | None],
                         timeout_s: float, security=None) -> list[SharePartitionRow]:
    """A row per partition of ``starts``, with the high watermark and the in-flight
    window's counts from each partition's leader (its status answer)."""
    rows = {tp: SharePartitionRow(tp[0], tp[1], start) for tp, start in sorted(starts.items())}
    if not rows:
        return []
    with Connection(bootstrap, timeout_s, security) as conn:
        metadata = conn.request(MetadataRequest[METADATA_VERSION](
            topics=[MetadataRequest.MetadataRequestTopic(name=t)
                    for t in sorted({t for t, _ in rows})],
            allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False))
    addresses = {b.node_id: (b.host, b.port) for b in metadata.brokers}
    leaders = {p.leader_id for t in metadata.topics for p in t.partitions
               if (t.name, p.partition_index) in rows}
    for leader in sorted(leaders & set(addresses)):
        try:
            with Connection(addresses[leader], timeout_s, security) as conn:
                status = conn.status()
        except ClientError:
            continue  # that leader's columns stay "-"
        _fill_from_status(rows, group, status)
    return list(rows.values())


def _fill_from_status(rows: dict[tuple[str, int], SharePartitionRow], group: str,
                      status: dict) -> None:
    """The high watermarks of the partitions ``status``'s broker leads, and the counts
    of ``group``'s share partitions there."""
    for hosted in status.get("hosted") or []:
        row = rows.get((hosted.get("topic"), hosted.get("partition")))
        if row is not None and hosted.get("role") == "leader":
            row.high_watermark = hosted.get("high_watermark")
    for share in status.get("share_partitions") or []:
        row = rows.get((share.get("topic"), share.get("partition")))
        if row is not None and share.get("group") == group:
            row.in_flight = share.get("acquired")
            row.acknowledged = share.get("finished")
            row.start_offset = share.get("start_offset", row.start_offset)


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
    if view.partitions:
        lines.append("")
        lines.append(format_table(
            ["TOPIC", "PARTITION", "START-OFFSET", "HIGH-WATERMARK", "LAG", "IN-FLIGHT",
             "ACKNOWLEDGED"],
            [[r.topic, r.partition, r.start_offset, r.high_watermark, r.lag, r.in_flight,
              r.acknowledged] for r in view.partitions], right=(1, 2, 3, 4, 5, 6)))
    if view.members:
        lines.append("")
        lines.append(format_table(
            ["MEMBER-ID", "MEMBER-EPOCH", "HOST", "CLIENT-ID", "ASSIGNMENT"],
            [[m.member_id, m.member_epoch, m.client_host or None, m.client_id,
              " ".join(f"{t}:{','.join(map(str, ps))}"
                       for t, ps in sorted(m.assignment.items())) or None]
             for m in sorted(view.members, key=lambda m: m.member_id)], right=(1,)))
    return "\n".join(lines)

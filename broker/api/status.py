"""Raftwood's private status request (see protocol/status.py for the JSON shape).

``ctx`` is the broker's ApiContext, as for the Kafka handlers.  The answer names every
topic with its configs, every broker and the share groups, so with an authorizer it
needs Describe on the cluster (Kafka's Metadata likewise hides what a principal may not
describe); a principal without it gets ``{"error": "CLUSTER_AUTHORIZATION_FAILED",
"message": ...}`` and nothing else."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, NamedTuple

from protocol.status import encode_status_response

from ..security.acls import AclOperation

if TYPE_CHECKING:
    from .context import ApiContext


def status(ctx: ApiContext) -> dict:
    image = ctx.image
    rm = ctx.replica_manager
    now_ms = int(time.time() * 1000)
    lag_limit_ms = ctx.config["replica.lag.time.max.ms"]
    hosted = []
    for (topic, index), partition in sorted(rm.partitions.items()):
        role = "leader" if partition.is_leader else (
            "follower" if partition.leader_id >= 0 else "offline")
        followers = [{
            "replica_id": f.replica_id, "log_end_offset": f.log_end_offset,
            "lag": max(0, partition.log_end_offset - max(0, f.log_end_offset)),
            "in_sync": f.replica_id in partition.isr,
            "caught_up_ms_ago": now_ms - f.last_caught_up_ms if f.last_caught_up_ms else None,
        } for f in sorted(partition.followers.values(), key=lambda f: f.replica_id)]
        hosted.append({
            "topic": topic, "partition": index, "role": role,
            "leader_epoch": partition.leader_epoch,
            "log_start_offset": partition.log_start_offset,
            "log_end_offset": partition.log_end_offset,
            "high_watermark": partition.high_watermark, "followers": followers,
            "replica_lag_time_max_ms": lag_limit_ms,
        })
    return {
        "broker_id": ctx.node_id,
        "controller_id": ctx.metadata.controller_id,
        "cluster_id": image.cluster_id,
        "metadata_version": image.version,
        "brokers": [{"id": b.broker_id, "host": b.host, "port": b.port,
                     "epoch": b.broker_epoch, "fenced": b.fenced}
                    for b in sorted(image.brokers.values(), key=lambda b: b.broker_id)],
        "topics": [{
            "name": t.name, "topic_id": t.topic_id, "configs": dict(t.configs),
            "partitions": [{
                "partition": index, "replicas": list(p.replicas), "leader": p.leader,
                "leader_epoch": p.leader_epoch, "partition_epoch": p.partition_epoch,
                "isr": list(p.isr),
                "replica_states": {str(r): s for r, s in sorted(p.replica_states.items())},
                "adding_replicas": list(p.adding_replicas),
                "removing_replicas": list(p.removing_replicas),
            } for index, p in sorted(t.partitions.items())],
        } for t in sorted(image.topics.values(), key=lambda t: t.name)],
        "hosted": hosted,
        "quorum": ctx.metadata.quorum_status(),
        "share_partitions": ctx.share.partitions.describe() if ctx.share is not None else [],
    }


class _Asker(NamedTuple):
    """Who sent a status request, in the shape the authorizer reads from a request."""
    session: Any
    client_host: str


REFUSED = {"error": "CLUSTER_AUTHORIZATION_FAILED",
           "message": "the Raftwood status request needs Describe on the cluster "
                      "(raftwood acls add --allow-principal ... --operation describe --cluster)"}


def status_response(ctx: ApiContext, correlation_id: int, session: Any = None,
                    client_host: str = "") -> bytes:
    if not ctx.authorizer.allows_cluster(_Asker(session, client_host), AclOperation.DESCRIBE):
        return encode_status_response(correlation_id, REFUSED)
    return encode_status_response(correlation_id, status(ctx))

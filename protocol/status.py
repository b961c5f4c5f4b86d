"""Raftwood's private status request: cluster and replication state as JSON.

Kafka's APIs have no place for a partition epoch, a replica's state-machine state or
a follower's lag, which ``raftwood topics describe`` and ``raftwood cluster`` show.
So the broker also answers one private API key on its Kafka listener.  Kafka
clients never send it (it is not listed in ApiVersions); our CLI does.

Frame layout, inside Kafka's usual 4-byte size prefix:
    request:  request header v1 (api_key=STATUS_API_KEY, api_version=0,
              correlation_id, client_id) then a UTF-8 JSON object (may be ``{}``)
    response: correlation_id int32, then a UTF-8 JSON object

The response object (every broker answers for itself; ``cluster`` is the metadata
image this broker has applied):
    {"broker_id": int, "controller_id": int, "cluster_id": str, "metadata_version": int,
     "brokers": [{"id", "host", "port", "epoch", "fenced"}],
     "topics": [{"name", "topic_id", "configs": {...}, "partitions": [
         {"partition", "replicas": [int], "leader", "leader_epoch", "partition_epoch",
          "isr": [int], "replica_states": {"<broker id>": "OnlineReplica", ...}}]}],
     "hosted": [{"topic", "partition", "role": "leader"|"follower"|"offline",
                 "leader_epoch", "log_start_offset", "log_end_offset", "high_watermark",
                 "followers": [{"replica_id", "log_end_offset", "lag", "in_sync",
                                "caught_up_ms_ago"}]}],
     "quorum": null for a lone broker, else {"role": "voter"|"observer", "running",
                "leader_id", "leading", "term", "commit_index", "last_applied",
                "voters": [{"id", "address", "connected", "match_index" (leader only)}],
                "observers_connected" (leader only)},
     "share_partitions": [{"group", "topic", "partition", "start_offset", "end_offset",
                           "acquired", "finished", "available"}] (the share partitions
                           this broker leads, KIP-932)}
"""
from __future__ import annotations

import json
import struct
from typing import Any

from .errors import CorruptRequest

STATUS_API_KEY = 10000
_HEADER = struct.Struct(">hhih")
_CORRELATION = struct.Struct(">i")


def encode_status_request(correlation_id: int, query: dict[str, Any] | None = None,
                          client_id: str = "raftwood-cli") -> bytes:
    client = client_id.encode()
    payload = (_HEADER.pack(STATUS_API_KEY, 0, correlation_id, len(client)) + client
               + json.dumps(query or {}).encode())
    return struct.pack(">i", len(payload)) + payload


def decode_status_request(frame: bytes) -> tuple[int, dict[str, Any]]:
    """(correlation_id, query) from a frame without its size prefix."""
    try:
        api_key, _version, correlation_id, client_len = _HEADER.unpack_from(frame, 0)
        start = _HEADER.size + max(0, client_len)
        query = json.loads(frame[start:] or b"{}")
    except (struct.error, ValueError, UnicodeDecodeError) as exc:
        raise CorruptRequest(f"status request does not parse: {exc}") from exc
    if api_key != STATUS_API_KEY or not isinstance(query, dict):
        raise CorruptRequest("not a status request")
    return correlation_id, query


def encode_status_response(correlation_id: int, status: dict[str, Any]) -> bytes:
    payload = _CORRELATION.pack(correlation_id) + json.dumps(status).encode()
    return struct.pack(">i", len(payload)) + payload


def decode_status_response(frame: bytes) -> tuple[int, dict[str, Any]]:
    """(correlation_id, status) from a frame without its size prefix."""
    (correlation_id,) = _CORRELATION.unpack_from(frame, 0)
    return correlation_id, json.loads(frame[_CORRELATION.size:])

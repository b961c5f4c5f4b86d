"""What JoinGroup and SyncGroup answer, as the coordinator hands it to the handlers (pure)."""
from __future__ import annotations

from dataclasses import dataclass, field

from protocol.errors import ErrorCode


@dataclass
class JoinResult:
    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    # JoinGroup v9+ (KIP-814): the leader of a Stable group that a static rejoin did not
    # rebalance gets the members but must not compute an assignment.
    skip_assignment: bool = False


@dataclass
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""

"""The waiting requests and timers of a group's members (event-loop only).

A JoinGroup or SyncGroup that waits is a future held by its member (``awaiting_join``,
``awaiting_sync``); answering takes it off the member first, so each is answered once,
and answering a done future (a lost connection cancelled it) is a no-op.  Timers are
``loop.call_later`` handles kept on the group or member; cancelling clears them.  Used
by the classic coordinator and its static-membership collaborator; KIP-848 members keep
their own timers (``consumer_coordinator.py``).
"""
from __future__ import annotations

import asyncio

from .results import JoinResult, SyncResult
from .state import GroupMetadata, MemberMetadata


def call_later(delay_ms: int, callback, *args) -> asyncio.TimerHandle:
    """``callback(*args)`` after ``delay_ms`` (a negative delay counts as 0)."""
    return asyncio.get_running_loop().call_later(max(0, delay_ms) / 1000.0, callback, *args)


def invoke_join(member: MemberMetadata, result: JoinResult) -> None:
    future, member.awaiting_join = member.awaiting_join, None
    if future is not None and not future.done():
        future.set_result(result)


def invoke_sync(member: MemberMetadata, result: SyncResult) -> None:
    future, member.awaiting_sync = member.awaiting_sync, None
    if future is not None and not future.done():
        future.set_result(result)


def cancel_heartbeat(member: MemberMetadata) -> None:
    if member.heartbeat_timer is not None:
        member.heartbeat_timer.cancel()
        member.heartbeat_timer = None


def cancel_join_timer(group: GroupMetadata) -> None:
    if group.join_timer is not None:
        group.join_timer.cancel()
    group.join_timer = None
    group.join_timer_initial = False


def cancel_sync_timer(group: GroupMetadata) -> None:
    if group.sync_timer is not None:
        group.sync_timer.cancel()
    group.sync_timer = None
    group.pending_sync_members.clear()

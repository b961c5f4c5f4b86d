"""The one handler form, and what a handler may return besides a response body
(shared by the handlers and the connection, in a module of its own so handlers need
not import the package).

A handler is ``handle(ctx: ApiContext, request: Request) -> Answer`` or
``async def handle(...) -> Answer``: the connection calls it in the event-loop pass
that decoded the request and looks at what comes back.  An answer ready now (a
response body, ``None`` for "send nothing", ``CLOSE``) is queued at once; a ``Later``
is queued when it resolves; an awaitable (what an ``async def`` handler returns) is
awaited in a task of its own.  So the hot paths (Produce, Fetch) run without a task,
and every other handler may simply be ``async def``.
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from protocol.messages import Request

    from .context import ApiContext

# The handler's answer is "close this connection" (Kafka closes it after a failed
# acks=0 produce, the only way to tell such a producer).  ``None`` means "send nothing".
CLOSE: Any = object()

#: What a handler's answer may be: a response body (kafka-python's, or bytes already
#: encoded: ``protocol.messages.Framed``), None, CLOSE or a Later.
Answer = Any
Handler = Callable[["ApiContext", "Request"], Answer | Awaitable[Answer]]


class Later:
    """The answer of a handler that is not ready when the handler returns, without a
    task: an acks=all produce waiting for the high watermark, a fetch's long poll.

    Kafka's shape (a response callback handed down to the replica manager) rather than
    a task per request: the connection registers its callback with ``then``; the
    handler's side calls ``resolve(make_body)`` once, where ``make_body()`` builds the
    response body and is called by the connection, under its error handling.
    ``cancel()`` (the connection is gone) runs ``on_cancel`` (e.g. withdrawing the
    operation from its purgatory) and drops the callback; a resolve after it does
    nothing.  Event-loop only."""

    __slots__ = ("on_cancel", "_callback", "_make_body", "_resolved", "_cancelled")

    def __init__(self) -> None:
        self.on_cancel: Callable[[], object] | None = None
        self._callback: Callable[[Callable[[], object]], None] | None = None
        self._make_body: Callable[[], object] | None = None
        self._resolved = False
        self._cancelled = False

    @property
    def resolved(self) -> bool:
        return self._resolved

    def then(self, callback: Callable[[Callable[[], object]], None]) -> None:
        """``callback(make_body)`` once resolved (at once if it already is)."""
        if self._resolved:
            if not self._cancelled:
                callback(self._make_body)
            return
        self._callback = callback

    def resolve(self, make_body: Callable[[], object]) -> None:
        if self._resolved:
            return
        self._resolved = True
        # No reference cycle outlives the answer (this -> the operation -> its respond
        # closure -> this): every produce would otherwise leave garbage for the cyclic
        # collector, whose passes then cost more than the task this replaces.
        self.on_cancel = None
        callback, self._callback = self._callback, None
        if callback is not None and not self._cancelled:
            callback(make_body)
        else:
            self._make_body = make_body

    def cancel(self) -> None:
        if self._cancelled:
            return
        self._cancelled = True
        self._callback = None
        on_cancel, self.on_cancel = self.on_cancel, None
        if on_cancel is not None and not self._resolved:
            on_cancel()


async def answer_of(outcome: Answer | Awaitable[Answer]) -> Answer:
    """The body a handler's ``outcome`` stands for, awaited (for callers that are
    coroutines themselves, such as tests).  Cancelling the awaiting task cancels a
    Later (its wait is withdrawn)."""
    if hasattr(outcome.__class__, "__await__"):
        return await outcome
    if outcome.__class__ is not Later:
        return outcome
    future = asyncio.get_running_loop().create_future()
    outcome.then(lambda make_body: future.done() or future.set_result(make_body))
    try:
        make_body = await future
    finally:
        outcome.cancel()
    return make_body()

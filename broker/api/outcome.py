"""What a handler may return besides a response body (shared by the handlers and the
connection, in a module of its own so handlers need not import the package)."""
from __future__ import annotations

from typing import Awaitable, Callable

# The handler's answer is "close this connection" (Kafka closes it after a failed
# acks=0 produce, the only way to tell such a producer).  ``None`` means "send nothing".
CLOSE = object()

Handler = Callable[..., Awaitable[object]]

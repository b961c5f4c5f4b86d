"""Tenures over the partitions of a coordinator's internal topic, and loading one.

A coordinator serves the keys of a partition while this broker leads it.  One tenure
(an ``Ownership``, compared by identity) starts when the replica manager reports the
leadership and ends when it reports anything else; in between the coordinator first
reads the partition's log to its end (``LOADING``: requests are told
COORDINATOR_LOAD_IN_PROGRESS), then serves from memory (``LOADED``).  ``load_partition``
is that read; what a record means is each coordinator's own loader.

Event-loop only.
"""
from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

LOAD_CHUNK_BYTES = 1024 * 1024


class LoadState(enum.Enum):
    LOADING = "loading"
    LOADED = "loaded"


@dataclass(eq=False)
class Ownership:
    """This broker leads coordinator partition ``partition``; identity marks one tenure."""

    partition: int
    leader_epoch: int
    state: LoadState = LoadState.LOADING
    task: asyncio.Task | None = None


async def load_partition(replica_manager, topic: str, ownership: Ownership,
                         owned: dict[int, Ownership], apply: Callable[[bytes, int], int],
                         prefix: str) -> bool:
    """Feed the partition's log to ``apply(chunk, position) -> next position``, from its log
    start to its end (the end read again at every step), in chunks of LOAD_CHUNK_BYTES,
    yielding to the event loop between chunks.

    True when the log was read to its end and ``ownership`` is still the tenure in
    ``owned``; False when the tenure changed meanwhile (the read is abandoned) or the read
    failed (logged; the tenure is then dropped from ``owned``, so the partition's keys are
    answered NOT_COORDINATOR rather than from a partial state)."""
    index = ownership.partition
    try:
        partition = replica_manager.get_partition(topic, index)
        if partition is None:
            raise RuntimeError("partition not hosted here")
        position = partition.log.log_start_offset
        while position < (end := partition.log.log_end_offset):
            chunk = partition.log.read(position, LOAD_CHUNK_BYTES, max_offset=end)
            if not chunk:
                break
            position = apply(bytes(chunk), position)
            await asyncio.sleep(0)  # let requests in; ownership may change meanwhile
            if owned.get(index) is not ownership:
                return False
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("%s loading %s-%d failed; not coordinating its keys", prefix, topic, index)
        if owned.get(index) is ownership:
            del owned[index]
        return False
    return owned.get(index) is ownership

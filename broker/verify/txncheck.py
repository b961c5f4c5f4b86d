"""The invariants of the transactional workload (KIP-98), as pure code.

Evidence, gathered by ``txnload`` and the ``observer``:
  * the history: every transaction the producer ran (``Txn``): its id, the records it
    handed to the client (partition, value) and its outcome *as the client saw it* —
    ``committed`` (commit_transaction returned), ``aborted`` (abort_transaction
    returned, or commit was never asked for and the producer was re-initialised, which
    aborts the open transaction of its transactional id), ``unknown`` (commit_transaction
    raised or timed out: the transaction may have ended either way; ``open``, a
    transaction still in progress when the history was taken, is judged as unknown);
  * sightings (``Sighting``: partition, offset, value) of a read_committed consumer
    along the run and of a final read_committed read from offset 0 after healing, with
    the partitions that final read saw to their end (the last committed "end"
    transaction's record read there, so no transaction before it is still open);
  * ListOffsets latest under read_committed (the last stable offset, LSO) per partition,
    from one client over time (``LsoAudit``; error answers — NOT_LEADER,
    FENCED_LEADER_EPOCH, OFFSET_NOT_AVAILABLE during a leader change — are "no answer"
    and never fed here).

Checks (``check_transactions``), each a violation kind of the run's ``ViolationLog``:
  * ``txn-lost`` — a committed transaction with a record missing from the final read;
  * ``aborted-visible`` — a record of an aborted transaction read under read_committed,
    during the run or at the end;
  * ``txn-partial`` — an unknown transaction partly visible (some records, not all): it
    may end either way, but whole;
  * ``txn-duplicate`` — one record read at two different positions (exactly once per
    committed transaction);
  * ``txn-stranger`` — a value read that no transaction of the history wrote;
  * ``txn-unread`` — the final read did not reach a partition's end within its bound
    (an LSO stuck behind a transaction nobody ends); records of such a partition are not
    judged lost, and transactions touching it are not judged all-or-nothing;
  * ``lso-backwards`` — an LSO answered lower than one answered earlier (``LsoAudit``).
Records of a partition the final read did not complete are judged only by what was
read (aborted-visible, duplicates).  Everything here is single-threaded; callers
serialise access.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

from .checker import EXAMPLES, Violation, ViolationLog

TopicPartition = tuple[str, int]
OUTCOMES = ("committed", "aborted", "unknown")
KINDS = ("txn-lost", "aborted-visible", "txn-partial", "txn-duplicate", "txn-stranger",
         "txn-unread", "lso-backwards")


@dataclass
class Txn:
    """One transaction attempt as the producer saw it."""

    txn_id: int
    records: list[tuple[int, bytes]] = field(default_factory=list)  # (partition, value)
    outcome: str = "open"      # until the client's calls for it returned
    planned_abort: bool = False
    end: bool = False          # the closing transaction written after healing
    note: str = ""             # how it ended when not plainly (the client's error)

    def partitions(self) -> set[int]:
        return {p for p, _ in self.records}


class Sighting(NamedTuple):
    """A record a read_committed consumer was served."""

    partition: int
    offset: int
    value: bytes


class LsoAudit:
    """The LSO of a partition never goes backwards (``lso-backwards``)."""

    def __init__(self, violations: ViolationLog):
        self.violations = violations
        self.highest: dict[TopicPartition, tuple[int, str]] = {}
        self.observations = 0

    def observe(self, tp: TopicPartition, offset: int, source: str) -> Violation | None:
        """A successful ListOffsets latest answer under read_committed from ``source``."""
        self.observations += 1
        seen = self.highest.get(tp)
        if seen is not None and offset < seen[0]:
            return self.violations.add(
                "lso-backwards", f"{tp[0]}-{tp[1]}: the read_committed latest offset (LSO) "
                f"went back to {offset} ({source}); {seen[0]} was answered earlier "
                f"({seen[1]})")
        if seen is None or offset > seen[0]:
            self.highest[tp] = (offset, source)
        return None


@dataclass
class TxnResult:
    """Counts of one check, for the report."""

    outcomes: Counter = field(default_factory=Counter)   # outcome -> transactions
    records: int = 0                 # records handed to the client
    unknown_visible: int = 0         # unknown transactions read whole
    unknown_invisible: int = 0       # ... and not at all
    unjudged: int = 0                # unknown ones touching a partition not read to its end
    live_read: int = 0               # records read along the run
    final_read: int = 0              # records of the final read
    lso_observations: int = 0
    final_complete: bool = False     # every partition read to its end
    planned_aborts: int = 0

    def to_dict(self) -> dict:
        return {"committed": self.outcomes["committed"], "aborted": self.outcomes["aborted"],
                "unknown": self.outcomes["unknown"], "records": self.records,
                "planned_aborts": self.planned_aborts,
                "unknown_visible": self.unknown_visible,
                "unknown_invisible": self.unknown_invisible, "unjudged": self.unjudged,
                "live_read": self.live_read, "final_read": self.final_read,
                "lso_observations": self.lso_observations,
                "final_complete": self.final_complete}


def check_transactions(topic: str, history: list[Txn], live: list[Sighting],
                       final: list[Sighting], completed: set[int], partitions: list[int],
                       violations: ViolationLog, lso: LsoAudit | None = None) -> TxnResult:
    """Every check of the module docstring on one topic's evidence.  ``completed``: the
    partitions the final read saw to their end; ``partitions``: all of the topic's."""
    result = TxnResult(lso_observations=lso.observations if lso else 0,
                       live_read=len(live), final_read=len(final),
                       final_complete=set(partitions) <= set(completed))
    for partition in sorted(set(partitions) - set(completed)):
        last = lso.highest.get((topic, partition)) if lso is not None else None
        violations.add("txn-unread", f"{topic}-{partition}: the final read_committed read "
                       f"did not reach the partition's end (the closing transaction's record "
                       f"was not read) within its bound"
                       + (f"; the highest LSO answered was {last[0]} ({last[1]})"
                          if last else "; no LSO was answered"))
    owner: dict[bytes, Txn] = {}
    history = [txn if txn.outcome in OUTCOMES else
               Txn(txn.txn_id, txn.records, "unknown", txn.planned_abort, txn.end,
                   txn.note or f"still {txn.outcome} when checked") for txn in history]
    for txn in history:
        if not txn.records:
            continue
        result.outcomes[txn.outcome] += 1
        result.records += len(txn.records)
        result.planned_aborts += txn.planned_abort
        for _, value in txn.records:
            owner[value] = txn
    positions: dict[bytes, set[tuple[int, int]]] = {}
    for sighting in list(live) + list(final):
        positions.setdefault(sighting.value, set()).add((sighting.partition, sighting.offset))
    final_values = {s.value for s in final}

    strangers = [v for v in positions if v not in owner]
    for value in strangers[:EXAMPLES]:
        where = sorted(positions[value])[0]
        violations.add("txn-stranger", f"{topic}-{where[0]}@{where[1]}: read {_short(value)}, "
                       f"which no transaction of the history wrote")
    for _ in strangers[EXAMPLES:]:
        violations.add("txn-stranger", "(more values no transaction wrote)")
    for value, seen in sorted(positions.items(), key=lambda kv: sorted(kv[1])[0]):
        if len(seen) > 1 and value in owner:
            txn = owner[value]
            violations.add("txn-duplicate", f"{topic}: a record of transaction {txn.txn_id} "
                           f"({txn.outcome}) read at {len(seen)} positions "
                           f"{_positions(topic, seen)}: {_short(value)}")

    for txn in history:
        if not txn.records:
            continue
        read = [v in positions for _, v in txn.records]
        if txn.outcome == "aborted":
            if any(read):
                visible = [(p, v) for (p, v), r in zip(txn.records, read) if r]
                where = sorted(positions[visible[0][1]])[0]
                violations.add("aborted-visible", f"{topic}: transaction {txn.txn_id} was "
                               f"aborted ({txn.note or 'abort_transaction returned'}) but "
                               f"{len(visible)} of its {len(txn.records)} records were read "
                               f"under read_committed, e.g. {_short(visible[0][1])} at "
                               f"{topic}-{where[0]}@{where[1]}")
            continue
        judged = txn.partitions() <= set(completed)
        if txn.outcome == "committed":
            missing = [(p, v) for p, v in txn.records
                       if p in completed and v not in final_values]
            if missing:
                violations.add("txn-lost", f"{topic}: transaction {txn.txn_id} was committed "
                               f"(commit_transaction returned) but {len(missing)} of its "
                               f"{len(txn.records)} records are not in the final "
                               f"read_committed read, e.g. {_short(missing[0][1])} on "
                               f"partition {missing[0][0]}")
            continue
        # unknown: all or nothing (what the final read shows, plus what was read along)
        if not judged:
            result.unjudged += 1
            continue
        if all(read):
            result.unknown_visible += 1
        elif not any(read):
            result.unknown_invisible += 1
        else:
            violations.add("txn-partial", f"{topic}: transaction {txn.txn_id} ended "
                           f"unknown to the client ({txn.note or 'commit raised'}) and "
                           f"{sum(read)} of its {len(txn.records)} records were read under "
                           f"read_committed: {_shape(txn.records, read)}")
    # a committed record read only along the run but absent at the end is lost too:
    # covered above (the final read is the reference); a record read along the run at
    # one offset and at the end at another is a txn-duplicate.
    return result


def _positions(topic: str, seen: set[tuple[int, int]]) -> str:
    return ", ".join(f"{topic}-{p}@{o}" for p, o in sorted(seen)[:4])


def _shape(records: list[tuple[int, bytes]], read: list[bool]) -> str:
    return " ".join(f"p{p}:{'read' if r else 'absent'}" for (p, _), r in
                    list(zip(records, read))[:10])


def _short(value: bytes | None, limit: int = 40) -> str:
    if value is None:
        return "nothing"
    return repr(value[:limit]) + ("..." if len(value) > limit else "")

"""The invariants ``raftwood verify`` checks, as pure code fed with observations.

During the run (fed by ``observer.Observer``):
  * ``OffsetAudit`` — ListOffsets latest of a partition never goes backwards over the
    whole run, whoever leads; the high watermark a leader reports never goes backwards
    while it leads in one leader epoch (a new leader may start below its predecessor's
    HW — Kafka's too — which is why ListOffsets answers OFFSET_NOT_AVAILABLE until it
    caught up; such answers are "no answer", never fed here).
  * ``ElectionAudit`` — no broker outside the ISR is elected (unclean election is off):
    for consecutive partition epochs e-1 → e with a leader epoch change, the new leader
    was in the ISR of epoch e-1.  Transitions whose epoch e-1 was never observed are
    counted as unverified, not guessed at.
  * ``CommittedSnapshots`` — what consumers were served (only ever below the HW) is
    remembered: batches byte for byte (digest, baseOffset and leader epoch included)
    and record values by offset.  Content below the HW never changes, so the final
    logs must hold exactly that.
  * ``EpochAudit`` — one leader per leader epoch: no two brokers advanced their HW
    (acknowledged acks=all writes) while leading the same epoch of a partition, and
    one (partition, batch leader epoch, offset) never maps to two different batches,
    across what every broker claiming leadership served and the final logs (each
    stored batch carries the partitionLeaderEpoch of the leader that appended it).

After healing (``check_final``):
  * every acknowledged record is at its acknowledged offset with its key and value (an
    acknowledgement without an offset — librdkafka gives none for a batch it infers
    was persisted from the answers to its retries — is looked up by its value);
  * every replica stores the same bytes below the HW, in whole contiguous batches
    covering the log from its start to the HW (``compare_replicas``);
  * every value in the logs is intact (its checksum) and was written by the workload;
  * duplicates (a written value present more than once) are counted, not failed;
  * every acknowledged record is attributed to the leader epoch of its stored batch,
    and each such epoch to the broker(s) seen leading it (``EpochAudit.attribute``).

Everything here is pure and single-threaded; callers serialise access.
"""
from __future__ import annotations

import bisect
import hashlib
from collections import Counter
from dataclasses import dataclass, field

from protocol.records import valid_prefix

from .payload import BadValue, decode_value

TopicPartition = tuple[str, int]
EXAMPLES = 5  # violations kept in full per kind; the rest are counted


def tp_name(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def batch_digest(batch: bytes) -> str:
    """A short fingerprint of one stored batch (all of its bytes)."""
    return hashlib.sha1(batch).hexdigest()[:16]


@dataclass(frozen=True)
class Violation:
    kind: str     # lost, committed_changed, hw_regression, divergent, out_of_isr_election,
    #               bad_value, epoch_conflict, not_converged, unhealed, error; and
    #               txncheck's txn-lost, aborted-visible, txn-partial, txn-duplicate,
    #               txn-stranger, txn-unread, lso-backwards; and reassign's
    #               reassign-stuck, reassign-ongoing
    detail: str


class ViolationLog:
    """Counts violations by kind and keeps the first few of each in full."""

    def __init__(self):
        self.counts: Counter = Counter()
        self.examples: list[Violation] = []
        self._kept: Counter = Counter()

    def add(self, kind: str, detail: str) -> Violation:
        violation = Violation(kind, detail)
        self.counts[kind] += 1
        if self._kept[kind] < EXAMPLES:
            self._kept[kind] += 1
            self.examples.append(violation)
        return violation

    def count(self, kind: str) -> int:
        return self.counts[kind]


# -- during the run ----------------------------------------------------------------------

class OffsetAudit:
    """ListOffsets latest and leader HW monotonicity (see the module docstring)."""

    def __init__(self, violations: ViolationLog):
        self.violations = violations
        self.latest_max: dict[TopicPartition, tuple[int, str]] = {}
        self.leader_hw: dict[tuple[int, TopicPartition, int], int] = {}
        self.latest_observations = 0
        self.hw_observations = 0

    def observe_latest(self, tp: TopicPartition, offset: int, source: str) -> Violation | None:
        """A successful ListOffsets latest answer (error code 0) from ``source``."""
        self.latest_observations += 1
        seen = self.latest_max.get(tp)
        if seen is not None and offset < seen[0]:
            return self.violations.add(
                "hw_regression", f"{tp_name(tp)}: ListOffsets latest went back to {offset} "
                f"({source}); {seen[0]} was answered earlier ({seen[1]})")
        if seen is None or offset > seen[0]:
            self.latest_max[tp] = (offset, source)
        return None

    def observe_leader_hw(self, node: int, tp: TopicPartition, leader_epoch: int,
                          high_watermark: int) -> Violation | None:
        """The HW broker ``node`` reports for a partition it leads in ``leader_epoch``."""
        self.hw_observations += 1
        key = (node, tp, leader_epoch)
        seen = self.leader_hw.get(key)
        if seen is not None and high_watermark < seen:
            return self.violations.add(
                "hw_regression", f"{tp_name(tp)}: leader {node} in epoch {leader_epoch} "
                f"reported HW {high_watermark} after {seen}")
        if seen is None or high_watermark > seen:
            self.leader_hw[key] = high_watermark
        return None


@dataclass(frozen=True)
class PartitionState:
    """A partition as one metadata image shows it."""

    leader: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]


class ElectionAudit:
    """Clean elections only (see the module docstring)."""

    def __init__(self, violations: ViolationLog):
        self.violations = violations
        self.states: dict[TopicPartition, dict[int, PartitionState]] = {}
        self.elections_checked = 0

    def observe(self, tp: TopicPartition, state: PartitionState) -> Violation | None:
        seen = self.states.setdefault(tp, {})
        if state.partition_epoch in seen:
            return None
        seen[state.partition_epoch] = state
        found = None
        for earlier, later in ((seen.get(state.partition_epoch - 1), state),
                               (state, seen.get(state.partition_epoch + 1))):
            if earlier is not None and later is not None:
                found = self._check(tp, earlier, later) or found
        return found

    def _check(self, tp: TopicPartition, earlier: PartitionState,
               later: PartitionState) -> Violation | None:
        if later.leader_epoch == earlier.leader_epoch or later.leader < 0:
            return None
        self.elections_checked += 1
        if later.leader not in earlier.isr:
            return self.violations.add(
                "out_of_isr_election", f"{tp_name(tp)}: broker {later.leader} elected in "
                f"leader epoch {later.leader_epoch} (partition epoch {later.partition_epoch}) "
                f"but the ISR of partition epoch {earlier.partition_epoch} was "
                f"{list(earlier.isr)}")
        return None

    def elections_seen(self) -> int:
        """Leader epoch changes observed at all (checked or not)."""
        total = 0
        for states in self.states.values():
            epochs = sorted({s.leader_epoch for s in states.values()})
            total += max(0, len(epochs) - 1)
        return total


class CommittedSnapshots:
    """What consumers were served during the run (always below the HW then)."""

    def __init__(self, violations: ViolationLog):
        self.violations = violations
        self.batches: dict[TopicPartition, dict[int, tuple[int, str, int]]] = {}
        self.values: dict[TopicPartition, dict[int, tuple[bytes | None, bytes | None]]] = {}

    def record_batch(self, tp: TopicPartition, base_offset: int, last_offset: int,
                     digest: str, leader_epoch: int) -> Violation | None:
        seen = self.batches.setdefault(tp, {})
        earlier = seen.setdefault(base_offset, (last_offset, digest, leader_epoch))
        if earlier[:2] != (last_offset, digest):
            return self.violations.add(
                "committed_changed", f"{tp_name(tp)}: the committed batch at {base_offset} "
                f"was served as {earlier} and later as {(last_offset, digest, leader_epoch)}")
        return None

    def record_value(self, tp: TopicPartition, offset: int, key: bytes | None,
                     value: bytes | None) -> Violation | None:
        seen = self.values.setdefault(tp, {})
        earlier = seen.setdefault(offset, (key, value))
        if earlier != (key, value):
            return self.violations.add(
                "committed_changed", f"{tp_name(tp)}: offset {offset} was read as "
                f"{_short(earlier[1])} and later as {_short(value)}")
        return None

    def batch_count(self) -> int:
        return sum(len(b) for b in self.batches.values())

    def value_count(self) -> int:
        return sum(len(v) for v in self.values.values())


class EpochAudit:
    """One leader per leader epoch (see the module docstring).  Violations are of kind
    ``epoch_conflict``; epochs several brokers claimed without two of them
    acknowledging are listed by ``shared_claims`` (a note, not a violation)."""

    def __init__(self, violations: ViolationLog):
        self.violations = violations
        # (tp, epoch) -> {node: [first HW seen, highest HW seen]} while it claimed to lead
        self.claims: dict[tuple[TopicPartition, int], dict[int, list[int]]] = {}
        # (tp, batch leader epoch) -> {base offset: (last offset, digest, source)}
        self.batches: dict[tuple[TopicPartition, int], dict[int, tuple[int, str, str]]] = {}
        self._bases: dict[tuple[TopicPartition, int], list[int]] = {}
        self._flagged: set[tuple[TopicPartition, int]] = set()

    def observe_claim(self, node: int, tp: TopicPartition, epoch: int,
                      high_watermark: int) -> Violation | None:
        """Broker ``node`` reports leading ``tp`` in ``epoch`` with this HW."""
        seen = self.claims.setdefault((tp, epoch), {}).setdefault(
            node, [high_watermark, high_watermark])
        seen[1] = max(seen[1], high_watermark)
        acking = self.acknowledgers(tp, epoch)
        if len(acking) > 1 and (tp, epoch) not in self._flagged:
            self._flagged.add((tp, epoch))
            ranges = ", ".join(f"broker {n} HW {self.claims[(tp, epoch)][n][0]}->"
                               f"{self.claims[(tp, epoch)][n][1]}" for n in acking)
            return self.violations.add(
                "epoch_conflict", f"{tp_name(tp)}: brokers {acking} both led leader epoch "
                f"{epoch} and advanced their HW in it ({ranges})")
        return None

    def acknowledgers(self, tp: TopicPartition, epoch: int) -> list[int]:
        """Brokers whose HW advanced while they claimed to lead ``epoch``."""
        return sorted(n for n, (first, last) in self.claims.get((tp, epoch), {}).items()
                      if last > first)

    def record_batch(self, tp: TopicPartition, epoch: int, base_offset: int,
                     last_offset: int, digest: str, source: str) -> Violation | None:
        """A stored batch stamped with leader ``epoch``, seen at ``source``."""
        key = (tp, epoch)
        batches = self.batches.setdefault(key, {})
        earlier = batches.get(base_offset)
        if earlier is not None:
            if earlier[:2] == (last_offset, digest):
                return None
            return self._conflict(tp, epoch, base_offset, earlier, last_offset, source)
        bases = self._bases.setdefault(key, [])
        at = bisect.bisect_left(bases, base_offset)
        if at and batches[bases[at - 1]][0] >= base_offset:
            return self._conflict(tp, epoch, base_offset, batches[bases[at - 1]],
                                  last_offset, source)
        if at < len(bases) and last_offset >= bases[at]:
            return self._conflict(tp, epoch, base_offset, batches[bases[at]], last_offset,
                                  source)
        bases.insert(at, base_offset)
        batches[base_offset] = (last_offset, digest, source)
        return None

    def _conflict(self, tp, epoch, base_offset, earlier, last_offset, source) -> Violation:
        return self.violations.add(
            "epoch_conflict", f"{tp_name(tp)}: two different batches of leader epoch {epoch}: "
            f"..{earlier[0]} (digest {earlier[1]}, {earlier[2]}) and {base_offset}.."
            f"{last_offset} ({source})")

    def attribute(self, acked_epochs: Counter) -> dict:
        """Acknowledged records per (tp, leader epoch) -> which broker(s) led it:
        counts of epochs with one leader seen, none seen (too short for the observer)
        and several claimants."""
        summary = {"epochs": len(acked_epochs), "records": sum(acked_epochs.values()),
                   "one_leader": 0, "unobserved": 0, "several_claimants": 0}
        for key in acked_epochs:
            claimants = self.claims.get(key, {})
            name = ("unobserved" if not claimants else
                    "one_leader" if len(claimants) == 1 else "several_claimants")
            summary[name] += 1
        return summary

    def shared_claims(self) -> list[str]:
        return [f"{tp_name(tp)} leader epoch {epoch}: brokers {sorted(nodes)} claimed it "
                f"(acknowledging: {self.acknowledgers(tp, epoch) or 'none'})"
                for (tp, epoch), nodes in sorted(self.claims.items()) if len(nodes) > 1]


# -- after healing -----------------------------------------------------------------------

@dataclass(frozen=True)
class AckedRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes


@dataclass
class FinalPartition:
    """One partition after healing: its HW, every replica's stored bytes (whole log,
    segments concatenated, from the log start), and the log start offset."""

    tp: TopicPartition
    high_watermark: int
    replicas: dict[int, bytes]
    log_start_offset: int = 0
    records: dict[int, tuple[bytes | None, bytes | None]] = field(default_factory=dict)


def batches_below(data: bytes, high_watermark: int) -> tuple[bytes, list]:
    """The stored batches of ``data`` whose last offset is below ``high_watermark``:
    (their bytes, their headers).  Stops at the first batch that is not well formed."""
    headers, _ = valid_prefix(data, check_crc=True)
    kept = [h for h in headers if h.last_offset < high_watermark]
    # batches are in offset order, so the kept ones are a prefix
    end = kept[-1].position + kept[-1].size if kept else 0
    return data[:end], kept


def compare_replicas(partition: FinalPartition, violations: ViolationLog) -> bytes | None:
    """Every replica stores whole contiguous batches covering [log start, HW) and the
    same bytes for them; returns the common prefix (None when they diverge)."""
    tp, hw = partition.tp, partition.high_watermark
    prefixes: dict[int, bytes] = {}
    problems: list[str] = []
    for node, data in sorted(partition.replicas.items()):
        prefix, headers = batches_below(data, hw)
        prefixes[node] = prefix
        expected = partition.log_start_offset
        for header in headers:
            if header.base_offset != expected:
                problems.append(f"broker {node} has a batch at {header.base_offset} where "
                                f"{expected} was expected")
                break
            expected = header.next_offset
        else:
            if expected != hw:
                problems.append(f"broker {node}'s batches below the HW end at {expected}, "
                                f"HW {hw}")
    if len(set(prefixes.values())) > 1:
        (ref_node, ref), *others = prefixes.items()
        for node, prefix in others:
            if prefix != ref:
                at = next((i for i, (a, b) in enumerate(zip(prefix, ref)) if a != b),
                          min(len(prefix), len(ref)))
                problems.append(f"broker {node}'s log differs from broker {ref_node}'s at "
                                f"byte {at} ({len(prefix)} vs {len(ref)} bytes below HW {hw})")
    if problems:
        violations.add("divergent", f"{tp_name(tp)}: " + "; ".join(problems))
        return None
    return next(iter(prefixes.values()), b"")


@dataclass
class CheckResult:
    """Counts for the report; ``violations`` holds examples of each kind."""

    violations: ViolationLog
    acked: int = 0
    lost: int = 0
    duplicates: int = 0
    present: int = 0
    unacked_present: int = 0
    partitions: int = 0
    divergent: int = 0
    epochs: dict = field(default_factory=dict)    # EpochAudit.attribute
    notes: list[str] = field(default_factory=list)

    FAILING = ("lost", "committed_changed", "hw_regression", "divergent",
               "out_of_isr_election", "bad_value", "epoch_conflict", "not_converged",
               "unhealed", "error",
               # the transactional workload's (txncheck.KINDS)
               "txn-lost", "aborted-visible", "txn-partial", "txn-duplicate",
               "txn-stranger", "txn-unread", "lso-backwards",
               # the reassign fault's (reassign.ReassignLedger.check)
               "reassign-stuck", "reassign-ongoing",
               # a transactional id or group blocked too long (stuck.ProgressWatch)
               "stuck")

    @property
    def passed(self) -> bool:
        return not any(self.violations.count(kind) for kind in self.FAILING)


def check_final(acked: list[AckedRecord], partitions: list[FinalPartition],
                snapshots: CommittedSnapshots, violations: ViolationLog,
                decode_records, epochs: EpochAudit | None = None) -> CheckResult:
    """Compare the healed cluster with what was acknowledged and observed.

    ``decode_records(data) -> [(offset, key, value), ...]`` decodes stored batches (the
    runner passes kafka-python's decoder; tests may pass a fake).  Fills each
    partition's ``records`` from its common prefix when the replicas agree (from the
    first replica otherwise, so losses are still counted).  With ``epochs`` every
    replica's batches below the HW go to the epoch audit and each acknowledged record
    is attributed to the leader epoch of its stored batch.
    """
    result = CheckResult(violations=violations, acked=len(acked), partitions=len(partitions))
    by_tp: dict[TopicPartition, FinalPartition] = {p.tp: p for p in partitions}
    spans: dict[TopicPartition, list[tuple[int, int, int]]] = {}
    for partition in partitions:
        common = compare_replicas(partition, violations)
        if common is None:
            result.divergent += 1
            first = next(iter(sorted(partition.replicas.items())), (None, b""))[1]
            common, _ = batches_below(first, partition.high_watermark)
        partition.records = {offset: (key, value)
                             for offset, key, value in decode_records(common)}
        _check_committed(partition, common, snapshots, violations)
        spans[partition.tp] = [(h.base_offset, h.last_offset, h.partition_leader_epoch)
                               for h in valid_prefix(common, check_crc=False)[0]]
        if epochs is not None:
            _record_final_batches(partition, epochs)

    acked_ids, acked_epochs = _check_acked(acked, by_tp, spans, result)
    if epochs is not None:
        result.epochs = epochs.attribute(acked_epochs)
        result.notes.extend(epochs.shared_claims()[:EXAMPLES])

    copies: Counter = Counter()
    for partition in partitions:
        for offset, (_key, value) in sorted(partition.records.items()):
            try:
                copies[decode_value(value)] += 1
            except BadValue as exc:
                violations.add("bad_value", f"{tp_name(partition.tp)}@{offset}: {exc}")
    result.present = sum(copies.values())
    result.duplicates = sum(n - 1 for n in copies.values() if n > 1)
    result.unacked_present = sum(1 for value_id in copies if value_id not in acked_ids)
    return result


def _check_committed(partition: FinalPartition, common: bytes, snapshots: CommittedSnapshots,
                     violations: ViolationLog) -> None:
    tp = partition.tp
    final_batches = {h.base_offset: (h.last_offset, batch_digest(common[h.position:h.position
                                                                        + h.size]))
                     for h in valid_prefix(common, check_crc=False)[0]}
    for base_offset, (last_offset, digest, _epoch) in sorted(
            snapshots.batches.get(tp, {}).items()):
        if final_batches.get(base_offset) != (last_offset, digest):
            violations.add("committed_changed", f"{tp_name(tp)}: the batch "
                           f"{base_offset}..{last_offset} served during the run is not in "
                           f"the final log byte for byte")
    for offset, (key, value) in sorted(snapshots.values.get(tp, {}).items()):
        if partition.records.get(offset) != (key, value):
            violations.add("committed_changed", f"{tp_name(tp)}@{offset}: a consumer read "
                           f"{_short(value)} during the run; the final log holds "
                           f"{_short((partition.records.get(offset) or (None, None))[1])}")


def _check_acked(acked: list[AckedRecord], by_tp: dict[TopicPartition, FinalPartition],
                 spans: dict[TopicPartition, list], result: CheckResult) -> tuple[set, Counter]:
    """Every acknowledged record at its offset (``lost`` otherwise); returns the
    acknowledged value ids and the count of acknowledged records per (tp, epoch)."""
    acked_ids = set()
    acked_epochs: Counter = Counter()
    by_value: dict[TopicPartition, dict] = {}
    without_offset = []
    for record in acked:
        acked_ids.add(_value_id(record.value))
        tp = (record.topic, record.partition)
        partition = by_tp.get(tp)
        offset = record.offset
        if (offset is None or offset < 0) and partition is not None:
            # librdkafka acknowledges without an offset a batch it infers was persisted
            # from the broker's answers to its retries: look for the value instead
            values = by_value.setdefault(tp, {v: o for o, (_k, v) in partition.records.items()})
            offset = values.get(record.value, offset)
            without_offset.append(f"{tp_name(tp)}@{offset}")
        found = partition.records.get(offset) if partition else None
        if found != (record.key, record.value):
            where = "absent" if found is None else f"holds {_short(found[1])}"
            result.violations.add("lost", f"{record.topic}-{record.partition}@"
                                  f"{record.offset}: acknowledged {_short(record.value)}, "
                                  f"the log {where}")
            result.lost += 1
        else:
            acked_epochs[(tp, _epoch_at(spans.get(tp, []), offset))] += 1
    if without_offset:
        result.notes.append(f"{len(without_offset)} acknowledgements carried no offset "
                            f"(a client inferring its retried batch was persisted); each "
                            f"checked by its value: {', '.join(without_offset[:EXAMPLES])}")
    return acked_ids, acked_epochs


def _record_final_batches(partition: FinalPartition, epochs: EpochAudit) -> None:
    for node, data in sorted(partition.replicas.items()):
        prefix, headers = batches_below(data, partition.high_watermark)
        for h in headers:
            epochs.record_batch(partition.tp, h.partition_leader_epoch, h.base_offset,
                                h.last_offset,
                                batch_digest(prefix[h.position:h.position + h.size]),
                                f"broker {node}'s final log")


def _epoch_at(spans: list[tuple[int, int, int]], offset: int) -> int:
    """The leader epoch of the batch (base, last, epoch) holding ``offset``; -1 if none."""
    at = bisect.bisect_right(spans, (offset, float("inf"), 0)) - 1
    return spans[at][2] if at >= 0 and spans[at][1] >= offset else -1


def _value_id(value: bytes):
    try:
        return decode_value(value)
    except BadValue:
        return value


def _short(value: bytes | None, limit: int = 40) -> str:
    if value is None:
        return "nothing"
    text = repr(value[:limit])
    return text + ("..." if len(value) > limit else "")

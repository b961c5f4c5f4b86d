"""What ``raftwood verify`` prints: progress lines while it runs, a report at the end,
and the one summary line a script can rely on (always the last line of the text
output)::

    verify: PASS faults=12 acked=5210 lost=0 duplicates=0 hw_regressions=0 divergent=0

On a failure the word is FAIL and the counts say what broke; violations that have no
field of their own (committed data changed, an out-of-ISR election, a damaged value,
two leaders in one leader epoch, a fault after which the cluster did not converge in
time, a cluster that never healed, a harness error; and the transactional workload's:
a committed transaction lost, an aborted record visible, an unknown transaction seen in
part, a transactional record read twice or never written, a partition not read to its
end, an LSO going back; and the ``reassign`` fault's: a move neither completed nor
cancelled, a partition still moving after the heal; a transactional id or group
without progress for longer than ``stuck.STUCK_BOUND_S``) are appended as extra
``name=count`` fields, only when non-zero.  The report has a ``transactions`` line
(committed/aborted/unknown counts and each transactional check's count; or why the
workload was skipped) and, when ``reassign`` ran, a ``reassign`` line (moves started,
completed, cancelled) and, with the transactional workload, a ``progress`` line (the
longest time each transactional id and group could not move on, and the bound); the
PASS line itself is unchanged.  Every other line is wrapped to ``WIDTH`` columns
(``fit``), its continuation indented under the value it continues; the summary line and
the replay command stay whole, so they can be parsed and copied.  Pure formatting,
apart from ``Progress`` which writes.
"""
from __future__ import annotations

import re
import sys
import textwrap
import time
from collections import Counter
from dataclasses import dataclass, field

from .checker import CheckResult
from .stuck import progress_line

EXTRA_FIELDS = (("committed_changed", "committed_changed"),
                ("out_of_isr_election", "out_of_isr_elections"),
                ("bad_value", "bad_values"), ("epoch_conflict", "epoch_conflicts"),
                ("not_converged", "not_converged"), ("unhealed", "unhealed"),
                ("error", "errors"),
                ("txn-lost", "txn_lost"), ("aborted-visible", "aborted_visible"),
                ("txn-partial", "txn_partial"), ("txn-duplicate", "txn_duplicates"),
                ("txn-stranger", "txn_strangers"), ("txn-unread", "txn_unread"),
                ("lso-backwards", "lso_backwards"),
                ("reassign-stuck", "reassign_stuck"), ("reassign-ongoing", "reassign_ongoing"),
                ("stuck", "stuck"))


WIDTH = 100
KEPT_WHOLE = ("verify: PASS", "verify: FAIL", "schedule (")   # parsed, or a command to copy
_LABEL = re.compile(r"^(\s*\[\s*[\d.]+s\] |\s+[a-z][\w-]*\s{2,}|\s+[\w-]+: |\s+#?\w+ |\s*)")


def fit(text: str, width: int = WIDTH) -> str:
    """Each line of ``text`` wrapped to ``width`` columns, continuations indented under
    the text after its label (``  records     ``, ``[  12.3s] ``); lines that fit, the
    summary line and the lines with a replay command unchanged.  A single word longer than the line
    (a path) is kept whole."""
    out = []
    for line in text.split("\n"):
        if len(line) <= width or line.startswith(KEPT_WHOLE) or \
                line.lstrip().startswith("replay "):
            out.append(line)
            continue
        indent = " " * min(len(_LABEL.match(line).group(1)), width // 2)
        out.extend(textwrap.wrap(line, width, subsequent_indent=indent,
                                 break_long_words=False, break_on_hyphens=False)
                   or [line])
    return "\n".join(out)


def summary_line(passed: bool, faults: int, acked: int, lost: int, duplicates: int,
                 hw_regressions: int, divergent: int, extra: dict[str, int] | None = None) -> str:
    """The last line of a run (see the module docstring)."""
    line = (f"verify: {'PASS' if passed else 'FAIL'} faults={faults} acked={acked} "
            f"lost={lost} duplicates={duplicates} hw_regressions={hw_regressions} "
            f"divergent={divergent}")
    if not passed:
        line += "".join(f" {name}={count}" for name, count in (extra or {}).items() if count)
    return line


def parse_summary_line(line: str) -> tuple[bool, dict[str, int]]:
    """(passed, counts) from a summary line; ValueError when it is not one."""
    words = line.strip().split()
    if len(words) < 2 or words[0] != "verify:" or words[1] not in ("PASS", "FAIL"):
        raise ValueError(f"not a verify summary line: {line!r}")
    counts = {}
    for word in words[2:]:
        name, sep, value = word.partition("=")
        if not sep:
            raise ValueError(f"not a name=count field: {word!r}")
        counts[name] = int(value)
    return words[1] == "PASS", counts


@dataclass
class AppliedFault:
    """A step as it ran: the broker it resolved to and what was done."""

    index: int
    kind: str
    node: int | None
    action: str
    started_s: float
    took_s: float
    skipped: str | None = None
    converged_s: float | None = None       # heal -> converged (None: not within the bound)
    stall_s: float | None = None           # longest window without an acks=all success
    partition_stall_s: float | None = None  # ... of the worst single partition

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Report:
    seed: int
    brokers: int
    duration_s: float
    planned: int
    applied: list[AppliedFault] = field(default_factory=list)
    result: CheckResult | None = None
    runtime_s: float = 0.0
    data_dir: str | None = None
    workload: dict = field(default_factory=dict)
    observations: dict = field(default_factory=dict)
    final: dict = field(default_factory=dict)
    network: str = "proxy"                     # netns, proxy or none
    network_why: str = ""
    faults_chosen: tuple = ()                  # the kinds, when not the mode's default
    recovery: dict = field(default_factory=dict)   # recovery.RecoveryStats.to_dict
    transactions: dict = field(default_factory=dict)  # txncheck.TxnResult + counts, or skipped
    reassignments: dict = field(default_factory=dict)  # reassign.ReassignLedger.summary
    progress: dict = field(default_factory=dict)  # stuck.ProgressWatch's summary
    share: dict = field(default_factory=dict)  # shareload.check_share's summary, or skipped

    @property
    def faults(self) -> int:
        return sum(1 for f in self.applied if f.skipped is None)

    def counts(self) -> dict[str, int]:
        result = self.result
        violations = result.violations
        return {"faults": self.faults, "acked": result.acked, "lost": result.lost,
                "duplicates": result.duplicates,
                "hw_regressions": violations.count("hw_regression"),
                "divergent": result.divergent}

    def extra_counts(self) -> dict[str, int]:
        violations = self.result.violations
        return {name: violations.count(kind) for kind, name in EXTRA_FIELDS}

    @property
    def passed(self) -> bool:
        return self.result is not None and self.result.passed

    def summary(self) -> str:
        counts = self.counts()
        return summary_line(self.passed, counts["faults"], counts["acked"], counts["lost"],
                            counts["duplicates"], counts["hw_regressions"],
                            counts["divergent"], self.extra_counts())

    def render(self) -> str:
        """The closing report; its last line is ``summary()``."""
        result = self.result
        kinds = Counter(f.kind for f in self.applied if f.skipped is None)
        skipped = [f for f in self.applied if f.skipped is not None]
        lines = [f"verify: results after {self.runtime_s:.1f}s (seed {self.seed}, "
                 f"{self.brokers} brokers, duration {self.duration_s:g}s)"]
        lines.append(f"  network     {self.network}"
                     + (f" ({self.network_why})" if self.network_why else ""))
        lines.append(f"  faults      {self.faults} applied of {self.planned} planned"
                     + (f" ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))})"
                        if kinds else ""))
        for fault in skipped:
            lines.append(f"              #{fault.index} {fault.kind} skipped: {fault.skipped}")
        lines += self._recovery_lines()
        lines += self._reassign_lines()
        w = self.workload
        if w:
            lines.append(f"  records     {result.acked} acknowledged, {w.get('failed', 0)} "
                         f"failed, {w.get('pending', 0)} unanswered at the end; "
                         f"{result.present} in the logs ({result.unacked_present} never "
                         f"acknowledged), {result.duplicates} duplicates")
        lines += self._transaction_lines()
        lines += self._share_lines()
        if self.progress:
            lines.append(progress_line(self.progress))
        lines += self._observation_lines()
        f = self.final
        if f:
            lines.append(f"  replicas    {result.partitions - result.divergent} of "
                         f"{result.partitions} partitions identical on every replica below "
                         f"the HW (HW {f.get('min_hw', 0)}..{f.get('max_hw', 0)})")
        for note in result.notes:
            lines.append(f"  note        {note}")
        if result.violations.examples:
            lines.append("  violations:")
            for violation in result.violations.examples:
                lines.append(f"    {violation.kind}: {violation.detail}")
            hidden = sum(result.violations.counts.values()) - len(result.violations.examples)
            if hidden > 0:
                lines.append(f"    ... and {hidden} more")
        else:
            lines.append("  violations  none")
        if self.data_dir:
            lines.append(f"  data        {self.data_dir} (broker logs: broker-<id>.log)")
        if not self.passed:
            lines.append(f"  replay      raftwood verify --seed {self.seed} "
                         f"--brokers {self.brokers} --duration {self.duration_s:g}"
                         + (f" --network {self.network}" if self.network != "none" else "")
                         + (f" --faults {','.join(self.faults_chosen)}"
                            if self.faults_chosen else ""))
        lines.append(self.summary())
        return fit("\n".join(lines))

    def _share_lines(self) -> list[str]:
        s = self.share
        if not s:
            return []
        if "skipped" in s:
            return [f"  share       skipped: {s['skipped']}"]
        return [f"  share       group {s.get('group')} ({s.get('consumers')} consumers): "
                f"{s.get('acknowledged', 0)} of {s.get('wanted', 0)} records acknowledged "
                f"({s.get('outcome_unknown_to_client', 0)} only by the start offset, "
                f"{s.get('unconfirmed_not_redelivered', 0)} unconfirmed, not redelivered), "
                f"missing {s.get('missing', 0)}; {s.get('deliveries', 0)} deliveries, "
                f"duplicates {s.get('duplicates', 0)} (bound {s.get('duplicate_bound', 0)}: "
                f"in flight at faults {sum(s.get('in_flight_at_faults', []))}, commits "
                f"refused {s.get('commits_refused', 0)}); lost acknowledgements "
                f"{s.get('lost_acknowledgements', 0)}; delivery counts "
                f"{s.get('delivery_counts', {})}"]

    def _transaction_lines(self) -> list[str]:
        t = self.transactions
        if not t:
            return []
        if "skipped" in t:
            return [f"  transactions skipped: {t['skipped']}"]
        unknown = t.get("unknown", 0)
        whole = (f" ({t.get('unknown_visible', 0)} read whole, "
                 f"{t.get('unknown_invisible', 0)} not at all"
                 + (f", {t['unjudged']} not judged" if t.get("unjudged") else "") + ")"
                 if unknown else "")
        end = ("every partition read to its end" if t.get("final_complete")
               else "NOT every partition read to its end")
        return [f"  transactions {t.get('committed', 0)} committed, {t.get('aborted', 0)} "
                f"aborted ({t.get('planned_aborts', 0)} planned), {unknown} unknown{whole}; "
                f"{t.get('records', 0)} records on {t.get('topic', '?')}",
                f"               read_committed: {t.get('live_read', 0)} read along the "
                f"run, {t.get('final_read', 0)} at the end ({end}), "
                f"{t.get('lso_observations', 0)} LSO answers; lost "
                f"{t.get('txn_lost', 0)}, aborted visible {t.get('aborted_visible', 0)}, "
                f"partial {t.get('txn_partial', 0)}, duplicates "
                f"{t.get('txn_duplicate', 0)}, strangers {t.get('txn_stranger', 0)}, "
                f"unread {t.get('txn_unread', 0)}, LSO regressions "
                f"{t.get('lso_backwards', 0)}"]

    def _reassign_lines(self) -> list[str]:
        r = self.reassignments
        if not r:
            return []
        late = r.get("cancels_late", 0)
        ongoing = r.get("ongoing_after_heal")
        return [f"  reassign    {r.get('started', 0)} moves started: "
                f"{r.get('completed', 0)} completed, {r.get('cancelled', 0)} cancelled, "
                f"{r.get('pending', 0)} neither"
                + (f"; {late} cancels came after completion" if late else "")
                + (f"; {r['refused']} not started (refused)" if r.get("refused") else "")
                + ("; none in progress after healing" if ongoing == [] else
                   f"; {len(ongoing)} still in progress after healing" if ongoing else
                   "; not listed after healing")]

    def _observation_lines(self) -> list[str]:
        lines = []
        o, e = self.observations, self.result.epochs
        if o:
            claimed = o.get("claimant_batches", 0)
            lines.append(f"  observed    {o.get('latest', 0)} ListOffsets answers, "
                         f"{o.get('leader_hw', 0)} leader HWs, {o.get('elections', 0)} "
                         f"elections ({o.get('elections_checked', 0)} checked against the "
                         f"previous ISR), {o.get('batches', 0)} committed batches and "
                         f"{o.get('values', 0)} consumer records remembered"
                         + (f" ({claimed} batches served by deposed leaders still "
                            f"claiming)" if claimed else ""))
        if e:
            lines.append(f"  leaders     {e['records']} acknowledged records in {e['epochs']} "
                         f"leader epochs: {e['one_leader']} epochs led by one broker as "
                         f"observed, {e['unobserved']} too short to observe, "
                         f"{e['several_claimants']} claimed by several brokers; "
                         f"{self.result.violations.count('epoch_conflict')} epoch conflicts")
        return lines

    def _recovery_lines(self) -> list[str]:
        r = self.recovery
        if not r or not r.get("kinds"):
            return []
        lines = [f"  recovery    heal -> converged (full ISR, replicas identical below the "
                 f"HW) within {r['converged_max_s']:.1f}s at most (bound "
                 f"{r['bound_s']:g}s); longest window without an acks=all success:"]
        for kind, k in r["kinds"].items():
            late = f", {k['unconverged']} NOT converged" if k["unconverged"] else ""
            lines.append(f"              {kind:<22} {k['faults']:>3}x  converged <= "
                         f"{k['converged_max_s']:5.1f}s{late}  stall max "
                         f"{k['stall_max_s']:5.1f}s median {k['stall_median_s']:4.1f}s  "
                         f"one partition max {k['partition_stall_max_s']:5.1f}s")
        return lines

    def to_dict(self) -> dict:
        result = self.result
        return {
            "network": self.network, "network_why": self.network_why,
            "recovery": self.recovery, "epochs": result.epochs,
            "passed": self.passed, "summary": self.summary(), "seed": self.seed,
            "brokers": self.brokers, "duration_s": self.duration_s,
            "runtime_s": round(self.runtime_s, 1), "planned": self.planned,
            "faults": [f.to_dict() for f in self.applied], "counts": self.counts(),
            "extra": self.extra_counts(), "workload": self.workload,
            "observations": self.observations, "final": self.final,
            "transactions": self.transactions, "reassignments": self.reassignments,
            "share": self.share,
            "violations": [{"kind": v.kind, "detail": v.detail}
                           for v in result.violations.examples],
            "notes": list(result.notes), "data_dir": self.data_dir,
        }


class Progress:
    """Timestamped progress lines (``[  12.3s] ...``) on a stream, flushed at once."""

    def __init__(self, stream=None):
        self.stream = stream if stream is not None else sys.stdout
        self.started = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def __call__(self, text: str) -> None:
        print(fit(f"[{self.elapsed():7.1f}s] {text}"), file=self.stream, flush=True)

    def raw(self, text: str) -> None:
        print(fit(text), file=self.stream, flush=True)

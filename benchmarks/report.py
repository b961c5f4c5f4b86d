"""Result containers and text output of `bench.py`. Pure: builds strings, does no I/O
except `print_section` / `print_summary`, which write to stdout."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SummaryRow:
    """One line of the goal-vs-measured table. `met` is "yes", "no" or "-" (no goal, or
    not measured)."""

    what: str
    goal: str
    measured: str
    met: str = "-"

    def as_json(self) -> dict:
        return {"what": self.what, "goal": self.goal, "measured": self.measured, "met": self.met}


@dataclass
class Section:
    """What one workload printed: a table, notes under it, summary lines and its figures."""

    key: str
    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    summary: list[SummaryRow] = field(default_factory=list)
    figures: dict = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


@dataclass
class CpuRow:
    """Broker CPU (all broker processes and their children) over one measured phase."""

    workload: str
    target: str
    phase: str           # "produce" or "consume"
    value_bytes: int
    cpu_s: float
    wall_s: float

    @property
    def cpu_s_per_gb(self) -> float | None:
        return self.cpu_s / (self.value_bytes / 1e9) if self.value_bytes > 0 else None

    @property
    def cpu_pct(self) -> float:
        return 100.0 * self.cpu_s / self.wall_s if self.wall_s > 0 else 0.0

    def as_json(self) -> dict:
        per_gb = self.cpu_s_per_gb
        return {"workload": self.workload, "target": self.target, "phase": self.phase,
                "value_bytes": self.value_bytes, "cpu_s": round(self.cpu_s, 3),
                "wall_s": round(self.wall_s, 3),
                "cpu_s_per_gb": None if per_gb is None else round(per_gb, 2),
                "cpu_pct": round(self.cpu_pct, 1)}


def format_table(columns: list[str], rows: list[list[str]]) -> str:
    """First column left-aligned, the rest right-aligned, except a last column named
    "status" (left-aligned, not padded)."""
    if not rows:
        return "(no rows)"
    all_rows = [columns] + rows
    last_free = columns[-1] == "status"
    padded = len(columns) - 1 if last_free else len(columns)
    widths = [max(len(str(r[i])) for r in all_rows) for i in range(padded)]
    lines = []
    for row in all_rows:
        cells = [str(row[0]).ljust(widths[0])]
        cells += [str(c).rjust(w) for c, w in zip(row[1:padded], widths[1:])]
        if last_free:
            cells.append(str(row[-1]))
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def print_section(section: Section) -> None:
    print(f"\n== {section.title}")
    print(format_table(section.columns, section.rows))
    for note in section.notes:
        print(f"  {note}")
    for error in section.errors:
        print(f"  ERROR: {error}")


def print_cpu(rows: list[CpuRow]) -> None:
    print("\n== Broker CPU per GB of record values (utime+stime of the broker processes "
          "and children, /proc)")
    table = [[r.workload, r.target, r.phase, f"{r.value_bytes / 1e9:.3f}", f"{r.cpu_s:.2f}",
              f"{r.cpu_pct:.0f}", _num(r.cpu_s_per_gb, 1)] for r in rows]
    print(format_table(["workload", "target", "phase", "GB", "CPU s", "CPU % of a core",
                        "CPU s/GB"], table))


def print_summary(sections: list[Section]) -> None:
    rows = [[s.key, r.what, r.goal, r.measured, r.met] for s in sections for r in s.summary]
    print("\n== Summary: goal vs measured")
    print(format_table(["workload", "figure", "goal", "measured", "met"], rows))


def ratio(ours: float | None, theirs: float | None) -> float | None:
    if ours is None or theirs is None or theirs <= 0:
        return None
    return ours / theirs


def fmt_ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def _num(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def num(value: float | None, digits: int = 0) -> str:
    """A figure with thousands separators, or "-" when missing."""
    return _num(value, digits)

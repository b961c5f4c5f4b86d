"""Aligned plain-text tables for the command line (pure functions, no I/O).

    >>> print(format_table(["ID", "ADDRESS"], [[1, "127.0.0.1:9092"], [10, "h:1"]]))
    ID  ADDRESS
    1   127.0.0.1:9092
    10  h:1

Columns are separated by two spaces; every cell is left-aligned except the ones in
``right`` (numbers read better right-aligned); trailing spaces are stripped so the output
diffs cleanly.  ``None`` prints as ``-``.  A table with no rows prints its header only.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

GAP = "  "
MISSING = "-"


def cell_text(value) -> str:
    """How one value prints: ``None`` → ``-``, booleans → ``yes``/``no``, lists → ``1,2,3``."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ",".join(cell_text(v) for v in value) if value else MISSING
    return str(value)


def format_table(headers: Sequence[str], rows: Iterable[Sequence], *,
                 right: Iterable[int] = (), indent: str = "") -> str:
    """The table as one string (no trailing newline).

    ``right`` holds the column indexes to right-align.  Rows shorter than the header are
    padded with empty cells; a row longer than the header is a caller bug (ValueError).
    """
    text_rows = []
    for row in rows:
        if len(row) > len(headers):
            raise ValueError(f"row has {len(row)} cells, header {len(headers)}: {row!r}")
        text_rows.append([cell_text(v) for v in row] + [""] * (len(headers) - len(row)))
    widths = [len(h) for h in headers]
    for row in text_rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row)]
    right_columns = set(right)
    lines = []
    for row in [list(headers)] + text_rows:
        cells = [c.rjust(w) if i in right_columns else c.ljust(w)
                 for i, (c, w) in enumerate(zip(row, widths))]
        lines.append(indent + GAP.join(cells).rstrip())
    return "\n".join(lines)

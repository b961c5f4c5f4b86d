"""docs/api-coverage.md lists every API the broker serves, at the versions it serves.

The table is what a user reads to learn whether their client's API and version are
served; it drifted once (AddPartitionsToTxn v4-5, EndTxn v5, the group APIs missing), so
it is checked against ``protocol.messages.SERVED``, the table the broker answers
ApiVersions from.
"""
from __future__ import annotations

import re
from pathlib import Path

from protocol.messages import SERVED

DOC = Path(__file__).resolve().parents[2] / "docs" / "api-coverage.md"


def _version_range(text: str) -> tuple[int, int]:
    """"3–12 (0–2 advertised, refused)" -> (3, 12); "1" -> (1, 1)."""
    match = re.match(r"\s*(\d+)(?:\s*[–-]\s*(\d+))?", text)
    assert match, f"no version range in {text!r}"
    low = int(match.group(1))
    return low, int(match.group(2) or low)


def documented() -> dict[str, tuple[int, int]]:
    """API name -> (first, last) version served, from the doc's table rows."""
    rows: dict[str, tuple[int, int]] = {}
    for line in DOC.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not line.startswith("|") or cells[0] in ("API", "---"):
            continue
        names = [name.strip() for name in cells[0].split(" / ")]
        versions = cells[1].split(" / ")
        if len(versions) == 1:
            versions = versions * len(names)
        assert len(versions) == len(names), f"names and versions do not pair: {line}"
        for name, version in zip(names, versions):
            rows[name] = _version_range(version)
    return rows


def test_every_served_api_is_documented_with_its_versions():
    doc = documented()
    wrong = {}
    for spec in SERVED.values():
        low = spec.refused_below or spec.min_version
        if doc.get(spec.name) != (low, spec.max_version):
            wrong[spec.name] = (doc.get(spec.name), (low, spec.max_version))
    assert not wrong, f"docs/api-coverage.md (documented, served): {wrong}"


def test_the_doc_names_no_api_that_is_not_served():
    served = {spec.name for spec in SERVED.values()}
    assert not set(documented()) - served

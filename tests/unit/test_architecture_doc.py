"""ARCHITECTURE.md stays true to the tree: every file or folder it names exists (a bare
file name is in the room its paragraph names first), every function, class or method it
names beside a file is defined in that file, and its list of floors names every entry of
test_layering's FLOORS, one numbered line per floor."""
from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

from tests.unit.test_layering import FLOORS

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "ARCHITECTURE.md"
# `protocol/`, `broker/api/produce.py`, `docs/layout.md`: a path in backticks
PATH = re.compile(r"`((?:[\w.-]+/)+(?:[\w.-]+\.(?:py|md))?|[\w.-]+\.(?:py|md))`")
# `broker/api/fetch.py` `handle_fetch`: a name in backticks right after a file's
NAMED = re.compile(r"`((?:[\w-]+/)*[\w-]+\.py)`\s+`([A-Za-z_][\w.]*)`")


def _text() -> str:
    return DOC.read_text(encoding="utf-8")


def _paragraphs(text: str) -> list[str]:
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", text)]


def _resolve(found: list[str], paragraph: str) -> list[str]:
    """A bare file name (``framing.py``) is in the paragraph's room: the first folder
    the paragraph names (``protocol/``)."""
    rooms = [p for p in PATH.findall(paragraph) if p.endswith("/")]
    base = rooms[0] if rooms else ""
    return [f if "/" in f else base + f for f in found]


def paths_named(text: str) -> list[str]:
    return sorted({path for paragraph in _paragraphs(text)
                   for path in _resolve(PATH.findall(paragraph), paragraph)})


def names_named(text: str) -> list[tuple[str, str]]:
    found = set()
    for paragraph in _paragraphs(text):
        for path, name in NAMED.findall(paragraph):
            found.add((_resolve([path], paragraph)[0], name))
    return sorted(found)


@cache
def defined_in(path: str) -> frozenset[str]:
    """Names a module defines anywhere: functions, classes, methods, assigned names."""
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return frozenset(names)


def floor_paths(entry: str) -> tuple[str, str]:
    """A FLOORS entry as the doc writes it: a package folder or a module file."""
    path = entry.replace(".", "/")
    return f"{path}/", f"{path}.py"


def test_the_page_names_paths_so_the_checks_are_not_vacuous():
    assert len(paths_named(_text())) > 40
    assert len(names_named(_text())) > 15


@pytest.mark.parametrize("path", paths_named(_text()))
def test_every_path_named_exists(path):
    assert (ROOT / path).exists(), f"ARCHITECTURE.md names {path}, which is not in the tree"


@pytest.mark.parametrize("path,name", names_named(_text()))
def test_every_name_named_beside_a_file_is_defined_there(path, name):
    assert (ROOT / path).is_file(), path
    missing = [part for part in name.split(".") if part not in defined_in(path)]
    assert not missing, f"ARCHITECTURE.md names {path} {name}: {missing} not defined there"


def floors_listed(text: str) -> dict[int, str]:
    """Floor number -> the text of its numbered line (with its continuation lines) in
    the section "The floors"."""
    section = text[text.index("## The floors"):text.index("## The rooms")]
    floors: dict[int, str] = {}
    current = None
    for line in section.splitlines():
        numbered = re.match(r"\s+(\d+)\. (.*)", line)
        if numbered:
            current = int(numbered.group(1))
            floors[current] = numbered.group(2)
        elif current is not None and line.startswith("     ") and line.strip():
            floors[current] += " " + line.strip()
        else:
            current = None
    return floors


def test_the_floors_list_every_floor_entry_on_its_floor():
    floors = floors_listed(_text())
    assert sorted(floors) == list(range(1, len(FLOORS) + 1)), \
        f"ARCHITECTURE.md numbers {sorted(floors)}; FLOORS has {len(FLOORS)} floors"
    for number, entries in enumerate(FLOORS, start=1):
        for entry in entries:
            folder, module = floor_paths(entry)
            assert f"`{folder}`" in floors[number] or f"`{module}`" in floors[number], \
                f"ARCHITECTURE.md's floor {number} does not name {entry} ({folder} or {module})"


def test_the_checkers_catch_a_missing_path_and_an_undefined_name():
    text = "`broker/no_such_room/` and `broker/api/fetch.py` `handle_nothing_here`"
    assert paths_named(text) == ["broker/api/fetch.py", "broker/no_such_room/"]
    assert paths_named("`protocol/`: `framing.py`.\n\n`nowhere.py`") == \
        ["nowhere.py", "protocol/", "protocol/framing.py"]
    assert not (ROOT / "broker/no_such_room/").exists()
    assert names_named(text) == [("broker/api/fetch.py", "handle_nothing_here")]
    assert "handle_nothing_here" not in defined_in("broker/api/fetch.py")
    assert "handle_fetch" in defined_in("broker/api/fetch.py")

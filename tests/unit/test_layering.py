"""Imports point one way (docs/layout.md).

    protocol/  stdlib, crc32c, kafka (kafka-python's message and record classes), itself
    storage/   stdlib, crc32c, itself, protocol.records (the batch header view),
               protocol.record_filter (the cleaner's record-level rewrite) and
               protocol.control (transaction markers) only
    broker/    anything, including protocol and storage
    pysyncobj  only under broker/controller/
    broker/api/ (request handlers) reaches the metadata and Raft only through
               broker.controller.metadata_client: never the store, raft or pysyncobj
    broker/coordinator/, groups/, transactions/ (the coordinators) sit below broker/api/
               and never import it
    no package module imports tests, compat or benchmarks
    the server (every broker module but cli/, harness/, testing/, verify/) never imports
    the command line, the process and cluster harness, the test plugin or verify
    harness/ (shared by cli/, testing/ and verify/) imports none of those three
    inside broker/, floors (FLOORS, lowest first): a module imports only its own floor or
               lower ones; UPWARD_ALLOWED names the arrows still to remove, each with
               its reason, and fails once one is gone (so the list only shrinks)
    no circles: no two modules import each other, directly or round a loop (imports
               under ``if TYPE_CHECKING:`` aside: they never run); CIRCLES_ALLOWED
               likewise

Every ``.py`` under the three packages is parsed with ``ast`` (never imported), so the
check works on half-written packages and sees imports inside functions as well.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("protocol", "storage", "broker")
STDLIB = frozenset(sys.stdlib_module_names)
NOT_FOR_PACKAGE_CODE = ("tests", "compat", "benchmarks")
# What runs beside the server, not in it: they may import the server, never the reverse.
TOOLING = ("broker.cli", "broker.harness", "broker.testing", "broker.verify")
HARNESS_USERS = ("broker.cli", "broker.testing", "broker.verify")
# protocol/ is sans-IO ("no asyncio, no sockets"); storage/ has "no network, no
# asyncio".  These are stdlib, so the import whitelist alone would let them through.
NO_IO_MODULES = ("asyncio", "socket", "selectors", "ssl", "socketserver", "http", "urllib")
BEYOND_TOP_LEVEL = "<beyond-top-level>"
METADATA_CLIENT = "broker.controller.metadata_client"
# The coordinator core and the coordinators on it: the handlers call them, never the reverse.
COORDINATORS = ("broker.coordinator", "broker.groups", "broker.transactions")

# The floors of broker/, lowest first.  An entry is a folder or a module; a module's floor
# is that of the longest entry containing it, so a leaf may sit below its folder.
FLOORS = (
    # leaves: background tasks, log lines, topic names and topic config names, the
    # counters the hot paths update; network.limits: Kafka's connection-limit settings
    # (config.py reads them; the connection, on the network floor, counts with them);
    # the purgatory (delayed operations: the controller's and replication's waits)
    # quotas: client quota entities and rates, pure (KIP-546); malloc_thresholds: glibc's
    # thresholds for large buffers, set once at start
    ("broker.tasks", "broker.logs", "broker.topics", "broker.metrics", "broker.network.limits",
     "broker.purgatory", "broker.quotas", "broker.malloc_thresholds"),
    ("broker.client",),            # the outgoing Kafka client
    ("broker.security",),
    ("broker.config",),
    ("broker.controller",),        # the metadata, Raft, the metadata client
    ("broker.replication", "broker.dynamic_config"),   # dynamic_config: run-time settings
    ("broker.coordinator",),
    ("broker.groups", "broker.transactions", "broker.share"),  # share: KIP-932 partition side
    ("broker.api",),               # the request handlers
    ("broker.network", "broker.ui"),   # the server connection dispatching to api/; the view
    ("broker.node", "broker.config_doc"),
    ("broker.harness",),
    ("broker.cli", "broker.testing", "broker.verify"),
)
# Arrows up the floors not yet removed: (importing module, imported module) -> why.
UPWARD_ALLOWED: dict[tuple[str, str], str] = {}
# Circles not yet broken, each a set of modules -> why.
CIRCLES_ALLOWED: dict[frozenset, str] = {}


def within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def module_name(path: Path) -> tuple[str, bool]:
    """Dotted module name of ``path`` under ROOT, and whether it is a package __init__."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    return ".".join(parts), is_package


def imported_names(source: str, module: str, is_package: bool = False,
                   runtime_only: bool = False) -> list[tuple[int, str]]:
    """(line, dotted name) of everything ``source`` imports, relative imports resolved.

    ``from a.b import c`` yields ``a.b.c`` (c may be a module or a name; prefix rules treat
    both alike).  ``importlib.import_module("x")`` and ``__import__("x")`` with a literal
    argument count too.  ``runtime_only`` leaves out what ``if TYPE_CHECKING:`` guards.
    """
    package = module.split(".") if is_package else module.split(".")[:-1]
    tree = ast.parse(source)
    if runtime_only:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and _is_type_checking(node.test):
                node.body = []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                keep = len(package) - (node.level - 1)
                base = package[:keep] if keep > 0 else [BEYOND_TOP_LEVEL]
                base = ".".join(base + ([node.module] if node.module else []))
            else:
                base = node.module
            for alias in node.names:
                found.append((node.lineno, base if alias.name == "*" else f"{base}.{alias.name}"))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = node.func
            callee = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if callee in ("import_module", "__import__"):
                found.append((node.lineno, node.args[0].value))
    return found


def violation(module: str, imported: str) -> str | None:
    """Why ``module`` may not import ``imported``, or None when it may."""
    top = imported.split(".")[0]
    layer = module.split(".")[0]
    if top == BEYOND_TOP_LEVEL:
        return "relative import beyond the top-level package"
    if top in NOT_FOR_PACKAGE_CODE:
        return f"package code imports {top}/"
    if layer == "broker" and not any(within(module, t) for t in TOOLING) \
            and any(within(imported, t) for t in TOOLING):
        return ("the server does not import broker/cli, broker/harness, broker/testing "
                "or broker/verify")
    if within(module, "broker.harness") and any(within(imported, t) for t in HARNESS_USERS):
        return "broker/harness is shared by cli, testing and verify and imports none of them"
    if top == "pysyncobj" and not within(module, "broker.controller"):
        return "only broker/controller/ may import pysyncobj"
    if within(module, "broker.api") and within(imported, "broker.controller") \
            and not within(imported, METADATA_CLIENT):
        return "broker/api/ reaches the metadata only through broker.controller.metadata_client"
    if any(within(module, c) for c in COORDINATORS) and within(imported, "broker.api"):
        return "the coordinators sit below broker/api/ and never import it"
    if within(imported, "kafka.protocol.old"):
        return "kafka-python's kafka/protocol/old/ is not to be used"
    if layer in ("protocol", "storage") and top in NO_IO_MODULES:
        return f"{layer}/ does no network or asyncio I/O"
    if layer == "protocol" and not (top in STDLIB or top in ("crc32c", "kafka", "protocol")):
        return "protocol/ imports only stdlib, crc32c, kafka and itself"
    if layer == "storage" and not (top in STDLIB or top in ("crc32c", "storage")
                                   or within(imported, "protocol.records")
                                   or within(imported, "protocol.record_filter")
                                   or within(imported, "protocol.control")):
        return ("storage/ imports only stdlib, crc32c, itself, protocol.records, "
                "protocol.record_filter and protocol.control")
    return None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") \
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def floor_of(name: str) -> tuple[int, str] | None:
    """(floor, entry) of a dotted broker name: the longest FLOORS entry containing it."""
    best = None
    for floor, entries in enumerate(FLOORS):
        for entry in entries:
            if within(name, entry) and (best is None or len(entry) > len(best[1])):
                best = (floor, entry)
    return best


def floor_violation(module: str, imported: str) -> str | None:
    """Why ``module`` may not import ``imported`` by the floors of broker/, or None."""
    if not (within(module, "broker") and within(imported, "broker")):
        return None
    if module == "broker" or imported == "broker":
        return None  # the package's own __init__ (empty)
    own, target = floor_of(module), floor_of(imported)
    if own is None or target is None:
        return f"{module if own is None else imported} has no floor in FLOORS"
    if target[0] > own[0]:
        return f"an import up the floors: {own[1]} sits below {target[1]}"
    return None


def allowed_upward(module: str, imported: str) -> bool:
    return any(module == m and within(imported, t) for m, t in UPWARD_ALLOWED)


def package_files(package: str) -> list[Path]:
    directory = ROOT / package
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.rglob("*.py") if "__pycache__" not in p.parts)


def violations_in(packages=PACKAGES) -> list[str]:
    problems = []
    for package in packages:
        for path in package_files(package):
            module, is_package = module_name(path)
            try:
                imports = imported_names(path.read_text(encoding="utf-8"), module, is_package)
            except SyntaxError as exc:
                problems.append(f"{path.relative_to(ROOT)}: does not parse: {exc}")
                continue
            for line, imported in imports:
                reason = violation(module, imported)
                if reason is None and not allowed_upward(module, imported):
                    reason = floor_violation(module, imported)
                if reason:
                    problems.append(f"{path.relative_to(ROOT)}:{line} imports {imported}: {reason}")
    return problems


def module_graph(packages=PACKAGES, runtime_only: bool = False) -> dict[str, dict[str, int]]:
    """module -> {imported module: line} over the project's own modules; a name that is
    not a module counts as its longest module prefix; a package importing its own
    submodules is left out (Python runs the package first: no circle)."""
    sources = {}
    for package in packages:
        for path in package_files(package):
            module, is_package = module_name(path)
            sources[module] = (path, is_package)
    graph: dict[str, dict[str, int]] = {}
    for module, (path, is_package) in sources.items():
        edges = graph.setdefault(module, {})
        names = imported_names(path.read_text(encoding="utf-8"), module, is_package,
                               runtime_only=runtime_only)
        for line, name in names:
            target = _longest_module(name, sources)
            if target and target != module and not (is_package and within(target, module)):
                edges.setdefault(target, line)
    return graph


def _longest_module(name: str, modules) -> str | None:
    parts = name.split(".")
    while parts and ".".join(parts) not in modules:
        parts.pop()
    return ".".join(parts) or None


def circles(graph: dict[str, dict[str, int]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(graph.get(target, ()))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


# --------------------------------------------------------------------------- the real tree

def test_protocol_package_exists_so_the_layering_check_is_not_vacuous():
    assert any(p.name == "messages.py" for p in package_files("protocol"))


@pytest.mark.parametrize("package", PACKAGES)
def test_package_imports_point_one_way(package):
    problems = violations_in([package])
    assert not problems, "\n".join(problems)


def test_every_broker_module_has_a_floor():
    unplaced = [name for name in module_graph(["broker"]) if name != "broker"
                and floor_of(name) is None]
    assert not unplaced, f"add these to FLOORS: {unplaced}"


def test_every_allowed_upward_arrow_is_still_an_import_up_the_floors():
    """The allow-list only shrinks: an entry whose import is gone fails here."""
    graph = module_graph(["broker"])
    for (module, target), reason in UPWARD_ALLOWED.items():
        assert reason.strip(), (module, target)
        assert any(within(t, target) for t in graph.get(module, {})), \
            f"{module} no longer imports {target}: drop it from UPWARD_ALLOWED"
        assert floor_violation(module, target), f"{module} -> {target} is not upward"


def test_no_circles_but_the_allowed_ones():
    found = circles(module_graph(runtime_only=True))
    new = [sorted(c) for c in found if c not in CIRCLES_ALLOWED]
    assert not new, f"modules importing each other: {new}"
    gone = [sorted(c) for c in CIRCLES_ALLOWED if c not in found]
    assert not gone, f"no longer circles, drop them from CIRCLES_ALLOWED: {gone}"
    assert all(reason.strip() for reason in CIRCLES_ALLOWED.values())


# --------------------------------------------------------------------------- the checker itself

@pytest.mark.parametrize("module,source,expected", [
    ("protocol.framing", "import asyncio", "no network"),
    ("protocol.messages", "from broker import server", "protocol/ imports only"),
    ("protocol.messages", "import storage.segment", "protocol/ imports only"),
    ("protocol.messages", "from kafka.protocol.old.fetch import FetchRequest", "old/"),
    ("protocol.messages", "import zstandard", "protocol/ imports only"),
    ("storage.segment", "from protocol.messages import decode_request", "protocol.records"),
    ("storage.segment", "from protocol import errors", "protocol.records"),
    ("storage.segment", "import protocol", "protocol.records"),
    ("storage.segment", "from kafka.record import DefaultRecordBatch", "storage/ imports only"),
    ("storage.segment", "from broker.config import Config", "storage/ imports only"),
    ("storage.segment", "def f():\n    import socket", "no network"),
    ("storage.segment", "import importlib\nimportlib.import_module('broker.server')", "storage/"),
    ("broker.network.connection", "import pysyncobj", "broker/controller/"),
    ("broker.api.admin", "from pysyncobj import SyncObj", "broker/controller/"),
    ("broker.api.metadata", "from ..controller.store import MetadataUnavailable",
     "only through broker.controller.metadata_client"),
    ("broker.api.status", "from broker.controller import raft", "only through"),
    ("broker.api.admin", "from ..controller.state import assign_replicas", "only through"),
    ("broker.api.configs", "import broker.controller.commands", "only through"),
    ("broker.api.context", "from ..controller import store", "only through"),
    ("broker.network.connection", "from tests.unit import helpers", "tests/"),
    ("broker.network.connection", "import compat.scenarios", "compat/"),
    ("storage.segment", "from ..compat import x", "beyond the top-level"),
    ("broker.api.fetch", "from ...tests import x", "beyond the top-level"),
    ("broker.replication.fetcher", "from ..testing import BrokerProcess", "the server"),
    ("broker.node", "from .cli.tables import format_table", "the server"),
    ("broker.api.status", "import broker.verify.report", "the server"),
    ("broker.node", "from .harness import ClusterProcess", "the server"),
    ("broker.replication.leader_endpoint", "from ..harness.process import BrokerProcess",
     "the server"),
    ("broker.client.kafka_client", "from broker.testing import KafkaConnection", "the server"),
    ("broker.client.client_protocol", "import broker.cli.client", "the server"),
    ("broker.harness.cluster", "from ..testing import FAST_CLUSTER_SETTINGS", "shared by"),
    ("broker.harness.process", "from broker.cli.client import answers_api_versions",
     "shared by"),
    ("broker.groups.admin", "def f():\n    from ..api.admin import create_topic_now",
     "below broker/api/"),
    ("broker.transactions.coordinator", "from ..api.admin import create_topic_now",
     "below broker/api/"),
    ("broker.coordinator.topic", "import broker.api.context", "below broker/api/"),
    ("broker.groups.coordinator", "from broker.api import HANDLERS", "below broker/api/"),
])
def test_checker_flags_imports_against_the_direction(module, source, expected):
    reasons = [violation(module, name) for _, name in imported_names(source, module)]
    assert any(r and expected in r for r in reasons), reasons


@pytest.mark.parametrize("module,is_package,source", [
    ("protocol.framing", False,
     "from __future__ import annotations\nimport struct\nfrom .errors import X"),
    ("protocol.records", False, "import crc32c\nfrom kafka.record.default_records import X"),
    ("protocol", True, "from . import messages"),
    ("storage.segment", False, "from protocol.records import parse_header, BatchHeader"),
    ("storage.segment", False, "from protocol import records"),
    ("storage.segment", False, "import protocol.records"),
    ("storage.segment", False, "import os, mmap, crc32c\nfrom .index import OffsetIndex"),
    ("storage", True, "from .segment import Segment"),
    ("broker.network.connection", False,
     "import asyncio\nfrom protocol.messages import X\nfrom storage import log"),
    ("broker.controller.raft", False, "from pysyncobj import SyncObj, replicated"),
    ("broker.controller", True, "import pysyncobj\nfrom .raft import Controller"),
    ("broker.api.produce", False, "from ..replication.partition import Partition"),
    ("broker.api.admin", False,
     "from ..controller.metadata_client import ApplyError, MetadataUnavailable"),
    ("broker.replication.replica_manager", False,
     "from ..controller.metadata_client import MetadataClient"),
    ("broker.cli.dev", False, "from ..harness import BrokerPlan, broker_process"),
    ("broker.cli.client", False, "from ..client.kafka_client import BlockingConnection"),
    ("broker.verify.cluster", False, "from broker.harness import ClusterProcess"),
    ("broker.testing", True, "from broker.harness import ClusterProcess"),
    ("broker.harness.process", False, "from broker.client.kafka_client import ConnectionFailed"),
    ("broker.groups.manager", False, "from ..coordinator import CoordinatorRuntime"),
    ("broker.transactions.coordinator", False,
     "from ..controller.metadata_client import MetadataUnavailable"),
    ("broker.api.groups", False, "from ..coordinator import CoordinatorAnswer"),
])
def test_checker_allows_imports_along_the_direction(module, is_package, source):
    names = imported_names(source, module, is_package)
    assert names
    assert [(name, violation(module, name)) for _, name in names if violation(module, name)] \
        == []


@pytest.mark.parametrize("module,imported", [
    ("broker.metrics.endpoint", "broker.ui.page"),
    ("broker.metrics", "broker.ui.feed.broker_feed"),
    ("broker.replication.leader_endpoint", "broker.network.connection.Connection"),
    ("broker.security.client", "broker.config.BrokerConfig"),
    ("broker.topics", "broker.replication.throttle.parse_throttled_replicas"),
    ("broker.config", "broker.controller.state"),
    ("broker.controller.store", "broker.replication.partition"),
    ("broker.replication.fetcher", "broker.coordinator.runtime"),
    ("broker.groups.manager", "broker.api.admin.create_topic_now"),
    ("broker.network.limits", "broker.config"),
    ("broker.client.kafka_client", "broker.security.client"),
    ("broker.node", "broker.harness.cluster"),
    ("broker.harness.process", "broker.cli.client"),
    ("broker.purgatory", "broker.replication.partition.Partition"),
])
def test_floor_rule_flags_imports_up_the_floors(module, imported):
    assert "up the floors" in floor_violation(module, imported)


@pytest.mark.parametrize("module,imported", [
    ("broker.replication.leader_endpoint", "broker.client.kafka_client.AsyncConnection"),
    ("broker.security.client", "broker.client.client_protocol.ConnectionFailed"),
    ("broker.config", "broker.network.limits"),
    ("broker.config", "broker.topics.THROTTLED_REPLICAS_CONFIGS"),
    ("broker.replication.throttle", "broker.topics.throttled_replicas_problem"),
    ("broker.node", "broker.ui.feed.broker_feed"),
    ("broker.network.connection", "broker.api.HANDLERS"),
    ("broker.network.connection", "broker.network.limits"),
    ("broker.ui.feed", "broker.api.status.status"),
    ("broker.cli.client", "broker.node"),
    ("broker.api.produce", "broker.api.context"),
    ("broker.controller.propagation", "broker.purgatory.Purgatory"),
    ("broker.replication.delayed", "broker.purgatory.DelayedOperation"),
])
def test_floor_rule_allows_imports_down_or_level(module, imported):
    assert floor_violation(module, imported) is None


def test_a_module_outside_the_floors_is_reported():
    assert "has no floor" in floor_violation("broker.newroom.x", "broker.tasks")


def test_circles_are_found_round_a_loop_and_alone_modules_are_not():
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}, "e": {}}
    assert circles(graph) == [frozenset({"a", "b", "c"})]
    assert circles({"a": {"b": 1}, "b": {}}) == []


def test_imports_under_type_checking_are_left_out_only_when_asked():
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n"
    assert (3, "x.b.B") in imported_names(source, "x.a")
    assert (3, "x.b.B") not in imported_names(source, "x.a", runtime_only=True)


def test_relative_imports_resolve_against_the_importing_package():
    assert imported_names("from .segment import Segment", "storage.log") \
        == [(1, "storage.segment.Segment")]
    assert imported_names("from . import records", "protocol", is_package=True) \
        == [(1, "protocol.records")]
    assert imported_names("from ..replication.partition import P", "broker.api.produce") \
        == [(1, "broker.replication.partition.P")]


def test_every_served_api_has_a_handler_and_every_handler_is_served():
    """protocol's SERVED (what ApiVersions advertises and the codec decodes) and the
    broker's HANDLERS must name the same APIs: an advertised API without a handler
    would be decoded and then dropped, a handler without SERVED is unreachable."""
    from broker.api import HANDLERS
    from protocol.messages import SERVED

    assert set(HANDLERS) == set(SERVED)

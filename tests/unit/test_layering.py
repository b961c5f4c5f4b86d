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


def within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def module_name(path: Path) -> tuple[str, bool]:
    """Dotted module name of ``path`` under ROOT, and whether it is a package __init__."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    return ".".join(parts), is_package


def imported_names(source: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, dotted name) of everything ``source`` imports, relative imports resolved.

    ``from a.b import c`` yields ``a.b.c`` (c may be a module or a name; prefix rules treat
    both alike).  ``importlib.import_module("x")`` and ``__import__("x")`` with a literal
    argument count too.
    """
    package = module.split(".") if is_package else module.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(source)):
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
                if reason:
                    problems.append(f"{path.relative_to(ROOT)}:{line} imports {imported}: {reason}")
    return problems


# --------------------------------------------------------------------------- the real tree

def test_protocol_package_exists_so_the_layering_check_is_not_vacuous():
    assert any(p.name == "messages.py" for p in package_files("protocol"))


@pytest.mark.parametrize("package", PACKAGES)
def test_package_imports_point_one_way(package):
    problems = violations_in([package])
    assert not problems, "\n".join(problems)


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

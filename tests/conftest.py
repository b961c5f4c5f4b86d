"""Shared fixtures and helpers for Raftwood's own tests.

The broker fixtures come from the ``raftwood`` pytest plugin (broker/testing/).  When
raftwood is installed (``make test`` installs it editable) the plugin is already loaded
through its ``pytest11`` entry point; otherwise ``pytest_configure`` below registers the
same module.  Registering it twice is an error in pluggy ("Plugin already registered under
a different name"), which is why this is not a plain ``pytest_plugins = [...]``.
"""
from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # compat/ and an uninstalled checkout are importable
    sys.path.insert(0, str(ROOT))

import broker.testing as raftwood_testing  # noqa: E402
from broker.testing import BrokerProcess, KafkaConnection  # noqa: E402

WAIT_S = 15.0


def pytest_configure(config):
    """Load the raftwood plugin unless its entry point did (or ``-p no:raftwood`` blocks it)."""
    manager = config.pluginmanager
    if not manager.is_registered(raftwood_testing) and not manager.has_plugin("raftwood"):
        manager.register(raftwood_testing, "raftwood")


_topic_counter = itertools.count(1)


@pytest.fixture
def topic_name(request) -> callable:
    """``topic_name(prefix="t") -> str``: a topic name unique in the session."""
    stem = "".join(c if c.isalnum() else "-" for c in request.node.name)[:60].strip("-")

    def make(prefix: str = "t") -> str:
        return f"{prefix}-{stem}-{next(_topic_counter)}"

    return make


def create_topic(bootstrap: str, name: str, partitions: int = 1,
                 configs: dict | None = None) -> str:
    """Create ``name`` with raw CreateTopics (replication factor 1) and wait until Metadata
    shows all its partitions with a leader; returns the name."""
    with KafkaConnection(bootstrap) as conn:
        error = conn.create_topic(name, partitions, configs)
        assert error == 0, f"CreateTopics {name}: error {error}"
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            topic = conn.metadata([name]).topics[0]
            if (topic.error_code == 0 and len(topic.partitions) == partitions
                    and all(p.leader_id >= 0 for p in topic.partitions)):
                return name
            time.sleep(0.05)
    raise AssertionError(f"{name} not ready in Metadata {WAIT_S} s after CreateTopics")


def create_topic_with_admin(bootstrap: str, name: str, partitions: int = 1,
                            configs: dict | None = None) -> str:
    """Create ``name`` with kafka-python's KafkaAdminClient (what users do)."""
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        topic_configs = {k: str(v) for k, v in (configs or {}).items()}
        admin.create_topics([NewTopic(name, partitions, 1, topic_configs=topic_configs)])
    finally:
        admin.close()
    return name


@pytest.fixture
def new_topic(topic_name):
    """``new_topic(broker, partitions=1, configs=None, prefix="t") -> name`` (raw CreateTopics)."""

    def make(broker: BrokerProcess | str, partitions: int = 1, configs: dict | None = None,
             prefix: str = "t") -> str:
        bootstrap = broker if isinstance(broker, str) else broker.bootstrap
        return create_topic(bootstrap, topic_name(prefix), partitions, configs)

    return make


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory):
    """One broker shared by a test module (the client compatibility suites)."""
    home = tmp_path_factory.mktemp("raftwood-module")
    broker = BrokerProcess(home / "data", log_path=home / "broker.log").start()
    yield broker
    was_running = broker.is_running()
    code = broker.stop()
    if was_running and code != 0:
        raise raftwood_testing.BrokerError(
            f"module broker exited with {code} after SIGTERM\n{broker.log_tail()}")


@pytest.fixture(scope="module")
def compat_env(module_broker):
    from compat.scenarios import CompatEnv

    return CompatEnv(module_broker.bootstrap, module_broker.node_id)


@pytest.fixture(scope="session")
def java_harness(tmp_path_factory):
    """Our Java kafka-clients harness (compat/java), compiled once per session (its jars
    are cached in compat/java/.cache); the test is skipped when Java or the jars are
    unavailable."""
    from compat.java.harness import HarnessUnavailable, prepare

    try:
        return prepare(build_dir=tmp_path_factory.mktemp("java-harness"))
    except HarnessUnavailable as exc:
        pytest.skip(f"Java harness unavailable: {exc}")


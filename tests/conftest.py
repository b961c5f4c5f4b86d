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
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # compat/ and an uninstalled checkout are importable
    sys.path.insert(0, str(ROOT))

import broker.testing as raftwood_testing  # noqa: E402
from broker.testing import BrokerError, BrokerProcess, ClusterProcess, KafkaConnection  # noqa: E402

WAIT_S = 15.0

# A test using one of these fixtures starts a cluster, a JVM or Spark: it is marked ``slow``
# at collection (``make test-fast`` leaves it out).  Tests that are slow for another reason
# carry ``@pytest.mark.slow`` (or a module ``pytestmark``) themselves.
SLOW_FIXTURES = frozenset({
    "raftwood_cluster", "raftwood_cluster_factory", "module_cluster_factory",
    "cluster_factory",  # the groups modules' getfixturevalue("raftwood_cluster_factory")
    "java_harness", "spark",
})


# Tests that must not run beside another test process: they measure the machine's own
# pace (a held event loop, a start bound, brokers staying registered under their own
# load), or they run the fault schedules and network namespaces of tests/faults.  They are
# marked ``serial`` at collection, so a run on pytest-xdist workers leaves them to a pass
# of their own (``-n 2 --dist loadfile -m "not serial"``, then ``-m serial``).  Keys are
# node id prefixes (a module or one test), values why.
SERIAL_TESTS = {
    "tests/faults/": "fault schedules, network namespaces and long verify runs",
    "tests/integration/test_create_partitions_liveness.py":
        "brokers must stay registered while they create 3000 partitions",
    "tests/integration/test_security_tls.py::test_a_jks_keystore":
        "a broker start with a bound",
    "tests/unit/metrics/test_metrics.py::test_loop_probe_":
        "measures a held event loop's lateness and CPU, and its thread's run-queue wait",
}


def pytest_configure(config):
    """Load the raftwood plugin unless its entry point did (or ``-p no:raftwood`` blocks it)."""
    manager = config.pluginmanager
    if not manager.is_registered(raftwood_testing) and not manager.has_plugin("raftwood"):
        manager.register(raftwood_testing, "raftwood")


def pytest_collection_modifyitems(config, items):
    """Mark ``slow`` every test whose fixtures (direct or through other fixtures) start a
    cluster, a JVM or Spark: ``-m "not slow"`` is the inner loop.  Mark ``serial`` every
    test under a ``SERIAL_TESTS`` prefix (node ids are relative to the rootdir)."""
    for item in items:
        if SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
        if item.nodeid.startswith(tuple(SERIAL_TESTS)):
            item.add_marker(pytest.mark.serial)


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
def module_cluster_factory(tmp_path_factory):
    """``factory(size=3, *, broker_settings=None, fast=True, start=True, voters=None,
    **settings) -> ClusterProcess`` like the plugin's ``raftwood_cluster_factory``, but
    the clusters live until the end of the test module, so its tests share them (a
    cluster start costs seconds, most tests need only topics of their own).  A test that
    kills, stops or pauses a broker of a shared cluster brings it back before it ends
    (the ``heal_cluster`` fixture).  Teardown fails as the plugin's does: a broker that
    needed SIGKILL or exited non-zero after SIGTERM."""
    clusters: list[ClusterProcess] = []
    counter = itertools.count(1)

    def factory(size: int = 3, *, broker_settings: dict | None = None, fast: bool = True,
                start: bool = True, voters: int | None = None, **settings) -> ClusterProcess:
        home = tmp_path_factory.mktemp(f"module-cluster-{next(counter)}")
        cluster = ClusterProcess(home, size, settings=settings, broker_settings=broker_settings,
                                 fast=fast, voters=voters)
        clusters.append(cluster)
        return cluster.start_all() if start else cluster

    yield factory
    failures = []
    for cluster in clusters:
        for node_id, code in cluster.stop_all().items():
            if code != 0:
                failures.append(f"broker node {node_id} exited with {code} after SIGTERM "
                                f"(expected 0; None: killed)\n"
                                f"{cluster.broker(node_id).log_tail()}")
    if failures:
        raise BrokerError("\n\n".join(failures))


def _heal(cluster: ClusterProcess) -> ClusterProcess:
    """Every broker of ``cluster`` running, registered and unfenced in every broker's view
    again, and (unless auto.leader.rebalance.enable is off) every partition led by its
    preferred replica: paused brokers resumed, stopped or killed ones started (same ports
    and data)."""
    for broker in cluster.brokers:
        if broker.is_running() and broker.paused:
            broker.resume()
    cluster.start_all()

    def every_broker_up(statuses):
        running = cluster.running()
        return sorted(statuses) == sorted(running) and all(
            not info["fenced"] for status in statuses.values()
            for info in status["brokers"] if info["id"] in running)

    cluster.wait_for(every_broker_up, cluster.start_timeout_s,
                     "every broker answering and unfenced in every view")
    if all(str(b.extra_settings.get("auto.leader.rebalance.enable", "true")).lower() == "true"
           for b in cluster.brokers):
        cluster.wait_for(_preferred_leaders, cluster.start_timeout_s,
                         "every partition led by its preferred replica when it is in sync")
    return cluster


def _preferred_leaders(statuses) -> bool:
    """Every partition of every broker's image whose preferred (first) replica is in the
    ISR is led by it: a fresh cluster's leadership, which a kill or pause had moved."""
    return bool(statuses) and all(
        p["leader"] == p["replicas"][0]
        for status in statuses.values() for topic in status["topics"]
        for p in topic["partitions"] if p["replicas"] and p["replicas"][0] in p["isr"])


@pytest.fixture
def heal_cluster():
    """``heal_cluster(cluster) -> cluster``: a shared cluster brought back to every broker
    running and registered (for the teardown of a test that kills or pauses brokers)."""
    return _heal


@pytest.fixture(scope="module")
def shared_cluster(module_cluster_factory) -> ClusterProcess:
    """One 3-broker cluster (FAST_CLUSTER_SETTINGS) for a whole module, whose tests work on
    topics of their own.  A module that needs other settings defines its own
    ``shared_cluster`` (``module_cluster_factory(3, **settings)``); ``cluster`` then heals
    that one."""
    return module_cluster_factory()


@pytest.fixture
def cluster(shared_cluster, heal_cluster) -> Iterator[ClusterProcess]:
    """The module's shared cluster; a test that stops, kills or pauses brokers hands it on
    with every broker running and unfenced and the preferred leaders back.  Modules whose
    ``cluster`` means something else define their own."""
    yield shared_cluster
    heal_cluster(shared_cluster)


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

